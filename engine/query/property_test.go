package query

import (
	"math"
	"math/rand"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Property tests over random documents: negated operators are exact
// complements, sort keys agree with Compare, and TopK agrees with a full
// stable sort.

type gen struct{ r *rand.Rand }

func (g gen) scalar() any {
	switch g.r.Intn(12) {
	case 0:
		return nil
	case 1:
		return int32(g.r.Intn(5) - 2)
	case 2:
		return int64(g.r.Intn(5) - 2)
	case 3:
		return float64(g.r.Intn(9)-4) / 2
	case 4:
		d, _ := bson.ParseDecimal128([]string{"-1", "0", "1.5", "2", "NaN"}[g.r.Intn(5)])
		return d
	case 5:
		return []string{"", "a", "ab", "b", "B"}[g.r.Intn(5)]
	case 6:
		return g.r.Intn(2) == 0
	case 7:
		return math.NaN()
	case 8:
		return bson.Undefined{}
	case 9:
		return bson.MinKey{}
	case 10:
		return bson.DateTime(g.r.Intn(3))
	}
	return bson.MaxKey{}
}

func (g gen) value(depth int) any {
	if depth > 2 {
		return g.scalar()
	}
	switch g.r.Intn(6) {
	case 0:
		n := g.r.Intn(4)
		a := bson.A{}
		for i := 0; i < n; i++ {
			a = append(a, g.value(depth+1))
		}
		return a
	case 1:
		return g.doc(depth + 1)
	}
	return g.scalar()
}

func (g gen) doc(depth int) bson.D {
	d := bson.D{}
	for _, k := range []string{"a", "b"} {
		if g.r.Intn(4) != 0 {
			d = append(d, bson.E{Key: k, Value: g.value(depth)})
		}
	}
	return d
}

func TestNegationsAreComplements(t *testing.T) {
	g := gen{rand.New(rand.NewSource(1))}
	type pair struct{ pos, neg bson.D }
	var pairs []pair
	for i := 0; i < 60; i++ {
		v := g.value(1)
		if _, ok := v.(bson.Undefined); ok {
			continue
		}
		path := []string{"a", "a.b", "a.0", "b.a.b"}[g.r.Intn(4)]
		ops := []struct{ op, neg string }{{"$eq", "$ne"}, {"$in", "$nin"}}
		o := ops[g.r.Intn(2)]
		arg := v
		if o.op == "$in" {
			arg = bson.A{v, g.scalar()}
			if _, ok := arg.(bson.A)[1].(bson.Undefined); ok {
				continue
			}
		}
		pairs = append(pairs, pair{
			pos: bson.D{{Key: path, Value: bson.D{{Key: o.op, Value: arg}}}},
			neg: bson.D{{Key: path, Value: bson.D{{Key: o.neg, Value: arg}}}},
		})
		for _, op := range []string{"$gt", "$gte", "$lt", "$lte", "$exists", "$type", "$size"} {
			a := v
			switch op {
			case "$exists":
				a = g.r.Intn(2) == 0
			case "$type":
				a = []string{"number", "string", "array", "object", "null", "double"}[g.r.Intn(6)]
			case "$size":
				a = int32(g.r.Intn(3))
			}
			if _, ok := a.(bson.Undefined); ok {
				continue
			}
			f := bson.D{{Key: path, Value: bson.D{{Key: op, Value: a}}}}
			pairs = append(pairs, pair{pos: f, neg: bson.D{{Key: path, Value: bson.D{{Key: "$not", Value: bson.D{{Key: op, Value: a}}}}}}})
			pairs = append(pairs, pair{pos: f, neg: bson.D{{Key: "$nor", Value: bson.A{f}}}})
		}
	}
	docs := make([]bson.D, 300)
	for i := range docs {
		docs[i] = g.doc(0)
	}
	checked := 0
	for _, p := range pairs {
		mp, err := Compile(p.pos)
		if err != nil {
			t.Fatalf("%s: %v", extJSON(p.pos), err)
		}
		mn, err := Compile(p.neg)
		if err != nil {
			t.Fatalf("%s: %v", extJSON(p.neg), err)
		}
		for _, d := range docs {
			checked++
			if mp.Matches(d) == mn.Matches(d) {
				t.Fatalf("%s and %s agree (%v) on %s", extJSON(p.pos), extJSON(p.neg), mp.Matches(d), extJSON(d))
			}
		}
	}
	t.Logf("%d complement checks", checked)
}

func TestSortPropertiesRandom(t *testing.T) {
	g := gen{rand.New(rand.NewSource(2))}
	specs := []bson.D{
		{{Key: "a", Value: int32(1)}},
		{{Key: "a", Value: int32(-1)}},
		{{Key: "a.b", Value: int32(1)}, {Key: "b", Value: int32(-1)}},
		{{Key: "b.a", Value: int32(-1)}, {Key: "a.0", Value: int32(1)}},
	}
	for round := 0; round < 20; round++ {
		docs := make([]bson.D, 40)
		for i := range docs {
			docs[i] = append(bson.D{{Key: "_id", Value: int32(i)}}, g.doc(0)...)
		}
		for _, spec := range specs {
			s, err := CompileSort(spec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range docs {
				for j := range docs {
					c1 := s.Compare(docs[i], docs[j])
					c2 := s.CompareKeys(s.Keys(docs[i]), s.Keys(docs[j]))
					if c1 != c2 || c1 != -s.Compare(docs[j], docs[i]) {
						t.Fatalf("inconsistent compare on %s / %s", extJSON(docs[i]), extJSON(docs[j]))
					}
				}
			}
			full := append([]bson.D(nil), docs...)
			stableSort(full, s.Compare)
			for _, k := range []int{1, 5, 40, 100} {
				tk := NewTopK(s, k, 0)
				for _, d := range docs {
					if err := tk.Push(d); err != nil {
						t.Fatal(err)
					}
				}
				want := full[:min(k, len(full))]
				if extJSON(ids(tk.Sorted())) != extJSON(ids(want)) {
					t.Fatalf("top-%d of %s differs from stable sort", k, extJSON(spec))
				}
			}
		}
	}
}

// TestEquivalences checks rewrites mongod itself relies on: $in is an $or of
// equalities, $gte is $gt or $eq, $all is an $and of equalities.
func TestEquivalences(t *testing.T) {
	g := gen{rand.New(rand.NewSource(3))}
	docs := make([]bson.D, 300)
	for i := range docs {
		docs[i] = g.doc(0)
	}
	ok := func(v any) bool { _, u := v.(bson.Undefined); return !u }
	checked := 0
	for i := 0; i < 150; i++ {
		x, y := g.value(1), g.value(1)
		if !ok(x) || !ok(y) {
			continue
		}
		path := []string{"a", "a.b", "a.0", "b.a"}[g.r.Intn(4)]
		eq := func(v any) bson.D { return bson.D{{Key: path, Value: bson.D{{Key: "$eq", Value: v}}}} }
		op := func(o string, v any) bson.D { return bson.D{{Key: path, Value: bson.D{{Key: o, Value: v}}}} }
		pairs := [][2]bson.D{
			{op("$in", bson.A{x, y}), {{Key: "$or", Value: bson.A{eq(x), eq(y)}}}},
			{op("$all", bson.A{x, y}), {{Key: "$and", Value: bson.A{eq(x), eq(y)}}}},
			{op("$gte", x), {{Key: "$or", Value: bson.A{op("$gt", x), eq(x)}}}},
			{op("$lte", x), {{Key: "$or", Value: bson.A{op("$lt", x), eq(x)}}}},
		}
		for _, p := range pairs {
			m1, err := Compile(p[0])
			if err != nil {
				t.Fatalf("%s: %v", extJSON(p[0]), err)
			}
			m2, err := Compile(p[1])
			if err != nil {
				t.Fatalf("%s: %v", extJSON(p[1]), err)
			}
			for _, d := range docs {
				checked++
				if m1.Matches(d) != m2.Matches(d) {
					t.Fatalf("%s (%v) and %s disagree on %s", extJSON(p[0]), m1.Matches(d), extJSON(p[1]), extJSON(d))
				}
			}
		}
	}
	t.Logf("%d equivalence checks", checked)
}

// TestRandomFiltersNeverPanic compiles random operator soup; whatever
// compiles must evaluate without panicking on random documents.
func TestRandomFiltersNeverPanic(t *testing.T) {
	g := gen{rand.New(rand.NewSource(4))}
	ops := []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$type", "$size",
		"$mod", "$all", "$elemMatch", "$not", "$regex", "$bitsAllSet", "$bitsAnyClear", "$options", "$foo"}
	var randFilter func(depth int) bson.D
	randArg := func(op string, depth int) any {
		switch g.r.Intn(4) {
		case 0:
			return g.value(1)
		case 1:
			return bson.A{g.scalar(), g.scalar()}
		case 2:
			if depth < 3 {
				return randFilter(depth + 1)
			}
		}
		return g.scalar()
	}
	randFilter = func(depth int) bson.D {
		f := bson.D{}
		for i := 0; i < 1+g.r.Intn(2); i++ {
			switch g.r.Intn(6) {
			case 0:
				if depth < 3 {
					f = append(f, bson.E{Key: []string{"$and", "$or", "$nor"}[g.r.Intn(3)], Value: bson.A{randFilter(depth + 1), randFilter(depth + 1)}})
					continue
				}
				fallthrough
			case 1:
				f = append(f, bson.E{Key: "a", Value: g.value(1)})
			default:
				op := ops[g.r.Intn(len(ops))]
				f = append(f, bson.E{Key: []string{"a", "a.b", "b.0"}[g.r.Intn(3)], Value: bson.D{{Key: op, Value: randArg(op, depth)}}})
			}
		}
		return f
	}
	docs := make([]bson.D, 50)
	for i := range docs {
		docs[i] = g.doc(0)
	}
	compiled := 0
	for i := 0; i < 3000; i++ {
		f := randFilter(0)
		m, err := Compile(f)
		if err != nil {
			continue
		}
		compiled++
		for _, d := range docs {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic %v: filter %s doc %s", r, extJSON(f), extJSON(d))
					}
				}()
				m.Matches(d)
				m.MatchesPos(d)
			}()
		}
	}
	t.Logf("%d random filters compiled and evaluated", compiled)
}

