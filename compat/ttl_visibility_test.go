package compat

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ttl-spec.md §6: expired means gone, at once, everywhere.

// expiringSet makes collection c with DefaultTTL 2 holding _ids 1..n, where
// the even ones carry ttl -1 (never expire), and returns once they exist.
func (e *env) expiringSet(n int) {
	e.t.Helper()
	e.create("c", dttl(2))
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "g", Value: 1}}})
	noErr(e.t, err, "createIndex g")
	e.alignSecond()
	docs := []any{}
	for i := 1; i <= n; i++ {
		d := bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i % 3}, {Key: "pad", Value: strings.Repeat("x", 1000)}}
		if i%2 == 0 {
			d = append(d, bson.E{Key: "ttl", Value: -1})
		}
		docs = append(docs, d)
	}
	e.insert("c", docs...)
}

func TestTTL_Differs_ExpiredInvisibleImmediately(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.expiringSet(6)
	e.advance(2 * sec) // odd _ids expire now; nothing physically deleted yet necessarily
	e.wantIDs("c", "find after expiry", 2, 4, 6)
	eq(t, "countDocuments", e.count("c", nil), int64(3))
	n, err := e.coll("c").EstimatedDocumentCount(e.ctx)
	noErr(t, err, "estimatedDocumentCount")
	eq(t, "estimatedDocumentCount (count command)", n, int64(3))
	r := e.run(bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "g", Value: bson.D{{Key: "$gte", Value: 0}}}}}})
	eq(t, "count command with query", intOf(t, val(t, r, "n"), "n"), int64(3))
	arr, err := e.coll("c").Distinct(e.ctx, "_id", bson.D{}).Raw()
	noErr(t, err, "distinct")
	vals, _ := arr.Values()
	got := []string{}
	for _, v := range vals {
		got = append(got, v.String())
	}
	sort.Strings(got)
	strsEq(t, "distinct _id", got, idList(2, 4, 6))
	agg := e.aggregate("c", bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "ids", Value: bson.D{{Key: "$push", Value: "$_id"}}}}}}})
	if len(agg) != 1 || intOf(t, val(t, agg[0], "n"), "n") != 3 {
		t.Fatalf("aggregate $group count: %v", agg)
	}
	// An index scan (hinted) does not find expired entries either.
	strsEq(t, "index scan on g", idsOf(e.find("c", bson.D{{Key: "g", Value: bson.D{{Key: "$gte", Value: 0}}}}, options.Find().SetHint("g_1").SetSort(bson.D{{Key: "_id", Value: 1}}))), idList(2, 4, 6))
	strsEq(t, "find by expired _id", idsOf(e.find("c", bson.D{{Key: "_id", Value: 1}})), idList())
}

func TestTTL_Differs_ExplainCountsExcludeExpired(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.expiringSet(6)
	e.advance(2 * sec)
	r := e.run(bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}}}, {Key: "verbosity", Value: "executionStats"}})
	eq(t, "explain executionStats.nReturned", intOf(t, val(t, r, "executionStats.nReturned"), "nReturned"), int64(3))
}

func TestTTL_Differs_CursorOpenedBeforeExpiry(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(2))
	e.alignSecond()
	docs := []any{}
	for i := 1; i <= 10; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	e.insert("c", docs...)
	e.insert("c", bson.D{{Key: "_id", Value: 11}, {Key: "ttl", Value: -1}})
	cur, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetBatchSize(3).SetSort(bson.D{{Key: "_id", Value: 1}}))
	noErr(t, err, "find")
	defer cur.Close(e.ctx)
	seen := []string{}
	for i := 0; i < 3 && cur.Next(e.ctx); i++ {
		seen = append(seen, cur.Current.Lookup("_id").String())
	}
	if cur.ID() == 0 {
		t.Fatalf("cursor exhausted after the first batch of 3; want an open cursor")
	}
	e.advance(2 * sec) // 1..10 expire while the cursor is open
	for cur.Next(e.ctx) {
		seen = append(seen, cur.Current.Lookup("_id").String())
	}
	noErr(t, cur.Err(), "getMore")
	strsEq(t, "documents seen", seen, idList(1, 2, 3, 11))
}

