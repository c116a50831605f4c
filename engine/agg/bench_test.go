package agg

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func benchDocs(n int) []bson.D {
	docs := make([]bson.D, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(i % 100)}, {Key: "v", Value: float64(i) / 3},
			{Key: "s", Value: "abcdefgh"}, {Key: "sub", Value: bson.D{{Key: "x", Value: int32(i)}}}}
	}
	return docs
}

func benchPipeline(b *testing.B, js string) {
	docs := benchDocs(10000)
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+js+`}`), false, &d); err != nil {
		b.Fatal(err)
	}
	p, err := Parse(d[0].Value.(bson.A), Options{DB: "test", Coll: "c"})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in := make([]bson.D, len(docs))
		copy(in, docs)
		it, err := p.Run(context.Background(), newFakeEnv(), Slice(in))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Collect(context.Background(), it); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGroup(b *testing.B) {
	benchPipeline(b, `[{"$group": {"_id": "$k", "n": {"$sum": 1}, "avg": {"$avg": "$v"}, "mx": {"$max": "$sub.x"}}}]`)
}

func BenchmarkProjectAddFields(b *testing.B) {
	benchPipeline(b, `[{"$addFields": {"t": {"$multiply": ["$v", 2]}, "u": {"$concat": ["$s", "-"]}}}, {"$project": {"t": 1, "u": 1, "k": 1}}]`)
}

func BenchmarkSortLimit(b *testing.B) {
	benchPipeline(b, `[{"$sort": {"v": -1}}, {"$limit": 10}]`)
}
