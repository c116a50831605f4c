package engine_test

// TTL review (ttl-spec.md): edge cases that mayfly honours. The defects it
// found are tested in ttl_review_fixed_test.go and ttl_review_gaps_test.go.

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func rvCreate(t *testing.T, ts *testServer, db, coll string, def any) *mongo.Collection {
	t.Helper()
	cmd := bson.D{{Key: "create", Value: coll}}
	if def != nil {
		cmd = append(cmd, bson.E{Key: "defaultTimeToLive", Value: def})
	}
	ts.run(t, db, cmd)
	return ts.db(db).Collection(coll)
}

func rvUnique(t *testing.T, c *mongo.Collection, field string) {
	t.Helper()
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: field, Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
}

// §6.3: an update moving a unique key onto a key held only by an expired
// document succeeds, and the live document is then found by that key.
func TestReviewUniqueUpdateOntoExpiredHolder(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r1", "c", 100)
	rvUnique(t, c, "k")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 5}, {Key: "ttl", Value: 5}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 6}})
	ts.clock.Advance(5 * time.Second)
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 5}}}}); err != nil {
		t.Fatalf("update onto expired holder's key: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 5}}), int32(2))
	var got bson.D
	if err := c.FindOne(ctx, bson.D{{Key: "k", Value: 5}}).Decode(&got); err != nil || got[0].Value != int32(2) {
		t.Fatalf("findOne k=5: %v %v", got, err)
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "k", Value: 5}}); n != 1 {
		t.Fatalf("count k=5: %d", n)
	}
	// findAndModify and replace onto the expired holder's key too
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 7}, {Key: "ttl", Value: 1}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: 8}})
	ts.clock.Advance(time.Second)
	if err := c.FindOneAndReplace(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "k", Value: 7}}).Err(); err != nil {
		t.Fatalf("replace onto expired holder's key: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 7}}), int32(4))
	// the reaper removes the expired holders without touching the live entries
	if _, err := ts.e.RunTTLPass(ctx); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 5}}), int32(2))
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 7}}), int32(4))
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}, {Key: "k", Value: 5}}); cmdErr(t, err).Code != 11000 {
		t.Fatalf("live holder must conflict")
	}
}

// §6.3: an insert batch where several documents share an expired _id: the
// first replaces the expired document, the rest are duplicates.
func TestReviewInsertBatchSharingExpiredID(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r2", "c", 10)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "old"}})
	ts.clock.Advance(10 * time.Second)
	res, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "a"}},
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "b"}},
		bson.D{{Key: "_id", Value: 2}},
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "c"}},
	}, options.InsertMany().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if !errorsAs(err, &bwe) || len(bwe.WriteErrors) != 2 {
		t.Fatalf("want 2 write errors: %v %v", res, err)
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			t.Fatalf("write error %v", we)
		}
	}
	docs := findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if len(docs) != 2 || m(docs[0])["v"] != "a" {
		t.Fatalf("docs %v", docs)
	}
	st := m(ts.run(t, "r2", bson.D{{Key: "collStats", Value: "c"}}))
	if fmt.Sprint(st["count"]) != "2" {
		t.Fatalf("collStats count %v", st["count"])
	}
}

// §4.3 via a pipeline-style update: $unset of ttl re-inherits DefaultTTL;
// $set of ttl to an invalid value in a pipeline is refused.
func TestReviewPipelineUnsetTTL(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r3", "c", 10)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: -1}})
	ts.clock.Advance(20 * time.Second)
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{{{Key: "$unset", Value: "ttl"}}}); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(9 * time.Second)
	if n := len(findAll(t, c, bson.D{})); n != 1 {
		t.Fatalf("at +9s: %d", n)
	}
	ts.clock.Advance(time.Second)
	if n := len(findAll(t, c, bson.D{})); n != 0 {
		t.Fatalf("at +10s: %d", n)
	}
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "ttl", Value: bson.D{{Key: "$literal", Value: 0.5}}}}}}})
	if cmdErr(t, err).Code != 2 {
		t.Fatalf("invalid ttl through pipeline accepted")
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "_ts", Value: 1}}}}})
	if cmdErr(t, err).Code != 2 {
		t.Fatalf("_ts through pipeline accepted")
	}
}

