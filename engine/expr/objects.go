package expr

import (
	"math/rand/v2"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// MergeInto merges the fields of src into dst (later fields win, in place
// when already present), as $mergeObjects does.
func MergeInto(dst, src bson.D) bson.D {
	for _, e := range src {
		dst = bsonx.Set(dst, e.Key, e.Value)
	}
	return dst
}

type fieldExpr struct {
	name              string
	field, input, val Expr
}

func (f *fieldExpr) Eval(env *Env) (any, error) {
	fv, err := f.field.Eval(env)
	if err != nil {
		return nil, err
	}
	fname, ok := fv.(string)
	if !ok {
		return nil, mongoerr.New(3041704, "%s requires 'field' to evaluate to type String, but got %s", f.name, bsonx.TypeName(fv))
	}
	in, err := f.input.Eval(env)
	if err != nil {
		return nil, err
	}
	if f.name == "$getField" {
		if IsNullish(in) {
			return nil, nil
		}
		d, ok := in.(bson.D)
		if !ok {
			return nil, mongoerr.New(3041705, "$getField requires 'input' to evaluate to type Object, but got %s", bsonx.TypeName(in))
		}
		v, ok := bsonx.Get(d, fname)
		if !ok {
			return bsonx.Missing, nil
		}
		return v, nil
	}
	if IsNullish(in) {
		return nil, nil
	}
	d, ok := in.(bson.D)
	if !ok {
		return nil, mongoerr.New(4161105, "%s requires 'input' to evaluate to type Object", f.name)
	}
	out := make(bson.D, 0, len(d)+1)
	out = append(out, d...)
	var v any = bsonx.Missing
	if f.val != nil {
		if v, err = f.val.Eval(env); err != nil {
			return nil, err
		}
	}
	if bsonx.IsMissing(v) {
		return bsonx.Delete(out, fname), nil
	}
	return bsonx.Set(out, fname, v), nil
}

func compileFieldOp(name string, args any, s *scope) (Expr, error) {
	f := &fieldExpr{name: name}
	d, ok := args.(bson.D)
	if name == "$getField" && (!ok || len(d) == 0 || strings.HasPrefix(d[0].Key, "$")) {
		// shorthand: {$getField: <field>} reads from $$CURRENT
		e, err := compile(args, s)
		if err != nil {
			return nil, err
		}
		if _, isConst := e.(*constExpr); isConst {
			if _, isStr := args.(string); !isStr {
				return nil, mongoerr.New(5654602, "$getField requires 'field' to evaluate to a constant, but got a non-constant argument")
			}
		}
		f.field = e
		f.input = &varPath{name: "CURRENT"}
		return f, nil
	}
	allowed := []string{"field", "input"}
	if name == "$setField" {
		allowed = append(allowed, "value")
	}
	m, err := objectArgs(name, args, 3041701, allowed...)
	if err != nil {
		return nil, err
	}
	if _, ok := m["field"]; !ok {
		return nil, mongoerr.New(3041702, "%s requires 'field' to be specified", name)
	}
	if fs, ok := m["field"].(string); ok && strings.HasPrefix(fs, "$") {
		return nil, mongoerr.New(5654601, "%s requires 'field' to evaluate to a constant, but got a non-constant argument", name)
	} else if !ok {
		if _, isD := m["field"].(bson.D); !isD {
			return nil, mongoerr.New(5654601, "%s requires 'field' to evaluate to a constant, but got a non-constant argument", name)
		}
	}
	if _, ok := m["input"]; !ok {
		if name == "$getField" {
			m["input"] = "$$CURRENT"
		} else {
			return nil, mongoerr.New(4161102, "%s requires 'input' to be specified", name)
		}
	}
	if name == "$setField" {
		if _, ok := m["value"]; !ok {
			return nil, mongoerr.New(4161103, "$setField requires 'value' to be specified")
		}
	}
	if f.field, err = compileOpt(m, "field", s); err != nil {
		return nil, err
	}
	if f.input, err = compileOpt(m, "input", s); err != nil {
		return nil, err
	}
	if f.val, err = compileOpt(m, "value", s); err != nil {
		return nil, err
	}
	return f, nil
}

// Rand is the source for $rand and $sample; tests may replace it.
var Rand = func() float64 { return rand.Float64() }

func init() {
	naryOp(0, -1, func(_ string, v []any) (any, error) {
		if len(v) == 1 {
			if a, ok := v[0].(bson.A); ok {
				v = a
			}
		}
		out := bson.D{}
		for _, x := range v {
			if IsNullish(x) {
				continue
			}
			d, ok := x.(bson.D)
			if !ok {
				return nil, mongoerr.New(40400, "$mergeObjects requires object inputs, but input %s is of type %s", ExtJSON(x), bsonx.TypeName(x))
			}
			out = MergeInto(out, d)
		}
		return out, nil
	}, "$mergeObjects")
	register(compileFieldOp, "$getField", "$setField")
	register(func(name string, args any, s *scope) (Expr, error) {
		m, err := objectArgs(name, args, 4161101, "field", "input")
		if err != nil {
			return nil, err
		}
		m["value"] = "$$REMOVE"
		d := bson.D{{Key: "field", Value: m["field"]}, {Key: "value", Value: "$$REMOVE"}}
		if in, ok := m["input"]; ok {
			d = append(d, bson.E{Key: "input", Value: in})
		}
		if _, ok := m["field"]; !ok {
			return nil, mongoerr.New(4161102, "$unsetField requires 'field' to be specified")
		}
		if _, ok := m["input"]; !ok {
			return nil, mongoerr.New(4161102, "$unsetField requires 'input' to be specified")
		}
		return compileFieldOp("$setField", d, s)
	}, "$unsetField")
	naryOp(1, 1, func(_ string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		d, ok := v[0].(bson.D)
		if !ok {
			return nil, mongoerr.New(40390, "$objectToArray requires a document input, found: %s", bsonx.TypeName(v[0]))
		}
		out := make(bson.A, len(d))
		for i, e := range d {
			out[i] = bson.D{{Key: "k", Value: e.Key}, {Key: "v", Value: e.Value}}
		}
		return out, nil
	}, "$objectToArray")
	naryOp(1, 1, func(_ string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(40386, "$arrayToObject requires an array input, found: %s", bsonx.TypeName(v[0]))
		}
		out := bson.D{}
		if len(a) == 0 {
			return out, nil
		}
		var pairs bool
		switch a[0].(type) {
		case bson.A:
			pairs = true
		case bson.D:
		default:
			return nil, mongoerr.New(40398, "Unrecognised input type format for $arrayToObject: %s", bsonx.TypeName(a[0]))
		}
		for _, el := range a {
			var k, val any
			if pairs {
				x, ok := el.(bson.A)
				if !ok {
					return nil, mongoerr.New(40396, "$arrayToObject requires a consistent input format. Elements mustall be arrays or all be objects. Array was detected, now found: %s", bsonx.TypeName(el))
				}
				if len(x) != 2 {
					return nil, mongoerr.New(40397, "$arrayToObject requires an array of size 2 arrays,found array of size: %d", len(x))
				}
				k, val = x[0], x[1]
			} else {
				x, ok := el.(bson.D)
				if !ok {
					return nil, mongoerr.New(40391, "$arrayToObject requires a consistent input format. Elements mustall be arrays or all be objects. Object was detected, now found: %s", bsonx.TypeName(el))
				}
				if len(x) != 2 {
					return nil, mongoerr.New(40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%d", len(x))
				}
				kv, ok1 := bsonx.Get(x, "k")
				vv, ok2 := bsonx.Get(x, "v")
				if !ok1 || !ok2 {
					return nil, mongoerr.New(40393, "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: %s", ExtJSON(x))
				}
				k, val = kv, vv
			}
			ks, ok := k.(string)
			if !ok {
				if pairs {
					return nil, mongoerr.New(40395, "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: %s", bsonx.TypeName(k))
				}
				return nil, mongoerr.New(40394, "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string. Found type: %s", bsonx.TypeName(k))
			}
			if strings.ContainsRune(ks, 0) {
				return nil, mongoerr.New(4940400, "Key field cannot contain an embedded null byte")
			}
			out = bsonx.Set(out, ks, val)
		}
		return out, nil
	}, "$arrayToObject")
	register(func(name string, args any, s *scope) (Expr, error) {
		if d, ok := args.(bson.D); !ok || len(d) != 0 {
			if a, ok := args.(bson.A); !ok || len(a) != 0 {
				return nil, mongoerr.New(3040500, "$rand does not currently accept arguments")
			}
		}
		return &nary{fn: func([]any) (any, error) { return Rand(), nil }}, nil
	}, "$rand")
}
