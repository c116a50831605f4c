package engine_test

// TTL review: failing reproductions of contract defects (rename to
// ttl_review_failing_test.go to run; uses helpers of ttl_review_test.go).

import (
	"net"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

func rvOpenFS(t *testing.T, fs vfs.FS, clock ttl.Clock) (*mongo.Client, func()) {
	t.Helper()
	kv, err := pebblekv.Open("data", pebblekv.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Config{KV: kv, Clock: clock, Reaper: engine.ReaperConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	ws := wire.NewServer(e, wire.Options{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go ws.Serve(ln)
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + ln.Addr().String() + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	return client, func() { client.Disconnect(ctx); ws.Close(); e.Close(); kv.Close() }
}

// §6.3 + index maintenance: an index built while a document is expired
// skips it; inserting (or upserting) over that expired _id with the same
// key must still index the new live document.
func TestReviewInsertOverExpiredSkippedByIndexBuild(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r19", "c", 10)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 5}, {Key: "u", Value: 7}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 6}, {Key: "u", Value: 8}, {Key: "ttl", Value: 100}})
	ts.clock.Advance(10 * time.Second) // _id 1 expired, not purged
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	rvUnique(t, c, "u")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 5}, {Key: "u", Value: 7}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "u", Value: 7}}); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("unique index missed the live holder of u=7: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 5}}), int32(1))
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 5}}, options.Find().SetHint("k_1")), int32(1))
}

func TestReviewUpsertOverExpiredSkippedByIndexBuild(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r20", "c", 10)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 5}, {Key: "u", Value: 7}})
	ts.clock.Advance(10 * time.Second)
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	rvUnique(t, c, "u")
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: 5}, {Key: "u", Value: 7}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "u", Value: 7}}); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("unique index missed the live holder of u=7: %v", err)
	}
	sameIDs(t, findAll(t, c, bson.D{{Key: "k", Value: 5}}), int32(1))
}

// §6.5 + §8.3: a crash right after a document became invisible, followed
// by a restart with the clock behind, must not resurrect it.
func TestReviewCrashDoesNotResurrect(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := ttl.NewFakeClock(t0)
	client, stop := rvOpenFS(t, fs, clock)
	db := client.Database("crash")
	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 100}}).Err(); err != nil {
		t.Fatal(err)
	}
	c := db.Collection("c", options.Collection().SetWriteConcern(writeconcern.Journaled()))
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "live"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "short"}, {Key: "ttl", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), "live") // "short" is gone for clients
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	stop()

	clock2 := ttl.NewFakeClock(t0.Add(time.Second)) // the machine's clock is behind after the crash
	client2, stop2 := rvOpenFS(t, crashed, clock2)
	defer stop2()
	c2 := client2.Database("crash").Collection("c")
	sameIDs(t, findAll(t, c2, bson.D{}), "live")
}

// §7: a TTL index on a dotted path through an array of subdocuments
// (a multikey index): the earliest Date among the indexed values counts,
// as mongod's TTL monitor deletes a document when any of its index keys is
// old enough.
func TestReviewTTLIndexDottedArrayOfSubdocuments(t *testing.T) {
	ts := startServer(t)
	c := ts.db("r7").Collection("c")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "ev.at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(10)}); err != nil {
		t.Fatal(err)
	}
	now := bson.NewDateTimeFromTime(t0)
	later := bson.NewDateTimeFromTime(t0.Add(time.Hour))
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "ev", Value: bson.A{bson.D{{Key: "at", Value: later}}, bson.D{{Key: "at", Value: now}}}}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "ev", Value: bson.D{{Key: "at", Value: bson.A{later, now}}}}})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "ev", Value: bson.A{bson.D{{Key: "at", Value: later}}}}})
	ts.clock.Advance(9 * time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(1), int32(2), int32(3))
	ts.clock.Advance(time.Second)
	sameIDs(t, findAll(t, c, bson.D{}), int32(3))
	if n, _ := ts.e.RunTTLPass(ctx); n != 2 {
		t.Fatalf("reaper deleted %d, want 2", n)
	}
}