// §4: ttl becoming valid or invalid through $rename/$inc, TTL on and off.
func TestReviewTTLThroughOperators(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r4", "c", 100)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 5}})
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$rename", Value: bson.D{{Key: "x", Value: "ttl"}}}}); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(5 * time.Second)
	if n := len(findAll(t, c, bson.D{})); n != 0 {
		t.Fatalf("renamed ttl 5 not honoured")
	}
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 1}})
	_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "ttl", Value: -1}}}})
	if cmdErr(t, err).Code != 2 {
		t.Fatalf("$inc to ttl 0 accepted")
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "ttl", Value: 0.5}}}})
	if cmdErr(t, err).Code != 2 {
		t.Fatalf("$inc to ttl 1.5 accepted")
	}
	// $rename of ttl away re-inherits
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$rename", Value: bson.D{{Key: "ttl", Value: "y"}}}}); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(50 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(2))
	// TTL off: invalid ttl is data; TTL back on: it counts as absent.
	ts.run(t, "r4", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: nil}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: "soon"}})
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	ts.run(t, "r4", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: 30}})
	// _id 2 (_ts +5 s) is already past 30 s; _id 3 (_ts +55 s) is not
	sameIDs(t, findAll(t, c, bson.D{}), int32(3))
	ts.clock.Advance(29 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(3))
	ts.clock.Advance(time.Second)
	sameIDs(t, findAll(t, c, bson.D{}))
}

// §6.2: findAndModify upsert over an expired _id inserts a new document.
func TestReviewFindAndModifyUpsertOverExpired(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r5", "c", 10)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "old", Value: true}, {Key: "n", Value: 5}})
	ts.clock.Advance(10 * time.Second)
	out := ts.run(t, "r5", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}, {Key: "new", Value: true}})
	leo := m(m(out)["lastErrorObject"])
	if leo["updatedExisting"] != false {
		t.Fatalf("lastErrorObject %v", leo)
	}
	v := m(m(out)["value"])
	if fmt.Sprint(v["n"]) != "1" || v["old"] != nil {
		t.Fatalf("value %v", m(out)["value"])
	}
	// without new: value is null
	ts.clock.Advance(10 * time.Second)
	out = ts.run(t, "r5", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}})
	if m(out)["value"] != nil {
		t.Fatalf("value %v", m(out)["value"])
	}
	d := findAll(t, c, bson.D{})
	if len(d) != 1 || fmt.Sprint(m(d[0])["n"]) != "1" {
		t.Fatalf("docs %v", d)
	}
}

// §5.2: _ts in aggregate $match/$sort/$project (as an expression too),
// distinct and count.
func TestReviewTSInAggregateDistinctCount(t *testing.T) {
	ts := startServer(t)
	c := ts.db("r6").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	ts.clock.Advance(5 * time.Second)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}})
	t1 := t0.Unix() + 5
	agg := func(p mongo.Pipeline) []bson.D {
		cur, err := c.Aggregate(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.D
		if err := cur.All(ctx, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := agg(mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t1}}}}}}})
	if len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("$match _ts: %v", got)
	}
	got = agg(mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "_ts", Value: -1}}}}, {{Key: "$project", Value: bson.D{{Key: "t", Value: "$_ts"}}}}})
	if len(got) != 2 || m(got[0])["t"] != t1 || m(got[0])["_ts"] != nil {
		t.Fatalf("$project t: $_ts: %v", got)
	}
	got = agg(mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "_ts", Value: 1}}}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}})
	if len(got) != 2 || m(got[0])["_ts"] != t0.Unix() {
		t.Fatalf("$project _ts: %v", got)
	}
	got = agg(mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "a", Value: 0}}}}})
	for _, d := range got {
		if m(d)["_ts"] != nil {
			t.Fatalf("exclusion $project leaked _ts: %v", got)
		}
	}
	got = agg(mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gte", Value: bson.A{"$_ts", t1}}}}}}}})
	if len(got) != 1 || m(got[0])["_ts"] != nil {
		t.Fatalf("$match $expr _ts: %v", got)
	}
	got = agg(mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "mx", Value: bson.D{{Key: "$max", Value: "$_ts"}}}}}}})
	if len(got) != 1 || m(got[0])["mx"] != t1 {
		t.Fatalf("$group $max _ts: %v", got)
	}
	// find: exclusion projection with a _ts filter does not return _ts
	d := findAll(t, c, bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t1}}}}, options.Find().SetProjection(bson.D{{Key: "a", Value: 0}}))
	if len(d) != 1 || len(d[0]) != 1 {
		t.Fatalf("find exclusion projection: %v", d)
	}
	d = findAll(t, c, bson.D{}, options.Find().SetProjection(bson.D{{Key: "a", Value: 0}}).SetSort(bson.D{{Key: "_ts", Value: 1}}))
	if len(d) != 2 || len(d[0]) != 1 {
		t.Fatalf("find exclusion projection with _ts sort: %v", d)
	}
	vals := ts.run(t, "r6", bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "_ts"}})
	if fmt.Sprint(vals[0].Value) != fmt.Sprint(bson.A{t0.Unix(), t1}) {
		t.Fatalf("distinct _ts %v", vals)
	}
	vals = ts.run(t, "r6", bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"}, {Key: "query", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$lt", Value: t1}}}}}})
	if fmt.Sprint(vals[0].Value) != "[1]" {
		t.Fatalf("distinct filtered by _ts %v", vals)
	}
	cnt := ts.run(t, "r6", bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$lt", Value: t1}}}}}})
	if fmt.Sprint(m(cnt)["n"]) != "1" {
		t.Fatalf("count by _ts %v", cnt)
	}
	if n, err := c.CountDocuments(ctx, bson.D{{Key: "_ts", Value: t1}}); err != nil || n != 1 {
		t.Fatalf("countDocuments by _ts %d %v", n, err)
	}
}