func TestTTL_Differs_LookupForeignSideHidesExpired(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("f", dttl(2))
	e.alignSecond()
	e.insert("f", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "a"}, {Key: "ttl", Value: -1}})
	e.insert("l", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}})
	pipeline := bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "f"}, {Key: "localField", Value: "k"}, {Key: "foreignField", Value: "k"}, {Key: "as", Value: "m"}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "ids", Value: "$m._id"}}}}}
	docsEq(t, e.aggregate("l", pipeline), bson.D{{Key: "_id", Value: 1}, {Key: "ids", Value: bson.A{1, 2}}})
	e.advance(2 * sec)
	docsEq(t, e.aggregate("l", pipeline), bson.D{{Key: "_id", Value: 1}, {Key: "ids", Value: bson.A{2}}})
}

func TestTTL_Differs_WritesDoNotMatchExpired(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(2))
	e.alignSecond()
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "x"}, {Key: "old", Value: true}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "x"}})
	e.advance(2 * sec)
	c := e.coll("c")
	u, err := c.UpdateMany(e.ctx, bson.D{{Key: "k", Value: "x"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
	noErr(t, err, "updateMany")
	eq(t, "updateMany matched", u.MatchedCount, int64(0))
	d, err := c.DeleteMany(e.ctx, bson.D{})
	noErr(t, err, "deleteMany")
	eq(t, "deleteMany deleted", d.DeletedCount, int64(0))
	err = c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}).Err()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("findOneAndUpdate of an expired document: %v, want no document", err)
	}
	err = c.FindOneAndDelete(e.ctx, bson.D{{Key: "_id", Value: 2}}).Err()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("findOneAndDelete of an expired document: %v, want no document", err)
	}
	// An upsert inserts a new document in place of the expired one.
	u, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "new", Value: true}}}}, options.UpdateOne().SetUpsert(true))
	noErr(t, err, "upsert over an expired _id")
	eq(t, "upsert matched", u.MatchedCount, int64(0))
	eq(t, "upsert upserted", u.UpsertedCount, int64(1))
	eq(t, "upsertedID", u.UpsertedID, any(int32(1)))
	docsEq(t, e.find("c", nil), bson.D{{Key: "_id", Value: 1}, {Key: "new", Value: true}})
	// findAndModify upsert too.
	raw, err := c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "again", Value: true}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Raw()
	noErr(t, err, "findAndModify upsert over an expired _id")
	docEq(t, raw, bson.D{{Key: "_id", Value: 2}, {Key: "again", Value: true}})
}

func TestTTL_Differs_InsertOverExpiredID(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(1))
	e.alignSecond()
	e.insert("c", bson.D{{Key: "_id", Value: "k"}, {Key: "v", Value: 1}})
	_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: "k"}, {Key: "v", Value: 2}})
	wantCode(t, err, 11000, "")
	e.advance(sec)
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: "k"}, {Key: "v", Value: 3}})
	noErr(t, err, "insert with the _id of an expired document")
	docsEq(t, e.find("c", nil), bson.D{{Key: "_id", Value: "k"}, {Key: "v", Value: 3}})
}

func TestTTL_Differs_UniqueIndexIgnoresExpiredHolder(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(1))
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)})
	noErr(t, err, "unique index")
	e.alignSecond()
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a@x"}})
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a@x"}})
	wantCode(t, err, 11000, "")
	e.advance(sec)
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a@x"}})
	noErr(t, err, "insert a key held only by an expired document")
	// And an update to that key.
	e.insert("c", bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "b@x"}, {Key: "ttl", Value: -1}})
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a@x"}}}})
	wantCode(t, err, 11000, "")
	e.wantIDs("c", "after", 2, 3)
}

