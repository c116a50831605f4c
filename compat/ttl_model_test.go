package compat

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ttl-spec.md §2: the expiry rule, and the seeds' matrix cell by cell.

func TestTTL_Matrix(t *testing.T) {
	mayflyOnly(t)
	t.Parallel()
	type cell struct {
		name        string
		defaultTTL  any // omit when noDefault
		noDefault   bool
		docTTL      any // omit when noTTL
		noTTL       bool
		expireAfter int // seconds; 0 = never
	}
	cells := []cell{
		{name: "DefaultMissing_TTLMissing_Never", noDefault: true, noTTL: true},
		{name: "DefaultMissing_TTLMinus1_Never", noDefault: true, docTTL: -1},
		{name: "DefaultMissing_TTL1_NeverPlainData", noDefault: true, docTTL: 1},
		{name: "DefaultMinus1_TTLMissing_Never", defaultTTL: -1, noTTL: true},
		{name: "DefaultMinus1_TTLMinus1_Never", defaultTTL: -1, docTTL: -1},
		{name: "DefaultMinus1_TTL2_ExpiresAfter2", defaultTTL: -1, docTTL: 2, expireAfter: 2},
		{name: "Default2_TTLMissing_ExpiresAfter2", defaultTTL: 2, noTTL: true, expireAfter: 2},
		{name: "Default1_TTLMinus1_Never", defaultTTL: 1, docTTL: -1},
		{name: "Default1_TTL3_DocumentTTLWinsWhenLonger", defaultTTL: 1, docTTL: 3, expireAfter: 3},
		{name: "Default3_TTL1_DocumentTTLWinsWhenShorter", defaultTTL: 3, docTTL: 1, expireAfter: 1},
	}
	for _, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			e := newClockEnv(t)
			if c.noDefault {
				e.create("c")
			} else {
				e.create("c", dttl(c.defaultTTL))
			}
			doc := bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "x"}}
			if !c.noTTL {
				doc = append(doc, bson.E{Key: "ttl", Value: c.docTTL})
			}
			e.alignSecond()
			e.insert("c", doc)
			e.wantVisible("c", 1, true, "just inserted")
			if c.expireAfter == 0 {
				e.advance(e.forever())
				e.wantVisible("c", 1, true, "long after (never expires)")
				return
			}
			e.advance(time.Duration(c.expireAfter-1) * sec)
			e.wantVisible("c", 1, true, "one second before expiry")
			e.advance(sec)
			e.wantVisible("c", 1, false, "at _ts + ttl")
			e.wantIDs("c", "after expiry")
		})
	}
}

func TestTTL_ExpiryBoundaryIsTsPlusTTLLessOrEqualNow(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	if !e.inProcess() {
		t.Skip("needs the in-process fake clock to stand exactly on a second boundary; the real-clock cells of TestTTL_Matrix cover expiry with MAYFLY_URI")
	}
	e.create("c", dttl(2))
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	e.advance(2*sec - time.Nanosecond) // _ts + 1.999999999: whole seconds say _ts+1
	e.wantVisible("c", 1, true, "a nanosecond before _ts+2")
	e.advance(time.Nanosecond)
	e.wantVisible("c", 1, false, "exactly _ts+2 (expired when _ts + ttl <= now)")
}

// §3: the three equivalent ways to set DefaultTTL.

func TestTTL_SetDefaultTTL_ViaCreate(t *testing.T) {
	mayflyOnly(t)
	e := newEnv(t)
	e.create("n", dttl(5))
	e.wantDefaultTTL("n", 5)
	e.create("m", dttl(-1))
	e.wantDefaultTTL("m", -1)
	e.create("big", dttl(int64(2147483647)))
	e.wantDefaultTTL("big", 2147483647)
	e.create("null", dttl(nil))
	e.wantDefaultTTL("null", nil)
	e.create("absent")
	e.wantDefaultTTL("absent", nil)
}

