package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func ids(docs []bson.D) []any {
	var out []any
	for _, d := range docs {
		out = append(out, d[0].Value)
	}
	return out
}

func sameIDs(t *testing.T, got []bson.D, want ...any) {
	t.Helper()
	g := ids(got)
	if fmt.Sprintf("%v", g) != fmt.Sprintf("%v", []any(want)) && !(len(g) == 0 && len(want) == 0) {
		t.Fatalf("ids = %v, want %v", g, want)
	}
}

// TestTTLMatrix checks the seeds' 3×3 matrix cell by cell (spec §2.4):
// DefaultTTL missing / -1 / 10 × document ttl missing / -1 / 5.
func TestTTLMatrix(t *testing.T) {
	ts := startServer(t)
	db := ts.db("matrix")
	type cell struct {
		def       any // nil = missing
		doc       any // nil = missing
		expiresAt int // seconds after insert, 0 = never
	}
	cells := []cell{
		{nil, nil, 0}, {nil, -1, 0}, {nil, 5, 0},
		{-1, nil, 0}, {-1, -1, 0}, {-1, 5, 5},
		{10, nil, 10}, {10, -1, 0}, {10, 5, 5},
	}
	for i, c := range cells {
		name := fmt.Sprintf("c%d", i)
		cmd := bson.D{{Key: "create", Value: name}}
		if c.def != nil {
			cmd = append(cmd, bson.E{Key: "defaultTimeToLive", Value: c.def})
		}
		ts.run(t, "matrix", cmd)
		d := bson.D{{Key: "_id", Value: i}}
		if c.doc != nil {
			d = append(d, bson.E{Key: "ttl", Value: c.doc})
		}
		if _, err := db.Collection(name).InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for sec := 0; sec <= 12; sec++ {
		for i, c := range cells {
			n := len(findAll(t, db.Collection(fmt.Sprintf("c%d", i)), bson.D{}))
			want := 1
			if c.expiresAt > 0 && sec >= c.expiresAt {
				want = 0
			}
			if n != want {
				t.Fatalf("cell %d (default %v, ttl %v) at +%ds: %d docs, want %d", i, c.def, c.doc, sec, n, want)
			}
		}
		ts.clock.Advance(time.Second)
	}
}

func TestTTL_Differs_ExpiredInvisibleEverywhereImmediately(t *testing.T) {
	ts := startServer(t)
	db := ts.db("inv")
	ts.run(t, "inv", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 10}})
	c := db.Collection("c")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}, {Key: "g", Value: 1}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "b"}, {Key: "g", Value: 1}, {Key: "ttl", Value: 100}})
	ts.clock.Advance(10 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(2))
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: "a"}}))
	sameIDs(t, findAll(t, c, bson.D{{Key: "_id", Value: 1}}))
	if n := ts.run(t, "inv", bson.D{{Key: "count", Value: "c"}}); n[0].Value != int32(1) {
		t.Fatalf("count %v", n)
	}
	vals := ts.run(t, "inv", bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "k"}})
	if fmt.Sprint(vals[0].Value) != "[b]" {
		t.Fatalf("distinct %v", vals)
	}
	r, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	if err != nil || r.MatchedCount != 0 {
		t.Fatalf("update matched an expired doc: %v %v", r, err)
	}
	dr, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if err != nil || dr.DeletedCount != 0 {
		t.Fatalf("delete matched an expired doc: %v %v", dr, err)
	}
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}).Err(); err != mongo.ErrNoDocuments {
		t.Fatalf("findAndModify found an expired doc: %v", err)
	}
	// unique index ignores the expired holder of "a"; insert over the expired _id works
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}}); err != nil {
		t.Fatalf("insert over expired _id / unique key: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: "a"}}), int32(1))
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "a"}}); cmdErr(t, err).Code != 11000 {
		t.Fatalf("live unique holder must still conflict")
	}
	// upsert over an expired _id inserts a fresh document
	ts.clock.Advance(10 * time.Second)
	ur, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "fresh", Value: true}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil || ur.UpsertedCount != 1 {
		t.Fatalf("upsert over expired: %v %v", ur, err)
	}
	var got bson.D
	c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got)
	if len(got) != 2 {
		t.Fatalf("upsert resurrected old fields: %v", got)
	}
	st := ts.run(t, "inv", bson.D{{Key: "collStats", Value: "c"}})
	mm := m(st)
	if mm["count"] != int64(2) {
		t.Fatalf("collStats count %v", mm["count"])
	}
}

