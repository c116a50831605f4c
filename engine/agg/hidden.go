package agg

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

// A hidden field (Options.Hidden: mayfly's _ts system property) is a
// top-level field the server keeps in every document but returns only when
// asked for. Documents read by a pipeline carry it only while the pipeline
// uses it: from the input on, through the stages that name it and through
// the stages that keep documents whole ($match, $sort, $addFields,
// $project, $unwind, $lookup...); it is removed before the first stage that
// builds new documents or captures whole ones ($group, $replaceRoot,
// $facet, $$ROOT anywhere...) and at the end, so it never leaks into
// results. A stage that outputs a field of that name itself ($project
// {_ts: 1}, $addFields {_ts: …}, a $group accumulator named _ts) turns it
// into an ordinary field.

// HiddenScanner is implemented by an Env whose documents carry the hidden
// field: ScanHidden is Scan with the field in each document. $lookup and
// $unionWith sub-pipelines that use the field read through it.
type HiddenScanner interface {
	ScanHidden(ctx context.Context, db, coll string, filter bson.D) (Iterator, error)
}

// hideStage removes the hidden field from each document.
type hideStage struct{ field string }

func (*hideStage) name() string { return "" }

func (s *hideStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return mapIter(in, func(d bson.D) (bson.D, error) { return bsonx.Delete(d, s.field), nil }), nil
}

// keepStages pass each document on with its other fields (or drop it):
// the hidden field can ride through them to a later stage that uses it.
// Any other stage builds new documents or captures whole ones, so the field
// is dropped before it (unless the stage names it).
var keepStages = map[string]bool{"$match": true, "$sort": true, "$skip": true, "$limit": true, "$addFields": true,
	"$set": true, "$unset": true, "$project": true, "$unwind": true, "$sample": true, "$redact": true,
	"$lookup": true, "$graphLookup": true, "$fill": true, "$densify": true}

// hidePlan finds where a pipeline (raw stages) must drop the hidden field:
// at returns the index to insert a hideStage before (len(pipeline) for the
// end, -1 for nowhere because a stage made it an ordinary field), and
// reads whether a stage before that point uses the field, so the input
// must carry it.
func hidePlan(pipeline bson.A, field string) (at int, reads bool) {
	for i, raw := range pipeline {
		d, _ := raw.(bson.D)
		if len(d) != 1 {
			return i, reads
		}
		name, spec := d[0].Key, d[0].Value
		switch name {
		case "$out", "$merge", "$unionWith":
			// Writes never store it; $unionWith's own sub-pipeline decides
			// for the documents it adds.
			return i, reads
		case "$lookup":
			if sd, ok := spec.(bson.D); ok {
				spec = bsonx.Delete(sd, "pipeline") // the sub-pipeline reads its own collection
			}
		}
		names := containsField(spec, field)
		if names && outputsField(name, spec, field) {
			return -1, true
		}
		if names {
			reads = true
			continue
		}
		if !keepStages[name] || refersToRoot(spec) {
			return i, reads
		}
	}
	return len(pipeline), reads
}

// refersToRoot reports whether a stage captures whole documents ($$ROOT,
// $$CURRENT).
func refersToRoot(v any) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if refersToRoot(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if refersToRoot(e) {
				return true
			}
		}
	case string:
		for _, p := range []string{"$$ROOT", "$$CURRENT"} {
			if x == p || len(x) > len(p) && x[:len(p)+1] == p+"." {
				return true
			}
		}
	}
	return false
}

// outputsField reports whether a stage outputs a top-level field named
// field itself (or removes it, which also ends its hidden life).
func outputsField(stage string, spec any, field string) bool {
	switch stage {
	case "$project", "$addFields", "$set", "$group":
		sd, ok := spec.(bson.D)
		if !ok {
			return false
		}
		_, has := bsonx.Get(sd, field)
		return has
	case "$unset":
		switch x := spec.(type) {
		case string:
			return x == field
		case bson.A:
			for _, v := range x {
				if v == field {
					return true
				}
			}
		}
	}
	return false
}

// containsField reports whether v names field: as a key anywhere, or as a
// "$field" path.
func containsField(v any, field string) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == field || containsField(e.Value, field) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if containsField(e, field) {
				return true
			}
		}
	case string:
		return x == "$"+field
	}
	return false
}

// withHidden inserts the hideStage a parsed pipeline needs. inFacet: the
// input comes from an enclosing pipeline that may carry the field, so it is
// dropped even before the first stage.
func withHidden(stages []stage, pipeline bson.A, opts *Options, inFacet bool) []stage {
	if opts.Hidden == "" || len(stages) != len(pipeline) {
		return stages
	}
	at, reads := hidePlan(pipeline, opts.Hidden)
	if at < 0 || (!reads && !inFacet) {
		return stages
	}
	out := make([]stage, 0, len(stages)+1)
	out = append(out, stages[:at]...)
	out = append(out, &hideStage{field: opts.Hidden})
	return append(out, stages[at:]...)
}

// hiddenReads reports whether a pipeline's input must carry the hidden
// field.
func hiddenReads(pipeline bson.A, opts *Options) bool {
	if opts.Hidden == "" {
		return false
	}
	_, reads := hidePlan(pipeline, opts.Hidden)
	return reads
}

// ReadsHidden reports whether the pipeline's input documents must carry
// Options.Hidden (a stage uses it before it is dropped).
func (p *Pipeline) ReadsHidden() bool { return p.readsHidden }

// scanFor opens a sub-pipeline's collection, with the hidden field when
// the sub-pipeline uses it.
func scanFor(ctx context.Context, rc *runCtx, p *Pipeline, db, coll string, filter bson.D) (Iterator, error) {
	if p != nil && p.readsHidden {
		if hs, ok := rc.env.(HiddenScanner); ok {
			return hs.ScanHidden(ctx, db, coll, filter)
		}
	}
	return rc.env.Scan(ctx, db, coll, filter)
}