func TestTTL_SetDefaultTTL_ViaCollMod(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c")
	e.wantDefaultTTL("c", nil)
	e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(2)})
	e.wantDefaultTTL("c", 2)
	e.alignSecond()
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	e.advance(sec)
	e.wantVisible("c", 1, true, "1 s into DefaultTTL 2")
	e.advance(sec)
	e.wantVisible("c", 1, false, "2 s into DefaultTTL 2")

	e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(-1)})
	e.wantDefaultTTL("c", -1)
	e.insert("c", bson.D{{Key: "_id", Value: 2}})
	e.advance(e.forever())
	e.wantVisible("c", 2, true, "DefaultTTL -1")

	e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(nil)})
	e.wantDefaultTTL("c", nil)
	// With TTL off, ttl is plain data.
	e.insert("c", bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: 1}})
	e.advance(e.forever())
	e.wantIDs("c", "TTL off", 2, 3)
}

func TestTTL_SetDefaultTTL_ViaTsIndex_CosmosConvention(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c")
	name, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "_ts", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(2)})
	noErr(t, err, "createIndex {_ts:1} expireAfterSeconds 2")
	eq(t, "index name", name, "_ts_1")
	e.wantDefaultTTL("c", 2)
	e.alignSecond()
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	e.advance(sec)
	e.wantVisible("c", 1, true, "1 s into _ts index TTL 2")
	e.advance(sec)
	e.wantVisible("c", 1, false, "2 s into _ts index TTL 2")

	e.run(bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "expireAfterSeconds", Value: 10}}}})
	e.wantDefaultTTL("c", 10)
	e.run(bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "expireAfterSeconds", Value: -1}}}})
	e.wantDefaultTTL("c", -1)

	noErr(t, e.coll("c").Indexes().DropOne(e.ctx, "_ts_1"), "dropIndex _ts_1")
	e.wantDefaultTTL("c", nil)

	// -1 through createIndexes too.
	_, err = e.coll("d").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "_ts", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(-1)})
	noErr(t, err, "createIndex {_ts:1} expireAfterSeconds -1")
	e.wantDefaultTTL("d", -1)
	// create with defaultTimeToLive shows the _ts_1 index.
	e.create("e", dttl(7))
	e.wantDefaultTTL("e", 7)
}

func TestTTL_SetDefaultTTL_InvalidValuesRefusedNothingChanges(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	mayflyOnly(t)
	e := newEnv(t)
	invalid := []any{0, 1.5, -2, int64(2147483648), "10", true, bson.D{}}
	e.create("on", dttl(5))
	e.create("plain")
	for _, v := range invalid {
		what := ejson(v)
		err := e.runErr(bson.D{{Key: "create", Value: "bad"}, dttl(v)})
		wantCode(t, err, 2, "BadValue")
		if e.collSpec("bad") != nil {
			t.Fatalf("create with defaultTimeToLive %s was refused but created the collection", what)
		}
		err = e.runErr(bson.D{{Key: "collMod", Value: "on"}, dttl(v)})
		wantCode(t, err, 2, "BadValue")
		e.wantDefaultTTL("on", 5)
		err = e.runErr(bson.D{{Key: "createIndexes", Value: "plain"}, {Key: "indexes", Value: bson.A{
			bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "_ts_1"}, {Key: "expireAfterSeconds", Value: v}},
		}}})
		wantCode(t, err, 2, "BadValue")
		e.wantDefaultTTL("plain", nil)
		err = e.runErr(bson.D{{Key: "collMod", Value: "on"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "expireAfterSeconds", Value: v}}}})
		wantCode(t, err, 2, "BadValue")
		e.wantDefaultTTL("on", 5)
	}
	// The message is clear: it names the valid range.
	err := e.runErr(bson.D{{Key: "create", Value: "bad"}, dttl(0)})
	if msg := errMsg(err); !strings.Contains(msg, "2147483647") || !strings.Contains(msg, "-1") {
		t.Fatalf("error message %q should name the valid values (-1, 1..2147483647)", msg)
	}
}

// §4: the document's ttl.

var invalidDocTTLs = []any{nil, 0, 1.5, -2, int64(2147483648), "10", bson.D{}, false, bson.NewDecimal128(0x3040000000000000, 0)}

