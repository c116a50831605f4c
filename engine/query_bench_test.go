package engine_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// BenchmarkIndexedVsUnindexedEquality compares the same equality query on
// 20k documents with and without an index on the field (through the
// driver, so the figure includes the wire round trip).
func BenchmarkIndexedVsUnindexedEquality(b *testing.B) {
	ts := startServer(b)
	db := ts.db("bench")
	docs := make([]any, 20000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 2000}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}
	}
	for _, name := range []string{"plain", "indexed"} {
		if _, err := db.Collection(name).InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Collection("indexed").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"plain", "indexed"} {
		c := db.Collection(name)
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cur, err := c.Find(ctx, bson.D{{Key: "k", Value: i % 2000}})
				if err != nil {
					b.Fatal(err)
				}
				var out []bson.Raw
				if err := cur.All(ctx, &out); err != nil || len(out) != 10 {
					b.Fatalf("%d results, %v", len(out), err)
				}
			}
		})
	}
}

// BenchmarkPointReadAndInsert reports _id point reads and single inserts
// through the driver.
func BenchmarkPointReadAndInsert(b *testing.B) {
	ts := startServer(b)
	c := ts.db("bench").Collection("p")
	docs := make([]any, 10000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}
	}
	c.InsertMany(ctx, docs)
	b.Run("pointRead", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: i % 10000}}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("insertOne", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.InsertOne(ctx, bson.D{{Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
