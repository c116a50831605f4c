package compat

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func (e *env) seq(coll string, n int) {
	e.t.Helper()
	docs := make([]any, 0, n)
	for i := 1; i <= n; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	e.insert(coll, docs...)
}

func TestCursor_DefaultFirstBatchIs101(t *testing.T) {
	e := newEnv(t)
	e.seq("c", 250)
	r := e.run(bson.D{{Key: "find", Value: "c"}})
	fb, _ := val(t, r, "cursor.firstBatch").Array().Values()
	eq(t, "default firstBatch size", len(fb), 101)
	id := val(t, r, "cursor.id")
	if id.Type != bson.TypeInt64 || id.Int64() == 0 {
		t.Fatalf("cursor.id %s, want a non-zero int64", id)
	}
	valEq(t, r, "cursor.ns", e.db.Name()+".c")
	// getMore without batchSize returns the rest.
	r = e.run(bson.D{{Key: "getMore", Value: id.Int64()}, {Key: "collection", Value: "c"}})
	nb, _ := val(t, r, "cursor.nextBatch").Array().Values()
	eq(t, "nextBatch size", len(nb), 149)
	valEq(t, r, "cursor.id", int64(0))
	// The exhausted cursor is gone.
	err := e.runErr(bson.D{{Key: "getMore", Value: id.Int64()}, {Key: "collection", Value: "c"}})
	wantCode(t, err, 43, "CursorNotFound")
}

func TestCursor_BatchSizeGetMoreAcrossBatches(t *testing.T) {
	e := newEnv(t)
	e.seq("c", 25)
	// Raw commands: batches of 4 until the cursor id is 0.
	r := e.run(bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "batchSize", Value: 4}})
	id := val(t, r, "cursor.id").Int64()
	batch, _ := val(t, r, "cursor.firstBatch").Array().Values()
	sizes := []string{}
	got := []string{}
	for {
		sizes = append(sizes, string(rune('0'+len(batch))))
		for _, d := range batch {
			got = append(got, d.Document().Lookup("_id").String())
		}
		if id == 0 {
			break
		}
		r = e.run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 4}})
		id = val(t, r, "cursor.id").Int64()
		batch, _ = val(t, r, "cursor.nextBatch").Array().Values()
	}
	// Six full batches of 4, then the last document (mongod may need one
	// more, empty, getMore to report cursor id 0).
	if len(sizes) < 7 || len(sizes) > 8 || strings.Join(sizes[:7], ",") != "4,4,4,4,4,4,1" {
		t.Fatalf("batch sizes %v, want 4,4,4,4,4,4,1 (then possibly an empty batch)", sizes)
	}
	want := []int{}
	for i := 1; i <= 25; i++ {
		want = append(want, i)
	}
	strsEq(t, "order", got, idList(want...))

	cur, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetBatchSize(4))
	noErr(t, err, "find")
	var all []bson.Raw
	noErr(t, cur.All(e.ctx, &all), "driver iterate")
	eq(t, "driver sees all", len(all), 25)

	// Limit across batches.
	cur, err = e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetBatchSize(4).SetLimit(10).SetSort(bson.D{{Key: "_id", Value: -1}}))
	noErr(t, err, "find with limit")
	var docs []bson.Raw
	noErr(t, cur.All(e.ctx, &docs), "all")
	strsEq(t, "limit 10 desc", idsOf(docs), idList(25, 24, 23, 22, 21, 20, 19, 18, 17, 16))

	// Aggregate cursors too.
	ac, err := e.coll("c").Aggregate(e.ctx, bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 5}}}}}}}, options.Aggregate().SetBatchSize(3))
	noErr(t, err, "aggregate")
	docs = nil
	noErr(t, ac.All(e.ctx, &docs), "aggregate all")
	eq(t, "aggregate documents", len(docs), 20)
}

func TestCursor_KillCursors(t *testing.T) {
	e := newEnv(t)
	e.seq("c", 10)
	r := e.run(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}})
	id := val(t, r, "cursor.id").Int64()
	r = e.run(bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id, int64(123456789)}}})
	valEq(t, r, "cursorsKilled", bson.A{id})
	valEq(t, r, "cursorsNotFound", bson.A{int64(123456789)})
	valEq(t, r, "cursorsAlive", bson.A{})
	valEq(t, r, "cursorsUnknown", bson.A{})
	err := e.runErr(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
	wantCode(t, err, 43, "CursorNotFound")
	// Closing a driver cursor early sends killCursors and succeeds.
	cur, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetBatchSize(2))
	noErr(t, err, "find")
	noErr(t, cur.Close(e.ctx), "close early")
}

func TestCursor_SingleBatchAndNegativeLimit(t *testing.T) {
	e := newEnv(t)
	e.seq("c", 10)
	r := e.run(bson.D{{Key: "find", Value: "c"}, {Key: "limit", Value: 3}, {Key: "singleBatch", Value: true}})
	valEq(t, r, "cursor.id", int64(0))
	fb, _ := val(t, r, "cursor.firstBatch").Array().Values()
	eq(t, "singleBatch", len(fb), 3)
}

func TestBulk_OrderedStopsAtFirstError(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 2}})
	models := []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 1}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 2}}),
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 3}}),
	}
	res, err := e.coll("c").BulkWrite(e.ctx, models)
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("ordered bulk with a duplicate: %v, want BulkWriteException", err)
	}
	eq(t, "write errors", len(bwe.WriteErrors), 1)
	eq(t, "error index", bwe.WriteErrors[0].Index, 1)
	eq(t, "error code", bwe.WriteErrors[0].Code, 11000)
	eq(t, "inserted", res.InsertedCount, int64(1))
	strsEq(t, "ids", e.ids("c"), idList(1, 2))
}