func TestTTL_DocTTL_InvalidRefusedWhileOn(t *testing.T) {
	mayflyOnly(t)
	e := newEnv(t)
	e.create("c", dttl(-1))
	e.insert("c", bson.D{{Key: "_id", Value: "keep"}, {Key: "ttl", Value: 100}})
	for i, v := range invalidDocTTLs {
		what := ejson(v)
		_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}, {Key: "ttl", Value: v}})
		wantCode(t, err, 2, "")
		if msg := errMsg(err); !strings.Contains(msg, "ttl") || !strings.Contains(msg, "2147483647") {
			t.Fatalf("insert ttl %s: message %q should name ttl and the valid range", what, msg)
		}
		_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: "keep"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "ttl", Value: v}}}})
		wantCode(t, err, 2, "")
		_, err = e.coll("c").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: "keep"}}, bson.D{{Key: "ttl", Value: v}})
		wantCode(t, err, 2, "")
		_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: "new"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "ttl", Value: v}}}}, options.UpdateOne().SetUpsert(true))
		wantCode(t, err, 2, "")
		err = e.coll("c").FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: "keep"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "ttl", Value: v}}}}).Err()
		wantCode(t, err, 2, "")
	}
	// $inc that makes ttl 0 is refused too (the resulting document counts).
	_, err := e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: "keep"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "ttl", Value: -100}}}})
	wantCode(t, err, 2, "")
	// Nothing was written.
	docsEq(t, e.find("c", nil), bson.D{{Key: "_id", Value: "keep"}, {Key: "ttl", Value: 100}})

	// insertMany, ordered: the first document goes in, the bad one stops the batch.
	_, err = e.coll("c").InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: "a"}, {Key: "ttl", Value: 5}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "ttl", Value: 0}},
		bson.D{{Key: "_id", Value: "c"}, {Key: "ttl", Value: 5}},
	})
	var bwe mongo.BulkWriteException
	if !asBulk(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 || bwe.WriteErrors[0].Code != 2 {
		t.Fatalf("insertMany with a bad ttl in the middle: %v, want one write error at index 1 with code 2", err)
	}
	eq(t, "documents after the refused batch", e.count("c", nil), int64(2))
}

func TestTTL_DocTTL_ValidNumericTypesExpire(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(-1))
	dec, _ := bson.ParseDecimal128("2")
	vals := []any{int32(2), int64(2), 2.0, dec}
	e.alignSecond()
	for i, v := range vals {
		_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}, {Key: "ttl", Value: v}})
		noErr(t, err, "insert ttl "+ejson(v))
	}
	for i, v := range vals {
		raw, err := e.coll("c").FindOne(e.ctx, bson.D{{Key: "_id", Value: i}}).Raw()
		noErr(t, err, "findOne")
		docEq(t, raw, bson.D{{Key: "_id", Value: i}, {Key: "ttl", Value: v}})
	}
	e.advance(sec)
	e.wantIDs("c", "1 s into ttl 2", 0, 1, 2, 3)
	e.advance(sec)
	e.wantIDs("c", "2 s into ttl 2")
}

func TestTTL_DocTTL_PlainDataWhileOff(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c")
	want := []bson.D{}
	for i, v := range invalidDocTTLs {
		d := bson.D{{Key: "_id", Value: i}, {Key: "ttl", Value: v}}
		_, err := e.coll("c").InsertOne(e.ctx, d)
		noErr(t, err, "insert ttl "+ejson(v)+" with TTL off")
		want = append(want, d)
	}
	e.insert("c", bson.D{{Key: "_id", Value: 100}, {Key: "ttl", Value: 1}})
	want = append(want, bson.D{{Key: "_id", Value: 100}, {Key: "ttl", Value: 1}})
	e.advance(e.forever())
	docsEq(t, e.find("c", nil, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), want...)
	// Updates to invalid values are fine too.
	_, err := e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 100}}, bson.D{{Key: "$set", Value: bson.D{{Key: "ttl", Value: "ten"}}}})
	noErr(t, err, "$set ttl string with TTL off")
}

func TestTTL_DocTTL_InvalidStoredWhileOffCountsAsAbsent(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c")
	e.alignSecond()
	e.insert("c",
		bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: "10"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 0}},
		bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: 1.5}},
		bson.D{{Key: "_id", Value: 4}, {Key: "ttl", Value: 10}},
		bson.D{{Key: "_id", Value: 5}, {Key: "ttl", Value: -1}},
	)
	e.run(bson.D{{Key: "collMod", Value: "c"}, dttl(2)})
	e.advance(sec)
	e.wantIDs("c", "1 s after TTL on", 1, 2, 3, 4, 5)
	e.advance(sec)
	e.wantIDs("c", "2 s after TTL on: invalid ttl inherits DefaultTTL 2", 4, 5)
}

