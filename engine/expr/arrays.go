package expr

import (
	"math"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func int32Arg(v any) (int64, bool) {
	i, ok := intArg(v)
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, false
	}
	return i, true
}

// iterExpr implements $map and $filter: input array, a variable name, and a
// per-element expression.
type iterExpr struct {
	name   string
	input  Expr
	as     string
	body   Expr
	limit  Expr
	filter bool
}

func (m *iterExpr) Eval(env *Env) (any, error) {
	in, err := m.input.Eval(env)
	if err != nil {
		return nil, err
	}
	if IsNullish(in) {
		return nil, nil
	}
	arr, ok := in.(bson.A)
	if !ok {
		if m.filter {
			return nil, mongoerr.New(28651, "input to $filter must be an array not %s", bsonx.TypeName(in))
		}
		return nil, mongoerr.New(16883, "input to $map must be an array not %s", bsonx.TypeName(in))
	}
	limit := int64(-1)
	if m.limit != nil {
		lv, err := m.limit.Eval(env)
		if err != nil {
			return nil, err
		}
		if !IsNullish(lv) {
			l, ok := int32Arg(lv)
			if !ok {
				return nil, mongoerr.New(327391, "$filter: limit must be represented as a 32-bit integral value: %s", ExtJSON(lv))
			}
			if l < 1 {
				return nil, mongoerr.New(327392, "$filter: limit must be greater than 0: %d", l)
			}
			limit = l
		}
	}
	inner, f := env.bind(m.as, nil)
	out := make(bson.A, 0, len(arr))
	for _, el := range arr {
		if err := env.poll(1); err != nil {
			return nil, err
		}
		f.val = el
		v, err := m.body.Eval(inner)
		if err != nil {
			return nil, err
		}
		if m.filter {
			if Truthy(v) {
				out = append(out, el)
				if limit > 0 && int64(len(out)) >= limit {
					break
				}
			}
			continue
		}
		if bsonx.IsMissing(v) {
			v = nil
		}
		out = append(out, v)
	}
	return out, nil
}

type reduceExpr struct {
	input, init, in Expr
}

