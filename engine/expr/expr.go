// Package expr compiles and evaluates MongoDB aggregation expressions.
//
// An expression is compiled once (Compile) into a tree of Expr nodes and
// evaluated many times against an Env. Evaluation results use the driver's
// bson types; an absent value (a missing field, $$REMOVE) is bsonx.Missing so
// that callers such as $project can tell "no field" from "null". Arrays built
// by expressions turn Missing into null, as mongod does; documents built by
// expressions drop fields whose value is Missing.
package expr

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Expr is a compiled aggregation expression.
type Expr interface {
	Eval(env *Env) (any, error)
}

// Env is what an expression is evaluated against: $$ROOT/$$CURRENT and the
// user and system variables.
//
// Vars holds pipeline-level variables (let variables, "NOW",
// "CLUSTER_TIME", and optionally "CURRENT"). Variables bound inside an
// expression ($let, $map, $filter, $reduce, ...) live in a private chain of
// frames so that binding them costs no map copies.
type Env struct {
	Root bson.D
	Vars map[string]any
	// RT is the running operation's runtime (interrupt check and limits);
	// nil: none.
	RT *Runtime

	local *frame
}

type frame struct {
	name string
	val  any
	next *frame
}

// bind returns a child env with one more local variable. The returned frame
// may be updated in place by loops ($map/$filter) to avoid allocations.
func (e *Env) bind(name string, v any) (*Env, *frame) {
	f := &frame{name: name, val: v, next: e.local}
	return &Env{Root: e.Root, Vars: e.Vars, RT: e.RT, local: f}, f
}

// lookup resolves a variable name (without "$$").
func (e *Env) lookup(name string) (any, bool) {
	for f := e.local; f != nil; f = f.next {
		if f.name == name {
			return f.val, true
		}
	}
	if v, ok := e.Vars[name]; ok {
		return v, true
	}
	switch name {
	case "ROOT", "CURRENT":
		if e.Root == nil {
			return bsonx.Missing, true
		}
		return e.Root, true
	case "NOW":
		return bson.NewDateTimeFromTime(time.Now()), true
	case "REMOVE":
		return bsonx.Missing, true
	}
	return nil, false
}

// Options tunes compilation.
type Options struct {
	// Vars lists user variables (without "$$") that are defined by the
	// surrounding context (e.g. the `let` of an aggregate command or a
	// $lookup). When non-nil, references to any other user variable fail at
	// compile time with mongod's 17276 "Use of undefined variable"; when nil,
	// undefined variables are only detected at evaluation time.
	Vars []string
}

type scope struct {
	strict bool
	names  map[string]int
}

func (s *scope) defined(name string) bool {
	if !s.strict {
		return true
	}
	switch name {
	case "ROOT", "CURRENT", "NOW", "REMOVE", "CLUSTER_TIME", "SEARCH_META", "USER_ROLES", "DESCEND", "PRUNE", "KEEP":
		return true
	}
	return s.names[name] > 0
}

func (s *scope) push(names ...string) {
	if s.names == nil {
		s.names = map[string]int{}
	}
	for _, n := range names {
		s.names[n]++
	}
}

func (s *scope) pop(names ...string) {
	for _, n := range names {
		s.names[n]--
	}
}

// Compile parses an expression value (a literal, a "$field" path, an
// operator document {$op: args}, or a document/array of expressions).
// Variables are checked at evaluation time.
func Compile(v any) (Expr, error) {
	return compile(v, &scope{})
}

// CompileWith is Compile with options (see Options).
func CompileWith(v any, opts Options) (Expr, error) {
	s := &scope{}
	if opts.Vars != nil {
		s.strict = true
		s.push(opts.Vars...)
	}
	return compile(v, s)
}

// Truthy is MongoDB's expression truthiness: false, null, missing, undefined
// and numeric zero are false; everything else is true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil, bson.Null, bson.Undefined:
		return false
	case bool:
		return x
	case int32:
		return x != 0
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case bson.Decimal128:
		return !decIsZero(x)
	}
	return !bsonx.IsMissing(v)
}

