package agg

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func parseNamespace(stageName string, v any, opts *Options) (db, coll string, err error) {
	switch x := v.(type) {
	case string:
		return opts.DB, x, nil
	case bson.D:
		db = opts.DB
		for _, e := range x {
			s, ok := e.Value.(string)
			switch {
			case e.Key == "db" && ok:
				db = s
			case e.Key == "coll" && ok:
				coll = s
			case e.Key == "db" || e.Key == "coll":
				return "", "", mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'", stageName, e.Key, bsonx.TypeName(e.Value))
			case stageName == "$out" && e.Key == "timeseries":
				return "", "", mongoerr.New(mongoerr.NotImplemented, "$out to a time-series collection is not supported by mayfly")
			default:
				return "", "", mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", stageName, e.Key)
			}
		}
		if coll == "" {
			return "", "", mongoerr.New(40414, "BSON field '%s.coll' is missing but a required field", stageName)
		}
		return db, coll, nil
	}
	if stageName == "$out" {
		return "", "", mongoerr.New(16990, "$out only supports a string or object argument, not %s", bsonx.TypeName(v))
	}
	return "", "", mongoerr.New(51178, "$merge 'into' field  must be either a string or an object, but found %s", bsonx.TypeName(v))
}

func validTargetColl(stageName, db, coll string) error {
	if coll == "" || strings.Contains(coll, "$") || strings.HasPrefix(coll, "system.") || strings.ContainsRune(coll, 0) {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid %s target namespace, %s.%s", stageName, db, coll)
	}
	return nil
}

// ensureID gives a document an ObjectId _id (first) when it has none.
func ensureID(d bson.D) bson.D {
	if _, ok := bsonx.Get(d, "_id"); ok {
		return d
	}
	return append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, d...)
}

// ---- $out

type outStage struct{ db, coll string }

func (*outStage) name() string { return "$out" }

func init() {
	stageParsers["$out"] = func(spec any, opts *Options) (stage, error) {
		db, coll, err := parseNamespace("$out", spec, opts)
		if err != nil {
			return nil, err
		}
		if err := validTargetColl("$out", db, coll); err != nil {
			return nil, err
		}
		return &outStage{db: db, coll: coll}, nil
	}
	stageParsers["$merge"] = parseMerge
}

func (s *outStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	src := mapIter(in, func(d bson.D) (bson.D, error) { return ensureID(d), nil })
	err := rc.env.Out(ctx, s.db, s.coll, src)
	src.Close()
	if err != nil {
		return nil, err
	}
	return Slice(nil), nil
}

// ---- $merge

type mergeStage struct {
	db, coll       string
	on             []string
	letNames       []string
	letExprs       []expr.Expr
	whenMatched    string // replace, keepExisting, merge, fail, pipeline
	update         func(doc bson.D, vars map[string]any) (bson.D, error)
	whenNotMatched string // insert, discard, fail
}

func (*mergeStage) name() string { return "$merge" }

