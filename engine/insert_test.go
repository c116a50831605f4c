package engine_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestInsertManyOrderedAndUnordered(t *testing.T) {
	ts := startServer(t)
	c := ts.db("im").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	docs := []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 5}}}
	_, err := c.InsertMany(ctx, docs)
	var bwe mongo.BulkWriteException
	if !errorsAs(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 2 || bwe.WriteErrors[0].Code != 11000 {
		t.Fatalf("ordered: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), int32(1), int32(2), int32(3))
	c.Drop(ctx)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	_, err = c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if !errorsAs(err, &bwe) || len(bwe.WriteErrors) != 2 || bwe.WriteErrors[0].Index != 2 || bwe.WriteErrors[1].Index != 3 {
		t.Fatalf("unordered: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), int32(1), int32(2), int32(3), int32(5))
	st := m(ts.run(t, "im", bson.D{{Key: "collStats", Value: "c"}}))
	if st["count"] != int64(4) {
		t.Fatalf("count %v", st["count"])
	}
}

// A document refused for a unique key on its second index leaves no entry
// in its first index, even though earlier documents of the same batch
// were written.
func TestInsertManyRefusedDocumentLeavesNoIndexEntries(t *testing.T) {
	ts := startServer(t)
	c := ts.db("im").Collection("u")
	c.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}}},
		{Keys: bson.D{{Key: "b", Value: 1}}, Options: options.Index().SetUnique(true)},
	})
	_, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: "y"}, {Key: "b", Value: 1}}, // same batch, same unique key
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: "z"}, {Key: "b", Value: 3}},
	}, options.InsertMany().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if !errorsAs(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 {
		t.Fatalf("%v", err)
	}
	if got := findAll(t, c, bson.D{{Key: "a", Value: "y"}}, options.Find().SetHint("a_1")); len(got) != 0 {
		t.Fatalf("refused document found through index a_1: %v", got)
	}
	if got := findAll(t, c, bson.D{{Key: "a", Value: "z"}}, options.Find().SetHint("a_1")); len(got) != 1 {
		t.Fatalf("later document missing: %v", got)
	}
}

// Inserting over an expired _id inside a batch replaces the expired
// document (spec §6.3) and keeps the counters exact.
func TestInsertManyOverExpired(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "im", bson.D{{Key: "create", Value: "e"}, {Key: "defaultTimeToLive", Value: 5}})
	c := ts.db("im").Collection("e")
	c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "old", Value: true}}, bson.D{{Key: "_id", Value: 2}}})
	ts.clock.Advance(5 * time.Second)
	if _, err := c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), int32(1), int32(3))
	if got := findAll(t, c, bson.D{{Key: "old", Value: true}}); len(got) != 0 {
		t.Fatalf("expired fields came back: %v", got)
	}
	if st := m(ts.run(t, "im", bson.D{{Key: "collStats", Value: "e"}})); st["count"] != int64(2) {
		t.Fatalf("count %v", st)
	}
}

// A sparse index on a dotted path skips documents where only a prefix of
// the path exists, and a query through it still finds every match.
func TestSparseDottedIndex(t *testing.T) {
	ts := startServer(t)
	c := ts.db("im").Collection("sp")
	c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a.b", Value: 1}}, Options: options.Index().SetSparse(true)})
	c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.D{{Key: "c", Value: 1}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.D{{Key: "b", Value: 5}}}},
		bson.D{{Key: "_id", Value: 3}},
	})
	out := ts.run(t, "im", bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "sp"}, {Key: "filter", Value: bson.D{{Key: "a.b", Value: bson.D{{Key: "$gte", Value: 0}}}}}, {Key: "hint", Value: "a.b_1"}}}, {Key: "verbosity", Value: "executionStats"}})
	if es := m(m(out)["executionStats"]); es["totalKeysExamined"] != int64(1) {
		t.Fatalf("sparse index holds %v keys, want 1", es["totalKeysExamined"])
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "a.b", Value: 5}}), int32(2))
}

func TestNestingDepthLimit(t *testing.T) {
	ts := startServer(t)
	c := ts.db("im").Collection("deep")
	nest := func(levels int) bson.D {
		d := bson.D{{Key: "x", Value: 1}}
		for i := 1; i < levels; i++ {
			d = bson.D{{Key: "a", Value: d}}
		}
		return d
	}
	if _, err := c.InsertOne(ctx, nest(180)); err != nil {
		t.Fatalf("depth 180 refused: %v", err)
	}
	_, err := c.InsertOne(ctx, nest(181))
	if ce := cmdErr(t, err); ce.Code != 15 {
		t.Fatalf("depth 181: %v", ce)
	}
	// Empty sub-documents do not count toward the depth.
	if _, err := c.InsertOne(ctx, append(nest(180), bson.E{Key: "e", Value: bson.D{}})); err != nil {
		t.Fatal(err)
	}
}

// MongoDB 5.0+: $-prefixed field names are allowed in inserted documents,
// top level and nested (but not inside _id).
func TestInsertDollarPrefixedFields(t *testing.T) {
	ts := startServer(t)
	c := ts.db("im").Collection("dollar")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "$price", Value: 50.0}, {Key: "loc", Value: bson.D{{Key: "$db", Value: "x"}}}}); err != nil {
		t.Fatalf("$-prefixed fields refused: %v", err)
	}
	_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$x", Value: 1}}}})
	if ce := cmdErr(t, err); ce.Code != 52 {
		t.Fatalf("$ inside _id: %v", ce)
	}
}