// TestRandomProjectionsNeverPanic does the same for projections, and checks
// Apply never modifies its input.
func TestRandomProjectionsNeverPanic(t *testing.T) {
	g := gen{rand.New(rand.NewSource(5))}
	paths := []string{"a", "b", "_id", "a.b", "a.a", "b.a.b", "a.$", "b.$"}
	vals := func() any {
		switch g.r.Intn(7) {
		case 0:
			return int32(1)
		case 1:
			return false
		case 2:
			return bson.D{{Key: "$slice", Value: int32(g.r.Intn(5) - 2)}}
		case 3:
			return bson.D{{Key: "$slice", Value: bson.A{int32(g.r.Intn(5) - 2), int32(g.r.Intn(3))}}}
		case 4:
			return bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$gt", Value: int32(0)}}}}
		case 5:
			return bson.D{{Key: "b", Value: int32(g.r.Intn(2))}}
		}
		return "lit"
	}
	m, err := Compile(bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: true}}}, {Key: "b", Value: bson.D{{Key: "$ne", Value: int32(7)}}}})
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]bson.D, 60)
	for i := range docs {
		docs[i] = append(bson.D{{Key: "_id", Value: int32(i)}}, g.doc(0)...)
	}
	compiled := 0
	for i := 0; i < 2000; i++ {
		spec := bson.D{}
		for j := 0; j < 1+g.r.Intn(3); j++ {
			spec = append(spec, bson.E{Key: paths[g.r.Intn(len(paths))], Value: vals()})
		}
		p, err := CompileProjection(spec)
		if err != nil {
			continue
		}
		compiled++
		for _, d := range docs {
			before := extJSON(d)
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic %v: projection %s doc %s", r, extJSON(spec), before)
					}
				}()
				_, _ = p.Apply(d, m)
			}()
			if extJSON(d) != before {
				t.Fatalf("projection %s modified its input %s", extJSON(spec), before)
			}
		}
	}
	t.Logf("%d random projections compiled and applied", compiled)
}
