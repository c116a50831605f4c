package engine_test

// TTL review: the six gaps once kept as failing reproductions in
// ttl_review_failing_test.go.txt, now fixed (uses helpers of
// ttl_review_test.go).

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestReviewFindAndModifyTS(t *testing.T) {
	ts := startServer(t)
	c := ts.db("r14").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	ts.clock.Advance(5 * time.Second)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	ts.clock.Advance(5 * time.Second)
	var got bson.D
	err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0.Unix()}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}},
		options.FindOneAndUpdate().SetSort(bson.D{{Key: "_ts", Value: -1}}).SetProjection(bson.D{{Key: "_ts", Value: 1}}).SetReturnDocument(options.After)).Decode(&got)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Value != int32(2) || got[1].Key != "_ts" || got[1].Value != t0.Unix()+10 {
		t.Fatalf("findAndModify with _ts: %v", got)
	}
	got = nil
	c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}).Decode(&got)
	if len(got) != 1 {
		t.Fatalf("_ts not hidden: %v", got)
	}
}

func TestReviewSubpipelinesTS(t *testing.T) {
	ts := startServer(t)
	c := ts.db("r24").Collection("c")
	f := ts.db("r24").Collection("f")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	f.InsertOne(ctx, bson.D{{Key: "_id", Value: 10}})
	ts.clock.Advance(5 * time.Second)
	f.InsertOne(ctx, bson.D{{Key: "_id", Value: 11}})
	recent := bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0.Unix() + 5}}}}}}}
	got := rvAgg(t, c, mongo.Pipeline{{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "f"}, {Key: "pipeline", Value: recent}, {Key: "as", Value: "x"}}}}})
	if len(got) != 1 || fmt.Sprint(m(got[0])["x"]) != `[{"_id":{"$numberInt":"11"}}]` || rvHasTS(got) {
		t.Errorf("$lookup sub-pipeline $match on _ts: %v, want [{_id: 1, x: [{_id: 11}]}]", got)
	}
	got = rvAgg(t, c, mongo.Pipeline{{{Key: "$unionWith", Value: bson.D{{Key: "coll", Value: "f"}, {Key: "pipeline", Value: recent}}}}})
	if fmt.Sprint(ids(got)) != "[1 11]" || rvHasTS(got) {
		t.Errorf("$unionWith sub-pipeline $match on _ts: %v, want [{_id: 1}, {_id: 11}]", got)
	}
}

func TestReviewTSLeaksWithoutProjection(t *testing.T) {
	ts := startServer(t)
	f := ts.db("r25").Collection("f")
	f.InsertOne(ctx, bson.D{{Key: "_id", Value: 10}})
	ts.clock.Advance(5 * time.Second)
	f.InsertOne(ctx, bson.D{{Key: "_id", Value: 11}})
	recent := bson.D{{Key: "$match", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0.Unix() + 5}}}}}}
	for i, p := range []mongo.Pipeline{
		{{{Key: "$facet", Value: bson.D{{Key: "a", Value: bson.A{recent}}}}}},
		{recent, {{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "docs", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}}},
		{{{Key: "$sort", Value: bson.D{{Key: "_ts", Value: -1}}}}, {{Key: "$replaceRoot", Value: bson.D{{Key: "newRoot", Value: bson.D{{Key: "d", Value: "$$ROOT"}}}}}}},
	} {
		if got := rvAgg(t, f, p); rvHasTS(got) {
			t.Errorf("pipeline %d: _ts returned without a projection naming it: %v", i, got)
		}
	}
}

func TestReviewTSIndexHint(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r16", "c", 100)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	ts.clock.Advance(5 * time.Second)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	sameIDs(t, findAll(t, c, bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: 0}}}}, options.Find().SetHint("_ts_1").SetSort(bson.D{{Key: "_ts", Value: 1}})), int32(1), int32(2))
	sameIDs(t, findAll(t, c, bson.D{}, options.Find().SetHint(bson.D{{Key: "_ts", Value: 1}})), int32(1), int32(2))
}

func TestReviewOutKeepsTSIndexName(t *testing.T) {
	ts := startServer(t)
	src := ts.db("r11").Collection("src")
	src.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	tgt := ts.db("r11").Collection("tgt")
	ts.run(t, "r11", bson.D{{Key: "create", Value: "tgt"}})
	ts.run(t, "r11", bson.D{{Key: "createIndexes", Value: "tgt"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "expiry"}, {Key: "expireAfterSeconds", Value: 10}}}}})
	cur, err := src.Aggregate(ctx, mongo.Pipeline{{{Key: "$out", Value: "tgt"}}})
	if err != nil {
		t.Fatal(err)
	}
	cur.Close(ctx)
	specs, _ := tgt.Indexes().ListSpecifications(ctx)
	names := []string{}
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if fmt.Sprint(names) != "[_id_ expiry]" {
		t.Fatalf("indexes after $out: %v", names)
	}
}

// Documents buffered by an aggregation $sort (behind a stage that keeps it
// from being pushed into the query) are re-checked for expiry before each
// batch: ids 5..9 expire after the first batch of two.
func TestReviewAggregateBlockingSortCursorAcrossExpiry(t *testing.T) {
	addX := bson.D{{Key: "$addFields", Value: bson.D{{Key: "x", Value: 1}}}}
	for i, tc := range []struct {
		p    mongo.Pipeline
		want string
	}{
		{mongo.Pipeline{addX, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}}, "[0 1 2 3 4]"},
		// 9 and 8 go out in the first batch, before the clock moves.
		{mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "k", Value: 1}}}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: -1}}}}}, "[9 8 4 3 2 1 0]"},
		// top-k sort ($sort + $limit)
		{mongo.Pipeline{addX, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}, {{Key: "$limit", Value: 8}}}, "[0 1 2 3 4]"},
		// a second sort behind a stage: the sources pass through the first
		{mongo.Pipeline{addX, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}, {{Key: "$unset", Value: "x"}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: -1}}}}}, "[9 8 4 3 2 1 0]"},
	} {
		ts := startServer(t)
		c := rvCreate(t, ts, "r13", "c", 100)
		var docs []any
		for i := 0; i < 10; i++ {
			d := bson.D{{Key: "_id", Value: i}}
			if i >= 5 {
				d = append(d, bson.E{Key: "ttl", Value: 5})
			}
			docs = append(docs, d)
		}
		c.InsertMany(ctx, docs)
		cur, err := c.Aggregate(ctx, tc.p, options.Aggregate().SetBatchSize(2))
		if err != nil {
			t.Fatal(err)
		}
		var got []any
		for cur.Next(ctx) {
			got = append(got, cur.Current.Lookup("_id").Int32())
			if len(got) == 2 {
				ts.clock.Advance(5 * time.Second)
			}
		}
		cur.Close(ctx)
		if fmt.Sprint(got) != tc.want {
			t.Errorf("pipeline %d %v: returned %v after ids 5..9 expired, want %s", i, tc.p, got, tc.want)
		}
	}
}
