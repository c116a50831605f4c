package agg

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Documents of mayfly's collections may stop existing while a pipeline
// holds them: a document whose time to live runs out is gone at once
// (ttl-spec.md §6.1), also for a cursor that is already open. Stages that
// buffer documents ($sort) ask, before handing a document on, whether the
// collection document it came from is still live.

// Source is a handle on the collection document a pipeline document came
// from.
type Source interface {
	// Live reports whether the document still exists (has not expired).
	Live() bool
}

// Tracked is implemented by iterators that know the Source of the document
// their last Next returned (nil: none, e.g. a document built by $group).
// The engine's input iterator implements it; streaming stages that turn
// one input document into zero or more output documents pass it on.
type Tracked interface {
	Source() Source
}

// sourceOf is it's Source of its last document, if it tracks one.
func sourceOf(it Iterator) Source {
	if t, ok := it.(Tracked); ok {
		return t.Source()
	}
	return nil
}

// Source of a streaming stage: that of the input document its last output
// came from.
func (f *funcIter) Source() Source {
	if f.src == nil {
		return nil
	}
	return sourceOf(f.src)
}

// liveSlice iterates sorted documents, skipping those whose source has
// gone since they were buffered.
type liveSlice struct {
	docs  []bson.D
	lives []Source // parallel to docs; nil entries are always live
	i     int
	last  Source
}

func (s *liveSlice) Next(ctx context.Context) (bson.D, bool, error) {
	for s.i < len(s.docs) {
		d, src := s.docs[s.i], s.lives[s.i]
		s.docs[s.i], s.lives[s.i] = nil, nil
		s.i++
		if src != nil && !src.Live() {
			continue
		}
		s.last = src
		return d, true, nil
	}
	return nil, false, nil
}

func (s *liveSlice) Close()         { s.docs, s.lives = nil, nil }
func (s *liveSlice) Source() Source { return s.last }