func TestTTLCursorOpenedBeforeExpiry(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "cur", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 100}})
	c := ts.db("cur").Collection("c")
	var docs []any
	for i := 0; i < 20; i++ {
		d := bson.D{{Key: "_id", Value: i}}
		if i >= 10 {
			d = append(d, bson.E{Key: "ttl", Value: 5})
		}
		docs = append(docs, d)
	}
	c.InsertMany(ctx, docs)
	// The sorted case (a blocking sort's buffered results) is covered by
	// TestReviewSortedCursor* in ttl_review_test.go.
	for _, sorted := range []bool{false} {
		opts := options.Find().SetBatchSize(5)
		if sorted {
			opts.SetSort(bson.D{{Key: "_id", Value: -1}})
		}
		cur, err := c.Find(ctx, bson.D{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for cur.Next(ctx) {
			n++
			if n == 3 {
				ts.clock.Advance(5 * time.Second) // ids 10..19 expire now
			}
		}
		cur.Close(ctx)
		if sorted && n != 5 {
			// first batch 19..15 (all later ones expired)
			t.Fatalf("sorted: got %d docs, want 5", n)
		}
		if !sorted && n != 10 {
			t.Fatalf("unsorted: got %d docs, want 10", n)
		}
		ts.clock.Set(t0)
		// documents that already expired stay expired: the clock never runs backwards
		if n := len(findAll(t, c, bson.D{})); n != 10 {
			t.Fatalf("after clock moved back: %d", n)
		}
	}
}

func TestTSHiddenProjectableFilterable(t *testing.T) {
	ts := startServer(t)
	c := ts.db("ts").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	ts.clock.Advance(5 * time.Second)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	d := findAll(t, c, bson.D{{Key: "_id", Value: 1}})
	if len(d[0]) != 1 {
		t.Fatalf("_ts not hidden: %v", d)
	}
	d = findAll(t, c, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_ts", Value: 1}}).SetSort(bson.D{{Key: "_ts", Value: -1}}))
	if d[0][0].Value != int32(2) || d[0][1].Key != "_ts" || d[0][1].Value != t0.Unix()+5 {
		t.Fatalf("projection/sort on _ts: %v", d)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "_ts", Value: bson.D{{Key: "$lt", Value: t0.Unix() + 5}}}}), int32(1))
	// clients cannot set _ts
	_, err := c.InsertOne(ctx, bson.D{{Key: "_ts", Value: 5}})
	if cmdErr(t, err).Code != 2 {
		t.Fatal("client _ts accepted")
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_ts", Value: 5}}}})
	if cmdErr(t, err).Code != 2 {
		t.Fatal("client _ts accepted by update")
	}
	// a no-op write bumps _ts
	ts.clock.Advance(7 * time.Second)
	r, _ := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{}}})
	_ = r
	c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "nothing", Value: 1}}}})
	d = findAll(t, c, bson.D{{Key: "_id", Value: 1}}, options.Find().SetProjection(bson.D{{Key: "_ts", Value: 1}}))
	if d[0][1].Value != t0.Unix()+12 {
		t.Fatalf("no-op update did not bump _ts: %v", d)
	}
}

func TestDocTTLValidation(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "v", bson.D{{Key: "create", Value: "on"}, {Key: "defaultTimeToLive", Value: -1}})
	on := ts.db("v").Collection("on")
	off := ts.db("v").Collection("off")
	bad := []any{nil, 0, 1.5, -2, int64(2147483648), "10"}
	for _, v := range bad {
		_, err := on.InsertOne(ctx, bson.D{{Key: "ttl", Value: v}})
		if cmdErr(t, err).Code != 2 {
			t.Fatalf("ttl %v accepted with TTL on", v)
		}
		if _, err := off.InsertOne(ctx, bson.D{{Key: "ttl", Value: v}}); err != nil {
			t.Fatalf("ttl %v refused with TTL off: %v", v, err)
		}
	}
	for _, v := range []any{-1, 1, int64(2147483647), 3.0, bson.NewDecimal128(0x3040000000000000, 7)} {
		if _, err := on.InsertOne(ctx, bson.D{{Key: "ttl", Value: v}}); err != nil {
			t.Fatalf("valid ttl %v refused: %v", v, err)
		}
	}
	for _, v := range []any{0, 1.5, -2, "x", nil, int64(1) << 40} {
		err := ts.db("v").RunCommand(ctx, bson.D{{Key: "collMod", Value: "on"}, {Key: "defaultTimeToLive", Value: v}}).Err()
		if v == nil {
			if err != nil {
				t.Fatalf("null must turn TTL off: %v", err)
			}
			continue
		}
		if cmdErr(t, err).Code != 2 {
			t.Fatalf("defaultTimeToLive %v accepted", v)
		}
	}
}

