package engine

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// bypassEmptyTsReplacement reads the write commands' optionalBool of that
// name (insert, update, delete, findAndModify): a boolean or absent, as
// mongod's OptionalBool parser accepts.
func bypassEmptyTsReplacement(r *Request) (bool, error) {
	v, ok := r.Arg("bypassEmptyTsReplacement")
	if !ok {
		return false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, mongoerr.New(mongoerr.TypeMismatch, "Field 'bypassEmptyTsReplacement' should be a boolean value, but found: %s", bsonx.TypeName(v))
	}
	return b, nil
}

// clusterTS hands out increasing timestamps for the empty Timestamp(0, 0)
// values mongod replaces (its cluster time ticks): the current second, and
// an increment that grows within one second.
var clusterTS struct {
	sync.Mutex
	last uint64
}

func nextTimestamp(now time.Time) bson.Timestamp {
	clusterTS.Lock()
	defer clusterTS.Unlock()
	v := uint64(now.Unix())<<32 | 1
	if v <= clusterTS.last {
		v = clusterTS.last + 1
	}
	clusterTS.last = v
	return bson.Timestamp{T: uint32(v >> 32), I: uint32(v)}
}

// fixEmptyTimestamps is mongod's fixDocumentForInsert / ObjectReplaceExecutor
// rule: a top-level field other than _id holding Timestamp(0, 0) is stored
// as the current timestamp. It returns d itself when nothing is replaced.
func fixEmptyTimestamps(d bson.D, now func() bson.Timestamp) (bson.D, bool) {
	var out bson.D
	for i, f := range d {
		if ts, ok := f.Value.(bson.Timestamp); ok && ts.T == 0 && ts.I == 0 && f.Key != "_id" {
			if out == nil {
				out = append(bson.D(nil), d...)
			}
			out[i].Value = now()
		}
	}
	if out == nil {
		return d, false
	}
	return out, true
}

// emptyTSFixer returns the replacement function for this request, or nil
// when the command asks for empty timestamps to be kept.
func (e *Engine) emptyTSFixer(r *Request) (func(bson.D) (bson.D, bool), error) {
	bypass, err := bypassEmptyTsReplacement(r)
	if err != nil || bypass {
		return nil, err
	}
	return func(d bson.D) (bson.D, bool) {
		return fixEmptyTimestamps(d, func() bson.Timestamp { return nextTimestamp(e.clock.Now()) })
	}, nil
}

// fixInsertTimestamps applies fix to each document of an insert; a
// rewritten document no longer matches the bytes the client sent, so its
// raw form is dropped.
func fixInsertTimestamps(docs bson.A, raws []bson.Raw, fix func(bson.D) (bson.D, bool)) bson.A {
	var out bson.A
	for i, v := range docs {
		d, ok := v.(bson.D)
		if !ok {
			continue
		}
		nd, changed := fix(d)
		if !changed {
			continue
		}
		if out == nil {
			out = append(bson.A(nil), docs...)
		}
		out[i] = nd
		if raws != nil {
			raws[i] = nil
		}
	}
	if out == nil {
		return docs
	}
	return out
}
