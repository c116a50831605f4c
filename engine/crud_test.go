package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

var ctx = context.Background()

func TestInsertFindRoundTrip(t *testing.T) {
	ts := startServer(t)
	c := ts.db("t").Collection("c")
	docs := []any{
		bson.D{{Key: "x", Value: int32(1)}, {Key: "_id", Value: int32(1)}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "x", Value: int64(2)}, {Key: "d", Value: bson.NewDecimal128(1, 2)}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "x", Value: 3.5}, {Key: "m", Value: bson.MinKey{}}, {Key: "ts", Value: bson.Timestamp{T: 5, I: 6}}},
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	got := findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if len(got) != 3 {
		t.Fatalf("got %d docs", len(got))
	}
	if got[0][0].Key != "_id" {
		t.Fatalf("_id not moved first: %v", got[0])
	}
	if _, ok := got[1][1].Value.(int64); !ok {
		t.Fatalf("int64 not preserved: %T", got[1][1].Value)
	}
	if _, ok := got[2][2].Value.(bson.MinKey); !ok {
		t.Fatalf("minkey lost: %v", got[2])
	}
	// duplicate _id
	_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1.0}})
	if ce := cmdErr(t, err); ce.Code != 11000 {
		t.Fatalf("want 11000, got %v", ce)
	}
	// filters
	if n := len(findAll(t, c, bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 2}}}})); n != 2 {
		t.Fatalf("count %d", n)
	}
}

func TestCursorBatches(t *testing.T) {
	ts := startServer(t)
	c := ts.db("t").Collection("c")
	var docs []any
	for i := 0; i < 1000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i % 7}})
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	got := findAll(t, c, bson.D{{Key: "v", Value: 3}}, options.Find().SetBatchSize(10))
	if len(got) != 143 {
		t.Fatalf("got %d", len(got))
	}
	got = findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "v", Value: -1}, {Key: "_id", Value: 1}}).SetSkip(5).SetLimit(300).SetBatchSize(50))
	if len(got) != 300 || got[0][1].Value != int32(6) {
		t.Fatalf("got %d first %v", len(got), got[0])
	}
}

func TestUpdatesAndUpsert(t *testing.T) {
	ts := startServer(t)
	c := ts.db("t").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}})
	r, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 2}}}})
	if err != nil || r.MatchedCount != 1 || r.ModifiedCount != 1 {
		t.Fatal(r, err)
	}
	r, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil || r.UpsertedCount != 1 || r.UpsertedID != int32(2) {
		t.Fatal(r, err)
	}
	var d bson.D
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: true}}}}, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if len(d) != 3 {
		t.Fatalf("%v", d)
	}
	dr, err := c.DeleteMany(ctx, bson.D{})
	if err != nil || dr.DeletedCount != 2 {
		t.Fatal(dr, err)
	}
}

func TestDistinctPaths(t *testing.T) {
	ts := startServer(t)
	c := ts.db("t").Collection("d")
	c.InsertMany(ctx, []any{
		bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "b", Value: 1}}, bson.D{{Key: "c", Value: 2}}, bson.D{{Key: "b", Value: bson.A{3, 1}}}}}},
		bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: nil}}}},
		bson.D{{Key: "x", Value: 1}},
		bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: "s"}}}},
	})
	var out bson.D
	if err := ts.db("t").RunCommand(ctx, bson.D{{Key: "distinct", Value: "d"}, {Key: "key", Value: "a.b"}}).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m(out)["values"]); got != "[<nil> 1 3 s]" {
		t.Fatalf("distinct a.b = %s", got)
	}
}

func TestMaxTimeMSWhileScanning(t *testing.T) {
	ts := startServer(t)
	c := ts.db("t").Collection("slow")
	docs := make([]any, 30000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "s", Value: "abcdefghijklmnopqrstuvwxyz"}}
	}
	c.InsertMany(ctx, docs)
	// A regex that matches nothing makes the scan examine every document
	// without returning any: the deadline must still be honoured.
	err := ts.db("t").RunCommand(ctx, bson.D{{Key: "count", Value: "slow"}, {Key: "query", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$regex", Value: "(a|b)*z$x"}}}}}, {Key: "maxTimeMS", Value: 1}}).Err()
	if ce := cmdErr(t, err); ce.Code != 50 {
		t.Fatalf("want MaxTimeMSExpired (50), got %v", ce)
	}
}

// A standalone honours w: 0, 1 and "majority"; w > 1 or a tag is refused
// with BadValue, as mongod does outside a replica set.
func TestWriteConcernOnStandalone(t *testing.T) {
	ts := startServer(t)
	ins := func(wc bson.D) error {
		return ts.db("t").RunCommand(ctx, bson.D{{Key: "insert", Value: "wc"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "writeConcern", Value: wc}}).Err()
	}
	for _, ok := range []bson.D{{{Key: "w", Value: 1}}, {{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: 100}}, {{Key: "j", Value: true}}} {
		if err := ins(ok); err != nil {
			t.Fatalf("%v refused: %v", ok, err)
		}
	}
	for _, bad := range []bson.D{{{Key: "w", Value: 2}}, {{Key: "w", Value: "dc-east"}}} {
		if ce := cmdErr(t, ins(bad)); ce.Code != 2 {
			t.Fatalf("%v: %v", bad, ce)
		}
	}
}
