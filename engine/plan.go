package engine

import (
	"bytes"
	"math"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/keycodec"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Plan kinds.
const (
	planCollScan = iota
	planIDScan   // ranges over document keys (_id)
	planIxScan   // ranges over a secondary index, then fetch
	planOr       // union of sub-plans (each branch of a top-level $or)
	planEOF      // provably empty
)

// keyRange is [lo, hi) relative to the scanned prefix; nil hi = to the end.
type keyRange struct{ lo, hi []byte }

// plan is how a query reads the collection. Whatever the plan, the full
// filter is applied to every fetched document: an index only narrows the
// candidates, so results are identical with and without it.
type plan struct {
	kind    int
	ix      *index
	ranges  []keyRange
	reverse bool
	// sorted: the scan yields documents in the order the query asked for.
	sorted bool
	// points: a planIDScan whose every range is one exact _id (read with
	// a point Get, which uses the bloom filters, instead of an iterator).
	points bool
	// idPoints are the _id values of a points plan, for explain's bounds
	// (built on demand: most queries never need the strings).
	idPoints []any
	subs     []*plan
	// bounds for explain: field → ["[1, 1]", …]
	bounds bson.D
}

func (p *plan) stageName() string {
	switch p.kind {
	case planIDScan:
		return "IDHACK"
	case planIxScan:
		return "IXSCAN"
	case planOr:
		return "OR"
	case planEOF:
		return "EOF"
	}
	return "COLLSCAN"
}

// pred is what the planner knows about one path from the top-level
// conjunction of a filter: equality points and a range.
type pred struct {
	points   []any // from $eq / implicit equality / $in (nil: none)
	hasPts   bool
	lo, hi   any
	loIncl   bool
	hiIncl   bool
	hasLo    bool
	hasHi    bool
	unusable bool // something the planner cannot bound (still filtered)
}

// indexable reports whether v can be a point of an index bound: scalars and
// documents (exact equality), not arrays (they match elements too), null
// (matches missing), regexes or MinKey/MaxKey.
func indexable(v any) bool {
	switch x := v.(type) {
	case bson.A, nil, bson.Null, bson.Undefined, bson.Regex, bson.MinKey, bson.MaxKey:
		return false
	case bson.D:
		return len(x) == 0 || !strings.HasPrefix(x[0].Key, "$")
	case float64:
		return !math.IsNaN(x)
	}
	return true
}

// analyze collects predicates per path from the top-level AND of a filter.
func analyze(filter bson.D, out map[string]*pred) {
	get := func(path string) *pred {
		p := out[path]
		if p == nil {
			p = &pred{}
			out[path] = p
		}
		return p
	}
	for _, e := range filter {
		if e.Key == "$and" {
			if arr, ok := e.Value.(bson.A); ok {
				for _, sub := range arr {
					if d, ok := sub.(bson.D); ok {
						analyze(d, out)
					}
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		p := get(e.Key)
		ops, isOps := e.Value.(bson.D)
		if !isOps || len(ops) == 0 || !strings.HasPrefix(ops[0].Key, "$") {
			p.addPoints([]any{e.Value})
			continue
		}
		for _, op := range ops {
			switch op.Key {
			case "$eq":
				p.addPoints([]any{op.Value})
			case "$in":
				if arr, ok := op.Value.(bson.A); ok {
					p.addPoints(arr)
				} else {
					p.unusable = true
				}
			case "$gt", "$gte":
				if indexable(op.Value) {
					if !p.hasLo || bsonx.Compare(op.Value, p.lo) > 0 || (bsonx.Compare(op.Value, p.lo) == 0 && op.Key == "$gt") {
						p.lo, p.loIncl, p.hasLo = op.Value, op.Key == "$gte", true
					}
				}
			case "$lt", "$lte":
				if indexable(op.Value) {
					if !p.hasHi || bsonx.Compare(op.Value, p.hi) < 0 || (bsonx.Compare(op.Value, p.hi) == 0 && op.Key == "$lt") {
						p.hi, p.hiIncl, p.hasHi = op.Value, op.Key == "$lte", true
					}
				}
			}
		}
	}
}

func (p *pred) addPoints(vals []any) {
	for _, v := range vals {
		if !indexable(v) {
			p.unusable = true
			return
		}
	}
	if p.hasPts {
		// Two equality sets on one path: keep the intersection.
		var keep []any
		for _, a := range p.points {
			for _, b := range vals {
				if bsonx.Equal(a, b) {
					keep = append(keep, a)
					break
				}
			}
		}
		p.points = keep
		return
	}
	p.points, p.hasPts = append([]any(nil), vals...), true
}

func (p *pred) pointsUsable() bool { return p != nil && p.hasPts && !p.unusable }

// rangeUsable: a one- or two-sided range within one type bracket.
func (p *pred) rangeUsable() bool {
	if p == nil || p.unusable || (!p.hasLo && !p.hasHi) {
		return false
	}
	if p.hasLo && p.hasHi && bsonx.Rank(p.lo) != bsonx.Rank(p.hi) {
		return false
	}
	return true
}

// bracketMin is the smallest value of each canonical type rank: the bounds
// of a type bracket ($gt: 5 only reaches numbers) are the encodings of the
// bracket's minimum and the next bracket's minimum.
var bracketMin = []any{
	bson.MinKey{}, bson.Undefined{}, nil, math.NaN(), "", bson.D{}, bson.A{}, bson.Binary{Data: []byte{}},
	bson.ObjectID{}, false, bson.DateTime(math.MinInt64), bson.Timestamp{}, bson.Regex{},
	bson.DBPointer{}, bson.JavaScript(""), bson.CodeWithScope{Code: "", Scope: bson.D{}}, bson.MaxKey{},
}

func bracketOf(v any) (lo, hi any) {
	r := bsonx.Rank(v)
	for i, m := range bracketMin {
		if bsonx.Rank(m) == r {
			return m, bracketMin[i+1]
		}
	}
	return bson.MaxKey{}, bson.MaxKey{}
}

func enc(v any, desc bool) []byte {
	if desc {
		return keycodec.AppendValueDesc(nil, v)
	}
	return keycodec.AppendValue(nil, v)
}

// rangeFor turns a predicate's range into encoded [lo, hi) bounds on one
// field appended to prefix.
func rangeFor(prefix []byte, p *pred, desc bool) keyRange {
	ref := p.lo
	if !p.hasLo {
		ref = p.hi
	}
	bLo, bHi := bracketOf(ref)
	var lo, hi []byte
	// Ascending bounds in value space.
	if p.hasLo {
		if p.loIncl {
			lo = enc(p.lo, false)
		} else {
			lo = keycodec.PrefixEnd(enc(p.lo, false))
		}
	} else {
		lo = enc(bLo, false)
	}
	if p.hasHi {
		if p.hiIncl {
			hi = keycodec.PrefixEnd(enc(p.hi, false))
		} else {
			hi = enc(p.hi, false)
		}
	} else {
		hi = enc(bHi, false)
	}
	if !desc {
		return keyRange{cat(prefix, lo), cat(prefix, hi)}
	}
	// Descending: values are stored inverted, so the value range flips.
	var dlo, dhi []byte
	if p.hasHi {
		if p.hiIncl {
			dlo = enc(p.hi, true)
		} else {
			dlo = keycodec.PrefixEnd(enc(p.hi, true))
		}
	} else {
		dlo = keycodec.PrefixEnd(enc(bHi, true))
	}
	if p.hasLo {
		if p.loIncl {
			dhi = keycodec.PrefixEnd(enc(p.lo, true))
		} else {
			dhi = enc(p.lo, true)
		}
	} else {
		dhi = keycodec.PrefixEnd(enc(bLo, true))
	}
	return keyRange{cat(prefix, dlo), cat(prefix, dhi)}
}

func cat(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// planQuery chooses how to read documents for filter (and sort, which an
// index may provide). hint is nil, an index name, or a key pattern.
func planQuery(s *collState, filter, sortSpec bson.D, hint any) (*plan, error) {
	if hint != nil {
		return planHint(s, filter, sortSpec, hint)
	}
	preds := map[string]*pred{}
	analyze(filter, preds)
	if p := preds["_id"]; p.pointsUsable() {
		return sortByID(idPointPlan(p.points), sortSpec), nil
	}
	if or, ok := bsonx.Get(filter, "$or"); ok && len(filter) == 1 {
		if p := planOrBranches(s, or); p != nil {
			return p, nil
		}
	}
	best, bestScore := (*plan)(nil), 0
	for _, ix := range s.indexes {
		if ix.Hidden || ix.isTSIndex() || !partialSatisfied(ix, filter) {
			continue
		}
		p, score := planIndex(ix, preds, sortSpec)
		if p != nil && score > bestScore {
			best, bestScore = p, score
		}
	}
	if p := preds["_id"]; best == nil && p.rangeUsable() {
		r := rangeFor(nil, p, false)
		return sortByID(&plan{kind: planIDScan, ranges: []keyRange{r}, bounds: bson.D{{Key: "_id", Value: bson.A{boundString(p)}}}}, sortSpec), nil
	}
	if best != nil {
		return best, nil
	}
	return sortByID(&plan{kind: planCollScan}, sortSpec), nil
}

// sortByID marks a collection scan or _id scan as giving a sort on _id
// alone: documents are stored in _id order (keycodec is MongoDB's
// comparison order, and _id is never an array), so no blocking sort is
// needed and a limit stops the scan early.
func sortByID(p *plan, sortSpec bson.D) *plan {
	if len(sortSpec) != 1 || sortSpec[0].Key != "_id" || (p.kind != planIDScan && p.kind != planCollScan) {
		return p
	}
	if _, ok := bsonx.ToFloat(sortSpec[0].Value); !ok {
		return p
	}
	p.sorted, p.reverse = true, docstore.IsDescending(sortSpec[0].Value)
	return p
}

// explainBounds returns the plan's bounds for explain, building an _id
// points plan's on demand.
func (p *plan) explainBounds() bson.D {
	if p.bounds != nil || !p.points {
		return p.bounds
	}
	var bounds bson.A
	seen := map[string]bool{}
	pts := append([]any(nil), p.idPoints...)
	sort.SliceStable(pts, func(i, j int) bool { return bsonx.Compare(pts[i], pts[j]) < 0 })
	for _, v := range pts {
		if isDupKey(nil, seen, keycodec.AppendValue(nil, v)) {
			continue
		}
		bounds = append(bounds, "["+valString(v)+", "+valString(v)+"]")
	}
	p.bounds = bson.D{{Key: "_id", Value: bounds}}
	return p.bounds
}

// isDupKey reports whether k was seen before, recording it: in seen when
// there is a map (many points), else by a linear look at ranges' starts.
func isDupKey(ranges []keyRange, seen map[string]bool, k []byte) bool {
	if seen != nil {
		if seen[string(k)] {
			return true
		}
		seen[string(k)] = true
		return false
	}
	for _, r := range ranges {
		if bytes.Equal(r.lo, k) {
			return true
		}
	}
	return false
}

func idPointPlan(points []any) *plan {
	p := &plan{kind: planIDScan, points: true, idPoints: points}
	var seen map[string]bool
	if len(points) > 8 {
		seen = make(map[string]bool, len(points))
	}
	for _, v := range points {
		k := keycodec.AppendValue(nil, v)
		if isDupKey(p.ranges, seen, k) {
			continue
		}
		p.ranges = append(p.ranges, keyRange{k, keycodec.PrefixEnd(k)})
	}
	sortRanges(p.ranges)
	if len(p.ranges) == 0 {
		p.kind = planEOF
	}
	return p
}

func sortRanges(rs []keyRange) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && bytes.Compare(rs[j].lo, rs[j-1].lo) < 0; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// planIndex scores an index for the predicates: equality on a prefix of its
// fields, then optionally a range on the next field; or, with no usable
// predicate, the order it gives to the requested sort.
func planIndex(ix *index, preds map[string]*pred, sortSpec bson.D) (*plan, int) {
	prefixes := [][]byte{nil}
	var bounds bson.D
	score := 0
	i := 0
	for ; i < len(ix.Key); i++ {
		f := ix.Key[i]
		p := preds[f.Key]
		if !p.pointsUsable() || (ix.Sparse && false) {
			break
		}
		desc := docstore.IsDescending(f.Value)
		var next [][]byte
		var b bson.A
		for _, pre := range prefixes {
			for _, v := range p.points {
				next = append(next, cat(pre, enc(v, desc)))
			}
		}
		for _, v := range p.points {
			b = append(b, "["+valString(v)+", "+valString(v)+"]")
		}
		if len(next) > 200 {
			break
		}
		prefixes = next
		bounds = append(bounds, bson.E{Key: f.Key, Value: b})
		score += 10
	}
	var ranges []keyRange
	if i < len(ix.Key) {
		f := ix.Key[i]
		p := preds[f.Key]
		if p.rangeUsable() {
			rp := *p
			if ix.Multikey && rp.hasLo && rp.hasHi {
				// A multikey index cannot intersect both bounds: an array
				// may satisfy each with a different element.
				rp.hasHi = false
			}
			for _, pre := range prefixes {
				ranges = append(ranges, rangeFor(pre, &rp, docstore.IsDescending(f.Value)))
			}
			bounds = append(bounds, bson.E{Key: f.Key, Value: bson.A{boundString(&rp)}})
			score += 5
			i++
		}
	}
	if ranges == nil {
		for _, pre := range prefixes {
			if pre == nil {
				ranges = append(ranges, keyRange{nil, nil})
			} else {
				ranges = append(ranges, keyRange{pre, keycodec.PrefixEnd(pre)})
			}
		}
	}
	for ; i < len(ix.Key); i++ {
		bounds = append(bounds, bson.E{Key: ix.Key[i].Key, Value: bson.A{"[MinKey, MaxKey]"}})
	}
	sortRanges(ranges)
	p := &plan{kind: planIxScan, ix: ix, ranges: ranges, bounds: bounds}
	if len(sortSpec) > 0 && len(ranges) == 1 {
		if ok, rev := indexGivesSort(ix, sortSpec, len(prefixesFields(bounds, ix))); ok {
			p.sorted, p.reverse = true, rev
			score += 3
		}
	}
	if ix.Sparse && score < 10 {
		// A sparse index lacks documents missing the field: only equality
		// on a non-null value proves the field exists.
		return nil, 0
	}
	if score == 0 {
		return nil, 0
	}
	return p, score
}

func prefixesFields(bounds bson.D, ix *index) []string {
	var out []string
	for _, b := range bounds {
		arr, _ := b.Value.(bson.A)
		if len(arr) == 1 {
			if s, _ := arr[0].(string); strings.HasPrefix(s, "[") && !strings.Contains(s, "MinKey") {
				out = append(out, b.Key)
				continue
			}
		}
		break
	}
	_ = ix
	return out
}

// indexGivesSort: the sort keys are the index fields after nEq equality
// fields, all in the index's direction or all reversed. A multikey index
// never gives a sort (arrays sort by min/max element, not key order).
func indexGivesSort(ix *index, sortSpec bson.D, nEq int) (ok, reverse bool) {
	if ix.Multikey || ix.Sparse || len(ix.Partial) > 0 {
		return false, false
	}
	if nEq > len(ix.Key) || len(sortSpec) > len(ix.Key)-nEq {
		return false, false
	}
	for j, s := range sortSpec {
		f := ix.Key[nEq+j]
		if f.Key != s.Key {
			return false, false
		}
		same := docstore.IsDescending(f.Value) == docstore.IsDescending(s.Value)
		if j == 0 {
			reverse = !same
		} else if same == reverse {
			return false, false
		}
	}
	return true, reverse
}

// planOrBranches builds an index union when every branch of $or can use
// the _id or an index; otherwise nil (collection scan).
func planOrBranches(s *collState, or any) *plan {
	arr, ok := or.(bson.A)
	if !ok || len(arr) == 0 {
		return nil
	}
	out := &plan{kind: planOr}
	for _, br := range arr {
		d, ok := br.(bson.D)
		if !ok {
			return nil
		}
		sub, err := planQuery(s, d, nil, nil)
		if err != nil || sub.kind == planCollScan || sub.kind == planOr {
			return nil
		}
		out.subs = append(out.subs, sub)
	}
	return out
}

// partialSatisfied: an index with a partialFilterExpression only serves a
// query whose top-level conjunction contains each of the partial filter's
// conditions verbatim (a conservative implication test).
func partialSatisfied(ix *index, filter bson.D) bool {
	if len(ix.Partial) == 0 {
		return true
	}
	for _, pe := range ix.Partial {
		found := false
		for _, fe := range filter {
			if fe.Key == pe.Key && bsonx.Equal(fe.Value, pe.Value) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// planHint forces an index by name or key pattern ({_id: 1} or "_id_" for
// the _id index; {$natural: 1} for a collection scan).
func planHint(s *collState, filter, sortSpec bson.D, hint any) (*plan, error) {
	preds := map[string]*pred{}
	analyze(filter, preds)
	var target *index
	switch h := hint.(type) {
	case string:
		if h == "_id_" {
			return hintID(preds), nil
		}
		for _, ix := range s.indexes {
			if ix.Name == h && !ix.isTSIndex() {
				target = ix
			}
		}
	case bson.D:
		if len(h) == 1 && h[0].Key == "$natural" {
			p := &plan{kind: planCollScan}
			p.reverse = docstore.IsDescending(h[0].Value)
			return p, nil
		}
		if len(h) == 1 && h[0].Key == "_id" {
			return hintID(preds), nil
		}
		for _, ix := range s.indexes {
			if bsonx.Equal(ix.Key, h) && !ix.isTSIndex() {
				target = ix
			}
		}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "hint must be a string or an object")
	}
	if target == nil && hintsTSIndex(s.meta, hint) {
		// The {_ts: 1} index listIndexes shows while DefaultTTL is set
		// (spec §3.3) has no entries: hinting it reads the collection,
		// which gives the same documents.
		return &plan{kind: planCollScan}, nil
	}
	if target == nil || target.Hidden {
		return nil, mongoerr.New(mongoerr.BadValue, "error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index")
	}
	if p, _ := planIndex(target, preds, sortSpec); p != nil {
		return p, nil
	}
	// A full index scan (sparse/partial indexes may then miss documents,
	// as they do in mongod when hinted).
	p := &plan{kind: planIxScan, ix: target, ranges: []keyRange{{nil, nil}}}
	for _, f := range target.Key {
		p.bounds = append(p.bounds, bson.E{Key: f.Key, Value: bson.A{"[MinKey, MaxKey]"}})
	}
	if ok, rev := indexGivesSort(target, sortSpec, 0); ok {
		p.sorted, p.reverse = true, rev
	}
	return p, nil
}

// hintsTSIndex reports whether a hint names the collection's _ts index by
// name or key pattern.
func hintsTSIndex(m *collMeta, hint any) bool {
	if !m.HasTTL {
		return false
	}
	switch h := hint.(type) {
	case string:
		return h == m.TSIndexName
	case bson.D:
		return bsonx.Equal(h, bson.D{{Key: "_ts", Value: int32(1)}})
	}
	return false
}

func hintID(preds map[string]*pred) *plan {
	if p := preds["_id"]; p.pointsUsable() {
		return idPointPlan(p.points)
	}
	if p := preds["_id"]; p.rangeUsable() {
		return &plan{kind: planIDScan, ranges: []keyRange{rangeFor(nil, p, false)}, bounds: bson.D{{Key: "_id", Value: bson.A{boundString(p)}}}}
	}
	return &plan{kind: planIDScan, ranges: []keyRange{{nil, nil}}, bounds: bson.D{{Key: "_id", Value: bson.A{"[MinKey, MaxKey]"}}}}
}

func valString(v any) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return "?"
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), `{"v":`), "}")
}

func boundString(p *pred) string {
	var sb strings.Builder
	if p.hasLo && p.loIncl {
		sb.WriteString("[")
	} else {
		sb.WriteString("(")
	}
	if p.hasLo {
		sb.WriteString(valString(p.lo))
	} else {
		lo, _ := bracketOf(p.hi)
		sb.WriteString(valString(lo))
	}
	sb.WriteString(", ")
	if p.hasHi {
		sb.WriteString(valString(p.hi))
	} else {
		sb.WriteString("inf")
	}
	if p.hasHi && p.hiIncl {
		sb.WriteString("]")
	} else {
		sb.WriteString(")")
	}
	return sb.String()
}