func TestTTL_Differs_StatsExcludeExpired(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.expiringSet(10) // 5 expire (odd), 5 stay
	before := e.run(bson.D{{Key: "dbStats", Value: 1}})
	eq(t, "dbStats.objects before", int64(num(t, before, "objects")), int64(10))
	cs := e.run(bson.D{{Key: "collStats", Value: "c"}})
	eq(t, "collStats.count before", int64(num(t, cs, "count")), int64(10))
	sizeBefore := num(t, cs, "size")
	dbSizeBefore := num(t, before, "dataSize")
	ldBefore := e.sizeOnDisk()

	e.advance(2 * sec)
	after := e.run(bson.D{{Key: "dbStats", Value: 1}})
	eq(t, "dbStats.objects after", int64(num(t, after, "objects")), int64(5))
	if num(t, after, "dataSize") >= dbSizeBefore {
		t.Fatalf("dbStats.dataSize %v did not shrink from %v", num(t, after, "dataSize"), dbSizeBefore)
	}
	cs = e.run(bson.D{{Key: "collStats", Value: "c"}})
	eq(t, "collStats.count after", int64(num(t, cs, "count")), int64(5))
	if num(t, cs, "size") >= sizeBefore {
		t.Fatalf("collStats.size %v did not shrink from %v", num(t, cs, "size"), sizeBefore)
	}
	st := e.aggregate("c", bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if len(st) != 1 {
		t.Fatalf("$collStats returned %d documents", len(st))
	}
	eq(t, "$collStats storageStats.count", int64(num(t, st[0], "storageStats.count")), int64(5))
	if ld := e.sizeOnDisk(); ld >= ldBefore {
		t.Fatalf("listDatabases sizeOnDisk %v did not shrink from %v", ld, ldBefore)
	}
}

func (e *env) sizeOnDisk() float64 {
	e.t.Helper()
	r := e.admin(bson.D{{Key: "listDatabases", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: e.db.Name()}}}})
	dbs, _ := val(e.t, r, "databases").Array().Values()
	if len(dbs) != 1 {
		e.t.Fatalf("listDatabases: %s", r)
	}
	return num(e.t, dbs[0].Document(), "sizeOnDisk")
}

// §6.5: an invisible document never becomes visible again.

func TestTTL_NoResurrection(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	mayflyOnly(t)
	t.Parallel()
	changes := []struct {
		name   string
		change func(e *env)
	}{
		{"RaiseDefaultTTL", func(e *env) { e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(1000)}) }},
		{"DefaultTTLToMinus1", func(e *env) { e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(-1)}) }},
		{"RemoveDefaultTTL", func(e *env) { e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(nil)}) }},
		{"RaiseViaTsIndexCollMod", func(e *env) {
			e.run(bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "expireAfterSeconds", Value: 1000}}}})
		}},
		{"DropTsIndex", func(e *env) { noErr(e.t, e.coll("c").Indexes().DropOne(e.ctx, "_ts_1"), "dropIndex _ts_1") }},
	}
	for _, ch := range changes {
		t.Run(ch.name, func(t *testing.T) {
			e := newClockEnv(t)
			e.create("c", dttl(-1))
			e.alignSecond()
			e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(2)})
			e.insert("c",
				bson.D{{Key: "_id", Value: 1}},                         // inherits 2
				bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 1}}, // own ttl 1
				bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: -1}},
				bson.D{{Key: "_id", Value: 4}, {Key: "ttl", Value: 100}},
			)
			e.advance(2 * sec)
			e.wantIDs("c", "expired under DefaultTTL 2", 3, 4)
			ch.change(e)
			e.wantIDs("c", "right after the change", 3, 4)
			e.advance(sec)
			e.wantIDs("c", "a second after the change", 3, 4)
			eq(t, "countDocuments", e.count("c", nil), int64(2))
		})
	}
}

func TestTTL_NoResurrectionWhenTheClockGoesBack(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	if !e.inProcess() {
		t.Skip("needs the in-process fake clock to move the server's time backwards")
	}
	e.create("c", dttl(2))
	e.insert("c", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 100}})
	start := e.now()
	e.advance(3 * sec)
	e.wantIDs("c", "after expiry", 2)
	e.tg.clock.Set(start.Add(-time.Hour)) // the host clock jumps back an hour
	e.wantIDs("c", "after the clock went back (spec §6.5: the expiry clock never runs backwards)", 2)
	eq(t, "countDocuments", e.count("c", nil), int64(1))
}

// §7: MongoDB TTL indexes on Date fields, with instant invisibility.

