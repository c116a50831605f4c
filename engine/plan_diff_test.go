package engine_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func randScalar(r *rand.Rand) any {
	switch r.IntN(9) {
	case 0:
		return int32(r.IntN(10))
	case 1:
		return int64(r.IntN(10))
	case 2:
		return float64(r.IntN(20)) / 2
	case 3:
		return fmt.Sprintf("s%d", r.IntN(5))
	case 4:
		return nil
	case 5:
		return bson.A{int32(r.IntN(10)), int32(r.IntN(10))}
	case 6:
		return r.IntN(2) == 0
	case 7:
		return bson.NewDecimal128(uint64(0x3040000000000000), uint64(r.IntN(10)))
	}
	return int32(r.IntN(10))
}

func randDoc(r *rand.Rand, id int) bson.D {
	d := bson.D{{Key: "_id", Value: int32(id)}}
	if r.IntN(6) > 0 {
		d = append(d, bson.E{Key: "a", Value: randScalar(r)})
	}
	if r.IntN(6) > 0 {
		d = append(d, bson.E{Key: "b", Value: int32(r.IntN(6))})
	}
	if r.IntN(4) > 0 {
		d = append(d, bson.E{Key: "c", Value: bson.D{{Key: "d", Value: randScalar(r)}}})
	}
	return d
}

func randPred(r *rand.Rand) bson.E {
	fields := []string{"a", "b", "c.d", "_id"}
	f := fields[r.IntN(len(fields))]
	v := func() any {
		x := randScalar(r)
		if _, isArr := x.(bson.A); isArr && r.IntN(2) == 0 {
			return int32(3)
		}
		return x
	}
	switch r.IntN(7) {
	case 0:
		return bson.E{Key: f, Value: v()}
	case 1:
		return bson.E{Key: f, Value: bson.D{{Key: "$in", Value: bson.A{v(), v(), v()}}}}
	case 2:
		return bson.E{Key: f, Value: bson.D{{Key: "$gt", Value: v()}}}
	case 3:
		return bson.E{Key: f, Value: bson.D{{Key: "$lte", Value: v()}}}
	case 4:
		return bson.E{Key: f, Value: bson.D{{Key: "$gte", Value: int32(r.IntN(10))}, {Key: "$lt", Value: int32(r.IntN(10))}}}
	case 5:
		return bson.E{Key: f, Value: bson.D{{Key: "$ne", Value: v()}}}
	}
	return bson.E{Key: f, Value: bson.D{{Key: "$exists", Value: r.IntN(2) == 0}}}
}

func randFilter(r *rand.Rand) bson.D {
	switch r.IntN(5) {
	case 0:
		return bson.D{}
	case 1:
		return bson.D{{Key: "$or", Value: bson.A{bson.D{randPred(r)}, bson.D{randPred(r)}}}}
	case 2:
		return bson.D{randPred(r), randPred(r)}
	}
	return bson.D{randPred(r)}
}

// TestPlannerDifferential: a thousand random documents and random
// filters and sorts, each run on a collection without indexes, on one with
// several indexes, and with each index hinted: the results must be
// identical (indexes only narrow candidates; the full filter always runs).
func TestPlannerDifferential(t *testing.T) {
	ts := startServer(t)
	db := ts.db("diff")
	plain, indexed := db.Collection("plain"), db.Collection("indexed")
	r := rand.New(rand.NewPCG(7, 11))
	var docs []any
	ndocs := 1200
	if testing.Short() {
		ndocs = 300
	}
	for i := 0; i < ndocs; i++ {
		docs = append(docs, randDoc(r, i))
	}
	if _, err := plain.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	models := []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}}},
		{Keys: bson.D{{Key: "b", Value: -1}, {Key: "a", Value: 1}}},
		{Keys: bson.D{{Key: "c.d", Value: 1}}},
		{Keys: bson.D{{Key: "b", Value: 1}}, Options: options.Index().SetSparse(true)},
		{Keys: bson.D{{Key: "a", Value: -1}, {Key: "b", Value: 1}}, Options: options.Index().SetPartialFilterExpression(bson.D{{Key: "b", Value: bson.D{{Key: "$gt", Value: 2}}}})},
	}
	// Half the indexes exist before the data, half are built over it.
	if _, err := indexed.Indexes().CreateMany(ctx, models[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := indexed.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := indexed.Indexes().CreateMany(ctx, models[2:]); err != nil {
		t.Fatal(err)
	}
	hints := []any{nil, "a_1", "b_-1_a_1", "c.d_1", bson.D{{Key: "_id", Value: 1}}}
	sorts := []bson.D{nil, {{Key: "a", Value: 1}, {Key: "_id", Value: 1}}, {{Key: "b", Value: -1}, {Key: "a", Value: 1}, {Key: "_id", Value: -1}}, {{Key: "c.d", Value: -1}, {Key: "_id", Value: 1}}}
	queries := 200
	if testing.Short() {
		queries = 40
	}
	for q := 0; q < queries; q++ {
		filter := randFilter(r)
		srt := sorts[r.IntN(len(sorts))]
		o := options.Find()
		if srt != nil {
			o.SetSort(srt)
		}
		want := idList(findAll(t, plain, filter, o), srt == nil)
		for _, h := range hints {
			o := options.Find()
			if srt != nil {
				o.SetSort(srt)
			}
			if h != nil {
				o.SetHint(h)
			}
			got := idList(findAll(t, indexed, filter, o), srt == nil)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("filter %v sort %v hint %v:\n got %v\nwant %v", filter, srt, h, got, want)
			}
		}
	}
}

func idList(docs []bson.D, unordered bool) []int32 {
	out := make([]int32, 0, len(docs))
	for _, d := range docs {
		out = append(out, d[0].Value.(int32))
	}
	if unordered {
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	}
	return out
}