// IsNullish reports whether v is null, undefined or missing: the values most
// operators map to a null result.
func IsNullish(v any) bool {
	switch v.(type) {
	case nil, bson.Null, bson.Undefined:
		return true
	}
	return bsonx.IsMissing(v)
}

// Constant returns the value and true when e is a compile-time constant.
func Constant(e Expr) (any, bool) {
	if c, ok := e.(*constExpr); ok {
		return c.v, true
	}
	return nil, false
}

// FieldPathOf returns the dotted path when e is a plain "$a.b" field path.
func FieldPathOf(e Expr) (string, bool) {
	if f, ok := e.(*fieldPath); ok {
		return strings.Join(f.parts, "."), true
	}
	return "", false
}

// ---------------------------------------------------------------------------
// tree nodes

type constExpr struct{ v any }

func (c *constExpr) Eval(*Env) (any, error) { return c.v, nil }

// fieldPath is "$a.b": a path from $$CURRENT.
type fieldPath struct{ parts []string }

func (f *fieldPath) Eval(env *Env) (any, error) {
	// $$CURRENT is the root unless rebound; avoid boxing the root document
	// (an allocation) in the common case.
	for fr := env.local; fr != nil; fr = fr.next {
		if fr.name == "CURRENT" {
			return walk(fr.val, f.parts), nil
		}
	}
	if cur, ok := env.Vars["CURRENT"]; ok {
		return walk(cur, f.parts), nil
	}
	if env.Root == nil {
		return bsonx.Missing, nil
	}
	val, ok := bsonx.Get(env.Root, f.parts[0])
	if !ok {
		return bsonx.Missing, nil
	}
	return walk(val, f.parts[1:]), nil
}

// varPath is "$$name.a.b".
type varPath struct {
	name  string
	parts []string
}

func (v *varPath) Eval(env *Env) (any, error) {
	val, ok := env.lookup(v.name)
	if !ok {
		if v.name == "CLUSTER_TIME" {
			return nil, mongoerr.New(10071, "Builtin variable '$$CLUSTER_TIME' is not available")
		}
		return nil, mongoerr.New(17276, "Use of undefined variable: %s", v.name)
	}
	return walk(val, v.parts), nil
}

// walk follows a dotted path as aggregation field paths do: through
// documents, and over arrays element-wise (collecting the non-missing results
// into an array; nested arrays stay nested).
func walk(v any, parts []string) any {
	for i, p := range parts {
		switch x := v.(type) {
		case bson.D:
			val, ok := bsonx.Get(x, p)
			if !ok {
				return bsonx.Missing
			}
			v = val
		case bson.A:
			return walkArray(x, parts[i:])
		default:
			return bsonx.Missing
		}
	}
	return v
}

func walkArray(a bson.A, parts []string) bson.A {
	out := make(bson.A, 0, len(a))
	for _, el := range a {
		switch x := el.(type) {
		case bson.D:
			r := walk(x, parts)
			if !bsonx.IsMissing(r) {
				out = append(out, r)
			}
		case bson.A:
			out = append(out, walkArray(x, parts))
		}
	}
	return out
}

// objectExpr builds a document; fields evaluating to Missing are dropped.
type objectExpr struct {
	keys []string
	vals []Expr
}

func (o *objectExpr) Eval(env *Env) (any, error) {
	out := make(bson.D, 0, len(o.keys))
	for i, k := range o.keys {
		v, err := o.vals[i].Eval(env)
		if err != nil {
			return nil, err
		}
		if bsonx.IsMissing(v) {
			continue
		}
		out = append(out, bson.E{Key: k, Value: v})
	}
	return out, nil
}

// arrayExpr builds an array; Missing elements become null.
type arrayExpr struct{ elems []Expr }