func TestBulk_UnorderedContinues(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 4}})
	docs := []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "_id", Value: 5}}}
	_, err := e.coll("c").InsertMany(e.ctx, docs, options.InsertMany().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("unordered insertMany: %v, want BulkWriteException", err)
	}
	eq(t, "write errors", len(bwe.WriteErrors), 2)
	eq(t, "first error index", bwe.WriteErrors[0].Index, 1)
	eq(t, "second error index", bwe.WriteErrors[1].Index, 3)
	strsEq(t, "ids", e.ids("c"), idList(1, 2, 3, 4, 5))

	// The raw reply: n counts what succeeded.
	raw := e.runWrite(bson.D{{Key: "insert", Value: "c"}, {Key: "ordered", Value: false}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 5}}, bson.D{{Key: "_id", Value: 6}}}}})
	valEq(t, raw, "n", int32(1))
	we, _ := val(t, raw, "writeErrors").Array().Values()
	eq(t, "writeErrors", len(we), 1)
	valEq(t, we[0].Document(), "index", int32(0))
	valEq(t, we[0].Document(), "code", int32(11000))
}

func TestBulk_MixedOperationsCounts(t *testing.T) {
	e := newEnv(t)
	e.seq("c", 5)
	models := []mongo.WriteModel{
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 6}}),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 4}}}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}),
		mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 99}}).SetReplacement(bson.D{{Key: "z", Value: 1}}).SetUpsert(true),
		mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}),
		mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{3, 100}}}}}),
	}
	res, err := e.coll("c").BulkWrite(e.ctx, models)
	noErr(t, err, "bulkWrite")
	eq(t, "inserted", res.InsertedCount, int64(1))
	eq(t, "matched", res.MatchedCount, int64(4))
	eq(t, "modified", res.ModifiedCount, int64(4))
	eq(t, "upserted", res.UpsertedCount, int64(1))
	eq(t, "deleted", res.DeletedCount, int64(2))
	eq(t, "upserted id at index 3", res.UpsertedIDs[3], any(int32(99)))
	strsEq(t, "ids", e.ids("c"), idList(1, 4, 5, 6, 99))
}

func TestBulk_InsertManyLargerThanMaxWriteBatch(t *testing.T) {
	e := newEnv(t)
	// 100001 small documents: the driver splits into several insert commands.
	docs := make([]any, 100001)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	res, err := e.coll("c").InsertMany(e.ctx, docs)
	noErr(t, err, "insertMany 100001")
	eq(t, "inserted", len(res.InsertedIDs), 100001)
	eq(t, "count", e.count("c", nil), int64(100001))
}

func TestFindAndModify_Forms(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 5}})
	c := e.coll("c")
	raw, err := c.FindOneAndUpdate(e.ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}}, options.FindOneAndUpdate().SetSort(bson.D{{Key: "n", Value: -1}})).Raw()
	noErr(t, err, "findOneAndUpdate before")
	docEq(t, raw, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 5}})
	raw, err = c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(bson.D{{Key: "n", Value: 1}, {Key: "_id", Value: 0}})).Raw()
	noErr(t, err, "findOneAndUpdate after")
	docEq(t, raw, bson.D{{Key: "n", Value: 16}})
	raw, err = c.FindOneAndReplace(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "r", Value: true}}, options.FindOneAndReplace().SetReturnDocument(options.After)).Raw()
	noErr(t, err, "findOneAndReplace")
	docEq(t, raw, bson.D{{Key: "_id", Value: 1}, {Key: "r", Value: true}})
	raw, err = c.FindOneAndDelete(e.ctx, bson.D{{Key: "_id", Value: 1}}).Raw()
	noErr(t, err, "findOneAndDelete")
	docEq(t, raw, bson.D{{Key: "_id", Value: 1}, {Key: "r", Value: true}})
	err = c.FindOneAndDelete(e.ctx, bson.D{{Key: "_id", Value: 1}}).Err()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("findOneAndDelete of nothing: %v", err)
	}
	// Upsert with new:true returns the inserted document; lastErrorObject reports it.
	r := e.run(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 7}}}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 1}}}}}, {Key: "upsert", Value: true}, {Key: "new", Value: true}})
	valEq(t, r, "value", bson.D{{Key: "_id", Value: 7}, {Key: "u", Value: 1}})
	valEq(t, r, "lastErrorObject.n", int32(1))
	valEq(t, r, "lastErrorObject.updatedExisting", false)
	valEq(t, r, "lastErrorObject.upserted", int32(7))
	r = e.run(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 7}}}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 2}}}}}})
	valEq(t, r, "value", bson.D{{Key: "_id", Value: 7}, {Key: "u", Value: 1}})
	valEq(t, r, "lastErrorObject.n", int32(1))
	valEq(t, r, "lastErrorObject.updatedExisting", true)
	r = e.run(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 404}}}, {Key: "remove", Value: true}})
	valEq(t, r, "value", nil)
	valEq(t, r, "lastErrorObject.n", int32(0))
	// Both remove and update: error.
	err = e.runErr(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{}}, {Key: "remove", Value: true}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}})
	wantCode(t, err, 9, "FailedToParse")
}