// §6.5: dropIndexes "*" drops the _ts index (TTL off) and TTL indexes;
// nothing expired comes back.
func TestReviewDropAllIndexesNoResurrection(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r8", "c", 10)
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "d", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(5)}); err != nil {
		t.Fatal(err)
	}
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: -1}, {Key: "d", Value: bson.NewDateTimeFromTime(t0)}}) // index: +5
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})                                                                           // default: +10
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: -1}})                                                  // never
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "ttl", Value: 20}, {Key: "d", Value: bson.NewDateTimeFromTime(t0.Add(time.Hour))}})
	ts.clock.Advance(5 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(2), int32(3), int32(4))
	ts.clock.Advance(5 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(3), int32(4))
	if err := c.Indexes().DropAll(ctx); err != nil {
		t.Fatal(err)
	}
	specs, _ := c.Indexes().ListSpecifications(ctx)
	if len(specs) != 1 {
		t.Fatalf("indexes after drop *: %v", specs)
	}
	var info bson.D
	ts.db("r8").RunCommand(ctx, bson.D{{Key: "listCollections", Value: 1}}).Decode(&info)
	if fmt.Sprint(info) == "" || containsTTLOption(info) {
		t.Fatalf("listCollections still shows defaultTimeToLive: %v", info)
	}
	ts.clock.Advance(time.Hour)
	sameIDs(t, findAll(t, c, bson.D{}), int32(3), int32(4))
}

func containsTTLOption(v any) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == "defaultTimeToLive" || containsTTLOption(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if containsTTLOption(e) {
				return true
			}
		}
	}
	return false
}

// §7 + §6.5: collMod raising a TTL index's expireAfterSeconds keeps
// already-expired documents gone; lowering it hides more at once.
func TestReviewCollModTTLIndexRaiseLower(t *testing.T) {
	ts := startServer(t)
	c := ts.db("r9").Collection("c")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "d", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(10)}); err != nil {
		t.Fatal(err)
	}
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "d", Value: bson.NewDateTimeFromTime(t0)}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "d", Value: bson.NewDateTimeFromTime(t0.Add(5 * time.Second))}})
	ts.clock.Advance(10 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(2))
	ts.run(t, "r9", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "d", Value: 1}}}, {Key: "expireAfterSeconds", Value: 100}}}})
	sameIDs(t, findAll(t, c, bson.D{}), int32(2))
	ts.run(t, "r9", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "d_1"}, {Key: "expireAfterSeconds", Value: 5}}}})
	sameIDs(t, findAll(t, c, bson.D{}))
	// hidden TTL indexes still expire documents (as in mongod)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "d", Value: bson.NewDateTimeFromTime(t0.Add(10 * time.Second))}})
	ts.run(t, "r9", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "d_1"}, {Key: "hidden", Value: true}}}})
	ts.clock.Advance(5 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}))
}

