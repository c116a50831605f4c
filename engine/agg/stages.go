package agg

import (
	"context"
	"math"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func init() {
	stageParsers["$match"] = parseMatch
	stageParsers["$project"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(15969, "$project specification must be an object")
		}
		p, err := parseProjection("$project", d, false, opts)
		if err != nil {
			return nil, err
		}
		return &projectStage{n: "$project", p: p}, nil
	}
	for _, n := range []string{"$addFields", "$set"} {
		n := n
		stageParsers[n] = func(spec any, opts *Options) (stage, error) {
			d, ok := spec.(bson.D)
			if !ok {
				return nil, mongoerr.New(40272, "%s specification stage must be an object, got %s", n, bsonx.TypeName(spec))
			}
			p, err := parseProjection(n, d, true, opts)
			if err != nil {
				return nil, err
			}
			return &projectStage{n: n, p: p}, nil
		}
	}
	stageParsers["$unset"] = func(spec any, opts *Options) (stage, error) {
		var fields bson.A
		switch x := spec.(type) {
		case string:
			fields = bson.A{x}
		case bson.A:
			if len(x) == 0 {
				return nil, mongoerr.New(31119, "$unset specification must be a string or an array with at least one field")
			}
			fields = x
		default:
			return nil, mongoerr.New(31002, "$unset specification must be a string or an array")
		}
		d := bson.D{}
		for _, f := range fields {
			s, ok := f.(string)
			if !ok {
				return nil, mongoerr.New(31120, "$unset specification must be a string or an array containing only string values")
			}
			d = append(d, bson.E{Key: s, Value: int32(0)})
		}
		p, err := parseProjection("$unset", d, false, opts)
		if err != nil {
			return nil, err
		}
		return &projectStage{n: "$unset", p: p}, nil
	}
	stageParsers["$replaceRoot"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(40228, "expected an object as specification for $replaceRoot stage, got %s", bsonx.TypeName(spec))
		}
		var nr any
		found := false
		for _, e := range d {
			if e.Key != "newRoot" {
				return nil, mongoerr.New(40415, "BSON field '$replaceRoot.%s' is an unknown field.", e.Key)
			}
			nr, found = e.Value, true
		}
		if !found {
			return nil, mongoerr.New(40414, "BSON field '$replaceRoot.newRoot' is missing but a required field")
		}
		e, err := compileExpr(nr, opts)
		if err != nil {
			return nil, err
		}
		return &replaceRootStage{n: "$replaceRoot", e: e}, nil
	}
	stageParsers["$replaceWith"] = func(spec any, opts *Options) (stage, error) {
		e, err := compileExpr(spec, opts)
		if err != nil {
			return nil, err
		}
		return &replaceRootStage{n: "$replaceWith", e: e}, nil
	}
	stageParsers["$limit"] = func(spec any, opts *Options) (stage, error) {
		if !bsonx.IsNumber(spec) {
			return nil, mongoerr.New(15957, "the limit must be specified as a number")
		}
		n, ok := bsonx.ToInt64(spec)
		if !ok {
			return nil, mongoerr.New(15957, "the limit must be specified as a number")
		}
		if n <= 0 {
			return nil, mongoerr.New(15958, "the limit must be positive")
		}
		return &limitStage{n: n}, nil
	}
	stageParsers["$skip"] = func(spec any, opts *Options) (stage, error) {
		if !bsonx.IsNumber(spec) {
			return nil, mongoerr.New(15972, "Argument to $skip must be a number not %s", bsonx.TypeName(spec))
		}
		n, ok := bsonx.ToInt64(spec)
		if !ok {
			return nil, mongoerr.New(15972, "Argument to $skip must be a number")
		}
		if n < 0 {
			return nil, mongoerr.New(15956, "Argument to $skip cannot be negative")
		}
		return &skipStage{n: n}, nil
	}
	stageParsers["$count"] = func(spec any, opts *Options) (stage, error) {
		s, ok := spec.(string)
		switch {
		case !ok:
			return nil, mongoerr.New(40156, "the count field must be a non-empty string")
		case s == "":
			return nil, mongoerr.New(40157, "the count field must be a non-empty string")
		case strings.HasPrefix(s, "$"):
			return nil, mongoerr.New(40158, "the count field cannot be a $-prefixed path")
		case strings.ContainsRune(s, 0):
			return nil, mongoerr.New(40159, "the count field cannot contain a null byte")
		case strings.Contains(s, "."):
			return nil, mongoerr.New(40160, "the count field cannot contain '.'")
		case s == "_id":
			// $count is $group {_id: null, <name>: {$sum: 1}}
			return nil, mongoerr.New(15948, "a group's _id may only be specified once")
		}
		return &countStage{field: s}, nil
	}
	stageParsers["$unwind"] = parseUnwind
	stageParsers["$sample"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(28745, "the $sample stage specification must be an object")
		}
		var size any
		found := false
		for _, e := range d {
			if e.Key != "size" {
				return nil, mongoerr.New(28748, "unrecognized option to $sample: %s", e.Key)
			}
			size, found = e.Value, true
		}
		if !found {
			return nil, mongoerr.New(28749, "$sample stage must specify a size")
		}
		if !bsonx.IsNumber(size) {
			return nil, mongoerr.New(28746, "size argument to $sample must be a number")
		}
		n, _ := bsonx.ToInt64(size)
		if f, _ := bsonx.ToFloat(size); f < 0 {
			return nil, mongoerr.New(28747, "size argument to $sample must not be negative")
		} else if n == 0 && f > 0 {
			n = int64(f)
		}
		return &sampleStage{n: n}, nil
	}
	stageParsers["$redact"] = func(spec any, opts *Options) (stage, error) {
		e, err := compileExpr(spec, opts)
		if err != nil {
			return nil, err
		}
		return &redactStage{e: e}, nil
	}
	stageParsers["$documents"] = func(spec any, opts *Options) (stage, error) {
		e, err := compileExpr(spec, opts)
		if err != nil {
			return nil, err
		}
		return &documentsStage{e: e}, nil
	}
	stageParsers["$sortByCount"] = func(spec any, opts *Options) (stage, error) {
		if s, ok := spec.(string); !ok || !strings.HasPrefix(s, "$") {
			if !isOperatorDoc(spec) {
				return nil, mongoerr.New(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
			}
		}
		g, err := parseGroup(bson.D{{Key: "_id", Value: spec}, {Key: "count", Value: bson.D{{Key: "$sum", Value: int32(1)}}}}, opts)
		if err != nil {
			return nil, err
		}
		s, err := parseSort(bson.D{{Key: "count", Value: int32(-1)}}, opts)
		if err != nil {
			return nil, err
		}
		return &compositeStage{n: "$sortByCount", parts: []stage{g, s}}, nil
	}
	stageParsers["$collStats"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(5447000, "$collStats must take a nested object but found: %s", expr.ExtJSON(spec))
		}
		for _, e := range d {
			switch e.Key {
			case "latencyStats", "storageStats", "count", "queryExecStats":
			default:
				return nil, mongoerr.New(40415, "BSON field '$collStats.%s' is an unknown field.", e.Key)
			}
		}
		return &collStatsStage{spec: d}, nil
	}
	stageParsers["$indexStats"] = func(spec any, opts *Options) (stage, error) {
		if d, ok := spec.(bson.D); !ok || len(d) != 0 {
			return nil, mongoerr.New(28803, "The $indexStats stage specification must be an empty object")
		}
		return &indexStatsStage{}, nil
	}
}

