package agg

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// ---- $lookup

// maxUserDocSize is BSONObjMaxUserSize plus mongod's internal allowance
// (16 MB + 16 KB), the limit on a $lookup's joined array.
const maxUserDocSize = 16*1024*1024 + 16*1024

type lookupStage struct {
	from         string
	db           string
	localField   []string
	foreignField string
	as           []string
	letNames     []string
	letExprs     []expr.Expr
	pipeline     *Pipeline // nil for the pure equality form
	hasPipeline  bool
	hasEquality  bool
}

func (*lookupStage) name() string { return "$lookup" }

// subOptions derives the options of a sub-pipeline ($lookup, $unionWith,
// $facet): same settings, with the given extra variable names in scope.
func subOptions(opts *Options, coll string, names []string) Options {
	o := *opts
	o.Coll = coll
	o.Let = nil
	o.letNames = append(append([]string{}, opts.letNames...), names...)
	o.inLookup = true
	return o
}

func init() {
	stageParsers["$lookup"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "the $lookup specification must be an Object, but found %s", bsonx.TypeName(spec))
		}
		s := &lookupStage{db: opts.DB}
		var pipe bson.A
		var letD bson.D
		hasLocal, hasForeign, hasFrom := false, false, false
		for _, e := range d {
			switch e.Key {
			case "from":
				switch f := e.Value.(type) {
				case string:
					s.from = f
				case bson.D:
					db, _ := bsonx.Get(f, "db")
					coll, _ := bsonx.Get(f, "coll")
					dbs, ok1 := db.(string)
					cs, ok2 := coll.(string)
					if !ok1 || !ok2 {
						return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup 'from' field must specify 'db' and 'coll'")
					}
					s.db, s.from = dbs, cs
				default:
					return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup 'from' field must be a string, but found %s", bsonx.TypeName(e.Value))
				}
				hasFrom = true
			case "localField", "foreignField", "as":
				str, ok := e.Value.(string)
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument '%s: %s' must be a string, is type %s", e.Key, expr.ExtJSON(e.Value), bsonx.TypeName(e.Value))
				}
				if err := validatePath("$lookup", str); err != nil {
					return nil, err
				}
				switch e.Key {
				case "localField":
					s.localField, hasLocal = strings.Split(str, "."), true
				case "foreignField":
					s.foreignField, hasForeign = str, true
				case "as":
					s.as = strings.Split(str, ".")
				}
			case "let":
				ld, ok := e.Value.(bson.D)
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'let' must be an object, is type %s", bsonx.TypeName(e.Value))
				}
				letD = ld
			case "pipeline":
				pa, ok := e.Value.(bson.A)
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'pipeline' must be an array, is type %s", bsonx.TypeName(e.Value))
				}
				pipe, s.hasPipeline = pa, true
			default:
				return nil, mongoerr.New(mongoerr.FailedToParse, "unknown argument to $lookup: %s", e.Key)
			}
		}
		if s.as == nil {
			return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'as' field for a $lookup")
		}
		if !s.hasPipeline && !(hasLocal && hasForeign) {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")
		}
		if hasLocal != hasForeign {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires both or neither of 'localField' and 'foreignField' to be specified")
		}
		s.hasEquality = hasLocal
		if !hasFrom {
			// only allowed when the sub-pipeline starts with $documents
			ok := false
			if len(pipe) > 0 {
				if fd, isD := pipe[0].(bson.D); isD && len(fd) > 0 && fd[0].Key == "$documents" {
					ok = true
				}
			}
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'from' field for a $lookup")
			}
		}
		if letD != nil && !s.hasPipeline {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup with 'let' requires 'pipeline' to be specified")
		}
		for _, e := range letD {
			if err := checkVarName(e.Key); err != nil {
				return nil, err
			}
			c, err := compileExpr(e.Value, opts)
			if err != nil {
				return nil, err
			}
			s.letNames = append(s.letNames, e.Key)
			s.letExprs = append(s.letExprs, c)
		}
		if s.hasPipeline {
			so := subOptions(opts, s.from, s.letNames)
			so.DB = s.db
			stages, err := parseStages(pipe, &so, false)
			if err != nil {
				return nil, err
			}
			for _, st := range stages {
				if st.name() == "$out" || st.name() == "$merge" {
					return nil, mongoerr.New(51047, "%s is not allowed to be used within a $lookup stage", st.name())
				}
			}
			s.pipeline = &Pipeline{stages: stages, opts: so, readsHidden: hiddenReads(pipe, &so)}
			optimize(s.pipeline.stages)
		}
		return s, nil
	}
	stageParsers["$unionWith"] = func(spec any, opts *Options) (stage, error) {
		s := &unionStage{db: opts.DB}
		var pipe bson.A
		switch x := spec.(type) {
		case string:
			s.coll = x
		case bson.D:
			hasColl := false
			for _, e := range x {
				switch e.Key {
				case "coll":
					c, ok := e.Value.(string)
					if !ok {
						return nil, mongoerr.New(mongoerr.TypeMismatch, "$unionWith 'coll' must be a string")
					}
					s.coll, hasColl = c, true
				case "pipeline":
					p, ok := e.Value.(bson.A)
					if !ok {
						return nil, mongoerr.New(mongoerr.TypeMismatch, "$unionWith 'pipeline' must be an array")
					}
					pipe = p
				default:
					return nil, mongoerr.New(40415, "BSON field '$unionWith.%s' is an unknown field.", e.Key)
				}
			}
			if !hasColl {
				ok := false
				if len(pipe) > 0 {
					if fd, isD := pipe[0].(bson.D); isD && len(fd) > 0 && fd[0].Key == "$documents" {
						ok = true
					}
				}
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "$unionWith stage without explicit collection must have a pipeline with $documents as first stage")
				}
			}
		default:
			return nil, mongoerr.New(mongoerr.FailedToParse, "the $unionWith stage specification must be an object or string, but found %s", bsonx.TypeName(spec))
		}
		so := subOptions(opts, s.coll, nil)
		stages, err := parseStages(pipe, &so, false)
		if err != nil {
			return nil, err
		}
		for _, st := range stages {
			if st.name() == "$out" || st.name() == "$merge" {
				return nil, mongoerr.New(31441, "%s is not allowed within a $unionWith's sub-pipeline", st.name())
			}
		}
		optimize(stages)
		s.pipeline = &Pipeline{stages: stages, opts: so, readsHidden: hiddenReads(pipe, &so)}
		return s, nil
	}
	stageParsers["$facet"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(15947, "the $facet specification must be a non-empty object, but found: %s", expr.ExtJSON(spec))
		}
		if len(d) == 0 {
			return nil, mongoerr.New(40169, "the $facet specification must be a non-empty object")
		}
		s := &facetStage{}
		for _, e := range d {
			if err := validatePath("$facet", e.Key); err != nil || strings.Contains(e.Key, ".") {
				return nil, mongoerr.New(40174, "$facet pipeline names must not contain '.' or start with '$': %s", e.Key)
			}
			pa, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.New(40170, "arguments to $facet must be arrays, %s is type %s", e.Key, bsonx.TypeName(e.Value))
			}
			if len(pa) == 0 {
				return nil, mongoerr.New(40171, "sub-pipeline in $facet stage cannot be empty: %s", e.Key)
			}
			stages, err := parseStages(pa, opts, true)
			if err != nil {
				return nil, err
			}
			optimize(stages)
			s.names = append(s.names, e.Key)
			s.pipes = append(s.pipes, &Pipeline{stages: stages, opts: *opts})
		}
		return s, nil
	}
}