func (a *arrayExpr) Eval(env *Env) (any, error) {
	out := make(bson.A, len(a.elems))
	for i, e := range a.elems {
		v, err := e.Eval(env)
		if err != nil {
			return nil, err
		}
		if bsonx.IsMissing(v) {
			v = nil
		}
		out[i] = v
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// compilation

type compileFunc func(name string, args any, s *scope) (Expr, error)

var operators map[string]compileFunc

func register(fn compileFunc, names ...string) {
	if operators == nil {
		operators = map[string]compileFunc{}
	}
	for _, n := range names {
		operators[n] = fn
	}
}

func compile(v any, s *scope) (Expr, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return compilePath(x, s)
		}
		return &constExpr{x}, nil
	case bson.D:
		return compileObject(x, s)
	case bson.M, bson.Raw:
		return compileObject(bsonx.ToD(x), s)
	case bson.A:
		elems := make([]Expr, len(x))
		allConst := true
		for i, e := range x {
			c, err := compile(e, s)
			if err != nil {
				return nil, err
			}
			elems[i] = c
			if _, ok := c.(*constExpr); !ok {
				allConst = false
			}
		}
		if allConst {
			out := make(bson.A, len(elems))
			for i, e := range elems {
				out[i] = e.(*constExpr).v
			}
			return &constExpr{out}, nil
		}
		return &arrayExpr{elems}, nil
	case int:
		return &constExpr{int64(x)}, nil
	}
	return &constExpr{v}, nil
}

