package query

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Projection is a compiled find projection (MongoDB 4.4+ semantics:
// inclusion or exclusion, _id rules, dotted paths, $slice, $elemMatch,
// positional $, and computed fields via aggregation expressions). It is
// immutable and safe for concurrent use.
type Projection struct {
	inclusion  bool
	idExcluded bool
	root       *pnode
	positional []string // path before ".$", nil when none
	topFields  map[string]bool
	rt         *expr.Runtime // for computed fields (WithRuntime)
}

// WithRuntime returns the projection for one operation: its computed
// fields are evaluated with the operation's runtime (interrupt check and
// expression limits), so maxTimeMS stops a runaway expression.
func (p *Projection) WithRuntime(rt *expr.Runtime) *Projection {
	c := *p
	c.rt = rt
	return &c
}

const (
	pInclude = iota
	pExclude
	pSub
	pExpr
	pSlice
	pElemMatch
)

type pnode struct {
	fields      []*pfield
	index       map[string]*pfield
	hasComputed bool // an expression somewhere below: missing parents get created
}

type pfield struct {
	name    string
	kind    int
	sub     *pnode
	expr    expr.Expr
	hasSkip bool
	skip    int
	limit   int
	elem    *Matcher // {name: {$elemMatch: spec}}
}

func newPnode() *pnode { return &pnode{index: map[string]*pfield{}} }

// projection parse state
type projParser struct {
	p         *Projection
	mode      int // 0 undecided, 1 inclusion, 2 exclusion
	idSet     bool
	idTrue    bool
	elemMatch bool
}

// CompileProjection parses a find projection. Errors carry mongod's codes:
// 31254/31253 for mixing exclusion and inclusion, 31252 for expressions in
// an exclusion projection, 31249/31250 for path collisions, 51270 for an
// empty sub-projection, 31275 for a nested $elemMatch, 31276/31256/31394
// for misused positional projections.
func CompileProjection(spec bson.D) (*Projection, error) {
	pp := &projParser{p: &Projection{root: newPnode(), topFields: map[string]bool{}}}
	for _, e := range spec {
		if err := pp.parse(e.Key, e.Value, true); err != nil {
			return nil, err
		}
	}
	p := pp.p
	switch pp.mode {
	case 1:
		p.inclusion = true
	case 2:
	default:
		// Only _id, $slice and $elemMatch were given: $elemMatch and an
		// explicit _id: 1 make it an inclusion; otherwise exclusion.
		p.inclusion = pp.elemMatch || (pp.idSet && pp.idTrue)
	}
	if pp.idSet && !pp.idTrue {
		p.idExcluded = true
	}
	if !p.inclusion {
		p.topFields = map[string]bool{}
	}
	return p, nil
}

func (pp *projParser) setMode(mode int, path string) error {
	switch {
	case pp.mode == 0:
		pp.mode = mode
	case pp.mode == 1 && mode == 2:
		return mongoerr.New(31254, "Cannot do exclusion on field %s in inclusion projection", path)
	case pp.mode == 2 && mode == 1:
		return mongoerr.New(31253, "Cannot do inclusion on field %s in exclusion projection", path)
	}
	return nil
}

func (pp *projParser) parse(path string, v any, top bool) error {
	p := pp.p
	if strings.HasSuffix(path, ".$") || path == "$" {
		base := strings.TrimSuffix(path, ".$")
		if strings.Contains(base, "$") && validateFieldPath(base) != nil {
			return mongoerr.New(31394, "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent.")
		}
		if err := validateFieldPath(base); err != nil {
			return err
		}
		if !trueValue(v) || bsonx.Rank(v) != bsonx.RankNumber && bsonx.Rank(v) != bsonx.RankBool {
			return mongoerr.New(31395, "positional projection cannot be used with exclusion or expressions: %s", path)
		}
		if p.positional != nil {
			return mongoerr.New(31276, "Cannot specify more than one positional projection per query.")
		}
		if pp.elemMatch {
			return mongoerr.New(31256, "Cannot specify positional operator and $elemMatch.")
		}
		if err := pp.setMode(1, path); err != nil {
			return err
		}
		p.positional = strings.Split(base, ".")
		return pp.insert(base, &pfield{kind: pInclude})
	}
	if strings.Contains(path, ".$.") || strings.HasPrefix(path, "$.") {
		return mongoerr.New(31394, "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent.")
	}
	if err := validateFieldPath(path); err != nil {
		return err
	}
	isID := top && path == "_id"
	if d, ok := v.(bson.D); ok {
		if len(d) == 0 {
			return mongoerr.New(51270, "An empty sub-projection is not a valid value. Found empty object at path")
		}
		if strings.HasPrefix(d[0].Key, "$") {
			switch d[0].Key {
			case "$slice":
				if len(d) != 1 {
					break
				}
				f, err := parseSlice(d[0].Value)
				if err != nil {
					return err
				}
				return pp.insert(path, f)
			case "$elemMatch":
				if len(d) != 1 {
					break
				}
				if strings.Contains(path, ".") {
					return mongoerr.New(31275, "Cannot use $elemMatch projection on a nested field.")
				}
				if p.positional != nil {
					return mongoerr.New(31256, "Cannot specify positional operator and $elemMatch.")
				}
				if _, ok := d[0].Value.(bson.D); !ok {
					return mongoerr.New(mongoerr.BadValue, "$elemMatch needs an Object")
				}
				m, err := Compile(bson.D{{Key: path, Value: d}})
				if err != nil {
					return err
				}
				pp.elemMatch = true
				return pp.insert(path, &pfield{kind: pElemMatch, elem: m})
			case "$meta":
				return mongoerr.New(mongoerr.NotImplemented, "$meta projection is not supported by mayfly: there is no text search or vector search metadata")
			}
			return pp.computed(path, v)
		}
		// Nested form {a: {b: 1}} is the same as {"a.b": 1}.
		for _, e := range d {
			if err := pp.parse(path+"."+e.Key, e.Value, false); err != nil {
				return err
			}
		}
		return nil
	}
	switch v.(type) {
	case bool, int, int32, int64, float64, bson.Decimal128:
		incl := trueValue(v)
		if isID {
			pp.idSet, pp.idTrue = true, incl
			if incl {
				return pp.insert(path, &pfield{kind: pInclude})
			}
			return pp.insert(path, &pfield{kind: pExclude})
		}
		if incl {
			if err := pp.setMode(1, path); err != nil {
				return err
			}
			return pp.insert(path, &pfield{kind: pInclude})
		}
		if err := pp.setMode(2, path); err != nil {
			return err
		}
		return pp.insert(path, &pfield{kind: pExclude})
	}
	return pp.computed(path, v)
}

// computed adds a field whose value is an aggregation expression (a literal
// like "x" or [1, 2], a "$path", or an operator document).
func (pp *projParser) computed(path string, v any) error {
	if pp.mode == 2 {
		return mongoerr.New(31252, "Cannot use expression other than $meta in exclusion projection")
	}
	if err := pp.setMode(1, path); err != nil {
		return err
	}
	e, err := expr.Compile(v)
	if err != nil {
		return err
	}
	return pp.insert(path, &pfield{kind: pExpr, expr: e})
}

func parseSlice(v any) (*pfield, error) {
	f := &pfield{kind: pSlice}
	switch x := v.(type) {
	case bson.A:
		if len(x) != 2 {
			return nil, mongoerr.New(mongoerr.BadValue, "$slice array wrong size")
		}
		if !bsonx.IsNumber(x[0]) || !bsonx.IsNumber(x[1]) {
			return nil, mongoerr.New(28724, "First argument to $slice must be an array, but is of type: %s", bsonx.TypeName(x[0]))
		}
		f.hasSkip = true
		f.skip = clampInt(x[0])
		f.limit = clampInt(x[1])
		if f.limit <= 0 {
			return nil, mongoerr.New(mongoerr.BadValue, "$slice limit must be positive")
		}
	default:
		if !bsonx.IsNumber(v) {
			return nil, mongoerr.New(mongoerr.BadValue, "$slice only supports numbers and [skip, limit] arrays")
		}
		f.limit = clampInt(v)
	}
	return f, nil
}

// clampInt converts a number to int truncating toward zero and saturating
// at the int32 range, as mongod's numberInt-based $slice arguments behave
// for practical purposes.
func clampInt(v any) int {
	f, _ := bsonx.ToFloat(v)
	if math.IsNaN(f) {
		return 0
	}
	f = math.Trunc(f)
	if f > math.MaxInt32 {
		return math.MaxInt32
	}
	if f < math.MinInt32 {
		return math.MinInt32
	}
	return int(f)
}

// insert places a field at a dotted path in the projection tree, refusing
// paths that collide with one already given.
func (pp *projParser) insert(path string, f *pfield) error {
	parts := strings.Split(path, ".")
	n := pp.p.root
	if f.kind == pExpr {
		n.hasComputed = true
	}
	for i, part := range parts[:len(parts)-1] {
		c := n.index[part]
		if c == nil {
			c = &pfield{name: part, kind: pSub, sub: newPnode()}
			n.index[part] = c
			n.fields = append(n.fields, c)
		} else if c.kind != pSub {
			return mongoerr.New(31249, "Path collision at %s remaining portion %s", path, strings.Join(parts[i+1:], "."))
		}
		n = c.sub
		if f.kind == pExpr {
			n.hasComputed = true
		}
	}
	last := parts[len(parts)-1]
	if n.index[last] != nil {
		return mongoerr.New(31250, "Path collision at %s", path)
	}
	f.name = last
	n.index[last] = f
	n.fields = append(n.fields, f)
	if f.kind != pExclude && f.kind != pExpr {
		pp.p.topFields[parts[0]] = true
	}
	return nil
}

// IsInclusion reports whether this is an inclusion projection (only the
// named fields, plus _id unless excluded, are returned).
func (p *Projection) IsInclusion() bool { return p.inclusion }

// Includes reports whether the projection explicitly includes the
// top-level field (by itself or through a dotted path, $slice, $elemMatch
// or positional projection). Exclusion projections include no field
// explicitly.
func (p *Projection) Includes(field string) bool { return p.topFields[field] }

// Apply projects doc. m is the query's matcher (nil for an empty filter),
// used only by a positional projection. The input is never modified; the result shares
// unmodified values with it.
func (p *Projection) Apply(doc bson.D, m *Matcher) (bson.D, error) {
	if !p.inclusion {
		return p.exclude(doc, doc, p.root, true)
	}
	out, err := p.include(doc, doc, p.root, true)
	if err != nil || p.positional == nil {
		return out, err
	}
	// A nil matcher is the empty filter: it records no position, so a
	// positional projection of an array fails as it does in mongod.
	pos := -1
	if m != nil {
		_, pos = m.MatchesPos(doc)
	}
	return p.applyPositional(out, doc, pos)
}

// applyPositional replaces, in the projected document, the first array
// along the positional path with the one element of the original array the
// query matched (the whole element, as mongod does, even when the path goes
// on into it).
func (p *Projection) applyPositional(out, doc bson.D, pos int) (bson.D, error) {
	sub := doc
	for ind, field := range p.positional {
		v, ok := lookup(sub, field)
		if !ok {
			return out, nil
		}
		switch x := v.(type) {
		case bson.A:
			if pos < 0 {
				return nil, mongoerr.New(51246, "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array")
			}
			if pos >= len(x) {
				return nil, mongoerr.New(51247, "Executor error during find command :: caused by :: positional operator '.$' element mismatch")
			}
			return setPath(out, p.positional[:ind+1], bson.A{x[pos]}), nil
		case bson.D:
			sub = x
		default:
			return out, nil
		}
	}
	return out, nil
}

// setPath sets a dotted path in a document built by include (whose
// containers along a projected path are fresh copies, so updating them in
// place never touches the input document).
func setPath(d bson.D, path []string, v any) bson.D {
	for i := range d {
		if d[i].Key != path[0] {
			continue
		}
		if len(path) == 1 {
			d[i].Value = v
		} else if sd, ok := d[i].Value.(bson.D); ok {
			d[i].Value = setPath(sd, path[1:], v)
		}
		return d
	}
	if len(path) == 1 {
		return append(d, bson.E{Key: path[0], Value: v})
	}
	return append(d, bson.E{Key: path[0], Value: setPath(bson.D{}, path[1:], v)})
}

func (p *Projection) include(src, root bson.D, n *pnode, top bool) (bson.D, error) {
	out := make(bson.D, 0, len(n.fields)+1)
	var seen map[string]bool
	for _, e := range src {
		f := n.index[e.Key]
		if f == nil {
			if top && e.Key == "_id" && !p.idExcluded {
				out = append(out, e)
			}
			continue
		}
		switch f.kind {
		case pInclude:
			out = append(out, e)
		case pSlice:
			out = append(out, bson.E{Key: e.Key, Value: f.slice(e.Value)})
		case pSub:
			v, ok, err := p.includeValue(e.Value, root, f.sub)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
			if f.sub.hasComputed {
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[e.Key] = true
			}
		}
	}
	if !n.hasComputed && !(top && p.hasTopElemMatch()) {
		return out, nil
	}
	for _, f := range n.fields {
		switch f.kind {
		case pExpr:
			v, err := f.expr.Eval(&expr.Env{Root: root, RT: p.rt})
			if err != nil {
				return nil, err
			}
			if !bsonx.IsMissing(v) {
				out = append(out, bson.E{Key: f.name, Value: v})
			}
		case pElemMatch:
			if v, ok := f.elemMatchValue(root); ok {
				out = append(out, bson.E{Key: f.name, Value: v})
			}
		case pSub:
			if f.sub.hasComputed && !seen[f.name] {
				v, err := p.include(nil, root, f.sub, false)
				if err != nil {
					return nil, err
				}
				out = append(out, bson.E{Key: f.name, Value: v})
			}
		}
	}
	return out, nil
}

func (p *Projection) hasTopElemMatch() bool {
	for _, f := range p.root.fields {
		if f.kind == pElemMatch {
			return true
		}
	}
	return false
}

// includeValue applies a sub-projection to a value: documents are
// projected, arrays element by element (scalars in them are dropped,
// nested arrays recursed into), and a scalar is dropped, unless the
// sub-projection computes fields, which turn it into a document.
func (p *Projection) includeValue(v any, root bson.D, sub *pnode) (any, bool, error) {
	switch x := v.(type) {
	case bson.D:
		d, err := p.include(x, root, sub, false)
		return d, err == nil, err
	case bson.A:
		out := make(bson.A, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case bson.D, bson.A:
				v, ok, err := p.includeValue(e, root, sub)
				if err != nil {
					return nil, false, err
				}
				if ok {
					out = append(out, v)
				}
			default:
				if sub.hasComputed {
					d, err := p.include(nil, root, sub, false)
					if err != nil {
						return nil, false, err
					}
					out = append(out, d)
				}
			}
		}
		return out, true, nil
	}
	if sub.hasComputed {
		d, err := p.include(nil, root, sub, false)
		return d, err == nil, err
	}
	return nil, false, nil
}