// ---- $match

type matchStage struct {
	filter   bson.D
	rest     bson.D // the filter without its top-level $expr clauses
	m        *query.Matcher
	exprs    []expr.Expr // top-level $expr clauses, evaluated with variables
	usesVars bool
	// nestedExpr: $expr appears below the top level (inside $or, $nor...),
	// where the query matcher cannot see pipeline variables; such filters
	// get the variables' values substituted once per run.
	nestedExpr bool
}

func (*matchStage) name() string { return "$match" }

func parseMatch(spec any, opts *Options) (stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(15959, "the match filter must be an expression in an object")
	}
	s := &matchStage{filter: d}
	// Top-level $expr clauses are evaluated here, with the pipeline's
	// variables ($lookup let, command let); the query matcher has no
	// variables. The rest is the query language proper.
	rest := bson.D{}
	for _, e := range hoistExprs(d) {
		if e.Key == "$expr" {
			c, err := compileExpr(e.Value, opts)
			if err != nil {
				return nil, err
			}
			s.exprs = append(s.exprs, c)
			if len(opts.letNames) > 0 || opts.inLookup {
				s.usesVars = true
			}
			continue
		}
		rest = append(rest, e)
	}
	m, err := query.Compile(rest)
	if err != nil {
		return nil, err
	}
	s.m, s.rest = m, rest
	s.nestedExpr = containsKey(rest, "$expr")
	if s.nestedExpr && (len(opts.letNames) > 0 || opts.inLookup) {
		s.usesVars = true
	}
	return s, nil
}

