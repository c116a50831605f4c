package query

import (
	"math"
	"math/big"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
)

// Matcher is a compiled query filter. It is immutable and safe for
// concurrent use.
type Matcher struct {
	root    node
	hasExpr bool
	filter  bson.D
}

// maxDepth bounds filter nesting as mongod does, so a hostile filter cannot
// exhaust the stack.
const maxDepth = 100

// Compile parses a query filter (the MongoDB query language as of 7.0). All
// validation happens here so Matches can neither fail nor allocate; errors
// are *mongoerr.Error with mongod's codes.
func Compile(filter bson.D) (*Matcher, error) {
	p := &parser{}
	root, err := p.parseFilter(filter, 0)
	if err != nil {
		return nil, err
	}
	return &Matcher{root: root, hasExpr: p.hasExpr, filter: filter}, nil
}

// CompileWithRuntime is Compile for one operation: its $expr evaluations
// get the operation's runtime (interrupt check and expression limits), so
// maxTimeMS stops a runaway $expr. The Matcher belongs to that operation.
func CompileWithRuntime(filter bson.D, rt *expr.Runtime) (*Matcher, error) {
	p := &parser{rt: rt}
	root, err := p.parseFilter(filter, 0)
	if err != nil {
		return nil, err
	}
	return &Matcher{root: root, hasExpr: p.hasExpr, filter: filter}, nil
}

// MatchesPosErr is MatchesPos that also reports an $expr evaluation error.
func (m *Matcher) MatchesPosErr(doc bson.D) (bool, int, error) {
	ok, pos, err := m.root.match(doc)
	if err != nil {
		return false, -1, err
	}
	if !ok {
		return false, -1, nil
	}
	return true, pos, nil
}

// Filter returns the filter the matcher was compiled from.
func (m *Matcher) Filter() bson.D { return m.filter }

// Matches reports whether doc satisfies the filter. A runtime error in an
// $expr (which only MatchesErr reports) counts as no match.
func (m *Matcher) Matches(doc bson.D) bool {
	ok, _, err := m.root.match(doc)
	return ok && err == nil
}

// MatchesPos also returns the array index the positional `$` operator
// refers to: the position, in the outermost array along the path, of the
// element that satisfied the (last such) predicate, or -1.
func (m *Matcher) MatchesPos(doc bson.D) (bool, int) {
	ok, pos, err := m.root.match(doc)
	if !ok || err != nil {
		return false, -1
	}
	return true, pos
}

// MatchesErr is Matches that also reports $expr evaluation errors (mongod
// fails the whole operation on those, e.g. $divide by zero).
func (m *Matcher) MatchesErr(doc bson.D) (bool, error) {
	ok, _, err := m.root.match(doc)
	if err != nil {
		return false, err
	}
	return ok, nil
}

// MatchesAll reports whether the filter matches every document (an empty
// filter, or one made only of $comment / $alwaysTrue), so callers can skip
// matching altogether.
func (m *Matcher) MatchesAll() bool {
	c, ok := m.root.(constNode)
	return ok && bool(c)
}

// HasExpr reports whether the filter contains $expr (whose evaluation can
// fail at run time).
func (m *Matcher) HasExpr() bool { return m.hasExpr }

// node is a compiled match expression.
type node interface {
	// match evaluates the node against a whole document, returning the
	// positional index it recorded (-1 for none).
	match(doc bson.D) (bool, int, error)
	// matchElem evaluates the node against one value with no path traversal
	// and no array expansion (mongod's matchesSingleElement), as the
	// children of a value $elemMatch are applied to each array element.
	matchElem(v any) bool
}

// pred tests one value; pathNode supplies the traversal.
type pred interface {
	test(v any) bool
}

// posPred is a pred that knows which array element satisfied it ($elemMatch).
type posPred interface {
	testPos(v any) (bool, int)
}

// ---- logical nodes ----

type constNode bool

func (c constNode) match(bson.D) (bool, int, error) { return bool(c), -1, nil }
func (c constNode) matchElem(any) bool              { return bool(c) }

type andNode []node

func (a andNode) match(doc bson.D) (bool, int, error) {
	pos := -1
	for _, n := range a {
		ok, p, err := n.match(doc)
		if err != nil || !ok {
			return false, -1, err
		}
		if p >= 0 {
			pos = p
		}
	}
	return true, pos, nil
}

func (a andNode) matchElem(v any) bool {
	for _, n := range a {
		if !n.matchElem(v) {
			return false
		}
	}
	return true
}

type orNode []node

// match records no positional index: like mongod, a positional $ cannot
// refer into an $or (which branch matched is not a position in any array).
func (o orNode) match(doc bson.D) (bool, int, error) {
	for _, n := range o {
		ok, _, err := n.match(doc)
		if err != nil {
			return false, -1, err
		}
		if ok {
			return true, -1, nil
		}
	}
	return false, -1, nil
}