func compilePath(x string, s *scope) (Expr, error) {
	if strings.HasPrefix(x, "$$") {
		name, rest, _ := strings.Cut(x[2:], ".")
		if name == "" {
			return nil, mongoerr.New(16869, "empty variable names are not allowed")
		}
		if !s.defined(name) {
			return nil, mongoerr.New(17276, "Use of undefined variable: %s", name)
		}
		var parts []string
		if rest != "" || strings.Contains(x[2:], ".") {
			parts = strings.Split(rest, ".")
			for _, p := range parts {
				if p == "" {
					return nil, mongoerr.New(15998, "FieldPath field names may not be empty strings.")
				}
			}
		}
		return &varPath{name: name, parts: parts}, nil
	}
	if x == "$" {
		return nil, mongoerr.New(16872, "'$' by itself is not a valid FieldPath")
	}
	parts := strings.Split(x[1:], ".")
	for _, p := range parts {
		if p == "" {
			return nil, mongoerr.New(15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(p, "$") {
			return nil, mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return &fieldPath{parts}, nil
}

func compileObject(d bson.D, s *scope) (Expr, error) {
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 {
			return nil, mongoerr.New(15983, "An object representing an expression must have exactly one field: %s", ExtJSON(d))
		}
		name := d[0].Key
		fn, ok := operators[name]
		if !ok {
			return nil, mongoerr.New(mongoerr.InvalidPipelineOperator, "Unrecognized expression '%s'", name)
		}
		return fn(name, d[0].Value, s)
	}
	o := &objectExpr{}
	allConst := true
	seen := map[string]bool{}
	for _, e := range d {
		if strings.HasPrefix(e.Key, "$") {
			return nil, mongoerr.New(16404, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s", len(d), ExtJSON(d))
		}
		if e.Key == "" {
			return nil, mongoerr.New(16412, "FieldPath field names may not be empty strings.")
		}
		if strings.Contains(e.Key, ".") {
			return nil, mongoerr.New(16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.")
		}
		if seen[e.Key] {
			return nil, mongoerr.New(16406, "duplicate field name specified in object literal: %s", ExtJSON(d))
		}
		seen[e.Key] = true
		c, err := compile(e.Value, s)
		if err != nil {
			return nil, err
		}
		if _, ok := c.(*constExpr); !ok {
			allConst = false
		}
		o.keys = append(o.keys, e.Key)
		o.vals = append(o.vals, c)
	}
	if allConst {
		v, _ := o.Eval(&Env{})
		return &constExpr{v}, nil
	}
	return o, nil
}

// ExtJSON renders a value as relaxed extended JSON for error messages.
func ExtJSON(v any) string {
	if d, ok := v.(bson.D); ok {
		b, err := bson.MarshalExtJSON(d, false, false)
		if err == nil {
			return string(b)
		}
	}
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return "?"
	}
	s := string(b)
	s = strings.TrimPrefix(s, `{"v":`)
	return strings.TrimSuffix(s, "}")
}

// args splits an operator's argument into a list: an array is the list, any
// other value is a single argument.
func argList(args any) []any {
	if a, ok := args.(bson.A); ok {
		return a
	}
	return []any{args}
}

func compileList(name string, args any, s *scope, min, max int) ([]Expr, error) {
	list := argList(args)
	if min == max && len(list) != min {
		return nil, mongoerr.New(16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, min, len(list))
	}
	if len(list) < min || (max >= 0 && len(list) > max) {
		if max < 0 {
			return nil, mongoerr.New(16020, "Expression %s takes at least %d arguments. %d were passed in.", name, min, len(list))
		}
		return nil, mongoerr.New(28667, "Expression %s takes at least %d arguments, and at most %d, but %d were passed in.", name, min, max, len(list))
	}
	out := make([]Expr, len(list))
	for i, a := range list {
		c, err := compile(a, s)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// nary is an operator over evaluated arguments.
type nary struct {
	args []Expr
	fn   func(vals []any) (any, error)
	efn  func(env *Env, vals []any) (any, error) // used instead of fn when set
}

func (n *nary) Eval(env *Env) (any, error) {
	var buf [4]any
	vals := buf[:0]
	for _, a := range n.args {
		v, err := a.Eval(env)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
	}
	if err := env.poll(valueWork(vals)); err != nil {
		return nil, err
	}
	var out any
	var err error
	if n.efn != nil {
		out, err = n.efn(env, vals)
	} else {
		out, err = n.fn(vals)
	}
	if err == nil {
		err = checkResult(out)
	}
	return out, err
}

// naryOp registers a simple operator taking between min and max (-1 = any)
// arguments evaluated eagerly.
func naryOp(min, max int, fn func(name string, vals []any) (any, error), names ...string) {
	register(func(name string, args any, s *scope) (Expr, error) {
		list, err := compileList(name, args, s, min, max)
		if err != nil {
			return nil, err
		}
		return &nary{args: list, fn: func(vals []any) (any, error) { return fn(name, vals) }}, nil
	}, names...)
}

// envNaryOp is naryOp for operators that need the evaluation's Env (its
// runtime: interrupt checks and limits).
func envNaryOp(min, max int, fn func(env *Env, name string, vals []any) (any, error), names ...string) {
	register(func(name string, args any, s *scope) (Expr, error) {
		list, err := compileList(name, args, s, min, max)
		if err != nil {
			return nil, err
		}
		return &nary{args: list, efn: func(env *Env, vals []any) (any, error) { return fn(env, name, vals) }}, nil
	}, names...)
}

// objectArgs validates a named-argument operator spec: it must be a document
// and only contain known fields.
func objectArgs(name string, args any, code int32, allowed ...string) (map[string]any, error) {
	d, ok := args.(bson.D)
	if !ok {
		return nil, mongoerr.New(code, "%s expects an object of named arguments but found: %s", name, bsonx.TypeName(args))
	}
	out := map[string]any{}
	for _, e := range d {
		found := false
		for _, a := range allowed {
			if a == e.Key {
				found = true
			}
		}
		if !found {
			return nil, mongoerr.New(code, "%s found an unknown argument: %s", name, e.Key)
		}
		out[e.Key] = e.Value
	}
	return out, nil
}

func compileOpt(m map[string]any, key string, s *scope) (Expr, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	return compile(v, s)
}

// evalOpt evaluates an optional sub-expression (nil → Missing).
func evalOpt(e Expr, env *Env) (any, error) {
	if e == nil {
		return bsonx.Missing, nil
	}
	return e.Eval(env)
}

func init() {
	register(func(name string, args any, s *scope) (Expr, error) {
		return &constExpr{args}, nil
	}, "$literal")
}
