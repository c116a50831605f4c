package engine_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkIssue21PushIndexedArray measures one $push onto a document whose
// indexed array already holds n elements: the old and new index keys of the
// document are diffed on every update (issue 21 item 5: this was quadratic
// in n).
func BenchmarkIssue21PushIndexedArray(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%dk", n/1000), func(b *testing.B) {
			ts := startServer(b)
			ctx := context.Background()
			c := ts.db("bench").Collection("push")
			ts.run(b, "bench", bson.D{{Key: "createIndexes", Value: "push"}, {Key: "indexes", Value: bson.A{
				bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
			arr := make(bson.A, n)
			for i := range arr {
				arr[i] = int32(i)
			}
			if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: arr}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: int32(n + i)}}}})
				if err != nil {
					b.Fatal(err)
				}
				if res.ModifiedCount != 1 {
					b.Fatalf("modified %d", res.ModifiedCount)
				}
			}
		})
	}
}
