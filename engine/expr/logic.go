package expr

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Comparison, boolean and conditional operators.

// cmpValue compares two expression values. In aggregation comparisons a
// missing value ranks with undefined, below null (so {$eq: ["$nope", null]}
// is false), unlike in sorts and indexes where it equals null.
func cmpValue(a, b any) int {
	if bsonx.IsMissing(a) {
		a = bson.Undefined{}
	}
	if bsonx.IsMissing(b) {
		b = bson.Undefined{}
	}
	return bsonx.Compare(a, b)
}

type andOr struct {
	args []Expr
	and  bool
}

func (a *andOr) Eval(env *Env) (any, error) {
	for _, e := range a.args {
		v, err := e.Eval(env)
		if err != nil {
			return nil, err
		}
		if Truthy(v) != a.and {
			return !a.and, nil
		}
	}
	return a.and, nil
}

type condExpr struct{ cond, then, els Expr }

func (c *condExpr) Eval(env *Env) (any, error) {
	v, err := c.cond.Eval(env)
	if err != nil {
		return nil, err
	}
	if Truthy(v) {
		return c.then.Eval(env)
	}
	return c.els.Eval(env)
}

type ifNull struct{ args []Expr }

func (n *ifNull) Eval(env *Env) (any, error) {
	for i, e := range n.args {
		v, err := e.Eval(env)
		if err != nil {
			return nil, err
		}
		if !IsNullish(v) || i == len(n.args)-1 {
			return v, nil
		}
	}
	return nil, nil
}

type switchExpr struct {
	cases []Expr
	thens []Expr
	def   Expr
}

func (s *switchExpr) Eval(env *Env) (any, error) {
	for i, c := range s.cases {
		v, err := c.Eval(env)
		if err != nil {
			return nil, err
		}
		if Truthy(v) {
			return s.thens[i].Eval(env)
		}
	}
	if s.def == nil {
		return nil, mongoerr.New(40069, "$switch could not find a matching branch for an input, and no default was specified.")
	}
	return s.def.Eval(env)
}

type letExpr struct {
	names []string
	vals  []Expr
	in    Expr
}

func (l *letExpr) Eval(env *Env) (any, error) {
	inner := env
	for i, n := range l.names {
		v, err := l.vals[i].Eval(env)
		if err != nil {
			return nil, err
		}
		inner, _ = inner.bind(n, v)
	}
	return l.in.Eval(inner)
}

// validateVarName checks a user variable name for definition ($let, $map
// "as", ...): it must start with a lowercase letter or a non-ASCII char and
// contain only letters, digits and '_'.
func validateVarName(name string) error {
	if name == "" {
		return mongoerr.New(16866, "empty variable names are not allowed")
	}
	c := name[0]
	if !(c >= 'a' && c <= 'z') && c < 0x80 {
		if name == "CURRENT" {
			return nil
		}
		return mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80) {
			return mongoerr.New(16868, "'%s' contains an invalid character for a variable name: '%c'", name, c)
		}
	}
	return nil
}