func parseMerge(spec any, opts *Options) (stage, error) {
	s := &mergeStage{on: []string{"_id"}, whenMatched: "merge", whenNotMatched: "insert"}
	var err error
	var letD bson.D
	hasLet := false
	switch x := spec.(type) {
	case string:
		s.db, s.coll = opts.DB, x
	case bson.D:
		hasInto := false
		for _, e := range x {
			switch e.Key {
			case "into":
				if s.db, s.coll, err = parseNamespace("$merge", e.Value, opts); err != nil {
					return nil, err
				}
				hasInto = true
			case "on":
				s.on = nil
				switch o := e.Value.(type) {
				case string:
					s.on = []string{o}
				case bson.A:
					if len(o) == 0 {
						return nil, mongoerr.New(51187, "If explicitly specifying $merge 'on', must include at least one field")
					}
					for _, f := range o {
						fs, ok := f.(string)
						if !ok {
							return nil, mongoerr.New(51134, "$merge 'on' array elements must be strings, but found %s", bsonx.TypeName(f))
						}
						s.on = append(s.on, fs)
					}
				default:
					return nil, mongoerr.New(51186, "$merge 'on' field  must be either a string or an array of strings, but found %s", bsonx.TypeName(e.Value))
				}
			case "let":
				ld, ok := e.Value.(bson.D)
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$merge.let' is the wrong type '%s', expected type 'object'", bsonx.TypeName(e.Value))
				}
				letD, hasLet = ld, true
			case "whenMatched":
				switch w := e.Value.(type) {
				case string:
					switch w {
					case "replace", "keepExisting", "merge", "fail":
						s.whenMatched = w
					default:
						return nil, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '$merge.whenMatched' is not a valid value.", w)
					}
				case bson.A:
					s.whenMatched = "pipeline"
					if s.update, err = CompileUpdatePipeline(w); err != nil {
						return nil, err
					}
				default:
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$merge.whenMatched' is the wrong type '%s', expected types '[string, array']", bsonx.TypeName(e.Value))
				}
			case "whenNotMatched":
				w, ok := e.Value.(string)
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$merge.whenNotMatched' is the wrong type '%s', expected type 'string'", bsonx.TypeName(e.Value))
				}
				switch w {
				case "insert", "discard", "fail":
					s.whenNotMatched = w
				default:
					return nil, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '$merge.whenNotMatched' is not a valid value.", w)
				}
			default:
				return nil, mongoerr.New(40415, "BSON field '$merge.%s' is an unknown field.", e.Key)
			}
		}
		if !hasInto {
			return nil, mongoerr.New(40414, "BSON field '$merge.into' is missing but a required field")
		}
	default:
		return nil, mongoerr.New(51182, "$merge only supports a string or object argument, but found %s", bsonx.TypeName(spec))
	}
	if err := validTargetColl("$merge", s.db, s.coll); err != nil {
		return nil, err
	}
	if hasLet && s.whenMatched != "pipeline" {
		return nil, mongoerr.New(51199, "Cannot use 'let' variables with 'whenMatched: %s' mode", s.whenMatched)
	}
	if !hasLet {
		letD = bson.D{{Key: "new", Value: "$$ROOT"}}
	}
	for _, e := range letD {
		c, err := compileExpr(e.Value, opts)
		if err != nil {
			return nil, err
		}
		s.letNames = append(s.letNames, e.Key)
		s.letExprs = append(s.letExprs, c)
	}
	return s, nil
}

func (s *mergeStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	defer in.Close()
	if !(len(s.on) == 1 && s.on[0] == "_id") {
		ok, err := rc.env.HasUniqueIndex(ctx, s.db, s.coll, s.on)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, mongoerr.New(51183, "Cannot find index to verify that join fields will be unique")
		}
	}
	for {
		d, ok, err := in.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if err := s.mergeOne(ctx, rc, d); err != nil {
			return nil, err
		}
	}
	return Slice(nil), nil
}

