package expr

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

// The set operators work on values compared with bsonx.Compare. Up to
// setLinearMax elements a linear search is cheapest; above, sets are
// deduplicated by sorting and looked up by binary search, so $setUnion,
// $setIntersection, $setDifference, $setEquals and $setIsSubset over large
// arrays cost n log n rather than n² (a single quadratic evaluation could
// not be interrupted by maxTimeMS).
const setLinearMax = 32

// setOfFast is setOf for large inputs: the first-seen representative of
// each group of equal values, in first-seen order.
func setOfFast(total int, vals ...bson.A) bson.A {
	all := make(bson.A, 0, total)
	for _, a := range vals {
		all = append(all, a...)
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return bsonx.Compare(all[idx[i]], all[idx[j]]) < 0 })
	reps := make([]int, 0, len(idx))
	for i, k := range idx {
		// stable: the first of a run of equal values is the first seen
		if i == 0 || bsonx.Compare(all[idx[i-1]], all[k]) != 0 {
			reps = append(reps, k)
		}
	}
	sort.Ints(reps)
	out := make(bson.A, len(reps))
	for i, k := range reps {
		out[i] = all[k]
	}
	return out
}

// lookupSet answers membership in an array.
type lookupSet struct {
	small  bson.A // linear search
	sorted bson.A // binary search
}

func newLookupSet(a bson.A) *lookupSet {
	if len(a) <= setLinearMax {
		return &lookupSet{small: a}
	}
	s := append(bson.A(nil), a...)
	sort.SliceStable(s, func(i, j int) bool { return bsonx.Compare(s[i], s[j]) < 0 })
	return &lookupSet{sorted: s}
}

func (l *lookupSet) has(v any) bool {
	if l.sorted == nil {
		return contains(l.small, v)
	}
	i := sort.Search(len(l.sorted), func(i int) bool { return bsonx.Compare(l.sorted[i], v) >= 0 })
	return i < len(l.sorted) && bsonx.Compare(l.sorted[i], v) == 0
}