func init() {
	for _, op := range []struct {
		name string
		ok   func(int) bool
	}{
		{"$eq", func(c int) bool { return c == 0 }},
		{"$ne", func(c int) bool { return c != 0 }},
		{"$gt", func(c int) bool { return c > 0 }},
		{"$gte", func(c int) bool { return c >= 0 }},
		{"$lt", func(c int) bool { return c < 0 }},
		{"$lte", func(c int) bool { return c <= 0 }},
	} {
		op := op
		naryOp(2, 2, func(_ string, v []any) (any, error) {
			return op.ok(cmpValue(v[0], v[1])), nil
		}, op.name)
	}
	naryOp(2, 2, func(_ string, v []any) (any, error) {
		return int32(cmpValue(v[0], v[1])), nil
	}, "$cmp")
	for _, name := range []string{"$and", "$or"} {
		isAnd := name == "$and"
		register(func(name string, args any, s *scope) (Expr, error) {
			list, err := compileList(name, args, s, 0, -1)
			if err != nil {
				return nil, err
			}
			return &andOr{args: list, and: isAnd}, nil
		}, name)
	}
	naryOp(1, 1, func(_ string, v []any) (any, error) { return !Truthy(v[0]), nil }, "$not")

	register(func(name string, args any, s *scope) (Expr, error) {
		if d, ok := args.(bson.D); ok {
			var c condExpr
			for _, e := range d {
				x, err := compile(e.Value, s)
				if err != nil {
					return nil, err
				}
				switch e.Key {
				case "if":
					c.cond = x
				case "then":
					c.then = x
				case "else":
					c.els = x
				default:
					return nil, mongoerr.New(17083, "Unrecognized parameter to $cond: %s", e.Key)
				}
			}
			switch {
			case c.cond == nil:
				return nil, mongoerr.New(17080, "Missing 'if' parameter to $cond")
			case c.then == nil:
				return nil, mongoerr.New(17081, "Missing 'then' parameter to $cond")
			case c.els == nil:
				return nil, mongoerr.New(17082, "Missing 'else' parameter to $cond")
			}
			return &c, nil
		}
		list, err := compileList(name, args, s, 3, 3)
		if err != nil {
			return nil, err
		}
		return &condExpr{list[0], list[1], list[2]}, nil
	}, "$cond")
	register(func(name string, args any, s *scope) (Expr, error) {
		list, err := compileList(name, args, s, 0, -1)
		if err != nil {
			return nil, err
		}
		if len(list) < 2 {
			return nil, mongoerr.New(1257300, "$ifNull needs at least two arguments, had: %d", len(list))
		}
		return &ifNull{list}, nil
	}, "$ifNull")
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(40060, "$switch requires an object as an argument, found: %s", bsonx.TypeName(args))
		}
		sw := &switchExpr{}
		for _, e := range d {
			switch e.Key {
			case "branches":
				br, ok := e.Value.(bson.A)
				if !ok {
					return nil, mongoerr.New(40061, "$switch expected an array for 'branches', found: %s", bsonx.TypeName(e.Value))
				}
				for _, b := range br {
					bd, ok := b.(bson.D)
					if !ok {
						return nil, mongoerr.New(40062, "$switch expected each branch to be an object, found: %s", bsonx.TypeName(b))
					}
					var c, t Expr
					for _, be := range bd {
						x, err := compile(be.Value, s)
						if err != nil {
							return nil, err
						}
						switch be.Key {
						case "case":
							c = x
						case "then":
							t = x
						default:
							return nil, mongoerr.New(40063, "$switch found an unknown argument to a branch: %s", be.Key)
						}
					}
					if c == nil {
						return nil, mongoerr.New(40064, "$switch requires each branch have a 'case' expression")
					}
					if t == nil {
						return nil, mongoerr.New(40065, "$switch requires each branch have a 'then' expression.")
					}
					sw.cases = append(sw.cases, c)
					sw.thens = append(sw.thens, t)
				}
			case "default":
				x, err := compile(e.Value, s)
				if err != nil {
					return nil, err
				}
				sw.def = x
			default:
				return nil, mongoerr.New(40067, "$switch found an unknown argument: %s", e.Key)
			}
		}
		if len(sw.cases) == 0 {
			return nil, mongoerr.New(40068, "$switch requires at least one branch.")
		}
		return sw, nil
	}, "$switch")
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(16874, "$let only supports an object as its argument")
		}
		var varsD bson.D
		var inV any
		hasVars, hasIn := false, false
		for _, e := range d {
			switch e.Key {
			case "vars":
				vd, ok := e.Value.(bson.D)
				if !ok {
					return nil, mongoerr.New(10065, "invalid parameter: expected an object (vars)")
				}
				varsD, hasVars = vd, true
			case "in":
				inV, hasIn = e.Value, true
			default:
				return nil, mongoerr.New(16875, "Unrecognized parameter to $let: %s", e.Key)
			}
		}
		if !hasVars {
			return nil, mongoerr.New(16876, "Missing 'vars' parameter to $let")
		}
		if !hasIn {
			return nil, mongoerr.New(16877, "Missing 'in' parameter to $let")
		}
		l := &letExpr{}
		for _, e := range varsD {
			if err := validateVarName(e.Key); err != nil {
				return nil, err
			}
			x, err := compile(e.Value, s)
			if err != nil {
				return nil, err
			}
			l.names = append(l.names, e.Key)
			l.vals = append(l.vals, x)
		}
		s.push(l.names...)
		in, err := compile(inV, s)
		s.pop(l.names...)
		if err != nil {
			return nil, err
		}
		l.in = in
		return l, nil
	}, "$let")
}