func (s *mergeStage) mergeOne(ctx context.Context, rc *runCtx, d bson.D) error {
	d = ensureID(d)
	filter := bson.D{}
	for _, f := range s.on {
		v, ok := getPath(d, strings.Split(f, "."))
		if _, isArr := v.(bson.A); !ok || expr.IsNullish(v) || isArr {
			return mongoerr.New(51132, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
		}
		filter = append(filter, bson.E{Key: f, Value: bson.D{{Key: "$eq", Value: v}}})
	}
	it, err := rc.env.Scan(ctx, s.db, s.coll, filter)
	if err != nil {
		return err
	}
	matches, err := Collect(ctx, it)
	if err != nil {
		return err
	}
	if len(matches) == 0 {
		switch s.whenNotMatched {
		case "discard":
			return nil
		case "fail":
			return mongoerr.New(13113, "$merge could not find a matching document in the target collection for at least one document in the source collection")
		}
		return mergeDupKey(rc.env.Insert(ctx, s.db, s.coll, d), s.on, false)
	}
	target := matches[0]
	id, _ := bsonx.Get(target, "_id")
	var nd bson.D
	switch s.whenMatched {
	case "keepExisting":
		return nil
	case "fail":
		// mongod's whenMatched: fail is an insert, refused by the unique
		// index on the 'on' fields.
		return mergeDupKey(rc.env.Insert(ctx, s.db, s.coll, d), s.on, true)
	case "replace":
		nd = d
	case "merge":
		nd = bsonx.CloneD(target)
		for _, e := range d {
			nd = bsonx.Set(nd, e.Key, e.Value)
		}
	case "pipeline":
		vars := make(map[string]any, len(rc.vars)+len(s.letNames))
		for k, v := range rc.vars {
			vars[k] = v
		}
		env := rc.exprEnv(d)
		for i, n := range s.letNames {
			v, err := s.letExprs[i].Eval(env)
			if err != nil {
				return err
			}
			if bsonx.IsMissing(v) {
				v = nil
			}
			vars[n] = v
		}
		if nd, err = s.update(target, vars); err != nil {
			return err
		}
	}
	if nid, ok := bsonx.Get(nd, "_id"); ok && bsonx.Compare(nid, id) != 0 {
		return mongoerr.New(mongoerr.ImmutableField, "$merge failed to update the matching document, did you attempt to modify the _id or the shard key? :: caused by :: Performing an update on the path '_id' would modify the immutable field '_id'")
	} else if !ok {
		nd = append(bson.D{{Key: "_id", Value: id}}, nd...)
	}
	return mergeDupKey(rc.env.Replace(ctx, s.db, s.coll, id, nd), s.on, false)
}

// mergeDupKey gives a duplicate key error of a $merge write mongod's
// context (DocumentSourceMerge::spill), keeping the E11000 message and its
// keyPattern and keyValue.
func mergeDupKey(err error, on []string, failMode bool) error {
	var me *mongoerr.Error
	if err == nil || !errors.As(err, &me) || me.Code != mongoerr.DuplicateKey {
		return err
	}
	pattern, _ := bsonx.Get(me.Extra, "keyPattern")
	pd, _ := pattern.(bson.D)
	fromOn := len(pd) == len(on)
	for _, f := range on {
		if _, ok := bsonx.Get(pd, f); !ok {
			fromOn = false
		}
	}
	context := "$merge failed due to a DuplicateKey error"
	if failMode && fromOn {
		context = "$merge with whenMatched: fail found an existing document with the same values for the 'on' fields"
	}
	return &mongoerr.Error{Code: me.Code, Msg: context + " :: caused by :: " + me.Msg, Extra: me.Extra}
}

// ---- pipeline-style updates

// CompileUpdatePipeline compiles the pipeline form of an update
// (update: [{$set: ...}, ...]). Only $addFields/$set, $project, $unset,
// $replaceRoot and $replaceWith are allowed, as in mongod (other stages fail
// with InvalidOptions). The returned function applies the stages to a
// document with the given variables (the command's let values, $$new for
// $merge, ...; $$NOW defaults to the time of compilation, so that it is the
// same for every document of one update); it does not modify doc.
func CompileUpdatePipeline(p bson.A) (func(doc bson.D, vars map[string]any) (bson.D, error), error) {
	opts := &Options{MemoryLimit: DefaultMemoryLimit}
	var stages []stage
	for _, raw := range p {
		d, ok := raw.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		if len(d) != 1 {
			return nil, mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		switch d[0].Key {
		case "$addFields", "$set", "$project", "$unset", "$replaceRoot", "$replaceWith":
		default:
			if _, known := stageParsers[d[0].Key]; !known {
				return nil, mongoerr.New(40324, "Unrecognized pipeline stage name: '%s'", d[0].Key)
			}
			return nil, mongoerr.New(mongoerr.InvalidOptions, "%s is not allowed to be used within an update", d[0].Key)
		}
		st, err := stageParsers[d[0].Key](d[0].Value, opts)
		if err != nil {
			return nil, err
		}
		stages = append(stages, st)
	}
	// $$NOW is one instant per compiled update (mongod fixes it per
	// command) unless the caller passes its own.
	now := bson.NewDateTimeFromTime(time.Now())
	return func(doc bson.D, vars map[string]any) (bson.D, error) {
		if _, ok := vars["NOW"]; !ok {
			nv := make(map[string]any, len(vars)+1)
			for k, v := range vars {
				nv[k] = v
			}
			nv["NOW"] = now
			vars = nv
		}
		cur := doc
		for _, st := range stages {
			env := &expr.Env{Root: cur, Vars: vars}
			switch s := st.(type) {
			case *projectStage:
				out, err := s.p.apply(cur, env)
				if err != nil {
					return nil, err
				}
				cur = out
			case *replaceRootStage:
				v, err := s.e.Eval(env)
				if err != nil {
					return nil, err
				}
				nd, ok := v.(bson.D)
				if !ok {
					return nil, mongoerr.New(40228, "'replacement document' must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s", expr.ExtJSON(v), bsonx.TypeName(v), expr.ExtJSON(cur))
				}
				cur = nd
			}
		}
		return cur, nil
	}, nil
}
