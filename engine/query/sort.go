package query

import (
	"container/heap"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Sort is a compiled sort specification. It is immutable and safe for
// concurrent use.
type Sort struct {
	keys    []sortKey
	natural int
}

// SortField is one key of a sort specification, for planners that match a
// sort against an index.
type SortField struct {
	Path string
	Desc bool
}

// Fields returns the sort keys in order ($natural excluded).
func (s *Sort) Fields() []SortField {
	out := make([]SortField, len(s.keys))
	for i, k := range s.keys {
		out[i] = SortField{Path: k.path.full, Desc: k.desc}
	}
	return out
}

// Natural is the direction of a {$natural: 1 | -1} sort (0 when absent).
// Natural order is the storage order, which only the caller knows, so
// $natural contributes no key here: documents it compares equal keep their
// input order.
func (s *Sort) Natural() int { return s.natural }

type sortKey struct {
	path fieldPath
	desc bool
}

// CompileSort parses a find/aggregate sort specification {a: 1, b: -1}.
// Directions are numbers equal to 1 or -1 (any numeric type); anything
// else is refused with mongod's codes. {$meta: "textScore"} is refused
// because mayfly has no text search.
func CompileSort(spec bson.D) (*Sort, error) {
	s := &Sort{keys: make([]sortKey, 0, len(spec))}
	seen := make(map[string]bool, len(spec))
	for _, e := range spec {
		if e.Key == "$natural" {
			switch {
			case bsonx.IsNumber(e.Value) && bsonx.Compare(e.Value, int32(1)) == 0:
				s.natural = 1
			case bsonx.IsNumber(e.Value) && bsonx.Compare(e.Value, int32(-1)) == 0:
				s.natural = -1
			default:
				return nil, mongoerr.New(mongoerr.BadValue, "$natural sort cannot be set to a value other than -1 or 1")
			}
			continue
		}
		if err := validateFieldPath(e.Key); err != nil {
			return nil, err
		}
		if d, ok := e.Value.(bson.D); ok {
			if len(d) > 0 && d[0].Key == "$meta" {
				return nil, mongoerr.New(mongoerr.NotImplemented, "$meta sort is not supported by mayfly: there is no text search or vector search metadata")
			}
			return nil, mongoerr.New(17312, "$meta is the only expression supported by $sort right now")
		}
		if !bsonx.IsNumber(e.Value) {
			return nil, mongoerr.New(15974, "Illegal key in $sort specification: %s: %s", e.Key, describe(e.Value))
		}
		var desc bool
		switch {
		case bsonx.Compare(e.Value, int32(1)) == 0:
		case bsonx.Compare(e.Value, int32(-1)) == 0:
			desc = true
		default:
			return nil, mongoerr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		if seen[e.Key] {
			// A repeated key cannot change the order: the first one decides.
			continue
		}
		seen[e.Key] = true
		s.keys = append(s.keys, sortKey{path: newFieldPath(e.Key), desc: desc})
	}
	return s, nil
}

// Len is the number of sort keys.
func (s *Sort) Len() int { return len(s.keys) }

// Keys computes a document's sort key: one value per sort field. A field
// holding an array sorts by its smallest element ascending and its largest
// descending; an empty array sorts before null (it is keyed as undefined,
// as in mongod's sort key generation); a missing field sorts as null.
func (s *Sort) Keys(doc bson.D) []any {
	out := make([]any, len(s.keys))
	for i, k := range s.keys {
		out[i] = sortValue(doc, k)
	}
	return out
}

// CompareKeys orders two keys computed by Keys (-1, 0, +1).
func (s *Sort) CompareKeys(a, b []any) int {
	for i, k := range s.keys {
		c := bsonx.Compare(a[i], b[i])
		if c != 0 {
			if k.desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// Compare orders two documents by the sort (-1, 0, +1). Prefer Keys +
// CompareKeys when sorting many documents.
func (s *Sort) Compare(a, b bson.D) int {
	for _, k := range s.keys {
		c := bsonx.Compare(sortValue(a, k), sortValue(b, k))
		if c != 0 {
			if k.desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// sortAcc keeps the extreme value seen for one sort key.
type sortAcc struct {
	desc bool
	set  bool
	v    any
}

func (a *sortAcc) add(v any) {
	if !a.set {
		a.v, a.set = v, true
		return
	}
	c := bsonx.Compare(v, a.v)
	if (a.desc && c > 0) || (!a.desc && c < 0) {
		a.v = v
	}
}

func sortValue(doc bson.D, k sortKey) any {
	acc := sortAcc{desc: k.desc}
	collectSortDoc(doc, k.path, 0, &acc)
	if !acc.set {
		return nil
	}
	return acc.v
}

// collectSort visits the values a path yields for sorting, like mongod's
// sort key generator: arrays along the path are traversed (a numeric
// component selects a position instead), documents in arrays that lack
// the field contribute null, and a leaf array contributes its elements.
func collectSort(v any, p fieldPath, i int, acc *sortAcc) {
	if i == len(p.parts) {
		if a, ok := v.(bson.A); ok {
			if len(a) == 0 {
				acc.add(bson.Undefined{})
				return
			}
			for _, e := range a {
				acc.add(e)
			}
			return
		}
		acc.add(v)
		return
	}
	switch x := v.(type) {
	case bson.D:
		collectSortDoc(x, p, i, acc)
	case bson.A:
		if k := p.idx[i]; k >= 0 {
			if k < len(x) {
				collectSort(x[k], p, i+1, acc)
			} else {
				acc.add(nil)
			}
			return
		}
		if len(x) == 0 {
			acc.add(nil)
			return
		}
		for _, e := range x {
			if d, ok := e.(bson.D); ok {
				collectSortDoc(d, p, i, acc)
			} else {
				acc.add(nil)
			}
		}
	default:
		acc.add(nil)
	}
}

// collectSortDoc continues collectSort inside a document (kept apart so a
// bson.D is never boxed into an interface, which would allocate).
func collectSortDoc(d bson.D, p fieldPath, i int, acc *sortAcc) {
	child, ok := lookup(d, p.parts[i])
	if !ok {
		acc.add(nil)
		return
	}
	collectSort(child, p, i+1, acc)
}

// DefaultSortMemoryLimit is mongod's internalQueryMaxBlockingSortMemoryUsageBytes:
// a blocking sort holding more than this fails unless it may spill to disk.
const DefaultSortMemoryLimit int64 = 100 * 1024 * 1024

// SortMemoryLimitError is mongod's error for a blocking sort over its
// memory limit (code 292, QueryExceededMemoryLimitNoDiskUseAllowed).
func SortMemoryLimitError(limit int64) *mongoerr.Error {
	return mongoerr.New(mongoerr.QueryExceededMemoryLimit,
		"Executor error during find command :: caused by :: Sort exceeded memory limit of %d bytes, but did not opt in to external sorting.", limit)
}

// DocSize estimates the memory a document holds (roughly its BSON size plus
// Go overhead), for sort memory accounting.
func DocSize(doc bson.D) int64 {
	return 24 + valueSize(doc)
}

func valueSize(v any) int64 {
	switch x := v.(type) {
	case bson.D:
		n := int64(5)
		for _, e := range x {
			n += int64(len(e.Key)) + 2 + valueSize(e.Value) + 16
		}
		return n
	case bson.A:
		n := int64(5)
		for _, e := range x {
			n += 4 + valueSize(e) + 16
		}
		return n
	case string:
		return int64(len(x)) + 5
	case bson.Symbol:
		return int64(len(x)) + 5
	case bson.Binary:
		return int64(len(x.Data)) + 5
	case bson.Regex:
		return int64(len(x.Pattern)+len(x.Options)) + 2
	case bson.JavaScript:
		return int64(len(x)) + 5
	case bson.CodeWithScope:
		return int64(len(x.Code)) + 9 + valueSize(x.Scope)
	case bson.DBPointer:
		return int64(len(x.DB)) + 17
	case bson.Decimal128:
		return 16
	case bson.ObjectID:
		return 12
	case int32:
		return 4
	case bool:
		return 1
	case nil, bson.Null, bson.Undefined, bson.MinKey, bson.MaxKey:
		return 0
	}
	return 8
}

// TopK sorts documents in memory. With k > 0 it keeps only the first k
// documents in sort order (a bounded heap, for sort + limit), so memory
// stays proportional to k; with k <= 0 it keeps everything. Ties keep
// insertion order, so the result is a stable sort. Memory is accounted with
// DocSize; when a limit is set and exceeded, Push fails with
// SortMemoryLimitError, as mongod does when disk use is not allowed.
type TopK struct {
	s       *Sort
	k       int
	limit   int64
	mem     int64
	seq     int64
	items   topItems
	scratch []any
}

type topItem struct {
	keys []any
	doc  bson.D
	seq  int64
	size int64
}

// NewTopK makes a sorter keeping the first k documents (all when k <= 0),
// failing once more than memLimit bytes are held (no limit when <= 0).
func NewTopK(s *Sort, k int, memLimit int64) *TopK {
	return &TopK{s: s, k: k, limit: memLimit, items: topItems{s: s}}
}

// Push adds a document. The document is retained, not copied.
func (t *TopK) Push(doc bson.D) error {
	seq := t.seq
	t.seq++
	if t.k > 0 && len(t.items.list) >= t.k {
		// Heap top is the worst kept item; replace it only if doc sorts
		// strictly before it (later equal items lose, keeping stability).
		// The key goes to a scratch buffer first: most documents of a
		// large input are rejected here and should cost no allocation.
		if t.scratch == nil {
			t.scratch = make([]any, len(t.s.keys))
		}
		for i, k := range t.s.keys {
			t.scratch[i] = sortValue(doc, k)
		}
		if t.s.CompareKeys(t.items.list[0].keys, t.scratch) <= 0 {
			return nil
		}
		it := topItem{keys: append([]any(nil), t.scratch...), doc: doc, seq: seq}
		it.size = DocSize(doc)
		t.mem += it.size - t.items.list[0].size
		t.items.list[0] = it
		heap.Fix(&t.items, 0)
	} else {
		it := topItem{keys: t.s.Keys(doc), doc: doc, seq: seq}
		it.size = DocSize(doc)
		t.mem += it.size
		if t.k > 0 {
			heap.Push(&t.items, it)
		} else {
			t.items.list = append(t.items.list, it)
		}
	}
	if t.limit > 0 && t.mem > t.limit {
		return SortMemoryLimitError(t.limit)
	}
	return nil
}

// Len is the number of documents held.
func (t *TopK) Len() int { return len(t.items.list) }

// MemUsage is the estimated number of bytes held.
func (t *TopK) MemUsage() int64 { return t.mem }

// Sorted returns the kept documents in sort order. The TopK must not be
// used afterwards.
func (t *TopK) Sorted() []bson.D {
	list := t.items.list
	sort.Slice(list, func(i, j int) bool { return t.items.before(&list[i], &list[j]) })
	out := make([]bson.D, len(list))
	for i := range list {
		out[i] = list[i].doc
	}
	return out
}

// topItems is a max-heap: the item that sorts last is on top.
type topItems struct {
	s    *Sort
	list []topItem
}

func (h *topItems) before(a, b *topItem) bool {
	if c := h.s.CompareKeys(a.keys, b.keys); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

func (h *topItems) Len() int           { return len(h.list) }
func (h *topItems) Less(i, j int) bool { return h.before(&h.list[j], &h.list[i]) }
func (h *topItems) Swap(i, j int)      { h.list[i], h.list[j] = h.list[j], h.list[i] }
func (h *topItems) Push(x any)         { h.list = append(h.list, x.(topItem)) }
func (h *topItems) Pop() any {
	n := len(h.list) - 1
	it := h.list[n]
	h.list = h.list[:n]
	return it
}