// containsKey reports whether a field named key occurs anywhere in v.
func containsKey(v any, key string) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == key || containsKey(e.Value, key) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if containsKey(e, key) {
				return true
			}
		}
	}
	return false
}

// substVars replaces references to user variables inside $expr clauses by
// their values, so that the query matcher (which has no variables) can
// evaluate them.
func substVars(v any, vars map[string]any, inExpr bool) any {
	switch x := v.(type) {
	case bson.D:
		out := make(bson.D, len(x))
		for i, e := range x {
			if inExpr && e.Key == "$literal" {
				out[i] = e
				continue
			}
			out[i] = bson.E{Key: e.Key, Value: substVars(e.Value, vars, inExpr || e.Key == "$expr")}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = substVars(e, vars, inExpr)
		}
		return out
	case string:
		if !inExpr || !strings.HasPrefix(x, "$$") {
			return x
		}
		name, path, hasPath := strings.Cut(x[2:], ".")
		val, ok := vars[name]
		if !ok || name == "CURRENT" || name == "ROOT" || name == "REMOVE" || name == "this" || name == "value" {
			return x
		}
		if !hasPath {
			return bson.D{{Key: "$literal", Value: val}}
		}
		return bson.D{{Key: "$let", Value: bson.D{
			{Key: "vars", Value: bson.D{{Key: "substituted__", Value: bson.D{{Key: "$literal", Value: val}}}}},
			{Key: "in", Value: "$$substituted__." + path},
		}}}
	}
	return v
}

// hoistExprs lifts {$expr} clauses out of a top-level $and so that they
// too see pipeline variables ({$and: [{$expr: ...}, {a: 1}]} becomes
// {$expr: ..., a: 1} in effect; both are conjunctions).
func hoistExprs(d bson.D) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		and, ok := e.Value.(bson.A)
		if e.Key != "$and" || !ok || len(and) == 0 {
			out = append(out, e)
			continue
		}
		var keep bson.A
		for _, c := range and {
			cd, ok := c.(bson.D)
			if ok && len(cd) == 1 && cd[0].Key == "$expr" {
				out = append(out, cd[0])
				continue
			}
			keep = append(keep, c)
		}
		if len(keep) > 0 {
			out = append(out, bson.E{Key: "$and", Value: keep})
		}
	}
	return out
}

func (s *matchStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	m := s.m
	if s.nestedExpr && (len(rc.vars) > 0 || rc.rt != nil) {
		// (recompiled with the run's runtime, so maxTimeMS interrupts a
		// nested $expr too)
		f := s.rest
		if len(rc.vars) > 0 {
			f = substVars(s.rest, rc.vars, false).(bson.D)
		}
		sub, err := query.CompileWithRuntime(f, rc.rt)
		if err != nil {
			return nil, err
		}
		m = sub
	}
	return mapIter(in, func(d bson.D) (bson.D, error) {
		for _, e := range s.exprs {
			v, err := e.Eval(rc.exprEnv(d))
			if err != nil {
				return nil, err
			}
			if !expr.Truthy(v) {
				return nil, nil
			}
		}
		ok, err := m.MatchesErr(d)
		if err != nil || !ok {
			return nil, err
		}
		return d, nil
	}), nil
}

// ---- $project / $addFields / $unset