// renameCollection keeps DefaultTTL, the _ts index and expiry.
func TestReviewRenameTTLCollection(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r10", "c", 10)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 5}})
	ts.clock.Advance(5 * time.Second)
	ts.run(t, "admin", bson.D{{Key: "renameCollection", Value: "r10.c"}, {Key: "to", Value: "r10b.d"}})
	d := ts.db("r10b").Collection("d")
	sameIDs(t, findAll(t, d, bson.D{}), int32(1))
	var lc bson.D
	ts.db("r10b").RunCommand(ctx, bson.D{{Key: "listCollections", Value: 1}}).Decode(&lc)
	if !containsTTLOption(lc) {
		t.Fatalf("renamed collection lost defaultTimeToLive: %v", lc)
	}
	ts.clock.Advance(5 * time.Second)
	sameIDs(t, findAll(t, d, bson.D{}))
	d.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	ts.clock.Advance(9 * time.Second)
	sameIDs(t, findAll(t, d, bson.D{}), int32(3))
	if n, _ := ts.e.RunTTLPass(ctx); n != 2 {
		t.Fatalf("reaper after rename deleted %d", n)
	}
}

// $out to an existing TTL collection keeps its setting (and the _ts index
// name); written documents get _ts now; $merge into a TTL collection
// treats an expired target document as absent.
func TestReviewOutMergeIntoTTLCollection(t *testing.T) {
	ts := startServer(t)
	src := ts.db("r11").Collection("src")
	src.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "new"}}, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: "new"}, {Key: "ttl", Value: 5}}})
	tgt := ts.db("r11").Collection("tgt")
	ts.run(t, "r11", bson.D{{Key: "create", Value: "tgt"}})
	ts.run(t, "r11", bson.D{{Key: "createIndexes", Value: "tgt"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "expiry"}, {Key: "expireAfterSeconds", Value: 10}}}}})
	ts.clock.Advance(100 * time.Second)
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
	if len(names) != 2 || names[0] != "_id_" {
		t.Fatalf("indexes after $out: %v", names)
	}
	ts.clock.Advance(5 * time.Second)
	sameIDs(t, findAll(t, tgt, bson.D{}), int32(1))
	ts.clock.Advance(5 * time.Second)
	sameIDs(t, findAll(t, tgt, bson.D{}))
	// $merge: _id 1 in tgt is expired: whenMatched merge must not see old fields
	tgt.InsertOne(ctx, bson.D{{Key: "_id", Value: 5}, {Key: "old", Value: true}})
	ts.clock.Advance(10 * time.Second)
	src.InsertOne(ctx, bson.D{{Key: "_id", Value: 5}, {Key: "v", Value: "m"}})
	cur, err = src.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "_id", Value: 5}}}}, {{Key: "$merge", Value: bson.D{{Key: "into", Value: "tgt"}, {Key: "whenMatched", Value: "merge"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	cur.Close(ctx)
	d := findAll(t, tgt, bson.D{})
	if len(d) != 1 || m(d[0])["old"] != nil {
		t.Fatalf("$merge over expired: %v", d)
	}
	ts.clock.Advance(9 * time.Second)
	if len(findAll(t, tgt, bson.D{})) != 1 {
		t.Fatal("$merge result must have _ts now")
	}
}

// §6.4: listDatabases and dbStats exclude expired documents.
func TestReviewListDatabasesDbStatsExcludeExpired(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r12", "c", 10)
	var docs []any
	for i := 0; i < 50; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: fmt.Sprintf("%0100d", i)}})
	}
	c.InsertMany(ctx, docs)
	entry := func() map[string]any {
		out := ts.run(t, "admin", bson.D{{Key: "listDatabases", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "r12"}}}})
		dbs := m(out)["databases"].(bson.A)
		return m(dbs[0])
	}
	if e := entry(); e["empty"] != false || e["sizeOnDisk"].(int64) < 5000 {
		t.Fatalf("before: %v", e)
	}
	ts.clock.Advance(10 * time.Second)
	if e := entry(); e["empty"] != true || e["sizeOnDisk"].(int64) != 0 {
		t.Fatalf("after expiry: %v", e)
	}
	st := m(ts.run(t, "r12", bson.D{{Key: "dbStats", Value: 1}}))
	if fmt.Sprint(st["objects"]) != "0" || fmt.Sprint(st["dataSize"]) != "0" {
		t.Fatalf("dbStats: %v", st)
	}
}

// §6.1: an aggregate cursor whose pipeline sorts in memory after another
// stage: documents that expire while it is open are not returned later.
func TestReviewAggregateCursorAcrossExpiry(t *testing.T) {
	for i, p := range []mongo.Pipeline{
		{{{Key: "$match", Value: bson.D{}}}},
		{{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}},
		{{{Key: "$addFields", Value: bson.D{{Key: "x", Value: 1}}}}},
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
		cur, err := c.Aggregate(ctx, p, options.Aggregate().SetBatchSize(2))
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
		if len(got) != 5 {
			t.Errorf("pipeline %d %v: returned %v after ids 5..9 expired (want 0..4)", i, p, got)
		}
	}
}

