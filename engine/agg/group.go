package agg

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// accumulator is one $group accumulator instance (per group). Its partial
// state can be exported (state) and combined into another instance (merge)
// so that $group can spill partial groups to disk and merge them later.
type accumulator interface {
	add(env *expr.Env) error
	result() any
	state() any
	merge(s any) error
	size() int64
}

// accSpec is a compiled accumulator field: a factory for per-group
// instances.
type accSpec struct {
	field string
	op    string
	make  func(env *expr.Env) (accumulator, error)
}

type groupStage struct {
	id      expr.Expr
	idDoc   []string // field names when _id is a document of expressions
	accs    []accSpec
	nameStr string
}

func (g *groupStage) name() string {
	if g.nameStr != "" {
		return g.nameStr
	}
	return "$group"
}

func init() {
	stageParsers["$group"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(15947, "a group's fields must be specified in an object")
		}
		return parseGroup(d, opts)
	}
}

func parseGroup(d bson.D, opts *Options) (*groupStage, error) {
	g := &groupStage{}
	hasID := false
	seen := map[string]bool{}
	for _, e := range d {
		if e.Key == "_id" {
			if hasID {
				return nil, mongoerr.New(15948, "a group's _id may only be specified once")
			}
			c, err := compileExpr(e.Value, opts)
			if err != nil {
				return nil, err
			}
			g.id, hasID = c, true
			continue
		}
		if strings.Contains(e.Key, ".") {
			return nil, mongoerr.New(40235, "The field name '%s' cannot contain '.'", e.Key)
		}
		if strings.HasPrefix(e.Key, "$") {
			return nil, mongoerr.New(40236, "The field name '%s' cannot be an operator name", e.Key)
		}
		if seen[e.Key] {
			return nil, mongoerr.New(16406, "duplicate field name specified in object literal: %s", e.Key)
		}
		seen[e.Key] = true
		ad, ok := e.Value.(bson.D)
		if !ok {
			return nil, mongoerr.New(40234, "The field '%s' must be an accumulator object", e.Key)
		}
		if len(ad) != 1 {
			return nil, mongoerr.New(40238, "The field '%s' must specify one accumulator", e.Key)
		}
		a, err := compileAccumulator(e.Key, ad[0].Key, ad[0].Value, opts)
		if err != nil {
			return nil, err
		}
		g.accs = append(g.accs, a)
	}
	if !hasID {
		return nil, mongoerr.New(15955, "a group specification must include an _id")
	}
	return g, nil
}

// groupKey encodes a value so that values equal under BSON comparison
// (1, 1.0, NumberLong(1), NumberDecimal("1.0")) encode identically.
func groupKey(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil, bson.Null, bson.Undefined:
		b.WriteString("n;")
		return
	case bson.D:
		b.WriteString("o{")
		for _, e := range x {
			b.WriteString(strconv.Quote(e.Key))
			b.WriteByte(':')
			groupKey(b, e.Value)
		}
		b.WriteString("};")
		return
	case bson.A:
		b.WriteString("a[")
		for _, e := range x {
			groupKey(b, e)
		}
		b.WriteString("];")
		return
	}
	if bsonx.IsMissing(v) {
		b.WriteString("n;")
		return
	}
	if bsonx.IsNumber(v) {
		if i, ok := bsonx.ToInt64(v); ok {
			b.WriteString("#")
			b.WriteString(strconv.FormatInt(i, 10))
		} else if bsonx.IsNaN(v) {
			b.WriteString("#nan")
		} else if r := bsonx.ToRat(v); r != nil {
			b.WriteString("#")
			b.WriteString(r.RatString())
		} else {
			f, _ := bsonx.ToFloat(v)
			b.WriteString("#" + strconv.FormatFloat(f, 'g', -1, 64))
		}
		b.WriteByte(';')
		return
	}
	if s, ok := v.(string); ok {
		b.WriteString("s")
		b.WriteString(strconv.Quote(s))
		b.WriteByte(';')
		return
	}
	if s, ok := v.(bson.Symbol); ok {
		b.WriteString("s")
		b.WriteString(strconv.Quote(string(s)))
		b.WriteByte(';')
		return
	}
	bs, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		b.WriteString("?;")
		return
	}
	b.WriteString(bsonx.TypeName(v))
	b.WriteString(strconv.Quote(string(bs)))
	b.WriteByte(';')
}