func TestDefaultTTLViewsAgree(t *testing.T) {
	ts := startServer(t)
	db := ts.db("views")
	c := db.Collection("c")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "_ts", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(30)}); err != nil {
		t.Fatal(err)
	}
	check := func(want any) {
		t.Helper()
		specs, _ := c.Indexes().ListSpecifications(ctx)
		var idx any
		for _, s := range specs {
			if s.Name == "_ts_1" {
				idx = *s.ExpireAfterSeconds
			}
		}
		colls, _ := db.ListCollections(ctx, bson.D{{Key: "name", Value: "c"}})
		var infos []bson.D
		colls.All(ctx, &infos)
		opts := m(m(infos[0])["options"])
		got := opts["defaultTimeToLive"]
		if fmt.Sprint(idx) != fmt.Sprint(want) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("index %v, options %v, want %v", idx, got, want)
		}
	}
	check(30)
	ts.run(t, "views", bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "expireAfterSeconds", Value: 60}}}})
	check(60)
	ts.run(t, "views", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: 90}})
	check(90)
	if err := c.Indexes().DropOne(ctx, "_ts_1"); err != nil {
		t.Fatal(err)
	}
	check(nil)
}

func TestNoResurrection(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "res", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 10}})
	c := ts.db("res").Collection("c")
	c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 20}}})
	ts.clock.Advance(10 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(2))
	ts.run(t, "res", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: 1000}})
	sameIDs(t, findAll(t, c, bson.D{}), int32(2))
	ts.clock.Advance(10 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}))
	ts.run(t, "res", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: nil}})
	sameIDs(t, findAll(t, c, bson.D{}))
	// TTL off: a document's own ttl is not interpreted
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: 1}})
	ts.clock.Advance(100 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(3))
}

func TestWriteExtendsLifeAndUnsetReinherits(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "ext", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 10}})
	c := ts.db("ext").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: -1}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	ts.clock.Advance(8 * time.Second)
	c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "touched", Value: true}}}})
	ts.clock.Advance(8 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(1), int32(2))
	c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "ttl", Value: 1}}}})
	ts.clock.Advance(10 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}))
}

func TestMongoTTLIndex(t *testing.T) {
	ts := startServer(t)
	c := ts.db("mi").Collection("c")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(60)}); err != nil {
		t.Fatal(err)
	}
	now := bson.NewDateTimeFromTime(t0)
	later := bson.NewDateTimeFromTime(t0.Add(time.Hour))
	c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: now}},
		bson.D{{Key: "_id", Value: 2}, {Key: "at", Value: bson.A{later, now}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "at", Value: "not a date"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "at", Value: later}},
	})
	ts.clock.Advance(59 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(1), int32(2), int32(3), int32(4))
	ts.clock.Advance(time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(3), int32(4))
	n, err := ts.e.RunTTLPass(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("reaper deleted %d, %v", n, err)
	}
	_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(1)})
	if cmdErr(t, err).Code != 67 {
		t.Fatalf("compound TTL index accepted")
	}
}

func TestReaperDeletesPhysically(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "reap", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 5}})
	c := ts.db("reap").Collection("c")
	c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}})
	var docs []any
	for i := 0; i < 3000; i++ {
		d := bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i % 10}}
		if i%3 == 0 {
			d = append(d, bson.E{Key: "ttl", Value: -1})
		}
		docs = append(docs, d)
	}
	c.InsertMany(ctx, docs)
	ts.clock.Advance(5 * time.Second)
	st := m(ts.run(t, "reap", bson.D{{Key: "collStats", Value: "c"}}))
	if st["count"] != int64(1000) || m(st["ttl"])["expiredBacklog"] != int64(2000) {
		t.Fatalf("before pass: %v", st)
	}
	n, err := ts.e.RunTTLPass(ctx)
	if err != nil || n != 2000 {
		t.Fatalf("pass deleted %d %v", n, err)
	}
	st = m(ts.run(t, "reap", bson.D{{Key: "collStats", Value: "c"}}))
	if st["count"] != int64(1000) || m(st["ttl"])["expiredBacklog"] != int64(0) {
		t.Fatalf("after pass: %v", st)
	}
	if got := len(findAll(t, c, bson.D{{Key: "v", Value: 3}})); got != 100 {
		t.Fatalf("index scan after reaping: %d", got)
	}
	ss := m(ts.run(t, "admin", bson.D{{Key: "serverStatus", Value: 1}}))
	mt := m(m(ss["metrics"])["ttl"])
	if mt["deletedDocuments"] != int64(2000) || mt["passes"] != int64(1) {
		t.Fatalf("metrics.ttl %v", mt)
	}
	if tt := m(ss["ttl"]); tt["expiredBacklog"] != int64(0) || tt["deletedDocuments"] != int64(2000) {
		t.Fatalf("ttl section %v", tt)
	}
}