// §3.4: createIndexes that fails on a later index changes nothing (the _ts
// index of the same command does not turn TTL on).
func TestReviewCreateIndexesPartialFailureChangesNothing(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "r15", bson.D{{Key: "create", Value: "c"}})
	err := ts.db("r15").RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "_ts_1"}, {Key: "expireAfterSeconds", Value: 10}},
		bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "x"}, {Key: "expireAfterSeconds", Value: 0}},
	}}}).Err()
	if err == nil {
		t.Fatal("expected an error")
	}
	var lc bson.D
	ts.db("r15").RunCommand(ctx, bson.D{{Key: "listCollections", Value: 1}}).Decode(&lc)
	if containsTTLOption(lc) {
		t.Fatalf("failed createIndexes turned TTL on: %v", lc)
	}
	err = ts.db("r15").RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "_ts_1"}, {Key: "expireAfterSeconds", Value: 10}},
		bson.D{{Key: "key", Value: bson.D{{Key: "d", Value: 1}}}, {Key: "name", Value: "d_1"}, {Key: "expireAfterSeconds", Value: -3}},
	}}}).Err()
	if err == nil {
		t.Fatal("expected an error")
	}
	ts.db("r15").RunCommand(ctx, bson.D{{Key: "listCollections", Value: 1}}).Decode(&lc)
	if containsTTLOption(lc) {
		t.Fatalf("failed createIndexes turned TTL on: %v", lc)
	}
}

// §3.3/§5.2: with TTL on, _ts filters and sorts return the right documents.
func TestReviewTSQueriesWithTTLOn(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r16", "c", 100)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	ts.clock.Advance(5 * time.Second)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	sameIDs(t, findAll(t, c, bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0.Unix() + 5}}}}), int32(2))
	sameIDs(t, findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_ts", Value: -1}})), int32(2), int32(1))
}

// §4.1: integral decimal128/double values are valid ttls; others refused
// with a message naming the value and the range.
func TestReviewDocTTLNumericEdges(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r17", "c", -1)
	d10, _ := bson.ParseDecimal128("1E+1")
	dm1, _ := bson.ParseDecimal128("-1.0")
	for i, v := range []any{d10, 10.0, int64(10)} {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "ttl", Value: v}}); err != nil {
			t.Fatalf("valid ttl %v refused: %v", v, err)
		}
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "never"}, {Key: "ttl", Value: dm1}}); err != nil {
		t.Fatalf("decimal -1.0 refused: %v", err)
	}
	dh, _ := bson.ParseDecimal128("2.5")
	for _, v := range []any{dh, int64(2147483648), -2.0, 0, nil, true, "5", bson.A{5}, bson.D{{Key: "n", Value: 5}}} {
		_, err := c.InsertOne(ctx, bson.D{{Key: "ttl", Value: v}})
		ce := cmdErr(t, err)
		if ce.Code != 2 || !containsAll(ce.Message, "2147483647") {
			t.Fatalf("ttl %v: %v", v, ce)
		}
	}
	ts.clock.Advance(9 * time.Second)
	if n := len(findAll(t, c, bson.D{})); n != 4 {
		t.Fatalf("at +9s: %d", n)
	}
	ts.clock.Advance(time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), "never")
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !contains(s, x) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

