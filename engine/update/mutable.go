package update

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Apply works on a pointer-based copy of the document so that every operator
// can modify a container in place (including $rename, which removes its
// source from a container an enclosing step may be walking) without slice
// aliasing surprises. Converting in and out is also the deep copy that keeps
// the caller's document untouched.

type obj struct{ f []fld }

type fld struct {
	k string
	v any
}

type arr struct{ e []any }

// toM converts a bson value into the mutable form (deep copy).
func toM(v any) any {
	switch x := v.(type) {
	case bson.D:
		o := &obj{f: make([]fld, len(x))}
		for i, e := range x {
			o.f[i] = fld{e.Key, toM(e.Value)}
		}
		return o
	case bson.A:
		a := &arr{e: make([]any, len(x))}
		for i, e := range x {
			a.e[i] = toM(e)
		}
		return a
	case bson.M, bson.Raw:
		return toM(toD(x))
	case int:
		return normInt(x)
	}
	return v
}

// normInt stores a Go int as the driver encodes it: int32 when it fits.
func normInt(n int) any {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return int32(n)
	}
	return int64(n)
}

// normalize deep-copies an update argument into plain bson.D / bson.A with
// Go ints turned into int32/int64, so that operators see only BSON types and
// later changes to the caller's value cannot affect a compiled update.
func normalize(v any) any {
	switch x := v.(type) {
	case bson.D:
		out := make(bson.D, len(x))
		for i, e := range x {
			out[i] = bson.E{Key: e.Key, Value: normalize(e.Value)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case bson.M, bson.Raw:
		return normalize(toD(x))
	case int:
		return normInt(x)
	}
	return v
}

// fromM converts back to bson.D / bson.A.
func fromM(v any) any {
	switch x := v.(type) {
	case *obj:
		d := make(bson.D, len(x.f))
		for i, f := range x.f {
			d[i] = bson.E{Key: f.k, Value: fromM(f.v)}
		}
		return d
	case *arr:
		a := make(bson.A, len(x.e))
		for i, e := range x.e {
			a[i] = fromM(e)
		}
		return a
	}
	return v
}

func (o *obj) index(k string) int {
	for i := range o.f {
		if o.f[i].k == k {
			return i
		}
	}
	return -1
}

func (o *obj) get(k string) (any, bool) {
	if i := o.index(k); i >= 0 {
		return o.f[i].v, true
	}
	return nil, false
}

func (o *obj) set(k string, v any) {
	if i := o.index(k); i >= 0 {
		o.f[i].v = v
		return
	}
	o.f = append(o.f, fld{k, v})
}

func (o *obj) del(k string) {
	if i := o.index(k); i >= 0 {
		o.f = append(o.f[:i], o.f[i+1:]...)
	}
}

// arrayIndex parses a path component used as an array index (decimal digits
// only, as mongod's parseUnsignedBase10Integer).
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// child looks a component up in a container value.
func child(c any, name string) (any, bool) {
	switch x := c.(type) {
	case *obj:
		return x.get(name)
	case *arr:
		if i, ok := arrayIndex(name); ok && i < len(x.e) {
			return x.e[i], true
		}
	}
	return nil, false
}

// setChild replaces an existing component.
func setChild(c any, name string, v any) {
	switch x := c.(type) {
	case *obj:
		x.set(name, v)
	case *arr:
		i, _ := arrayIndex(name)
		x.e[i] = v
	}
}

func toD(v any) bson.D {
	switch d := v.(type) {
	case bson.D:
		return d
	case bson.Raw:
		var out bson.D
		if bson.Unmarshal(d, &out) != nil {
			return nil
		}
		return out
	case bson.M:
		out := make(bson.D, 0, len(d))
		for k, v := range d {
			out = append(out, bson.E{Key: k, Value: v})
		}
		return out
	}
	return nil
}