func (o orNode) matchElem(v any) bool {
	for _, n := range o {
		if n.matchElem(v) {
			return true
		}
	}
	return false
}

type norNode []node

func (o norNode) match(doc bson.D) (bool, int, error) {
	for _, n := range o {
		ok, _, err := n.match(doc)
		if err != nil {
			return false, -1, err
		}
		if ok {
			return false, -1, nil
		}
	}
	return true, -1, nil
}

func (o norNode) matchElem(v any) bool {
	for _, n := range o {
		if n.matchElem(v) {
			return false
		}
	}
	return true
}

// notNode negates a whole path predicate: {a: {$ne: 5}} is "no value
// reachable at a equals 5", not "some value differs from 5".
type notNode struct{ n node }

func (n notNode) match(doc bson.D) (bool, int, error) {
	ok, _, err := n.n.match(doc)
	if err != nil {
		return false, -1, err
	}
	return !ok, -1, nil
}

func (n notNode) matchElem(v any) bool { return !n.n.matchElem(v) }

type exprNode struct {
	e  expr.Expr
	rt *expr.Runtime
}

func (n exprNode) match(doc bson.D) (bool, int, error) {
	v, err := n.e.Eval(&expr.Env{Root: doc, RT: n.rt})
	if err != nil {
		return false, -1, err
	}
	return expr.Truthy(v), -1, nil
}

func (n exprNode) matchElem(any) bool { return false }

// ---- path traversal ----

// pathNode applies a predicate to every value a dotted path reaches,
// following mongod's rules:
//   - documents are descended into by field name;
//   - an array met before the end of the path is traversed: each element
//     that is a document is descended into with the same path component, and
//     a numeric component also selects the element at that position;
//     elements that are themselves arrays or scalars are skipped;
//   - a scalar met before the end of the path, or an absent field, yields
//     "missing" (so {"a.b": null} matches {a: 5});
//   - an array at the end of the path is tested element by element and then
//     as a whole (so {a: 1} and {a: [1]} both match {a: [1]} and nested
//     arrays compare whole), unless the predicate works on arrays itself
//     ($size, $elemMatch).
type pathNode struct {
	path     fieldPath
	pred     pred
	noExpand bool
	posPred  posPred
}

func (n *pathNode) match(doc bson.D) (bool, int, error) {
	if len(n.path.parts) == 0 {
		// Path-less predicates (children of a value $elemMatch) are only
		// ever applied through matchElem.
		return false, -1, nil
	}
	ok, pos := n.walkDoc(doc, 0)
	return ok, pos, nil
}

func (n *pathNode) matchElem(v any) bool { return n.pred.test(v) }

func (n *pathNode) walkDoc(d bson.D, i int) (bool, int) {
	v, ok := lookup(d, n.path.parts[i])
	if !ok {
		return n.pred.test(bsonx.Missing), -1
	}
	return n.walk(v, i+1)
}

func (n *pathNode) walk(v any, i int) (bool, int) {
	if i == len(n.path.parts) {
		return n.leaf(v)
	}
	switch x := v.(type) {
	case bson.D:
		return n.walkDoc(x, i)
	case bson.A:
		k := n.path.idx[i]
		for j, e := range x {
			if d, ok := e.(bson.D); ok {
				if m, _ := n.walkDoc(d, i); m {
					return true, j
				}
			}
			if j != k {
				continue
			}
			// An explicit position is not an implicit array traversal:
			// it records no positional index, and an array found there at
			// the end of the path is compared whole, not element-wise.
			if i+1 == len(n.path.parts) {
				if n.posPred != nil {
					if m, p := n.posPred.testPos(e); m {
						return true, p
					}
				} else if n.pred.test(e) {
					return true, -1
				}
			} else if m, p := n.walk(e, i+1); m {
				return true, p
			}
		}
		return false, -1
	}
	return n.pred.test(bsonx.Missing), -1
}

func (n *pathNode) leaf(v any) (bool, int) {
	if n.noExpand {
		if n.posPred != nil {
			return n.posPred.testPos(v)
		}
		return n.pred.test(v), -1
	}
	if a, ok := v.(bson.A); ok {
		for j, e := range a {
			if n.pred.test(e) {
				return true, j
			}
		}
	}
	return n.pred.test(v), -1
}

// ---- predicates ----

// isNullish reports the values {$eq: null} matches in MongoDB 7.0: null,
// undefined and a missing field.
func isNullish(v any) bool {
	switch v.(type) {
	case nil, bson.Null, bson.Undefined:
		return true
	}
	return bsonx.IsMissing(v)
}

type eqPred struct {
	val  any
	null bool
}

func (p *eqPred) test(v any) bool {
	if p.null {
		return isNullish(v)
	}
	if bsonx.IsMissing(v) {
		return false
	}
	return bsonx.Compare(v, p.val) == 0
}

const (
	opLT = iota
	opLTE
	opGT
	opGTE
)