func TestTTLIndex_Differs_DateExpiredInvisibleImmediately(t *testing.T) {
	e := newClockEnv(t)
	mayflyOnly(t)
	e.alignSecond()
	now := e.now()
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(2)})
	noErr(t, err, "TTL index")
	half := 500 * time.Millisecond
	e.insert("c",
		bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: now.Add(-half)}},                                  // deadline now+1.5
		bson.D{{Key: "_id", Value: 2}, {Key: "at", Value: bson.A{now.Add(10 * sec), now.Add(-sec - half)}}}, // earliest: deadline now+0.5
		bson.D{{Key: "_id", Value: 3}, {Key: "at", Value: now.Add(-time.Hour).Format(time.RFC3339)}},        // a string never expires
		bson.D{{Key: "_id", Value: 4}}, // missing never expires
		bson.D{{Key: "_id", Value: 5}, {Key: "at", Value: bson.Timestamp{T: 1, I: 1}}}, // not a date
		bson.D{{Key: "_id", Value: 6}, {Key: "at", Value: now.Add(sec)}},               // deadline now+3
		bson.D{{Key: "_id", Value: 7}, {Key: "at", Value: bson.A{"x", 5}}},
	)
	e.advance(sec) // now+1
	e.wantIDs("c", "now+1s: earliest date of the array passed", 1, 3, 4, 5, 6, 7)
	e.advance(sec) // now+2
	e.wantIDs("c", "now+2s", 3, 4, 5, 6, 7)
	e.advance(e.forever())
	e.wantIDs("c", "much later: only dates expire", 3, 4, 5, 7)
	ix := e.index("c", "at_1")
	if ix == nil {
		t.Fatalf("listIndexes lacks at_1: %v", e.indexes("c"))
	}
	eq(t, "expireAfterSeconds", intOf(t, val(t, ix, "expireAfterSeconds"), "expireAfterSeconds"), int64(2))
}

func TestTTLIndex_PartialFilterExpression(t *testing.T) {
	e := newClockEnv(t)
	mayflyOnly(t)
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(1).SetPartialFilterExpression(bson.D{{Key: "kind", Value: "temp"}})})
	noErr(t, err, "partial TTL index")
	e.alignSecond()
	now := e.now()
	e.insert("c",
		bson.D{{Key: "_id", Value: 1}, {Key: "kind", Value: "temp"}, {Key: "at", Value: now.Add(-10 * sec)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "kind", Value: "keep"}, {Key: "at", Value: now.Add(-10 * sec)}},
	)
	e.advance(sec)
	e.wantIDs("c", "partial TTL index applies to temp only", 2)
}

func TestTTLIndex_CollModExpireAfterSeconds(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	e := newClockEnv(t)
	mayflyOnly(t)
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(2)})
	noErr(t, err, "TTL index")
	e.alignSecond()
	now := e.now()
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: now.Add(-500 * time.Millisecond)}})
	r := e.run(bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "expireAfterSeconds", Value: 100}}}})
	eq(t, "expireAfterSeconds_old", num(t, r, "expireAfterSeconds_old"), 2.0)
	eq(t, "expireAfterSeconds_new", num(t, r, "expireAfterSeconds_new"), 100.0)
	e.advance(3 * sec)
	e.wantIDs("c", "after raising expireAfterSeconds to 100", 1)
	ix := e.index("c", "at_1")
	eq(t, "listIndexes expireAfterSeconds", intOf(t, val(t, ix, "expireAfterSeconds"), "expireAfterSeconds"), int64(100))
	e.run(bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: 1}}}})
	e.wantIDs("c", "after lowering expireAfterSeconds to 1 (by index name)")
}

// Runs against mongod too: these are MongoDB's own validation errors.
func TestTTLIndex_ValidationErrors(t *testing.T) {
	e := newEnv(t)
	create := func(spec bson.D) error {
		return e.runErr(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{spec}}})
	}
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: -1}}), 67, "CannotCreateIndex")
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: int64(2147483648)}}), 67, "CannotCreateIndex")
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}, {Key: "b", Value: 1}}}, {Key: "name", Value: "at_1_b_1"}, {Key: "expireAfterSeconds", Value: 10}}), 67, "CannotCreateIndex")
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_1"}, {Key: "expireAfterSeconds", Value: 10}}), 197, "InvalidIndexSpecificationOption")
	// 0 and the maximum are fine.
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: 0}},
		bson.D{{Key: "key", Value: bson.D{{Key: "other", Value: -1}}}, {Key: "name", Value: "other_-1"}, {Key: "expireAfterSeconds", Value: int32(2147483647)}},
	}}})
	eq(t, "indexes", len(e.indexes("c")), 3)
}