type projectStage struct {
	n string
	p *projection
}

func (s *projectStage) name() string { return s.n }

func (s *projectStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return mapIter(in, func(d bson.D) (bson.D, error) {
		return s.p.apply(d, rc.exprEnv(d))
	}), nil
}

// ---- $replaceRoot / $replaceWith

type replaceRootStage struct {
	n string
	e expr.Expr
}

func (s *replaceRootStage) name() string { return s.n }

func (s *replaceRootStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return mapIter(in, func(d bson.D) (bson.D, error) {
		v, err := s.e.Eval(rc.exprEnv(d))
		if err != nil {
			return nil, err
		}
		nd, ok := v.(bson.D)
		if !ok {
			shown := "MISSING"
			if !bsonx.IsMissing(v) {
				shown = expr.ExtJSON(v)
			}
			return nil, mongoerr.New(40228, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s", shown, bsonx.TypeName(v), expr.ExtJSON(d))
		}
		return nd, nil
	}), nil
}

// ---- $limit / $skip

type limitStage struct{ n int64 }

func (*limitStage) name() string { return "$limit" }

func (s *limitStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	left := s.n
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			if left <= 0 {
				in.Close()
				return nil, false, nil
			}
			d, ok, err := in.Next(ctx)
			if ok {
				left--
			}
			return d, ok, err
		},
		close: in.Close,
		src:   in,
	}, nil
}

type skipStage struct{ n int64 }

func (*skipStage) name() string { return "$skip" }

func (s *skipStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	skipped := int64(0)
	return mapIter(in, func(d bson.D) (bson.D, error) {
		if skipped < s.n {
			skipped++
			return nil, nil
		}
		return d, nil
	}), nil
}

// ---- $count

type countStage struct{ field string }

func (*countStage) name() string { return "$count" }

func (s *countStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	done := false
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			if done {
				return nil, false, nil
			}
			done = true
			n := int64(0)
			for {
				_, ok, err := in.Next(ctx)
				if err != nil {
					return nil, false, err
				}
				if !ok {
					break
				}
				n++
			}
			if n == 0 {
				return nil, false, nil
			}
			var v any = n
			if n <= math.MaxInt32 {
				v = int32(n)
			}
			return bson.D{{Key: s.field, Value: v}}, true, nil
		},
		close: in.Close,
	}, nil
}

// ---- $unwind

type unwindStage struct {
	path     []string
	index    string
	preserve bool
}

func (*unwindStage) name() string { return "$unwind" }