// cmpPred is $lt/$lte/$gt/$gte. Comparisons are bracketed by canonical type
// ({$gt: 5} never matches a string), except that MinKey and MaxKey bounds
// compare against everything and null/undefined/missing are one bracket.
// NaN equals only NaN and is neither less nor greater than any number.
type cmpPred struct {
	op       int
	val      any
	rank     int
	null     bool
	extreme  bool
	nan      bool
	isNumber bool
}

func newCmpPred(op int, val any) *cmpPred {
	p := &cmpPred{op: op, val: val, rank: bsonx.Rank(val), null: isNullish(val)}
	switch val.(type) {
	case bson.MinKey, bson.MaxKey:
		p.extreme = true
	}
	p.isNumber = p.rank == bsonx.RankNumber
	p.nan = bsonx.IsNaN(val)
	return p
}

func (p *cmpPred) test(v any) bool {
	if p.null {
		if isNullish(v) {
			return p.op == opLTE || p.op == opGTE
		}
		return false
	}
	if bsonx.Rank(v) != p.rank {
		if p.extreme {
			return p.result(bsonx.Compare(v, p.val))
		}
		return false
	}
	if p.isNumber {
		vn := bsonx.IsNaN(v)
		if vn || p.nan {
			return vn && p.nan && (p.op == opLTE || p.op == opGTE)
		}
	}
	return p.result(bsonx.Compare(v, p.val))
}

func (p *cmpPred) result(c int) bool {
	switch p.op {
	case opLT:
		return c < 0
	case opLTE:
		return c <= 0
	case opGT:
		return c > 0
	}
	return c >= 0
}

// inPred is $in: equality against a sorted set (binary search in BSON
// order) plus regexes, with null standing for null/undefined/missing.
type inPred struct {
	vals    []any
	regexes []*regexPred
	hasNull bool
}

func (p *inPred) test(v any) bool {
	if isNullish(v) {
		return p.hasNull
	}
	if n := len(p.vals); n > 0 {
		if n <= 8 {
			for _, x := range p.vals {
				if bsonx.Compare(v, x) == 0 {
					return true
				}
			}
		} else {
			i := sort.Search(n, func(i int) bool { return bsonx.Compare(p.vals[i], v) >= 0 })
			if i < n && bsonx.Compare(p.vals[i], v) == 0 {
				return true
			}
		}
	}
	for _, r := range p.regexes {
		if r.test(v) {
			return true
		}
	}
	return false
}

type existsPred struct{}

func (existsPred) test(v any) bool { return !bsonx.IsMissing(v) }

// typePred is $type: a set of BSON type numbers (indexed by the type byte,
// so MinKey -1 is 255) plus the "number" alias.
type typePred struct {
	set    [256]bool
	number bool
}

func (p *typePred) test(v any) bool {
	if bsonx.IsMissing(v) {
		return false
	}
	if p.number && bsonx.IsNumber(v) {
		return true
	}
	return p.set[byte(bsonx.TypeNumber(v))]
}

type sizePred struct{ n int }

func (p sizePred) test(v any) bool {
	a, ok := v.(bson.A)
	return ok && len(a) == p.n
}

type modPred struct{ div, rem int64 }

func (p modPred) test(v any) bool {
	var n int64
	switch x := v.(type) {
	case int32:
		n = int64(x)
	case int:
		n = int64(x)
	case int64:
		n = x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
		t := math.Trunc(x)
		if t >= 9223372036854775808.0 || t < -9223372036854775808.0 {
			return false
		}
		n = int64(t)
	case bson.Decimal128:
		r := bsonx.ToRat(x)
		if r == nil {
			return false
		}
		q := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
		if !q.IsInt64() {
			return false
		}
		n = q.Int64()
	default:
		return false
	}
	if p.div == -1 {
		return p.rem == 0
	}
	return n%p.div == p.rem
}

// elemObjPred is $elemMatch with a query document: some element that is a
// document (or an array, seen as a document keyed by position) matches it.
type elemObjPred struct{ sub node }

func (p *elemObjPred) test(v any) bool { ok, _ := p.testPos(v); return ok }

func (p *elemObjPred) testPos(v any) (bool, int) {
	a, ok := v.(bson.A)
	if !ok {
		return false, -1
	}
	for j, e := range a {
		var d bson.D
		switch x := e.(type) {
		case bson.D:
			d = x
		case bson.A:
			d = arrayAsDoc(x)
		default:
			continue
		}
		if ok, _, err := p.sub.match(d); ok && err == nil {
			return true, j
		}
	}
	return false, -1
}

// elemValPred is $elemMatch with operators: some element satisfies all of
// them, each applied to the element itself.
type elemValPred struct{ sub node }

func (p *elemValPred) test(v any) bool { ok, _ := p.testPos(v); return ok }

func (p *elemValPred) testPos(v any) (bool, int) {
	a, ok := v.(bson.A)
	if !ok {
		return false, -1
	}
	for j, e := range a {
		if p.sub.matchElem(e) {
			return true, j
		}
	}
	return false, -1
}