func TestTTL_DocTTL_UnsetReinheritsDefault(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(2))
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: -1}}, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: -1}}, bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: -1}})
	e.advance(e.forever())
	e.wantIDs("c", "ttl -1 never expires", 1, 2, 3)
	e.alignSecond()
	_, err := e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "ttl", Value: 1}}}})
	noErr(t, err, "$unset ttl")
	_, err = e.coll("c").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "v", Value: "no ttl"}})
	noErr(t, err, "replace without ttl")
	e.advance(sec)
	e.wantIDs("c", "1 s after losing ttl", 1, 2, 3)
	e.advance(sec)
	e.wantIDs("c", "2 s after losing ttl: DefaultTTL 2 applies", 3)
}

// §5: _ts.

func TestTTL_Differs_TSSetOnEveryWriteEvenNoOps(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	c := e.coll("c")
	step := func() time.Time { e.advance(1100 * time.Millisecond); return e.now() }

	before := e.now()
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	last := e.wantTS("c", 1, before, "insert")

	before = step()
	r, err := c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}})
	noErr(t, err, "no-op $set")
	eq(t, "no-op update nModified (user-visible changes only)", r.ModifiedCount, int64(0))
	eq(t, "no-op update matched", r.MatchedCount, int64(1))
	last = wantLater(t, e.wantTS("c", 1, before, "no-op update"), last)

	before = step()
	// With _id, so that mongod too counts it a no-op (issue 12 item 4).
	r, err = c.ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	noErr(t, err, "identical replace")
	eq(t, "identical replace nModified", r.ModifiedCount, int64(0))
	last = wantLater(t, e.wantTS("c", 1, before, "identical replace"), last)

	before = step()
	r, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	noErr(t, err, "upsert matching")
	eq(t, "upsert matching upserted", r.UpsertedCount, int64(0))
	last = wantLater(t, e.wantTS("c", 1, before, "upsert that matched"), last)

	before = step()
	noErr(t, c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}).Err(), "findAndModify")
	last = wantLater(t, e.wantTS("c", 1, before, "findAndModify update"), last)

	before = step()
	noErr(t, c.FindOneAndReplace(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "a", Value: 1}}).Err(), "findAndModify replace")
	wantLater(t, e.wantTS("c", 1, before, "findAndModify replace"), last)

	before = step()
	r, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}}, options.UpdateOne().SetUpsert(true))
	noErr(t, err, "upsert inserting")
	eq(t, "upserted", r.UpsertedCount, int64(1))
	e.wantTS("c", 2, before, "upsert that inserted")
}

func wantLater(t *testing.T, got, prev int64) int64 {
	t.Helper()
	if got <= prev {
		t.Fatalf("_ts %d did not move past the previous %d", got, prev)
	}
	return got
}

func TestTTL_NoOpWriteExtendsLife(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(2))
	e.alignSecond()
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	e.advance(sec)
	r, err := e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}})
	noErr(t, err, "no-op update")
	eq(t, "nModified", r.ModifiedCount, int64(0))
	e.advance(sec)
	e.wantVisible("c", 1, true, "2 s after insert but 1 s after the no-op update")
	e.advance(sec)
	e.wantVisible("c", 1, false, "2 s after the no-op update")
}