func TestTTL_EarliestDeadlineWins(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(3))
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)})
	noErr(t, err, "TTL index")
	e.alignSecond()
	now := e.now()
	e.insert("c",
		bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: now.Add(1500 * time.Millisecond)}},                          // date first (now+1.5), DefaultTTL at now+3
		bson.D{{Key: "_id", Value: 2}, {Key: "at", Value: now.Add(time.Hour)}},                                        // DefaultTTL first
		bson.D{{Key: "_id", Value: 3}, {Key: "at", Value: now.Add(1500 * time.Millisecond)}, {Key: "ttl", Value: -1}}, // ttl -1 opts out of DefaultTTL only
		bson.D{{Key: "_id", Value: 4}, {Key: "ttl", Value: -1}},
	)
	e.advance(sec)
	e.wantIDs("c", "now+1", 1, 2, 3, 4)
	e.advance(sec)
	e.wantIDs("c", "now+2: the dates passed", 2, 4)
	e.advance(sec)
	e.wantIDs("c", "now+3: DefaultTTL passed", 4)
}

// §8 and §9: the reaper and what it reports.

func TestTTL_ReaperPhysicallyDeletesAndReports(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	mayflyOnly(t)
	e := newClockEnv(t)
	st := e.serverStatus()
	del0 := num(t, st, "metrics.ttl.deletedDocuments")
	passes0 := num(t, st, "metrics.ttl.passes")
	e.create("c", dttl(1))
	docs := []any{}
	for i := 1; i <= 20; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("p", 500)}})
	}
	e.insert("c", docs...)
	e.insert("c", bson.D{{Key: "_id", Value: 100}, {Key: "ttl", Value: -1}})
	e.advance(2 * sec)
	e.wantIDs("c", "expired at once", 100)
	waitFor(t, e.serverStatusWait(), "serverStatus.metrics.ttl.deletedDocuments to grow by 20", func() bool {
		return num(t, e.serverStatus(), "metrics.ttl.deletedDocuments") >= del0+20
	})
	st = e.serverStatus()
	if num(t, st, "metrics.ttl.passes") <= passes0 {
		t.Fatalf("metrics.ttl.passes did not grow: %v", num(t, st, "metrics.ttl.passes"))
	}
	// collStats: the collection's setting, no backlog left, and what was purged.
	waitFor(t, e.serverStatusWait(), "collStats ttl.expiredBacklog to reach 0", func() bool {
		return num(t, e.run(bson.D{{Key: "collStats", Value: "c"}}), "ttl.expiredBacklog") == 0
	})
	cs := e.run(bson.D{{Key: "collStats", Value: "c"}})
	eq(t, "collStats ttl.defaultTimeToLive", intOf(t, val(t, cs, "ttl.defaultTimeToLive"), "defaultTimeToLive"), int64(1))
	eq(t, "collStats ttl.deletedDocuments", num(t, cs, "ttl.deletedDocuments"), 20.0)
	eq(t, "collStats count", num(t, cs, "count"), 1.0)
	// The live document survived every pass.
	e.wantIDs("c", "after the reaper", 100)
}

func TestTTL_ServerStatusSections(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	mayflyOnly(t)
	e := newEnv(t)
	st := e.serverStatus()
	for _, f := range []string{"metrics.ttl.deletedDocuments", "metrics.ttl.passes"} {
		num(t, st, f)
	}
	// mayfly's own section (spec §9): backlog, lag of the oldest, purge rate, bytes reclaimed.
	if v := val(t, st, "ttl"); v.Type != bson.TypeEmbeddedDocument {
		t.Fatalf("serverStatus.ttl is %s, want a document", v.Type)
	}
	for _, f := range []string{"expiredBacklog", "expiredBacklogBytes", "oldestExpiredLagSeconds", "purgeRatePerSecond", "reclaimedBytes", "deletedDocuments", "passes"} {
		num(t, st, "ttl."+f)
	}
	if v := val(t, st, "ttl.lastPassStart"); v.Type != bson.TypeDateTime && v.Type != bson.TypeNull {
		t.Fatalf("serverStatus.ttl.lastPassStart is %s, want a date (or null before the first pass)", v.Type)
	}
	// collStats of a collection with TTL off still has the section, with a null setting.
	e.create("plain")
	cs := e.run(bson.D{{Key: "collStats", Value: "plain"}})
	if v := val(t, cs, "ttl.defaultTimeToLive"); v.Type != bson.TypeNull {
		t.Fatalf("collStats ttl.defaultTimeToLive with TTL off is %s, want null", v)
	}
	num(t, cs, "ttl.expiredBacklog")
}