// §7: earliest deadline wins; ttl -1 only opts out of DefaultTTL; the
// reaper physically deletes documents expired only through a TTL index.
func TestReviewEarliestDeadlineAndReaper(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r18", "c", 30)
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "d", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(10).SetPartialFilterExpression(bson.D{{Key: "kind", Value: "tmp"}})}); err != nil {
		t.Fatal(err)
	}
	at := bson.NewDateTimeFromTime(t0)
	c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: -1}, {Key: "kind", Value: "tmp"}, {Key: "d", Value: at}},                                                                                                                 // +10 via index
		bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: -1}, {Key: "kind", Value: "keep"}, {Key: "d", Value: at}},                                                                                                                // never
		bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: 5}, {Key: "kind", Value: "tmp"}, {Key: "d", Value: at}},                                                                                                                  // +5 own
		bson.D{{Key: "_id", Value: 4}, {Key: "kind", Value: "tmp"}, {Key: "d", Value: "not a date"}},                                                                                                                                // +30 default
		bson.D{{Key: "_id", Value: 5}, {Key: "ttl", Value: -1}, {Key: "kind", Value: "tmp"}, {Key: "d", Value: bson.A{"x", bson.NewDateTimeFromTime(t0.Add(20 * time.Second)), bson.NewDateTimeFromTime(t0.Add(2 * time.Second))}}}, // +12 via index
	})
	steps := []struct {
		at   int
		want string
	}{{4, "[1 2 3 4 5]"}, {5, "[1 2 4 5]"}, {10, "[2 4 5]"}, {12, "[2 4]"}, {30, "[2]"}}
	for _, s := range steps {
		ts.clock.Set(t0.Add(time.Duration(s.at) * time.Second))
		if got := fmt.Sprint(ids(findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})))); got != s.want {
			t.Fatalf("at +%ds: %s, want %s", s.at, got, s.want)
		}
	}
	if n, err := ts.e.RunTTLPass(ctx); err != nil || n != 4 {
		t.Fatalf("reaper deleted %d (%v), want 4", n, err)
	}
	st := m(ts.run(t, "r18", bson.D{{Key: "collStats", Value: "c"}}))
	if fmt.Sprint(st["count"]) != "1" {
		t.Fatalf("collStats %v", st)
	}
}

// §6.1: find cursors (index order, in-memory sort, index range) across
// expiry: documents that expire while the cursor is open are not returned
// by later batches; count with an indexed filter excludes expired ones.
func TestReviewFindCursorsAcrossExpiry(t *testing.T) {
	for i, opts := range []*options.FindOptionsBuilder{
		options.Find().SetBatchSize(2),
		options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "n", Value: 1}}),
		options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "k", Value: 1}}),
		options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "k", Value: -1}}).SetSkip(1),
	} {
		ts := startServer(t)
		c := rvCreate(t, ts, "r21", "c", 100)
		if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
			t.Fatal(err)
		}
		var docs []any
		for j := 0; j < 10; j++ {
			d := bson.D{{Key: "_id", Value: j}, {Key: "k", Value: j % 3}, {Key: "n", Value: 10 - j}}
			if j%2 == 1 {
				d = append(d, bson.E{Key: "ttl", Value: 5})
			}
			docs = append(docs, d)
		}
		c.InsertMany(ctx, docs)
		cur, err := c.Find(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 0}}}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []int32
		odd := 0
		for cur.Next(ctx) {
			id := cur.Current.Lookup("_id").Int32()
			got = append(got, id)
			if len(got) > 2 && id%2 == 1 {
				odd++
			}
			if len(got) == 2 {
				ts.clock.Advance(5 * time.Second)
			}
		}
		cur.Close(ctx)
		if odd != 0 {
			t.Errorf("find %d: later batches returned expired documents: %v", i, got)
		}
		cnt := ts.run(t, "r21", bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "k", Value: 1}}}})
		if fmt.Sprint(m(cnt)["n"]) != "1" { // k=1: ids 1, 4, 7; only 4 is live
			t.Errorf("count k=1: %v", cnt)
		}
	}
}

// §6.1: a collMod that lowers DefaultTTL (or a new TTL index) makes
// documents expire at once, also for streaming cursors already open.
func TestReviewStreamingCursorAcrossPolicyChange(t *testing.T) {
	for i := 0; i < 4; i++ {
		ts := startServer(t)
		c := rvCreate(t, ts, "r22", "c", 100)
		var docs []any
		for j := 0; j < 10; j++ {
			docs = append(docs, bson.D{{Key: "_id", Value: j}, {Key: "n", Value: 10 - j}, {Key: "d", Value: bson.NewDateTimeFromTime(t0)}})
		}
		c.InsertMany(ctx, docs)
		ts.clock.Advance(50 * time.Second)
		var cur *mongo.Cursor
		var err error
		if i%2 == 0 {
			cur, err = c.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
		} else {
			cur, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}}, options.Aggregate().SetBatchSize(2))
		}
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for cur.Next(ctx) {
			n++
			if n == 2 {
				if i < 2 {
					ts.run(t, "r22", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: 10}})
				} else {
					c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "d", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(10)})
				}
			}
		}
		cur.Close(ctx)
		if n != 2 {
			t.Errorf("case %d: %d documents returned, want 2 (the rest expired by the policy change)", i, n)
		}
	}
}
