package expr

import (
	"math"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Percentiles ($percentile, $median) over the numeric inputs, computed
// exactly: for a percentile p the result is the value at rank
// ceil(p*n)-1 of the sorted values, as mongod's discrete method (and its
// approximate method on small inputs) returns. Results are doubles.

// Percentiles holds collected values for $percentile/$median.
type Percentiles struct{ vals []float64 }

// Add collects v if it is a number.
func (p *Percentiles) Add(v any) {
	if f, ok := bsonx.ToFloat(v); ok && bsonx.IsNumber(v) {
		p.vals = append(p.vals, f)
	}
}

// Merge adds another collection's values.
func (p *Percentiles) Merge(o []float64) { p.vals = append(p.vals, o...) }

// Values returns the collected values (for spilling).
func (p *Percentiles) Values() []float64 { return p.vals }

// Result returns one double per requested percentile (null when empty).
func (p *Percentiles) Result(ps []float64) []any {
	sort.Float64s(p.vals)
	out := make([]any, len(ps))
	for i, q := range ps {
		if len(p.vals) == 0 {
			out[i] = nil
			continue
		}
		r := int(math.Ceil(q*float64(len(p.vals)))) - 1
		r = max(0, min(r, len(p.vals)-1))
		out[i] = p.vals[r]
	}
	return out
}

// ParsePercentileArgs validates {input, p, method} ($percentile) or
// {input, method} ($median), returning the input expression value and ps.
func ParsePercentileArgs(name string, args any) (input any, ps []float64, err error) {
	allowed := []string{"input", "method"}
	if name == "$percentile" {
		allowed = append(allowed, "p")
	}
	d, ok := args.(bson.D)
	if !ok {
		return nil, nil, mongoerr.New(7436100, "specification must be an object; found %s", bsonx.TypeName(args))
	}
	m := map[string]any{}
	for _, e := range d {
		found := false
		for _, a := range allowed {
			found = found || a == e.Key
		}
		if !found {
			return nil, nil, mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", name, e.Key)
		}
		m[e.Key] = e.Value
	}
	in, ok := m["input"]
	if !ok {
		return nil, nil, mongoerr.New(40414, "BSON field '%s.input' is missing but a required field", name)
	}
	meth, ok := m["method"]
	if !ok {
		return nil, nil, mongoerr.New(40414, "BSON field '%s.method' is missing but a required field", name)
	}
	if ms, _ := meth.(string); ms != "approximate" && ms != "discrete" && ms != "continuous" {
		return nil, nil, mongoerr.New(mongoerr.BadValue, "Enumeration value '%v' for field '%s.method' is not a valid value.", meth, name)
	}
	if name == "$median" {
		return in, []float64{0.5}, nil
	}
	pv, ok := m["p"]
	if !ok {
		return nil, nil, mongoerr.New(40414, "BSON field '$percentile.p' is missing but a required field")
	}
	pa, ok := pv.(bson.A)
	if !ok || len(pa) == 0 {
		return nil, nil, mongoerr.New(7750301, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s", ExtJSON(pv))
	}
	for _, x := range pa {
		f, ok := bsonx.ToFloat(x)
		if !ok || !bsonx.IsNumber(x) || f < 0 || f > 1 {
			return nil, nil, mongoerr.New(7750301, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s", ExtJSON(pv))
		}
		ps = append(ps, f)
	}
	return in, ps, nil
}

func init() {
	for _, n := range []string{"$percentile", "$median"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			inV, ps, err := ParsePercentileArgs(name, args)
			if err != nil {
				return nil, err
			}
			in, err := compile(inV, s)
			if err != nil {
				return nil, err
			}
			return &nary{args: []Expr{in}, fn: func(v []any) (any, error) {
				var p Percentiles
				if a, ok := v[0].(bson.A); ok {
					for _, x := range a {
						p.Add(x)
					}
				} else {
					p.Add(v[0])
				}
				res := p.Result(ps)
				if name == "$median" {
					return res[0], nil
				}
				return bson.A(res), nil
			}}, nil
		}, n)
	}
	refuse := func(name string, args any, s *scope) (Expr, error) {
		switch name {
		case "$function", "$accumulator":
			return nil, mongoerr.New(mongoerr.NotImplemented, "%s is not supported by mayfly: there is no JavaScript engine", name)
		}
		return nil, mongoerr.New(mongoerr.NotImplemented, "%s is not supported by mayfly: there is no text or vector search metadata", name)
	}
	register(refuse, "$meta", "$function", "$accumulator")
}