type group struct {
	key  any
	accs []accumulator
}

func groupMemError() error {
	return mongoerr.New(mongoerr.QueryExceededMemoryLimit,
		"PlanExecutor error during aggregation :: caused by :: Exceeded memory limit for $group, but didn't allow external spilling. Pass allowDiskUse:true to opt in.")
}

func (g *groupStage) newGroup(key any, env *expr.Env) (*group, error) {
	gr := &group{key: key, accs: make([]accumulator, len(g.accs))}
	for i, a := range g.accs {
		acc, err := a.make(env)
		if err != nil {
			return nil, err
		}
		gr.accs[i] = acc
	}
	return gr, nil
}

func (g *groupStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	var spill *sorter
	return lazy(in, func(ctx context.Context) ([]bson.D, error) {
		groups := map[string]*group{}
		var order []*group
		var mem int64
		var kb strings.Builder
		flush := func() error {
			// spill partial groups, sorted by key, as records
			// {k: key, s: [states...]}
			if spill == nil {
				spill = &sorter{
					cmp:      func(a, b []any) int { return bsonx.Compare(a[0], b[0]) },
					limit:    math.MaxInt64,
					disk:     true,
					dir:      rc.opts.TempDir,
					memError: func(int64) error { return groupMemError() },
				}
			}
			for _, gr := range order {
				states := make(bson.A, len(gr.accs))
				for i, a := range gr.accs {
					states[i] = a.state()
				}
				spill.add([]any{gr.key}, bson.D{{Key: "k", Value: gr.key}, {Key: "s", Value: states}})
			}
			if err := spill.spill(); err != nil {
				return err
			}
			groups = map[string]*group{}
			order = nil
			mem = 0
			return nil
		}
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			env := rc.exprEnv(d)
			if err := env.Poll(len(g.accs) + 1); err != nil {
				return nil, err
			}
			key, err := g.id.Eval(env)
			if err != nil {
				return nil, err
			}
			if bsonx.IsMissing(key) {
				key = nil
			}
			kb.Reset()
			groupKey(&kb, key)
			ks := kb.String()
			gr, ok := groups[ks]
			if !ok {
				if gr, err = g.newGroup(key, env); err != nil {
					return nil, err
				}
				groups[ks] = gr
				order = append(order, gr)
				mem += int64(len(ks))*2 + 64
			}
			for _, a := range gr.accs {
				before := a.size()
				if err := a.add(env); err != nil {
					return nil, err
				}
				mem += a.size() - before
			}
			if mem > rc.opts.groupMemoryLimit() {
				if !rc.opts.AllowDiskUse {
					return nil, groupMemError()
				}
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
		if spill != nil {
			if len(order) > 0 {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			return g.mergeSpilled(ctx, spill, rc.rt)
		}
		out := make([]bson.D, 0, len(order))
		for _, gr := range order {
			out = append(out, g.output(gr))
		}
		return out, nil
	}), nil
}

func (g *groupStage) output(gr *group) bson.D {
	d := make(bson.D, 0, len(g.accs)+1)
	d = append(d, bson.E{Key: "_id", Value: gr.key})
	for i, a := range g.accs {
		v := gr.accs[i].result()
		if bsonx.IsMissing(v) {
			v = nil
		}
		d = append(d, bson.E{Key: a.field, Value: v})
	}
	return d
}

// mergeSpilled merges the sorted runs of partial groups: records with equal
// keys are adjacent and, within a key, in spill order.
func (g *groupStage) mergeSpilled(ctx context.Context, spill *sorter, rt *expr.Runtime) ([]bson.D, error) {
	it, err := spill.finish()
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []bson.D
	var cur *group
	for {
		d, ok, err := it.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		key, _ := bsonx.Get(d, "k")
		states, _ := bsonx.Get(d, "s")
		if cur == nil || bsonx.Compare(cur.key, key) != 0 {
			if cur != nil {
				out = append(out, g.output(cur))
			}
			if cur, err = g.newGroup(key, &expr.Env{Root: bson.D{}, RT: rt}); err != nil {
				return nil, err
			}
		}
		for i, s := range states.(bson.A) {
			if err := cur.accs[i].merge(s); err != nil {
				return nil, err
			}
		}
	}
	if cur != nil {
		out = append(out, g.output(cur))
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// accumulators

func approxSize(v any) int64 {
	switch x := v.(type) {
	case bson.D:
		n := int64(16)
		for _, e := range x {
			n += int64(len(e.Key)) + 16 + approxSize(e.Value)
		}
		return n
	case bson.A:
		n := int64(16)
		for _, e := range x {
			n += 16 + approxSize(e)
		}
		return n
	case string:
		return int64(len(x)) + 16
	case bson.Binary:
		return int64(len(x.Data)) + 24
	}
	return 16
}

func compileAccumulator(field, op string, arg any, opts *Options) (accSpec, error) {
	spec := accSpec{field: field, op: op}
	simple := func(mk func(e expr.Expr) accumulator) (accSpec, error) {
		if _, isArr := arg.(bson.A); isArr {
			return spec, mongoerr.New(40237, "The %s accumulator is a unary operator", op)
		}
		e, err := compileExpr(arg, opts)
		if err != nil {
			return spec, err
		}
		spec.make = func(*expr.Env) (accumulator, error) { return mk(e), nil }
		return spec, nil
	}
	switch op {
	case "$sum":
		return simple(func(e expr.Expr) accumulator { return &sumAcc{e: e} })
	case "$avg":
		return simple(func(e expr.Expr) accumulator { return &sumAcc{e: e, avg: true} })
	case "$min":
		return simple(func(e expr.Expr) accumulator { return &minMaxAcc{e: e, dir: -1} })
	case "$max":
		return simple(func(e expr.Expr) accumulator { return &minMaxAcc{e: e, dir: 1} })
	case "$first":
		return simple(func(e expr.Expr) accumulator { return &firstLastAcc{e: e, first: true} })
	case "$last":
		return simple(func(e expr.Expr) accumulator { return &firstLastAcc{e: e} })
	case "$push", "$addToSet":
		sp, err := simple(func(e expr.Expr) accumulator {
			if op == "$addToSet" {
				return &pushAcc{e: e, op: op, set: map[string]bool{}}
			}
			return &pushAcc{e: e, op: op}
		})
		if err != nil {
			return sp, err
		}
		mk := sp.make
		sp.make = func(env *expr.Env) (accumulator, error) {
			acc, err := mk(env)
			if err != nil {
				return nil, err
			}
			pa := acc.(*pushAcc)
			if op == "$addToSet" {
				pa.limit = env.RT.AddToSetLimit()
			} else {
				pa.limit = env.RT.PushLimit()
			}
			return pa, nil
		}
		return sp, nil
	case "$mergeObjects":
		return simple(func(e expr.Expr) accumulator { return &mergeAcc{e: e} })
	case "$stdDevPop":
		return simple(func(e expr.Expr) accumulator { return &stdAcc{e: e, pop: true} })
	case "$stdDevSamp":
		return simple(func(e expr.Expr) accumulator { return &stdAcc{e: e} })
	case "$count":
		if d, ok := arg.(bson.D); !ok || len(d) != 0 {
			return spec, mongoerr.New(mongoerr.TypeMismatch, "$count takes no arguments, i.e. $count:{}")
		}
		one, _ := expr.Compile(int32(1))
		spec.make = func(*expr.Env) (accumulator, error) { return &sumAcc{e: one}, nil }
		return spec, nil
	case "$top", "$bottom", "$topN", "$bottomN":
		return compileTopBottom(spec, arg, opts)
	case "$firstN", "$lastN", "$maxN", "$minN":
		return compileNAcc(spec, arg, opts)
	case "$percentile", "$median":
		inV, ps, err := expr.ParsePercentileArgs(op, arg)
		if err != nil {
			return spec, err
		}
		in, err := compileExpr(inV, opts)
		if err != nil {
			return spec, err
		}
		spec.make = func(*expr.Env) (accumulator, error) {
			return &percentileAcc{e: in, ps: ps, median: op == "$median"}, nil
		}
		return spec, nil
	case "$accumulator", "$function":
		return spec, mongoerr.New(mongoerr.NotImplemented, "%s is not supported by mayfly: there is no JavaScript engine", op)
	}
	return spec, mongoerr.New(15952, "unknown group operator '%s'", op)
}

type sumAcc struct {
	e   expr.Expr
	s   expr.Summer
	avg bool
}

func (a *sumAcc) add(env *expr.Env) error {
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	a.s.Add(v)
	return nil
}

func (a *sumAcc) result() any {
	if a.avg {
		return a.s.Avg()
	}
	return a.s.Result()
}

func (a *sumAcc) state() any { return bson.A{a.s.Result(), a.s.N} }

func (a *sumAcc) merge(s any) error {
	st := s.(bson.A)
	n, _ := bsonx.ToInt64(st[1])
	if n == 0 {
		return nil
	}
	a.s.Add(st[0])
	a.s.N += n - 1
	return nil
}

func (a *sumAcc) size() int64 { return 64 }

type minMaxAcc struct {
	e     expr.Expr
	dir   int
	val   any
	found bool
}

func (a *minMaxAcc) consider(v any) {
	if expr.IsNullish(v) {
		return
	}
	if !a.found || bsonx.Compare(v, a.val)*a.dir > 0 {
		a.val, a.found = v, true
	}
}

func (a *minMaxAcc) add(env *expr.Env) error {
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	a.consider(v)
	return nil
}

func (a *minMaxAcc) result() any {
	if !a.found {
		return nil
	}
	return a.val
}

func (a *minMaxAcc) state() any        { return bson.A{a.found, a.result()} }
func (a *minMaxAcc) merge(s any) error { st := s.(bson.A); a.consider(st[1]); return nil }
func (a *minMaxAcc) size() int64       { return 32 + approxSize(a.val) }

type firstLastAcc struct {
	e     expr.Expr
	first bool
	val   any
	seen  bool
}

func (a *firstLastAcc) add(env *expr.Env) error {
	if a.first && a.seen {
		return nil
	}
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	if bsonx.IsMissing(v) {
		v = nil
	}
	a.val, a.seen = v, true
	return nil
}

func (a *firstLastAcc) result() any { return a.val }
func (a *firstLastAcc) state() any  { return bson.A{a.seen, a.val} }
func (a *firstLastAcc) merge(s any) error {
	st := s.(bson.A)
	if seen, _ := st[0].(bool); seen && (!a.first || !a.seen) {
		a.val, a.seen = st[1], true
	}
	return nil
}
func (a *firstLastAcc) size() int64 { return 32 + approxSize(a.val) }

type pushAcc struct {
	e     expr.Expr
	op    string
	vals  bson.A
	set   map[string]bool // non-nil for $addToSet
	mem   int64
	limit int64 // internalQueryMaxPushBytes / internalQueryMaxAddToSetBytes
}

// push adds a value. Like mongod's AccumulatorPush and AccumulatorAddToSet
// (accumulator_push.cpp, accumulator_add_to_set.cpp), the values held
// must stay under the memory limit (100 MB by default), else
// ExceededMemoryLimit (146): a single group's array cannot spill.
func (a *pushAcc) push(v any) error {
	if a.set != nil {
		var b strings.Builder
		groupKey(&b, v)
		k := b.String()
		if a.set[k] {
			return nil
		}
		a.set[k] = true
		a.mem += int64(len(k))
	}
	a.vals = append(a.vals, v)
	a.mem += approxSize(v)
	limit := a.limit
	if limit <= 0 {
		limit = expr.DefaultExprMemoryLimit
	}
	if a.mem >= limit {
		op := a.op
		if op == "" {
			op = "$push"
		}
		return mongoerr.New(mongoerr.ExceededMemoryLimit, "%s used too much memory and cannot spill to disk. Memory limit: %d bytes", op, limit)
	}
	return nil
}

func (a *pushAcc) add(env *expr.Env) error {
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	if bsonx.IsMissing(v) {
		return nil
	}
	return a.push(v)
}

func (a *pushAcc) result() any {
	if a.vals == nil {
		return bson.A{}
	}
	return a.vals
}
func (a *pushAcc) state() any { return a.result() }
func (a *pushAcc) merge(s any) error {
	for _, v := range s.(bson.A) {
		if err := a.push(v); err != nil {
			return err
		}
	}
	return nil
}
func (a *pushAcc) size() int64 { return 32 + a.mem }

type mergeAcc struct {
	e   expr.Expr
	doc bson.D
}

func (a *mergeAcc) add(env *expr.Env) error {
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	return a.merge(v)
}

func (a *mergeAcc) merge(v any) error {
	if expr.IsNullish(v) {
		return nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return mongoerr.New(40400, "$mergeObjects requires object inputs, but input %s is of type %s", expr.ExtJSON(v), bsonx.TypeName(v))
	}
	a.doc = expr.MergeInto(a.doc, d)
	return nil
}

func (a *mergeAcc) result() any {
	if a.doc == nil {
		return bson.D{}
	}
	return a.doc
}
func (a *mergeAcc) state() any  { return a.result() }
func (a *mergeAcc) size() int64 { return approxSize(a.doc) }

type stdAcc struct {
	e        expr.Expr
	pop      bool
	n        float64
	mean, m2 float64
}

func (a *stdAcc) add(env *expr.Env) error {
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	if !bsonx.IsNumber(v) {
		return nil
	}
	x, _ := bsonx.ToFloat(v)
	a.combine(1, x, 0)
	return nil
}

// combine merges a partial (n, mean, m2) with Chan et al.'s formula.
func (a *stdAcc) combine(n, mean, m2 float64) {
	if n == 0 {
		return
	}
	tot := a.n + n
	d := mean - a.mean
	a.m2 += m2 + d*d*a.n*n/tot
	a.mean += d * n / tot
	a.n = tot
}

func (a *stdAcc) result() any {
	if a.pop {
		if a.n == 0 {
			return nil
		}
		return math.Sqrt(a.m2 / a.n)
	}
	if a.n < 2 {
		return nil
	}
	return math.Sqrt(a.m2 / (a.n - 1))
}
func (a *stdAcc) state() any { return bson.A{a.n, a.mean, a.m2} }
func (a *stdAcc) merge(s any) error {
	st := s.(bson.A)
	n, _ := bsonx.ToFloat(st[0])
	mean, _ := bsonx.ToFloat(st[1])
	m2, _ := bsonx.ToFloat(st[2])
	a.combine(n, mean, m2)
	return nil
}
func (a *stdAcc) size() int64 { return 48 }

// ---- $top/$bottom/$topN/$bottomN and $firstN/$lastN/$maxN/$minN

// evalN evaluates the n argument for a group (from the group's first
// document; mongod requires it to depend on the group key only).
func evalN(op string, e expr.Expr, env *expr.Env) (int64, error) {
	v, err := e.Eval(env)
	if err != nil {
		return 0, err
	}
	if !bsonx.IsNumber(v) {
		return 0, mongoerr.New(5787902, "Value for 'n' must be of integral type, but found %s", expr.ExtJSON(v))
	}
	n, ok := bsonx.ToInt64(v)
	if !ok {
		return 0, mongoerr.New(5787903, "Value for 'n' must be of integral type, but found %s", expr.ExtJSON(v))
	}
	if n <= 0 {
		return 0, mongoerr.New(5787908, "'n' must be greater than 0, found %d", n)
	}
	return n, nil
}

func argsDoc(op string, arg any, allowed ...string) (map[string]any, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(5787900, "specification must be an object; found %s", expr.ExtJSON(arg))
	}
	m := map[string]any{}
	for _, e := range d {
		ok := false
		for _, a := range allowed {
			ok = ok || a == e.Key
		}
		if !ok {
			return nil, mongoerr.New(5787901, "Unknown argument for '%s': %s", op, e.Key)
		}
		m[e.Key] = e.Value
	}
	return m, nil
}

type topItem struct {
	key bson.A
	out any
}

// topAcc keeps the best n (output, sort key) pairs.
type topAcc struct {
	spec   *expr.SortSpec
	output expr.Expr
	n      int64
	single bool
	bottom bool
	items  []topItem
	mem    int64
}

func (a *topAcc) better(x, y bson.A) bool {
	c := compareKeyArrays(a.spec, x, y)
	if a.bottom {
		return c > 0
	}
	return c < 0
}

func compareKeyArrays(s *expr.SortSpec, x, y bson.A) int {
	for i := range x {
		if c := bsonx.Compare(x[i], y[i]); c != 0 {
			return c * s.Dirs[i]
		}
	}
	return 0
}

func (a *topAcc) insert(it topItem) {
	// insertion into a small sorted slice; ties keep arrival order
	pos := len(a.items)
	for i := range a.items {
		if a.better(it.key, a.items[i].key) {
			pos = i
			break
		}
	}
	if int64(pos) >= a.n {
		return
	}
	a.items = append(a.items, topItem{})
	copy(a.items[pos+1:], a.items[pos:])
	a.items[pos] = it
	a.mem += approxSize(it.out) + approxSize(it.key)
	if int64(len(a.items)) > a.n {
		a.items = a.items[:a.n]
	}
}

func (a *topAcc) add(env *expr.Env) error {
	out, err := a.output.Eval(env)
	if err != nil {
		return err
	}
	if bsonx.IsMissing(out) {
		out = nil
	}
	key := make(bson.A, len(a.spec.Fields))
	for i, f := range a.spec.Fields {
		k := sortKeyOf(env.Root, f, a.spec.Dirs[i])
		if bsonx.IsMissing(k) {
			k = nil
		}
		key[i] = k
	}
	a.insert(topItem{key: key, out: out})
	return nil
}

func sortKeyOf(doc bson.D, path string, dir int) any {
	s := &expr.SortSpec{Fields: []string{path}, Dirs: []int{dir}}
	return s.Key(doc, 0)
}

func (a *topAcc) result() any {
	if a.single {
		if len(a.items) == 0 {
			return nil
		}
		return a.items[0].out
	}
	// items are best-first; $bottomN reports them in sort order
	out := make(bson.A, len(a.items))
	for i, it := range a.items {
		if a.bottom {
			out[len(out)-1-i] = it.out
		} else {
			out[i] = it.out
		}
	}
	return out
}

func (a *topAcc) state() any {
	out := make(bson.A, len(a.items))
	for i, it := range a.items {
		out[i] = bson.A{it.key, it.out}
	}
	return out
}

func (a *topAcc) merge(s any) error {
	for _, x := range s.(bson.A) {
		p := x.(bson.A)
		a.insert(topItem{key: p[0].(bson.A), out: p[1]})
	}
	return nil
}

func (a *topAcc) size() int64 { return 64 + a.mem }

func compileTopBottom(spec accSpec, arg any, opts *Options) (accSpec, error) {
	op := spec.op
	single := op == "$top" || op == "$bottom"
	allowed := []string{"sortBy", "output"}
	if !single {
		allowed = append(allowed, "n")
	}
	m, err := argsDoc(op, arg, allowed...)
	if err != nil {
		return spec, err
	}
	sb, ok := m["sortBy"]
	if !ok {
		return spec, mongoerr.New(5788005, "Missing value for 'sortBy'")
	}
	ss, err := expr.ParseSortSpec(sb, false, op)
	if err != nil {
		return spec, err
	}
	outV, ok := m["output"]
	if !ok {
		return spec, mongoerr.New(5788004, "Missing value for 'output'")
	}
	out, err := compileExpr(outV, opts)
	if err != nil {
		return spec, err
	}
	var nE expr.Expr
	if !single {
		nv, ok := m["n"]
		if !ok {
			return spec, mongoerr.New(5787906, "Missing value for 'n'")
		}
		if nE, err = compileExpr(nv, opts); err != nil {
			return spec, err
		}
	} else if _, ok := m["n"]; ok {
		return spec, mongoerr.New(5788002, "n is not allowed for %s", op)
	}
	bottom := op == "$bottom" || op == "$bottomN"
	spec.make = func(env *expr.Env) (accumulator, error) {
		a := &topAcc{spec: ss, output: out, n: 1, single: single, bottom: bottom}
		if nE != nil {
			n, err := evalN(op, nE, env)
			if err != nil {
				return nil, err
			}
			a.n = n
		}
		return a, nil
	}
	return spec, nil
}

type nAcc struct {
	op    string
	input expr.Expr
	n     int64
	vals  bson.A
	mem   int64
}

func (a *nAcc) consider(v any) {
	switch a.op {
	case "$firstN":
		if int64(len(a.vals)) < a.n {
			a.vals = append(a.vals, v)
			a.mem += approxSize(v)
		}
	case "$lastN":
		a.vals = append(a.vals, v)
		if int64(len(a.vals)) > a.n {
			a.vals = a.vals[1:]
		}
		a.mem = 0
		for _, x := range a.vals {
			a.mem += approxSize(x)
		}
	default:
		if expr.IsNullish(v) {
			return
		}
		dir := 1 // maxN keeps descending order
		if a.op == "$minN" {
			dir = -1
		}
		pos := len(a.vals)
		for i, x := range a.vals {
			if bsonx.Compare(v, x)*dir > 0 {
				pos = i
				break
			}
		}
		if int64(pos) >= a.n {
			return
		}
		a.vals = append(a.vals, nil)
		copy(a.vals[pos+1:], a.vals[pos:])
		a.vals[pos] = v
		if int64(len(a.vals)) > a.n {
			a.vals = a.vals[:a.n]
		}
		a.mem += approxSize(v)
	}
}

func (a *nAcc) add(env *expr.Env) error {
	v, err := a.input.Eval(env)
	if err != nil {
		return err
	}
	if bsonx.IsMissing(v) {
		v = nil
	}
	a.consider(v)
	return nil
}

func (a *nAcc) result() any {
	if a.vals == nil {
		return bson.A{}
	}
	return a.vals
}
func (a *nAcc) state() any { return a.result() }
func (a *nAcc) merge(s any) error {
	for _, v := range s.(bson.A) {
		a.consider(v)
	}
	return nil
}
func (a *nAcc) size() int64 { return 32 + a.mem }

func compileNAcc(spec accSpec, arg any, opts *Options) (accSpec, error) {
	m, err := argsDoc(spec.op, arg, "input", "n")
	if err != nil {
		return spec, err
	}
	inV, ok := m["input"]
	if !ok {
		return spec, mongoerr.New(5787907, "Missing value for 'input'")
	}
	nV, ok := m["n"]
	if !ok {
		return spec, mongoerr.New(5787906, "Missing value for 'n'")
	}
	in, err := compileExpr(inV, opts)
	if err != nil {
		return spec, err
	}
	nE, err := compileExpr(nV, opts)
	if err != nil {
		return spec, err
	}
	op := spec.op
	spec.make = func(env *expr.Env) (accumulator, error) {
		n, err := evalN(op, nE, env)
		if err != nil {
			return nil, err
		}
		return &nAcc{op: op, input: in, n: n}, nil
	}
	return spec, nil
}

var _ = big.NewInt

type percentileAcc struct {
	e      expr.Expr
	ps     []float64
	median bool
	p      expr.Percentiles
}

func (a *percentileAcc) add(env *expr.Env) error {
	v, err := a.e.Eval(env)
	if err != nil {
		return err
	}
	a.p.Add(v)
	return nil
}

func (a *percentileAcc) result() any {
	r := a.p.Result(a.ps)
	if a.median {
		return r[0]
	}
	return bson.A(r)
}

func (a *percentileAcc) state() any {
	out := bson.A{}
	for _, v := range a.p.Values() {
		out = append(out, v)
	}
	return out
}

func (a *percentileAcc) merge(s any) error {
	for _, v := range s.(bson.A) {
		a.p.Add(v)
	}
	return nil
}

func (a *percentileAcc) size() int64 { return 32 + 8*int64(len(a.p.Values())) }
