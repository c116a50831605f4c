package engine

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

// spillSort finishes a blocking find sort that went over its memory limit
// with disk use allowed (allowDiskUse, or allowDiskUseByDefault): the
// documents held so far (mds, with their sort keys, in input order or, after
// a top-k trim, in stable sort order) and the rest of the scan go through an
// external sorter. A spilled record keeps what the cursor needs later: the
// stored record (_id key, timestamps, raw body, for the TTL recheck and the
// output) and the positional-projection match position.
func (cq *compiledQuery) spillSort(mi *matchIter, mds []*matchedDoc, keys [][]any, k, memLimit int64) (docSource, error) {
	ext := agg.NewExternalSorter(cq.srt.CompareKeys, memLimit, "")
	ok := false
	defer func() {
		if !ok {
			ext.Close()
		}
	}()
	for i, md := range mds {
		if err := ext.Add(keys[i], spillRecord(md)); err != nil {
			return nil, err
		}
		mds[i] = nil
	}
	for {
		md, err := mi.next()
		if err != nil {
			return nil, err
		}
		if md == nil {
			break
		}
		if md.doc == nil {
			if md.doc, err = md.rec.Doc(); err != nil {
				return nil, err
			}
		}
		if err := ext.Add(cq.srt.Keys(md.doc), spillRecord(md)); err != nil {
			return nil, err
		}
	}
	it, err := ext.Finish()
	if err != nil {
		return nil, err
	}
	ok = true
	return &spilledSource{cq: cq, it: it, ext: ext, skip: cq.spec.skip, left: k}, nil
}

func spillRecord(md *matchedDoc) bson.D {
	return bson.D{
		{Key: "i", Value: bson.Binary{Data: md.rec.IDKey}},
		{Key: "t", Value: md.rec.TS},
		{Key: "o", Value: md.rec.Own},
		{Key: "r", Value: bson.Binary{Data: md.rec.Raw}},
		{Key: "p", Value: int64(md.pos)},
	}
}

// spilledSource yields an external sort's result, applying skip and the
// top-k bound (left > 0) the in-memory path applies by truncation, and the
// TTL recheck of sortedSource.
type spilledSource struct {
	cq   *compiledQuery
	it   agg.Iterator
	ext  *agg.ExternalSorter
	skip int64
	left int64 // > 0: documents still wanted (skip included)
	done bool
}

func (s *spilledSource) next() (bson.Raw, error) {
	now := s.cq.c.e.nowMS()
	for !s.done {
		d, ok, err := s.it.Next(context.Background())
		if err != nil {
			return nil, err
		}
		if !ok {
			s.close()
			return nil, nil
		}
		if s.left > 0 {
			s.left--
			if s.left == 0 {
				s.done = true
			}
		}
		md, err := s.cq.fromSpill(d)
		if err != nil {
			return nil, err
		}
		if s.skip > 0 {
			s.skip--
			continue
		}
		if ttl.Expired(s.cq.c.st().deadline(md.rec), now) {
			continue
		}
		s.cq.stats.nReturned++
		return s.cq.output(md)
	}
	s.close()
	return nil, nil
}

func (s *spilledSource) close() {
	s.done = true
	if s.it != nil {
		s.it.Close()
	}
	s.ext.Close()
}

func (cq *compiledQuery) fromSpill(d bson.D) (*matchedDoc, error) {
	bad := func() error { return mongoerr.New(mongoerr.InternalError, "corrupt sort spill record") }
	if len(d) != 5 {
		return nil, bad()
	}
	id, ok1 := d[0].Value.(bson.Binary)
	raw, ok2 := d[3].Value.(bson.Binary)
	ts, ok3 := bsonx.ToInt64(d[1].Value)
	own, ok4 := bsonx.ToInt64(d[2].Value)
	pos, ok5 := bsonx.ToInt64(d[4].Value)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil, bad()
	}
	rec := &docstore.Record{IDKey: id.Data, TS: ts, Own: own, Raw: bson.Raw(raw.Data)}
	doc, err := rec.Doc()
	if err != nil {
		return nil, err
	}
	if cq.withTS {
		doc = append(doc, bson.E{Key: "_ts", Value: rec.TS})
	}
	return &matchedDoc{rec: rec, doc: doc, pos: int(pos)}, nil
}