func parseUnwind(spec any, opts *Options) (stage, error) {
	s := &unwindStage{}
	var path string
	switch x := spec.(type) {
	case string:
		path = x
	case bson.D:
		hasPath := false
		for _, e := range x {
			switch e.Key {
			case "path":
				p, ok := e.Value.(string)
				if !ok {
					return nil, mongoerr.New(28808, "expected a string as the path for $unwind stage, got %s", bsonx.TypeName(e.Value))
				}
				path, hasPath = p, true
			case "includeArrayIndex":
				p, ok := e.Value.(string)
				if !ok {
					return nil, mongoerr.New(28810, "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got %s", bsonx.TypeName(e.Value))
				}
				if p == "" {
					return nil, mongoerr.New(28810, "expected a non-empty string for the includeArrayIndex  option to $unwind stage")
				}
				if strings.HasPrefix(p, "$") {
					return nil, mongoerr.New(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", p)
				}
				s.index = p
			case "preserveNullAndEmptyArrays":
				b, ok := e.Value.(bool)
				if !ok {
					return nil, mongoerr.New(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", bsonx.TypeName(e.Value))
				}
				s.preserve = b
			default:
				return nil, mongoerr.New(28811, "unrecognized option to $unwind stage: %s", e.Key)
			}
		}
		if !hasPath {
			return nil, mongoerr.New(28812, "no path specified to $unwind stage")
		}
	default:
		return nil, mongoerr.New(15981, "expected either a string or an object as specification for $unwind stage, got %s", bsonx.TypeName(spec))
	}
	if path == "" {
		return nil, mongoerr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	if !strings.HasPrefix(path, "$") {
		return nil, mongoerr.New(28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	if err := validatePath("$unwind", path[1:]); err != nil {
		return nil, err
	}
	s.path = strings.Split(path[1:], ".")
	return s, nil
}

// getPath reads a dotted path through documents only (no array traversal),
// as $unwind does.
func getPath(d bson.D, path []string) (any, bool) {
	var cur any = d
	for _, p := range path {
		doc, ok := cur.(bson.D)
		if !ok {
			return nil, false
		}
		v, ok := bsonx.Get(doc, p)
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// setPath returns a copy of d with the dotted path set (creating
// intermediate documents), or removed when remove is true.
func setPath(d bson.D, path []string, v any, remove bool) bson.D {
	out := make(bson.D, len(d), len(d)+1)
	copy(out, d)
	if len(path) == 1 {
		if remove {
			return bsonx.Delete(out, path[0])
		}
		return bsonx.Set(out, path[0], v)
	}
	sub, _ := bsonx.Get(out, path[0])
	sd, ok := sub.(bson.D)
	if !ok {
		if remove {
			return out
		}
		sd = bson.D{}
	}
	return bsonx.Set(out, path[0], setPath(sd, path[1:], v, remove))
}

func (s *unwindStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	var cur bson.D
	var arr bson.A
	idx := 0
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			for {
				if cur != nil && idx < len(arr) {
					out := setPath(cur, s.path, arr[idx], false)
					if s.index != "" {
						out = setPath(out, strings.Split(s.index, "."), int64(idx), false)
					}
					idx++
					return out, true, nil
				}
				cur = nil
				d, ok, err := in.Next(ctx)
				if err != nil || !ok {
					return nil, false, err
				}
				v, found := getPath(d, s.path)
				a, isArr := v.(bson.A)
				switch {
				case isArr && len(a) > 0:
					cur, arr, idx = d, a, 0
				case isArr || !found || v == nil:
					if !s.preserve {
						continue
					}
					out := d
					if isArr {
						out = setPath(d, s.path, nil, true)
					}
					if s.index != "" {
						out = setPath(out, strings.Split(s.index, "."), nil, false)
					}
					return out, true, nil
				default:
					out := d
					if s.index != "" {
						out = setPath(out, strings.Split(s.index, "."), nil, false)
					}
					return out, true, nil
				}
			}
		},
		close: in.Close,
		src:   in,
	}, nil
}

// ---- $sample

type sampleStage struct{ n int64 }

func (*sampleStage) name() string { return "$sample" }

func (s *sampleStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return lazy(in, func(ctx context.Context) ([]bson.D, error) {
		// reservoir sampling, then shuffle: a uniform random sample in
		// random order
		var res []bson.D
		seen := int64(0)
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			seen++
			if int64(len(res)) < s.n {
				res = append(res, d)
				continue
			}
			j := int64(expr.Rand() * float64(seen))
			if j < s.n {
				res[j] = d
			}
		}
		for i := len(res) - 1; i > 0; i-- {
			j := int(expr.Rand() * float64(i+1))
			res[i], res[j] = res[j], res[i]
		}
		return res, nil
	}), nil
}

// lazy runs fill on the first Next and then iterates its result.
func lazy(in Iterator, fill func(ctx context.Context) ([]bson.D, error)) Iterator {
	var docs []bson.D
	filled := false
	i := 0
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			if !filled {
				filled = true
				var err error
				if docs, err = fill(ctx); err != nil {
					return nil, false, err
				}
				if in != nil {
					in.Close()
				}
			}
			if i >= len(docs) {
				return nil, false, nil
			}
			d := docs[i]
			docs[i] = nil
			i++
			return d, true, nil
		},
		close: func() {
			if in != nil {
				in.Close()
			}
		},
	}
}

// ---- $redact

type redactStage struct{ e expr.Expr }

func (*redactStage) name() string { return "$redact" }

const (
	redactDescend = "descend"
	redactPrune   = "prune"
	redactKeep    = "keep"
)

func (s *redactStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	vars := map[string]any{"DESCEND": redactDescend, "PRUNE": redactPrune, "KEEP": redactKeep}
	for k, v := range rc.vars {
		vars[k] = v
	}
	return mapIter(in, func(d bson.D) (bson.D, error) {
		return s.redact(d, d, vars)
	}), nil
}

func (s *redactStage) redact(d, root bson.D, vars map[string]any) (bson.D, error) {
	// CURRENT is the (sub)document being examined; ROOT stays the top.
	vars["CURRENT"] = d
	v, err := s.e.Eval(&expr.Env{Root: root, Vars: vars})
	if err != nil {
		return nil, err
	}
	switch v {
	case redactKeep:
		return d, nil
	case redactPrune:
		return nil, nil
	case redactDescend:
		out := make(bson.D, 0, len(d))
		for _, e := range d {
			nv, keep, err := s.redactValue(e.Value, root, vars)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, bson.E{Key: e.Key, Value: nv})
			}
		}
		return out, nil
	}
	return nil, mongoerr.New(17053, "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s", expr.ExtJSON(v))
}