// §6.1: a collMod that lowers DefaultTTL (or a new TTL index) makes
// documents expire at once, also for cursors whose results a blocking
// (in-memory) sort already buffered: they re-check under the current policy.
func TestReviewSortedCursorAcrossPolicyChange(t *testing.T) {
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
			cur, err = c.Find(ctx, bson.D{}, options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "n", Value: 1}}))
		} else {
			cur, err = c.Aggregate(ctx, mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "n", Value: 1}}}}}, options.Aggregate().SetBatchSize(2))
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

// §5.2: _ts lives in the document header, not the body, so an index built
// from the body cannot hold it: a compound index with _ts or a
// partialFilterExpression on _ts must not make _ts queries return nothing.
func TestReviewIndexesNamingTS(t *testing.T) {
	ts := startServer(t)
	c := rvCreate(t, ts, "r23", "c", 100)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}})
	ts.clock.Advance(5 * time.Second)
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}})
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}, {Key: "_ts", Value: 1}}}); err == nil {
		// accepted: then it must answer correctly (refusing it would be fine too)
		sameIDs(t, findAll(t, c, bson.D{{Key: "x", Value: 1}, {Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0.Unix() + 5}}}}), int32(2))
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "y", Value: 1}}, Options: options.Index().SetPartialFilterExpression(bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: 0}}}})}); err == nil {
		c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "y", Value: 1}})
		sameIDs(t, findAll(t, c, bson.D{{Key: "y", Value: 1}, {Key: "_ts", Value: bson.D{{Key: "$gte", Value: 0}}}}), int32(3))
	}
}

func rvAgg(t *testing.T, coll *mongo.Collection, p mongo.Pipeline) []bson.D {
	t.Helper()
	cur, err := coll.Aggregate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.D
	if err := cur.All(ctx, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func rvHasTS(v any) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == "_ts" || rvHasTS(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if rvHasTS(e) {
				return true
			}
		}
	case []bson.D:
		for _, e := range x {
			if rvHasTS(e) {
				return true
			}
		}
	}
	return false
}

// §6.3: an expired holder of a unique key holds it no more, but reusing
// its _id must still check the key: when a live document has taken it since,
// an insert (single or batch) or upsert over the expired _id is refused.
func TestReviewUniqueReinsertExpiredIDSkipsCheck(t *testing.T) {
	for i := 0; i < 3; i++ {
		ts := startServer(t)
		c := rvCreate(t, ts, "r26", "c", 100)
		rvUnique(t, c, "u")
		c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "u", Value: 7}, {Key: "ttl", Value: 5}})
		c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "u", Value: 8}})
		ts.clock.Advance(5 * time.Second)
		// the live _id 2 takes u=7 from the expired _id 1
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 7}}}}); err != nil {
			t.Fatal(err)
		}
		var err error
		switch i {
		case 0:
			_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "u", Value: 7}})
		case 1:
			_, err = c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "u", Value: 7}}, bson.D{{Key: "_id", Value: 3}}})
		case 2:
			_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 7}}}}, options.UpdateOne().SetUpsert(true))
		}
		if !mongo.IsDuplicateKeyError(err) {
			t.Errorf("case %d: re-using the expired _id with a unique key a live document holds: %v; live holders of u=7: %v", i, err, ids(findAll(t, c, bson.D{{Key: "u", Value: 7}})))
		}
	}
}

// §6.5/§8.1: with many documents expired through a dotted-path TTL index,
// purging reaches every one of them, and dropping the TTL index resurrects
// nothing.
func TestReviewDottedTTLCandidatesBlockPurge(t *testing.T) {
	ts := startServer(t)
	c := ts.db("r28").Collection("c")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "ev.at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(10)}); err != nil {
		t.Fatal(err)
	}
	old := bson.NewDateTimeFromTime(t0.Add(-time.Hour))
	var docs []any
	for i := 0; i < 4100; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "ev", Value: bson.A{bson.D{{Key: "at", Value: old}}}}})
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: "plain"}, {Key: "ev", Value: bson.D{{Key: "at", Value: bson.NewDateTimeFromTime(t0)}}}})
	ts.clock.Advance(10 * time.Second)
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: "plain"}}); n != 0 {
		t.Fatalf("plain not expired")
	}
	ts.e.RunTTLPass(ctx)
	if err := c.Indexes().DropOne(ctx, "ev.at_1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: "plain"}}); n != 0 {
		t.Fatalf("the expired document came back after dropping the TTL index")
	}
}