func (s *lookupStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return mapIter(in, func(d bson.D) (bson.D, error) {
		var filter bson.D
		if s.hasEquality {
			// The local value: an array matches any of its elements; a
			// missing value matches null (and missing) foreign fields.
			local := lookupValues(d, s.localField)
			filter = equalityFilter(s.foreignField, local)
		}
		var results bson.A
		if s.pipeline == nil {
			it, err := rc.env.Scan(ctx, s.db, s.from, filter)
			if err != nil {
				return nil, err
			}
			docs, err := Collect(ctx, it)
			if err != nil {
				return nil, err
			}
			results = make(bson.A, len(docs))
			for i, x := range docs {
				results[i] = x
			}
		} else {
			vars := make(map[string]any, len(rc.vars)+len(s.letNames))
			for k, v := range rc.vars {
				vars[k] = v
			}
			env := rc.exprEnv(d)
			for i, n := range s.letNames {
				v, err := s.letExprs[i].Eval(env)
				if err != nil {
					return nil, err
				}
				if bsonx.IsMissing(v) {
					v = nil
				}
				vars[n] = v
			}
			var input Iterator
			if s.pipeline.NeedsInput() {
				it, err := scanFor(ctx, rc, s.pipeline, s.db, s.from, filter)
				if err != nil {
					return nil, err
				}
				input = it
			}
			sub := &runCtx{env: rc.env, vars: vars, opts: &s.pipeline.opts, rt: rc.rt}
			it, err := s.pipeline.runWith(ctx, sub, input)
			if err != nil {
				return nil, err
			}
			docs, err := Collect(ctx, it)
			if err != nil {
				return nil, err
			}
			results = make(bson.A, len(docs))
			for i, x := range docs {
				results[i] = x
			}
		}
		if results == nil {
			results = bson.A{}
		}
		if approxSize(results) > maxUserDocSize {
			var total int
			for _, r := range results {
				b, _ := bson.Marshal(r)
				total += len(b)
			}
			if total > maxUserDocSize {
				return nil, mongoerr.New(4568, "Total size of documents in %s matching pipeline's $lookup stage exceeds %d bytes", s.from, maxUserDocSize)
			}
		}
		return setPath(d, s.as, results, false), nil
	}), nil
}

