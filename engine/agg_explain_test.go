package engine_test

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestAggregateCountLookupFacetMerge(t *testing.T) {
	ts := startServer(t)
	db := ts.db("ag")
	orders, users := db.Collection("orders"), db.Collection("users")
	ts.run(t, "ag", bson.D{{Key: "create", Value: "users"}, {Key: "defaultTimeToLive", Value: -1}})
	users.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "ann"}},
		bson.D{{Key: "_id", Value: "bob"}, {Key: "ttl", Value: 5}}, // expires: must not join
	})
	orders.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "u", Value: "ann"}, {Key: "amt", Value: 10}},
		bson.D{{Key: "_id", Value: 2}, {Key: "u", Value: "bob"}, {Key: "amt", Value: 5}},
		bson.D{{Key: "_id", Value: 3}, {Key: "u", Value: "ann"}, {Key: "amt", Value: 2.5}},
	})
	n, err := orders.CountDocuments(ctx, bson.D{{Key: "u", Value: "ann"}})
	if err != nil || n != 2 {
		t.Fatalf("countDocuments %d %v", n, err)
	}
	ts.clock.Advance(5 * time.Second)
	cur, err := orders.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "users"}, {Key: "localField", Value: "u"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "user"}}}},
		{{Key: "$project", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$size", Value: "$user"}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.D
	cur.All(ctx, &got)
	if len(got) != 3 || m(got[1])["n"] != int32(0) || m(got[0])["n"] != int32(1) {
		t.Fatalf("lookup joined an expired user: %v", got)
	}
	cur, err = orders.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$facet", Value: bson.D{
			{Key: "total", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "s", Value: bson.D{{Key: "$sum", Value: "$amt"}}}}}}}},
			{Key: "byUser", Value: bson.A{bson.D{{Key: "$sortByCount", Value: "$u"}}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	cur.All(ctx, &got)
	total := m(m(got[0])["total"].(bson.A)[0].(bson.D))["s"]
	if total != 17.5 {
		t.Fatalf("facet total %v (%T)", total, total)
	}
	_, err = orders.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$u"}, {Key: "sum", Value: bson.D{{Key: "$sum", Value: "$amt"}}}}}},
		{{Key: "$merge", Value: bson.D{{Key: "into", Value: "totals"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, findAll(t, db.Collection("totals"), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), "ann", "bob")
	// db.c.stats() in mongosh is $collStats with storageStats
	cur, err = orders.Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	cur.All(ctx, &got)
	if m(m(got[0])["storageStats"])["count"] != int64(3) {
		t.Fatalf("$collStats: %v", got)
	}
	// pipeline-style update
	if _, err := orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "double", Value: bson.D{{Key: "$multiply", Value: bson.A{"$amt", 2}}}}}}}}); err != nil {
		t.Fatal(err)
	}
	d := findAll(t, orders, bson.D{{Key: "_id", Value: 1}})
	if m(d[0])["double"] != int32(20) {
		t.Fatalf("pipeline update: %v", d)
	}
}

func TestExplainIndexedEquality(t *testing.T) {
	ts := startServer(t)
	c := ts.db("ex").Collection("c")
	var docs []any
	for i := 0; i < 5000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 100}})
	}
	c.InsertMany(ctx, docs)
	c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}})
	out := ts.run(t, "ex", bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "k", Value: 7}}}}}, {Key: "verbosity", Value: "executionStats"}})
	qp := m(m(out)["queryPlanner"])
	wp := m(qp["winningPlan"])
	if wp["stage"] != "FETCH" || m(wp["inputStage"])["stage"] != "IXSCAN" || m(wp["inputStage"])["indexName"] != "k_1" {
		t.Fatalf("winning plan %v", wp)
	}
	es := m(m(out)["executionStats"])
	if es["nReturned"] != int64(50) || es["totalDocsExamined"] != int64(50) || es["totalKeysExamined"] != int64(50) {
		t.Fatalf("execution stats %v", es)
	}
	out = ts.run(t, "ex", bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "z", Value: 7}}}}}})
	if m(m(m(out)["queryPlanner"])["winningPlan"])["stage"] != "COLLSCAN" {
		t.Fatalf("unindexed: %v", out)
	}
}

func TestExplainIDPointBounds(t *testing.T) {
	ts := startServer(t)
	c := ts.db("ex").Collection("p")
	c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}})
	out := ts.run(t, "ex", bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "p"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{2, 1, 2}}}}}}}}})
	wp := m(m(m(out)["queryPlanner"])["winningPlan"])
	if wp["stage"] != "IDHACK" || fmt.Sprint(m(wp["indexBounds"])["_id"]) != "[[1, 1] [2, 2]]" {
		t.Fatalf("winning plan %v", wp)
	}
}