func TestTTL_Differs_TSHiddenUnlessProjected(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "first"}})
	e.advance(2 * sec)
	mid := e.now().Unix()
	e.advance(2 * sec)
	e.insert("c", bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: "second"}})

	// Not returned by plain reads, exclusion projections, aggregation or findAndModify.
	docsEq(t, e.find("c", nil, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})),
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "first"}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: "second"}})
	docsEq(t, e.find("c", bson.D{{Key: "_id", Value: 1}}, options.Find().SetProjection(bson.D{{Key: "a", Value: 0}})), bson.D{{Key: "_id", Value: 1}})
	docsEq(t, e.aggregate("c", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 1}}}}}), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "first"}})
	raw, err := e.coll("c").FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}, options.FindOneAndUpdate().SetReturnDocument(options.After)).Raw()
	noErr(t, err, "findOneAndUpdate")
	docEq(t, raw, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "first"}, {Key: "b", Value: 1}})
	// That update moved doc 1's _ts to now: put it back in the past order by re-writing doc 2 later.
	e.advance(2 * sec)
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 2}}}})
	noErr(t, err, "touch doc 2")
	ts1, ts2 := e.ts("c", 1), e.ts("c", 2)
	if !(ts1 < ts2 && ts1 > mid) {
		t.Fatalf("_ts 1=%d 2=%d mid=%d: want mid < ts1 < ts2", ts1, ts2, mid)
	}

	// Projection names it: returned, as an int64.
	docs := e.find("c", bson.D{{Key: "_id", Value: 1}}, options.Find().SetProjection(bson.D{{Key: "_ts", Value: 1}}))
	docsEq(t, docs, bson.D{{Key: "_id", Value: 1}, {Key: "_ts", Value: ts1}})
	docs = e.find("c", bson.D{{Key: "_id", Value: 1}}, options.Find().SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "_ts", Value: 1}, {Key: "_id", Value: 0}}))
	if len(docs) != 1 || val(t, docs[0], "_ts").Int64() != ts1 || val(t, docs[0], "a").StringValue() != "first" || has(docs[0], "_id") {
		t.Fatalf("projection {a:1,_ts:1,_id:0}: %v", docs)
	}
	// Filter and sort on it, in find and in pipelines.
	strsEq(t, "filter _ts >= ts2", idsOf(e.find("c", bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: ts2}}}})), idList(2))
	strsEq(t, "sort _ts desc", idsOf(e.find("c", nil, options.Find().SetSort(bson.D{{Key: "_ts", Value: -1}}))), idList(2, 1))
	strsEq(t, "sort _ts asc", idsOf(e.find("c", nil, options.Find().SetSort(bson.D{{Key: "_ts", Value: 1}}))), idList(1, 2))
	got := e.aggregate("c", bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$gt", Value: mid}}}}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "_ts", Value: -1}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "_ts", Value: 1}}}},
	})
	docsEq(t, got, bson.D{{Key: "_id", Value: 2}, {Key: "_ts", Value: ts2}}, bson.D{{Key: "_id", Value: 1}, {Key: "_ts", Value: ts1}})
	n, err := e.coll("c").CountDocuments(e.ctx, bson.D{{Key: "_ts", Value: bson.D{{Key: "$lt", Value: mid}}}})
	noErr(t, err, "count by _ts")
	eq(t, "count _ts < mid", n, int64(0))
}

func idsOf(docs []bson.Raw) []string {
	out := []string{}
	for _, d := range docs {
		out = append(out, d.Lookup("_id").String())
	}
	return out
}

func TestTTL_Differs_ClientCannotSetTS(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	c := e.coll("c")
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	_, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}, {Key: "_ts", Value: int64(5)}})
	wantCode(t, err, 2, "")
	_, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_ts", Value: int64(5)}}}})
	wantCode(t, err, 2, "")
	_, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "_ts", Value: 1}}}})
	wantCode(t, err, 2, "")
	_, err = c.ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_ts", Value: int64(5)}})
	wantCode(t, err, 2, "")
	err = c.FindOneAndReplace(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_ts", Value: int64(5)}}).Err()
	wantCode(t, err, 2, "")
	eq(t, "documents", e.count("c", nil), int64(1))

	// An upsert whose filter names _ts does not copy it.
	before := e.now()
	r, err := c.UpdateOne(e.ctx, bson.D{{Key: "k", Value: "u"}, {Key: "_ts", Value: int64(5)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	noErr(t, err, "upsert with _ts in the filter")
	eq(t, "upserted", r.UpsertedCount, int64(1))
	e.wantTS("c", r.UpsertedID, before, "upserted document")
	raw, err := c.FindOne(e.ctx, bson.D{{Key: "k", Value: "u"}}).Raw()
	noErr(t, err, "find upserted")
	docEq(t, raw, bson.D{{Key: "_id", Value: r.UpsertedID}, {Key: "k", Value: "u"}, {Key: "x", Value: 1}})
}