func (s *redactStage) redactValue(v any, root bson.D, vars map[string]any) (any, bool, error) {
	switch x := v.(type) {
	case bson.D:
		r, err := s.redact(x, root, vars)
		return r, r != nil, err
	case bson.A:
		out := bson.A{}
		for _, el := range x {
			switch el.(type) {
			case bson.D, bson.A:
				r, keep, err := s.redactValue(el, root, vars)
				if err != nil {
					return nil, false, err
				}
				if keep {
					out = append(out, r)
				}
			default:
				out = append(out, el)
			}
		}
		return out, true, nil
	}
	return v, true, nil
}

// ---- $documents

type documentsStage struct{ e expr.Expr }

func (*documentsStage) name() string { return "$documents" }

func (s *documentsStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	v, err := s.e.Eval(rc.exprEnv(bson.D{}))
	if err != nil {
		return nil, err
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(5858203, "an array is expected")
	}
	docs := make([]bson.D, 0, len(a))
	for _, x := range a {
		d, ok := x.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "$documents expected an array of objects, but found an element of type %s", bsonx.TypeName(x))
		}
		docs = append(docs, d)
	}
	if in != nil {
		in.Close()
	}
	return Slice(docs), nil
}

// ---- composite (a stage desugared into several)

type compositeStage struct {
	n     string
	parts []stage
}

func (s *compositeStage) name() string { return s.n }

func (s *compositeStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	it := in
	for _, p := range s.parts {
		next, err := p.run(ctx, rc, it)
		if err != nil {
			return nil, err
		}
		it = next
	}
	return it, nil
}

// ---- $collStats / $indexStats

type collStatsStage struct{ spec bson.D }

func (*collStatsStage) name() string { return "$collStats" }

func (s *collStatsStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	if in != nil {
		in.Close()
	}
	if rc.opts.Coll == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "$collStats must be run against a collection namespace")
	}
	d, err := rc.env.CollStats(ctx, rc.opts.DB, rc.opts.Coll, s.spec)
	if err != nil {
		return nil, err
	}
	return Slice([]bson.D{d}), nil
}

type indexStatsStage struct{}

func (*indexStatsStage) name() string { return "$indexStats" }

func (s *indexStatsStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	if in != nil {
		in.Close()
	}
	docs, err := rc.env.IndexStats(ctx, rc.opts.DB, rc.opts.Coll)
	if err != nil {
		return nil, err
	}
	return Slice(docs), nil
}

// sortDocs sorts in place, stably, by a compare function.
func sortDocs(docs []bson.D, cmp func(a, b bson.D) int) {
	sort.SliceStable(docs, func(i, j int) bool { return cmp(docs[i], docs[j]) < 0 })
}

func sortSlice(n int, less func(i, j int) bool, swap func(i, j int)) {
	sort.Sort(&lessSwap{n, less, swap})
}

type lessSwap struct {
	n    int
	less func(i, j int) bool
	swap func(i, j int)
}

func (l *lessSwap) Len() int           { return l.n }
func (l *lessSwap) Less(i, j int) bool { return l.less(i, j) }
func (l *lessSwap) Swap(i, j int)      { l.swap(i, j) }