// lookupValues collects the values at a dotted path, traversing arrays,
// for $lookup's equality match (missing → [null]).
func lookupValues(d bson.D, path []string) bson.A {
	var out bson.A
	var walk func(v any, i int)
	walk = func(v any, i int) {
		if i == len(path) {
			if a, ok := v.(bson.A); ok {
				if len(a) == 0 {
					out = append(out, nil)
				}
				for _, x := range a {
					out = append(out, x)
				}
				return
			}
			out = append(out, v)
			return
		}
		switch x := v.(type) {
		case bson.D:
			nv, ok := bsonx.Get(x, path[i])
			if !ok {
				out = append(out, nil)
				return
			}
			walk(nv, i+1)
		case bson.A:
			for _, el := range x {
				walk(el, i)
			}
		default:
			out = append(out, nil)
		}
	}
	walk(d, 0)
	if len(out) == 0 {
		out = bson.A{nil}
	}
	return out
}

// ---- $unionWith

type unionStage struct {
	db, coll string
	pipeline *Pipeline
}

func (*unionStage) name() string { return "$unionWith" }

func (s *unionStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	var second Iterator
	firstDone := false
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			if !firstDone {
				d, ok, err := in.Next(ctx)
				if err != nil || ok {
					return d, ok, err
				}
				firstDone = true
				in.Close()
				var input Iterator
				if s.pipeline.NeedsInput() {
					if input, err = scanFor(ctx, rc, s.pipeline, s.db, s.coll, nil); err != nil {
						return nil, false, err
					}
				}
				sub := &runCtx{env: rc.env, vars: rc.vars, opts: &s.pipeline.opts, rt: rc.rt}
				if second, err = s.pipeline.runWith(ctx, sub, input); err != nil {
					return nil, false, err
				}
			}
			return second.Next(ctx)
		},
		close: func() {
			in.Close()
			if second != nil {
				second.Close()
			}
		},
	}, nil
}

// ---- $facet

type facetStage struct {
	names []string
	pipes []*Pipeline
}

func (*facetStage) name() string { return "$facet" }

func (s *facetStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return lazy(in, func(ctx context.Context) ([]bson.D, error) {
		docs, err := Collect(ctx, in)
		if err != nil {
			return nil, err
		}
		out := bson.D{}
		// mongod 7.0 (document_source_facet.cpp): the results of all the
		// facets together stay under internalQueryFacetMaxOutputDocSizeBytes
		// (100 MB), else 4031700.
		maxBytes := rc.opts.facetMaxOutputBytes()
		var used int64
		for i, p := range s.pipes {
			cp := make([]bson.D, len(docs))
			copy(cp, docs)
			it, err := p.runWith(ctx, rc, Slice(cp))
			if err != nil {
				return nil, err
			}
			res, err := Collect(ctx, it)
			if err != nil {
				return nil, err
			}
			arr := make(bson.A, len(res))
			for j, r := range res {
				arr[j] = r
				if used += approxSize(r); used > maxBytes {
					return nil, mongoerr.New(4031700, "document constructed by $facet is %d bytes, which exceeds the limit of %d bytes", used, maxBytes)
				}
			}
			out = append(out, bson.E{Key: s.names[i], Value: arr})
		}
		return []bson.D{out}, nil
	}), nil
}

// equalityFilter matches documents whose field equals (or has an element
// equal to) any of vals. $in is used unless a value is a regex, which $in
// would treat as a pattern; those are matched with $eq.
func equalityFilter(field string, vals bson.A) bson.D {
	hasRegex := false
	for _, v := range vals {
		if _, ok := v.(bson.Regex); ok {
			hasRegex = true
		}
	}
	if !hasRegex {
		return bson.D{{Key: field, Value: bson.D{{Key: "$in", Value: vals}}}}
	}
	or := bson.A{}
	for _, v := range vals {
		or = append(or, bson.D{{Key: field, Value: bson.D{{Key: "$eq", Value: v}}}})
	}
	return bson.D{{Key: "$or", Value: or}}
}
