package engine

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Command-level `let` for find, update, delete and findAndModify (as in
// mongod 7.0; aggregate has its own): the variables are evaluated once and
// their values are substituted for $$name references in the parts of the
// command that are expressions ($expr in filters, computed projections,
// pipeline-style updates), before the command is parsed. An update
// statement's `c` (its constants) is substituted the same way into its
// pipeline.

// letVars evaluates the command's let (nil when there is none).
func (e *Engine) letVars(r *Request) (map[string]any, error) {
	let, err := docArg(r, "let")
	if err != nil || let == nil {
		return nil, err
	}
	return agg.EvalLet(let, e.Now())
}

// applyLet rewrites the command document with the let variables
// substituted: fields lists the top-level fields to rewrite and whether
// each is an expression context (a projection or a pipeline) or a filter.
func (e *Engine) applyLet(r *Request, fields map[string]bool) error {
	vars, err := e.letVars(r)
	if err != nil || vars == nil {
		return err
	}
	cmd := make(bson.D, len(r.Cmd))
	copy(cmd, r.Cmd)
	for i, f := range cmd {
		if exprCtx, ok := fields[f.Key]; ok && i > 0 {
			cmd[i].Value = substLet(f.Value, vars, exprCtx && isExprContext(f.Value), nil)
		}
	}
	r.Cmd = cmd
	return nil
}

// isExprContext: a projection document or an update pipeline is made of
// expressions; an update document ({$set: ...}) is not.
func isExprContext(v any) bool {
	switch x := v.(type) {
	case bson.A:
		return true
	case bson.D:
		return len(x) == 0 || !strings.HasPrefix(x[0].Key, "$")
	}
	return false
}

// applyStatementLet substitutes let variables (and the statement's
// constants c) into each statement of an update or delete: q is a filter,
// u (when a pipeline) is all expressions.
func (e *Engine) applyStatementLet(r *Request, arrayField string) error {
	vars, err := e.letVars(r)
	if err != nil {
		return err
	}
	v, ok := r.Arg(arrayField)
	stmts, isArr := v.(bson.A)
	if !ok || !isArr {
		return nil
	}
	out := make(bson.A, len(stmts))
	changed := false
	for i, s := range stmts {
		st, ok := s.(bson.D)
		if !ok {
			out[i] = s
			continue
		}
		svars := vars
		if c, has := bsonx.Get(st, "c"); has && arrayField == "updates" {
			cd, isDoc := c.(bson.D)
			if !isDoc {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'update.updates.c' is the wrong type '%s', expected type 'object'", bsonx.TypeName(c))
			}
			if len(cd) > 0 {
				svars = map[string]any{}
				for k, x := range vars {
					svars[k] = x
				}
				for _, f := range cd {
					svars[f.Key] = f.Value
				}
			}
		}
		if svars == nil {
			out[i] = st
			continue
		}
		nst := make(bson.D, len(st))
		copy(nst, st)
		for j, f := range nst {
			switch f.Key {
			case "q":
				if vars != nil {
					nst[j].Value = substLet(f.Value, vars, false, nil)
				}
			case "u":
				if _, isPipeline := f.Value.(bson.A); isPipeline {
					nst[j].Value = substLet(f.Value, svars, true, nil)
				}
			}
		}
		out[i] = nst
		changed = true
	}
	if !changed {
		return nil
	}
	cmd := make(bson.D, len(r.Cmd))
	copy(cmd, r.Cmd)
	for i, f := range cmd {
		if f.Key == arrayField {
			cmd[i].Value = out
		}
	}
	r.Cmd = cmd
	return nil
}

// substLet replaces $$name references to the given variables by their
// values ({$literal: v}, or a $let for $$name.path), inside expressions
// only (inExpr; in a filter, inside $expr). Names rebound by $let, $map,
// $filter or $reduce (shadowed) are left alone in their scope.
func substLet(v any, vars map[string]any, inExpr bool, shadowed map[string]bool) any {
	switch x := v.(type) {
	case bson.D:
		if inExpr && len(x) == 1 {
			switch x[0].Key {
			case "$literal":
				return x
			case "$let", "$map", "$filter", "$reduce":
				return substScoped(x, vars, shadowed)
			}
		}
		out := make(bson.D, len(x))
		for i, e := range x {
			sub := inExpr || e.Key == "$expr"
			if e.Key == "$elemMatch" && !inExpr {
				sub = false
			}
			out[i] = bson.E{Key: e.Key, Value: substLet(e.Value, vars, sub, shadowed)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = substLet(e, vars, inExpr, shadowed)
		}
		return out
	case string:
		if !inExpr || !strings.HasPrefix(x, "$$") {
			return x
		}
		name, path, hasPath := strings.Cut(x[2:], ".")
		val, ok := vars[name]
		if !ok || shadowed[name] {
			return x
		}
		if !hasPath {
			return bson.D{{Key: "$literal", Value: val}}
		}
		return bson.D{{Key: "$let", Value: bson.D{
			{Key: "vars", Value: bson.D{{Key: "let__value", Value: bson.D{{Key: "$literal", Value: val}}}}},
			{Key: "in", Value: "$$let__value." + path},
		}}}
	}
	return v
}

// substScoped handles the operators that bind variables: their bound
// names hide the let variables of the same name inside the scope.
func substScoped(x bson.D, vars map[string]any, shadowed map[string]bool) any {
	args, ok := x[0].Value.(bson.D)
	if !ok {
		return bson.D{{Key: x[0].Key, Value: substLet(x[0].Value, vars, true, shadowed)}}
	}
	var bound []string
	scoped := map[string]bool{}
	switch x[0].Key {
	case "$let":
		scoped["in"] = true
		if vd, ok := bsonx.Get(args, "vars"); ok {
			if d, ok := vd.(bson.D); ok {
				for _, f := range d {
					bound = append(bound, f.Key)
				}
			}
		}
	case "$map", "$filter":
		scoped["in"], scoped["cond"] = true, true
		as := "this"
		if a, ok := bsonx.Get(args, "as"); ok {
			if s, ok := a.(string); ok {
				as = s
			}
		}
		bound = append(bound, as)
	case "$reduce":
		scoped["in"] = true
		bound = append(bound, "value", "this")
	}
	inner := map[string]bool{}
	for k := range shadowed {
		inner[k] = true
	}
	for _, b := range bound {
		inner[b] = true
	}
	out := make(bson.D, len(args))
	for i, f := range args {
		sh := shadowed
		if scoped[f.Key] {
			sh = inner
		}
		out[i] = bson.E{Key: f.Key, Value: substLet(f.Value, vars, true, sh)}
	}
	return bson.D{{Key: x[0].Key, Value: out}}
}