func (r *reduceExpr) Eval(env *Env) (any, error) {
	in, err := r.input.Eval(env)
	if err != nil {
		return nil, err
	}
	if IsNullish(in) {
		return nil, nil
	}
	arr, ok := in.(bson.A)
	if !ok {
		return nil, mongoerr.New(40080, "$reduce requires that 'input' be an array, found: %s", ExtJSON(in))
	}
	acc, err := r.init.Eval(env)
	if err != nil {
		return nil, err
	}
	e1, fv := env.bind("value", acc)
	e2, ft := e1.bind("this", nil)
	for _, el := range arr {
		if err := env.poll(1); err != nil {
			return nil, err
		}
		fv.val, ft.val = acc, el
		if acc, err = r.in.Eval(e2); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

type zipExpr struct {
	inputs   []Expr
	longest  bool
	defaults []Expr
}

func (z *zipExpr) Eval(env *Env) (any, error) {
	arrays := make([]bson.A, len(z.inputs))
	minLen, maxLen := math.MaxInt, 0
	for i, e := range z.inputs {
		v, err := e.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		a, ok := v.(bson.A)
		if !ok {
			return nil, mongoerr.New(34468, "$zip found a non-array expression in input: %s", ExtJSON(v))
		}
		arrays[i] = a
		minLen = min(minLen, len(a))
		maxLen = max(maxLen, len(a))
	}
	defs := make([]any, len(z.inputs))
	for i, d := range z.defaults {
		v, err := d.Eval(env)
		if err != nil {
			return nil, err
		}
		defs[i] = v
	}
	n := minLen
	if z.longest {
		n = maxLen
	}
	if len(arrays) == 0 {
		n = 0
	}
	if err := env.poll(n * (1 + len(arrays))); err != nil {
		return nil, err
	}
	out := make(bson.A, n)
	for i := 0; i < n; i++ {
		row := make(bson.A, len(arrays))
		for j, a := range arrays {
			if i < len(a) {
				row[j] = a[i]
			} else {
				row[j] = defs[j]
			}
		}
		out[i] = row
	}
	return out, nil
}

// SortSpec orders values for $sortArray, $top/$bottom and friends: either a
// whole-value direction (Fields == nil) or a list of (path, direction) keys.
type SortSpec struct {
	Dir    int
	Fields []string
	Dirs   []int
}

// ParseSortSpec parses 1/-1 or a sort document. code is used for errors.
func ParseSortSpec(v any, allowScalar bool, op string) (*SortSpec, error) {
	if allowScalar && bsonx.IsNumber(v) {
		i, _ := bsonx.ToInt64(v)
		if i != 1 && i != -1 {
			return nil, mongoerr.New(2942505, "%s sort direction must be 1 or -1", op)
		}
		return &SortSpec{Dir: int(i)}, nil
	}
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 {
		return nil, mongoerr.New(2942503, "%s sortBy must be a non-empty object or 1 / -1", op)
	}
	s := &SortSpec{}
	for _, e := range d {
		i, ok := bsonx.ToInt64(e.Value)
		if !ok || (i != 1 && i != -1) || !bsonx.IsNumber(e.Value) {
			return nil, mongoerr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		s.Fields = append(s.Fields, e.Key)
		s.Dirs = append(s.Dirs, int(i))
	}
	return s, nil
}

// sortKey extracts a sort key like a $sort: arrays contribute their min
// (ascending) or max (descending) element.
func sortKey(v any, path string, dir int) any {
	val := lookupDotted(v, path)
	if a, ok := val.(bson.A); ok {
		if len(a) == 0 {
			return bson.Undefined{}
		}
		best := a[0]
		for _, x := range a[1:] {
			c := bsonx.Compare(x, best)
			if (dir > 0 && c < 0) || (dir < 0 && c > 0) {
				best = x
			}
		}
		return best
	}
	return val
}

// lookupDotted walks a dotted path through documents and arrays (collecting
// array elements' values, like aggregation field paths).
func lookupDotted(v any, path string) any {
	parts := splitDots(path)
	return walk(v, parts)
}

func splitDots(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// Compare orders two values under the spec.
func (s *SortSpec) Compare(a, b any) int {
	if s.Fields == nil {
		return s.Dir * bsonx.Compare(a, b)
	}
	for i, f := range s.Fields {
		ka := sortKey(a, f, s.Dirs[i])
		kb := sortKey(b, f, s.Dirs[i])
		if c := bsonx.Compare(ka, kb); c != 0 {
			return c * s.Dirs[i]
		}
	}
	return 0
}

type nExpr struct {
	name     string
	input, n Expr
}

func (e *nExpr) Eval(env *Env) (any, error) {
	nv, err := e.n.Eval(env)
	if err != nil {
		return nil, err
	}
	n, ok := intArg(nv)
	if !ok {
		return nil, mongoerr.New(5787902, "Value for 'n' must be of integral type, but found %s", ExtJSON(nv))
	}
	if n <= 0 {
		return nil, mongoerr.New(5787908, "'n' must be greater than 0, found %d", n)
	}
	in, err := e.input.Eval(env)
	if err != nil {
		return nil, err
	}
	arr, ok := in.(bson.A)
	if !ok {
		return nil, mongoerr.New(5788200, "Input must be an array")
	}
	switch e.name {
	case "$firstN":
		return append(bson.A{}, arr[:min(int(n), len(arr))]...), nil
	case "$lastN":
		return append(bson.A{}, arr[len(arr)-min(int(n), len(arr)):]...), nil
	}
	vals := make(bson.A, 0, len(arr))
	for _, v := range arr {
		if !IsNullish(v) {
			vals = append(vals, v)
		}
	}
	dir := 1
	if e.name == "$maxN" {
		dir = -1
	}
	sort.SliceStable(vals, func(i, j int) bool { return dir*bsonx.Compare(vals[i], vals[j]) < 0 })
	return vals[:min(int(n), len(vals))], nil
}

func arrayOrNull(v any) (bson.A, bool) {
	a, ok := v.(bson.A)
	return a, ok
}

// setOf deduplicates values in first-seen order.
func setOf(vals ...bson.A) bson.A {
	total := 0
	for _, a := range vals {
		total += len(a)
	}
	if total > setLinearMax {
		return setOfFast(total, vals...)
	}
	out := bson.A{}
	for _, a := range vals {
		for _, v := range a {
			dup := false
			for _, o := range out {
				if bsonx.Compare(o, v) == 0 {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, v)
			}
		}
	}
	return out
}

// sortedSet orders a deduplicated set by BSON order.
func sortedSet(a bson.A) bson.A {
	sort.SliceStable(a, func(i, j int) bool { return bsonx.Compare(a[i], a[j]) < 0 })
	return a
}

func contains(a bson.A, v any) bool {
	for _, x := range a {
		if bsonx.Compare(x, v) == 0 {
			return true
		}
	}
	return false
}

func init() {
	naryOp(1, 1, func(_ string, v []any) (any, error) {
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(17124, "The argument to $size must be an array. Type of argument was: %s", bsonx.TypeName(v[0]))
		}
		return int32(len(a)), nil
	}, "$size")
	naryOp(1, 1, func(_ string, v []any) (any, error) {
		_, ok := v[0].(bson.A)
		return ok, nil
	}, "$isArray")
	naryOp(2, 2, func(_ string, v []any) (any, error) {
		if IsNullish(v[0]) || IsNullish(v[1]) {
			return nil, nil
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(28689, "$arrayElemAt's first argument must be an array, but is %s", bsonx.TypeName(v[0]))
		}
		if !bsonx.IsNumber(v[1]) {
			return nil, mongoerr.New(28690, "$arrayElemAt's second argument must be a numeric value, but is %s", bsonx.TypeName(v[1]))
		}
		i, ok := int32Arg(v[1])
		if !ok {
			return nil, mongoerr.New(28691, "$arrayElemAt's second argument must be representable as a 32-bit integer: %s", ExtJSON(v[1]))
		}
		if i < 0 {
			i += int64(len(a))
		}
		if i < 0 || i >= int64(len(a)) {
			return bsonx.Missing, nil
		}
		return a[i], nil
	}, "$arrayElemAt")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(28689, "%s's argument must be an array, but is %s", name, bsonx.TypeName(v[0]))
		}
		if len(a) == 0 {
			return bsonx.Missing, nil
		}
		if name == "$first" {
			return a[0], nil
		}
		return a[len(a)-1], nil
	}, "$first", "$last")
	naryOp(2, 2, func(_ string, v []any) (any, error) {
		a, ok := v[1].(bson.A)
		if !ok {
			return nil, mongoerr.New(40081, "$in requires an array as a second argument, found: %s", bsonx.TypeName(v[1]))
		}
		return contains(a, v[0]), nil
	}, "$in")
	envNaryOp(0, -1, func(env *Env, _ string, v []any) (any, error) {
		n := 0
		for _, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
			a, ok := x.(bson.A)
			if !ok {
				return nil, mongoerr.New(28664, "$concatArrays only supports arrays, not %s", bsonx.TypeName(x))
			}
			n += len(a)
		}
		// mayfly's guard against runaway growth (a $reduce doubling an
		// array): the result is held to the $range limit
		// (internalQueryMaxRangeBytes), counted as $range counts, 16 bytes
		// an element; mongod 8.0 fails such arrays the same way, with
		// ExceededMemoryLimit "$concatArrays needs too much memory".
		if limit := env.RT.RangeLimit(); int64(n)*16 >= limit {
			return nil, mongoerr.New(mongoerr.ExceededMemoryLimit, "$concatArrays needs too much memory (%d bytes) and cannot spill to disk. Memory limit: %d bytes", int64(n)*16, limit)
		}
		out := make(bson.A, 0, n)
		for _, x := range v {
			out = append(out, x.(bson.A)...)
		}
		return out, nil
	}, "$concatArrays")
	naryOp(2, 3, func(_ string, v []any) (any, error) {
		for _, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(28724, "First argument to $slice must be an array, but is of type: %s", bsonx.TypeName(v[0]))
		}
		if !bsonx.IsNumber(v[1]) {
			return nil, mongoerr.New(28725, "Second argument to $slice must be a numeric value, but is of type: %s", bsonx.TypeName(v[1]))
		}
		x, ok := int32Arg(v[1])
		if !ok {
			return nil, mongoerr.New(28726, "Second argument to $slice can't be represented as a 32-bit integer: %s", ExtJSON(v[1]))
		}
		n := int64(len(a))
		if len(v) == 2 {
			if x >= 0 {
				return append(bson.A{}, a[:min(x, n)]...), nil
			}
			return append(bson.A{}, a[n-min(-x, n):]...), nil
		}
		if !bsonx.IsNumber(v[2]) {
			return nil, mongoerr.New(28727, "Third argument to $slice must be numeric, but is of type: %s", bsonx.TypeName(v[2]))
		}
		cnt, ok := int32Arg(v[2])
		if !ok {
			return nil, mongoerr.New(28728, "Third argument to $slice can't be represented as a 32-bit integer: %s", ExtJSON(v[2]))
		}
		if cnt <= 0 {
			return nil, mongoerr.New(28729, "Third argument to $slice must be positive: %s", ExtJSON(v[2]))
		}
		start := x
		if start < 0 {
			start = max(0, n+start)
		}
		if start >= n {
			return bson.A{}, nil
		}
		return append(bson.A{}, a[start:min(start+cnt, n)]...), nil
	}, "$slice")
	envNaryOp(2, 3, func(env *Env, _ string, v []any) (any, error) {
		if !bsonx.IsNumber(v[0]) {
			return nil, mongoerr.New(34443, "$range requires a numeric starting value, found value of type: %s", bsonx.TypeName(v[0]))
		}
		start, ok := int32Arg(v[0])
		if !ok {
			return nil, mongoerr.New(34444, "$range requires a starting value that can be represented as a 32-bit integer, found value: %s", ExtJSON(v[0]))
		}
		if !bsonx.IsNumber(v[1]) {
			return nil, mongoerr.New(34445, "$range requires a numeric ending value, found value of type: %s", bsonx.TypeName(v[1]))
		}
		end, ok := int32Arg(v[1])
		if !ok {
			return nil, mongoerr.New(34446, "$range requires an ending value that can be represented as a 32-bit integer, found value: %s", ExtJSON(v[1]))
		}
		step := int64(1)
		if len(v) == 3 {
			if !bsonx.IsNumber(v[2]) {
				return nil, mongoerr.New(34447, "$range requires a numeric step value, found value of type: %s", bsonx.TypeName(v[2]))
			}
			if step, ok = int32Arg(v[2]); !ok {
				return nil, mongoerr.New(34448, "$range requires a step value that can be represented as a 32-bit integer, found value: %s", ExtJSON(v[2]))
			}
			if step == 0 {
				return nil, mongoerr.New(34449, "$range requires a non-zero step value")
			}
		}
		// mongod (expression.cpp, ExpressionRange::evaluate): the array
		// needs 1+steps elements of the start value's approximate size (16
		// bytes for a number) and must stay under internalQueryMaxRangeBytes,
		// else ExceededMemoryLimit (146).
		n := int64(0)
		if steps := (end - start) / step; (end-start)%step != 0 || steps > 0 {
			if steps >= 0 {
				n = steps
				if (end-start)%step != 0 {
					n++
				}
			}
		}
		limit := env.RT.RangeLimit()
		if need := 24 + n*16; need >= limit {
			return nil, mongoerr.New(mongoerr.ExceededMemoryLimit, "$range would use too much memory (%d bytes) and cannot spill to disk. Memory limit: %d bytes", need, limit)
		}
		out := make(bson.A, 0, n)
		for i := start; (step > 0 && i < end) || (step < 0 && i > end); i += step {
			out = append(out, int32(i))
		}
		return out, nil
	}, "$range")
	naryOp(1, 1, func(_ string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(34435, "The argument to $reverseArray must be an array, but was of type: %s", bsonx.TypeName(v[0]))
		}
		out := make(bson.A, len(a))
		for i, x := range a {
			out[len(a)-1-i] = x
		}
		return out, nil
	}, "$reverseArray")
	naryOp(2, 4, func(_ string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(40090, "$indexOfArray requires an array as a first argument, found: %s", bsonx.TypeName(v[0]))
		}
		start, end := int64(0), int64(len(a))
		for i := 2; i < len(v); i++ {
			x, ok := int32Arg(v[i])
			if !ok {
				return nil, mongoerr.New(40096, "$indexOfArray requires an integral starting index, found a value of type: %s, with value: %s", bsonx.TypeName(v[i]), ExtJSON(v[i]))
			}
			if x < 0 {
				return nil, mongoerr.New(40097, "$indexOfArray requires a nonnegative starting index, found: %d", x)
			}
			if i == 2 {
				start = x
			} else {
				end = min(x, end)
			}
		}
		for i := start; i < end; i++ {
			if bsonx.Compare(a[i], v[1]) == 0 {
				return int32(i), nil
			}
		}
		return int32(-1), nil
	}, "$indexOfArray")

	// set operators: $setUnion and $setIntersection return their elements
	// in BSON order (mongod builds them as ordered sets); operands are
	// checked left to right, a null operand yielding null.
	naryOp(0, -1, func(_ string, v []any) (any, error) {
		var arrs []bson.A
		for _, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
			a, ok := x.(bson.A)
			if !ok {
				return nil, mongoerr.New(17043, "All operands of $setUnion must be arrays. One argument is of type: %s", bsonx.TypeName(x))
			}
			arrs = append(arrs, a)
		}
		return sortedSet(setOf(arrs...)), nil
	}, "$setUnion")
	naryOp(0, -1, func(_ string, v []any) (any, error) {
		var cur bson.A
		for i, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
			a, ok := x.(bson.A)
			if !ok {
				return nil, mongoerr.New(17047, "All operands of $setIntersection must be arrays. One argument is of type: %s", bsonx.TypeName(x))
			}
			if i == 0 {
				cur = setOf(a)
				continue
			}
			next := bson.A{}
			in := newLookupSet(a)
			for _, y := range cur {
				if in.has(y) {
					next = append(next, y)
				}
			}
			cur = next
		}
		if cur == nil {
			cur = bson.A{}
		}
		return sortedSet(cur), nil
	}, "$setIntersection")
	naryOp(2, 2, func(_ string, v []any) (any, error) {
		if IsNullish(v[0]) || IsNullish(v[1]) {
			return nil, nil
		}
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(17048, "both operands of $setDifference must be arrays. First argument is of type: %s", bsonx.TypeName(v[0]))
		}
		b, ok := v[1].(bson.A)
		if !ok {
			return nil, mongoerr.New(17049, "both operands of $setDifference must be arrays. Second argument is of type: %s", bsonx.TypeName(v[1]))
		}
		out := bson.A{}
		inB := newLookupSet(b)
		for _, x := range setOf(a) {
			if !inB.has(x) {
				out = append(out, x)
			}
		}
		return out, nil
	}, "$setDifference")
	register(func(name string, args any, s *scope) (Expr, error) {
		list, err := compileList(name, args, s, 0, -1)
		if err != nil {
			return nil, err
		}
		if len(list) < 2 {
			return nil, mongoerr.New(17045, "$setEquals needs at least two arguments had: %d", len(list))
		}
		return &nary{args: list, fn: func(v []any) (any, error) {
			var sets []bson.A
			for i, x := range v {
				a, ok := x.(bson.A)
				if !ok {
					return nil, mongoerr.New(17044, "All operands of $setEquals must be arrays. %d-th argument is of type: %s", i+1, bsonx.TypeName(x))
				}
				sets = append(sets, setOf(a))
			}
			first := newLookupSet(sets[0])
			for _, o := range sets[1:] {
				if len(o) != len(sets[0]) {
					return false, nil
				}
				for _, x := range o {
					if !first.has(x) {
						return false, nil
					}
				}
			}
			return true, nil
		}}, nil
	}, "$setEquals")
	naryOp(2, 2, func(_ string, v []any) (any, error) {
		a, ok := v[0].(bson.A)
		if !ok {
			return nil, mongoerr.New(17046, "both operands of $setIsSubset must be arrays. First argument is of type: %s", bsonx.TypeName(v[0]))
		}
		b, ok := v[1].(bson.A)
		if !ok {
			return nil, mongoerr.New(17042, "both operands of $setIsSubset must be arrays. Second argument is of type: %s", bsonx.TypeName(v[1]))
		}
		inB := newLookupSet(b)
		for _, x := range a {
			if !inB.has(x) {
				return false, nil
			}
		}
		return true, nil
	}, "$setIsSubset")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		a, ok := v[0].(bson.A)
		if !ok {
			code := int32(17040)
			if name == "$anyElementTrue" {
				code = 17041
			}
			return nil, mongoerr.New(code, "%s's argument must be an array, but is %s", name, bsonx.TypeName(v[0]))
		}
		any := name == "$anyElementTrue"
		for _, x := range a {
			if Truthy(x) == any {
				return any, nil
			}
		}
		return !any, nil
	}, "$allElementsTrue", "$anyElementTrue")

	for _, n := range []string{"$map", "$filter"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			isFilter := name == "$filter"
			var m map[string]any
			var err error
			if isFilter {
				m, err = objectArgs(name, args, 28647, "input", "as", "cond", "limit")
				if err == nil {
					for _, k := range []string{"input", "cond"} {
						if _, ok := m[k]; !ok {
							code := map[string]int32{"input": 28648, "cond": 28650}[k]
							return nil, mongoerr.New(code, "Missing '%s' parameter to $filter", k)
						}
					}
				}
			} else {
				m, err = objectArgs(name, args, 16879, "input", "as", "in")
				if err == nil {
					for _, k := range []string{"input", "in"} {
						if _, ok := m[k]; !ok {
							code := map[string]int32{"input": 16880, "in": 16882}[k]
							return nil, mongoerr.New(code, "Missing '%s' parameter to $map", k)
						}
					}
				}
			}
			if err != nil {
				return nil, err
			}
			as := "this"
			if a, ok := m["as"]; ok {
				as, ok = a.(string)
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "%s 'as' must be a string", name)
				}
				if err := validateVarName(as); err != nil {
					return nil, err
				}
			}
			it := &iterExpr{name: name, as: as, filter: isFilter}
			if it.input, err = compileOpt(m, "input", s); err != nil {
				return nil, err
			}
			if it.limit, err = compileOpt(m, "limit", s); err != nil {
				return nil, err
			}
			s.push(as)
			defer s.pop(as)
			key := "in"
			if isFilter {
				key = "cond"
			}
			if it.body, err = compileOpt(m, key, s); err != nil {
				return nil, err
			}
			return it, nil
		}, n)
	}
	register(func(name string, args any, s *scope) (Expr, error) {
		m, err := objectArgs(name, args, 40076, "input", "initialValue", "in")
		if err != nil {
			return nil, err
		}
		for k, code := range map[string]int32{"input": 40077, "initialValue": 40078, "in": 40079} {
			if _, ok := m[k]; !ok {
				return nil, mongoerr.New(code, "$reduce requires '%s' to be specified", k)
			}
		}
		r := &reduceExpr{}
		if r.input, err = compileOpt(m, "input", s); err != nil {
			return nil, err
		}
		if r.init, err = compileOpt(m, "initialValue", s); err != nil {
			return nil, err
		}
		s.push("value", "this")
		defer s.pop("value", "this")
		if r.in, err = compileOpt(m, "in", s); err != nil {
			return nil, err
		}
		return r, nil
	}, "$reduce")
	register(func(name string, args any, s *scope) (Expr, error) {
		m, err := objectArgs(name, args, 34464, "inputs", "useLongestLength", "defaults")
		if err != nil {
			return nil, err
		}
		z := &zipExpr{}
		inputs, ok := m["inputs"].(bson.A)
		if !ok {
			if _, has := m["inputs"]; !has {
				return nil, mongoerr.New(34465, "$zip requires at least one input array")
			}
			return nil, mongoerr.New(34461, "inputs must be an array of expressions, found %s", bsonx.TypeName(m["inputs"]))
		}
		for _, in := range inputs {
			e, err := compile(in, s)
			if err != nil {
				return nil, err
			}
			z.inputs = append(z.inputs, e)
		}
		if l, ok := m["useLongestLength"]; ok {
			b, ok := l.(bool)
			if !ok {
				return nil, mongoerr.New(34463, "useLongestLength must be a bool, found %s", bsonx.TypeName(l))
			}
			z.longest = b
		}
		if d, ok := m["defaults"]; ok {
			da, ok := d.(bson.A)
			if !ok {
				return nil, mongoerr.New(34462, "defaults must be an array of expressions, found %s", bsonx.TypeName(d))
			}
			if !z.longest {
				return nil, mongoerr.New(34466, "cannot specify defaults unless useLongestLength is true")
			}
			if len(da) != len(z.inputs) {
				return nil, mongoerr.New(34467, "defaults and inputs must have the same length")
			}
			for _, x := range da {
				e, err := compile(x, s)
				if err != nil {
					return nil, err
				}
				z.defaults = append(z.defaults, e)
			}
		}
		return z, nil
	}, "$zip")
	register(func(name string, args any, s *scope) (Expr, error) {
		m, err := objectArgs(name, args, 2942500, "input", "sortBy")
		if err != nil {
			return nil, err
		}
		if _, ok := m["input"]; !ok {
			return nil, mongoerr.New(2942501, "$sortArray requires 'input' to be specified")
		}
		sb, ok := m["sortBy"]
		if !ok {
			return nil, mongoerr.New(2942502, "$sortArray requires 'sortBy' to be specified")
		}
		spec, err := ParseSortSpec(sb, true, name)
		if err != nil {
			return nil, err
		}
		in, err := compile(m["input"], s)
		if err != nil {
			return nil, err
		}
		return &nary{args: []Expr{in}, fn: func(v []any) (any, error) {
			if IsNullish(v[0]) {
				return nil, nil
			}
			a, ok := v[0].(bson.A)
			if !ok {
				return nil, mongoerr.New(2942504, "The input argument to $sortArray must be an array, but was of type: %s", bsonx.TypeName(v[0]))
			}
			out := append(bson.A{}, a...)
			sort.SliceStable(out, func(i, j int) bool { return spec.Compare(out[i], out[j]) < 0 })
			return out, nil
		}}, nil
	}, "$sortArray")
	for _, n := range []string{"$maxN", "$minN", "$firstN", "$lastN"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			m, err := objectArgs(name, args, 5787901, "input", "n")
			if err != nil {
				return nil, err
			}
			if _, ok := m["n"]; !ok {
				return nil, mongoerr.New(5787906, "Missing value for 'n'")
			}
			if _, ok := m["input"]; !ok {
				return nil, mongoerr.New(5787907, "Missing value for 'input'")
			}
			e := &nExpr{name: name}
			if e.input, err = compileOpt(m, "input", s); err != nil {
				return nil, err
			}
			if e.n, err = compileOpt(m, "n", s); err != nil {
				return nil, err
			}
			return e, nil
		}, n)
	}
}

// Key returns the sort key of v for the i-th field of a document spec
// (array values contribute their smallest element ascending, largest
// descending; empty arrays sort before null).
func (s *SortSpec) Key(v any, i int) any {
	return sortKey(v, s.Fields[i], s.Dirs[i])
}
