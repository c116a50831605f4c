package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// sliceSource serves documents computed up front (listCollections,
// listIndexes) through a cursor, as mongod's QueuedDataStage does.
type sliceSource struct {
	docs []bson.Raw
	i    int
}

func (s *sliceSource) next() (bson.Raw, error) {
	if s.i >= len(s.docs) {
		return nil, nil
	}
	d := s.docs[s.i]
	s.i++
	return d, nil
}

func (s *sliceSource) close() {}

// eof lets fillBatch close the cursor with its last batch, as mongod does
// when the executor is at EOF after a batch.
func (s *sliceSource) eof() bool { return s.i >= len(s.docs) }

// simpleCursorBatchSize reads the cursor option of listCollections and
// listIndexes (SimpleCursorOptions: {batchSize: safeInt64 >= 0}, strict).
// -1 means no limit, mongod's default for these commands.
func simpleCursorBatchSize(r *Request) (int64, error) {
	v, ok := r.Arg("cursor")
	if !ok {
		return -1, nil
	}
	d, isDoc := v.(bson.D)
	if !isDoc {
		return 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.cursor' is the wrong type '%s', expected type 'object'", r.Name, bsonx.TypeName(v))
	}
	n := int64(-1)
	for _, f := range d {
		if f.Key != "batchSize" {
			return 0, mongoerr.New(40415, "BSON field 'cursor.%s' is an unknown field.", f.Key)
		}
		if !bsonx.IsNumber(f.Value) {
			return 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'cursor.batchSize' is the wrong type '%s', expected types '[long, int, decimal, double]'", bsonx.TypeName(f.Value))
		}
		n = safeNumberLong(f.Value)
		if n < 0 {
			return 0, mongoerr.New(51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
		}
	}
	return n, nil
}

// listCursorReply returns docs as a cursor on ns: the first batchSize of
// them in firstBatch, the rest behind a live cursor id for getMore and
// killCursors (0 when nothing remains).
func (e *Engine) listCursorReply(r *Request, batchSize int64, ns string, docs []bson.D) (bson.D, error) {
	raws := make([]bson.Raw, 0, len(docs))
	for _, d := range docs {
		raw, err := marshalReply(d)
		if err != nil {
			return nil, err
		}
		raws = append(raws, raw)
	}
	src := &sliceSource{docs: raws}
	cur := &cursor{ns: ns, src: src, remaining: -1}
	batch := bson.A{}
	if batchSize != 0 {
		b, _, err := fillBatch(r, cur, batchSize)
		if err != nil {
			return nil, err
		}
		batch = b
	}
	if src.eof() {
		return cursorReply("firstBatch", batch, 0, ns), nil
	}
	return cursorReply("firstBatch", batch, e.cursors.add(cur), ns), nil
}
