package engine_test

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestReaperReclaimsDiskSpace: on an otherwise idle server, a pass that
// purges expired documents asks Pebble to compact the collection's ranges,
// so the space really comes back (spec §8.2), as collStats.storageSize and
// serverStatus.ttl.reclaimedBytes show.
func TestReaperReclaimsDiskSpace(t *testing.T) {
	ts := startServer(t)
	ts.run(t, "rec", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 60}})
	c := ts.db("rec").Collection("c")
	pad := strings.Repeat("x", 1000)
	var docs []any
	total := 12000
	if testing.Short() {
		total = 4000
	}
	for i := 0; i < total; i++ {
		d := bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}
		if i%4 == 0 {
			d = append(d, bson.E{Key: "ttl", Value: -1}) // a quarter stays
		}
		docs = append(docs, d)
	}
	if _, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
		t.Fatal(err)
	}
	ts.run(t, "admin", bson.D{{Key: "fsync", Value: 1}})
	before := m(ts.run(t, "rec", bson.D{{Key: "collStats", Value: "c"}}))["storageSize"].(int64)
	ts.clock.Advance(time.Minute)
	n, err := ts.e.RunTTLPass(ctx)
	if err != nil || n != int64(total*3/4) {
		t.Fatalf("pass deleted %d: %v", n, err)
	}
	after := m(ts.run(t, "rec", bson.D{{Key: "collStats", Value: "c"}}))["storageSize"].(int64)
	if after > before/2 {
		t.Fatalf("storageSize %d -> %d: space did not come back", before, after)
	}
	tt := m(m(ts.run(t, "admin", bson.D{{Key: "serverStatus", Value: 1}}))["ttl"])
	if tt["reclaimedBytes"].(int64) <= 0 {
		t.Fatalf("reclaimedBytes %v", tt)
	}
	t.Logf("storageSize %d -> %d bytes, reclaimed %d", before, after, tt["reclaimedBytes"])
	if got := len(findAll(t, c, bson.D{})); got != total/4 {
		t.Fatalf("%d live documents left, want %d", got, total/4)
	}
}

// TestExplainIDLookupOnLargeCollection: an _id point lookup touches one key
// however large the collection (O(log n) in the store), and an indexed
// equality examines exactly the matching documents.
func TestExplainLargeCollection(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 100k documents; run without -short")
	}
	ts := startServer(t)
	c := ts.db("big").Collection("c")
	const n = 100000
	batch := make([]any, 0, 10000)
	for i := 0; i < n; i++ {
		batch = append(batch, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 1000}})
		if len(batch) == cap(batch) {
			if _, err := c.InsertMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}})
	out := ts.run(t, "big", bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 77777}}}}}, {Key: "verbosity", Value: "executionStats"}})
	es := m(m(out)["executionStats"])
	if es["totalKeysExamined"] != int64(1) || es["totalDocsExamined"] != int64(1) || es["nReturned"] != int64(1) {
		t.Fatalf("_id lookup: %v", es)
	}
	out = ts.run(t, "big", bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "k", Value: 5}}}}}, {Key: "verbosity", Value: "executionStats"}})
	es = m(m(out)["executionStats"])
	if m(m(m(out)["queryPlanner"])["winningPlan"])["inputStage"].(bson.D)[0].Value != "IXSCAN" || es["totalDocsExamined"] != int64(100) || es["nReturned"] != int64(100) {
		t.Fatalf("indexed equality: %v", out)
	}
}