func (p *Projection) exclude(src, root bson.D, n *pnode, top bool) (bson.D, error) {
	out := make(bson.D, 0, len(src))
	for _, e := range src {
		f := n.index[e.Key]
		if f == nil {
			out = append(out, e)
			continue
		}
		switch f.kind {
		case pExclude:
		case pInclude:
			out = append(out, e)
		case pSlice:
			out = append(out, bson.E{Key: e.Key, Value: f.slice(e.Value)})
		case pSub:
			out = append(out, bson.E{Key: e.Key, Value: p.excludeValue(e.Value, root, f.sub)})
		case pElemMatch:
			if v, ok := f.elemMatchValue(root); ok {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		}
	}
	return out, nil
}

func (p *Projection) excludeValue(v any, root bson.D, sub *pnode) any {
	switch x := v.(type) {
	case bson.D:
		d, _ := p.exclude(x, root, sub, false)
		return d
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = p.excludeValue(e, root, sub)
		}
		return out
	}
	return v
}

// slice applies $slice to a value; non-arrays are returned unchanged.
func (f *pfield) slice(v any) any {
	a, ok := v.(bson.A)
	if !ok {
		return v
	}
	n := len(a)
	var from, to int
	if !f.hasSkip {
		if f.limit >= 0 {
			from, to = 0, min(f.limit, n)
		} else {
			from, to = max(n+f.limit, 0), n
		}
	} else {
		from = f.skip
		if from < 0 {
			from = max(n+from, 0)
		}
		from = min(from, n)
		to = min(from+f.limit, n)
	}
	return append(bson.A{}, a[from:to]...)
}

// elemMatchValue is the $elemMatch projection of a top-level field: an
// array holding the first element that matches, or nothing.
func (f *pfield) elemMatchValue(root bson.D) (any, bool) {
	v, ok := lookup(root, f.name)
	if !ok {
		return nil, false
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, false
	}
	matched, pos := f.elem.MatchesPos(root)
	if !matched || pos < 0 || pos >= len(a) {
		return nil, false
	}
	return bson.A{a[pos]}, true
}
