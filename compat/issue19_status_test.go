package compat

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// statusDeltas reads serverStatus figures by path.
func statusFigures(t *testing.T, e *env, paths []string) map[string]float64 {
	t.Helper()
	st := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
	out := map[string]float64{}
	for _, p := range paths {
		out[p] = num(t, st, p)
	}
	return out
}

// checkDeltas compares the growth of each figure: exactly on a private
// in-process server; against MAYFLY_URI other tests run on the same server
// at the same time, so only "at least" can hold there.
func checkDeltas(t *testing.T, e *env, before, after map[string]float64, want map[string]float64) {
	t.Helper()
	for p, w := range want {
		got := after[p] - before[p]
		if e.inProcess() && got != w {
			t.Errorf("%s grew by %v, want %v", p, got, w)
		}
		if !e.inProcess() && got < w {
			t.Errorf("%s grew by %v, want at least %v", p, got, w)
		}
	}
}

var issue19DocPaths = []string{
	"metrics.document.inserted", "metrics.document.returned", "metrics.document.updated", "metrics.document.deleted",
	"metrics.queryExecutor.scanned", "metrics.queryExecutor.scannedObjects",
	"metrics.queryExecutor.collectionScans.total", "metrics.queryExecutor.collectionScans.nonTailable",
}

func TestIssue19StatusDocumentAndQueryExecutor(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	e := newClockEnv(t)
	st := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
	for _, p := range issue19DocPaths {
		if v := val(t, st, p); v.Type != bson.TypeInt64 {
			t.Errorf("%s is %s, want long", p, v.Type)
		}
	}
	c := e.coll("docs")

	b := statusFigures(t, e, issue19DocPaths)
	_, err := c.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 3}}, bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: 4}},
		bson.D{{Key: "_id", Value: 5}, {Key: "x", Value: 5}},
	})
	noErr(t, err, "insertMany")
	a := statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{"metrics.document.inserted": 5, "metrics.queryExecutor.collectionScans.total": 0})

	// An unindexed query scans the collection: 5 documents examined, 1 returned.
	b = a
	if got := e.find("docs", bson.D{{Key: "x", Value: 3}}); len(got) != 1 {
		t.Fatalf("find x:3 returned %d documents", len(got))
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{
		"metrics.document.returned": 1, "metrics.queryExecutor.scannedObjects": 5, "metrics.queryExecutor.scanned": 0,
		"metrics.queryExecutor.collectionScans.total": 1, "metrics.queryExecutor.collectionScans.nonTailable": 1,
	})

	// A find by _id: one key, one document, no collection scan.
	b = a
	if got := e.find("docs", bson.D{{Key: "_id", Value: 2}}); len(got) != 1 {
		t.Fatalf("find _id:2 returned %d documents", len(got))
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{
		"metrics.document.returned": 1, "metrics.queryExecutor.scannedObjects": 1, "metrics.queryExecutor.scanned": 1,
		"metrics.queryExecutor.collectionScans.total": 0,
	})

	// A find in small batches: every getMore's documents count as returned.
	b = a
	if got := e.find("docs", bson.D{}, options.Find().SetBatchSize(2)); len(got) != 5 {
		t.Fatalf("find {} returned %d documents", len(got))
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{
		"metrics.document.returned": 5, "metrics.queryExecutor.scannedObjects": 5,
		"metrics.queryExecutor.collectionScans.total": 1,
	})

	b = a
	res, err := c.UpdateMany(e.ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 3}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
	noErr(t, err, "updateMany")
	if res.ModifiedCount != 3 {
		t.Fatalf("updateMany modified %d", res.ModifiedCount)
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{
		"metrics.document.updated": 3, "metrics.queryExecutor.collectionScans.total": 1,
		"metrics.queryExecutor.scannedObjects": 5,
	})

	// metrics.document.updated counts the documents an update matched, as
	// mongod does, even those it left unchanged.
	b = a
	res, err = c.UpdateMany(e.ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 4}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
	noErr(t, err, "updateMany (no change)")
	if res.MatchedCount != 2 || res.ModifiedCount != 0 {
		t.Fatalf("updateMany matched %d, modified %d", res.MatchedCount, res.ModifiedCount)
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{"metrics.document.updated": 2})

	// An upsert counts as inserted, not updated.
	b = a
	res, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 9}}}}, options.UpdateOne().SetUpsert(true))
	noErr(t, err, "upsert")
	if res.UpsertedCount != 1 {
		t.Fatalf("upserted %d", res.UpsertedCount)
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{"metrics.document.updated": 0, "metrics.document.inserted": 1})

	b = a
	dr, err := c.DeleteMany(e.ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}})
	noErr(t, err, "deleteMany")
	if dr.DeletedCount != 2 {
		t.Fatalf("deleteMany deleted %d", dr.DeletedCount)
	}
	a = statusFigures(t, e, issue19DocPaths)
	checkDeltas(t, e, b, a, map[string]float64{
		"metrics.document.deleted": 2, "metrics.queryExecutor.collectionScans.total": 0,
	})
}

func TestIssue19StatusAssertsUser(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	e := newClockEnv(t)
	b := statusFigures(t, e, []string{"asserts.user", "asserts.regular"})
	for _, cmd := range []bson.D{
		{{Key: "noSuchCommandIssue19", Value: 1}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "$bogus", Value: 1}}}},
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: "not an array"}},
	} {
		if err := e.runErr(cmd); err == nil {
			t.Fatalf("%v succeeded", cmd)
		}
	}
	a := statusFigures(t, e, []string{"asserts.user", "asserts.regular"})
	checkDeltas(t, e, b, a, map[string]float64{"asserts.user": 3, "asserts.regular": 0})
}

func TestIssue19StatusSectionsShape(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	e := newEnv(t)
	st := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
	for path, typ := range map[string]bson.Type{
		"asserts.regular": bson.TypeInt32, "asserts.warning": bson.TypeInt32, "asserts.msg": bson.TypeInt32,
		"asserts.tripwire": bson.TypeInt32, "asserts.rollovers": bson.TypeInt32,
		"extra_info.note": bson.TypeString, "extra_info.page_faults": bson.TypeInt64,
		"extra_info.user_time_us": bson.TypeInt64, "extra_info.system_time_us": bson.TypeInt64,
		"globalLock.totalTime":                 bson.TypeInt64,
		"globalLock.currentQueue.total":        bson.TypeInt32,
		"globalLock.currentQueue.readers":      bson.TypeInt32,
		"globalLock.currentQueue.writers":      bson.TypeInt32,
		"globalLock.activeClients.total":       bson.TypeInt32,
		"globalLock.activeClients.readers":     bson.TypeInt32,
		"globalLock.activeClients.writers":     bson.TypeInt32,
		"storageEngine.name":                   bson.TypeString,
		"storageEngine.supportsCommittedReads": bson.TypeBoolean,
		"storageEngine.persistent":             bson.TypeBoolean,
		"storageEngine.readOnly":               bson.TypeBoolean,
	} {
		if v := val(t, st, path); v.Type != typ {
			t.Errorf("%s is %s, want %s", path, v.Type, typ)
		}
	}
	valEq(t, st, "extra_info.note", "fields vary by platform")
	valEq(t, st, "storageEngine.name", "mayfly-pebble")
	valEq(t, st, "storageEngine.readOnly", false)
	if e.inProcess() {
		valEq(t, st, "storageEngine.persistent", false) // the test servers keep their data in memory
	}
	// serverStatus itself is in flight while it answers.
	if n := num(t, st, "globalLock.activeClients.total"); n < 1 {
		t.Errorf("globalLock.activeClients.total = %v, want >= 1", n)
	}
	if n := num(t, st, "globalLock.totalTime"); n <= 0 {
		t.Errorf("globalLock.totalTime = %v", n)
	}
	if n := num(t, st, "extra_info.user_time_us"); n <= 0 {
		t.Errorf("extra_info.user_time_us = %v", n)
	}
	// mayfly stores in Pebble: no wiredTiger section (docs/admin-commands.md).
	if has(st, "wiredTiger") {
		t.Errorf("serverStatus has wiredTiger")
	}
	// A standalone mongod reports opcountersRepl too, all zero.
	for _, f := range []string{"insert", "query", "update", "delete", "getmore", "command"} {
		valEq(t, st, "opcountersRepl."+f, int64(0))
	}
	// {<section>: 0} leaves the new sections out too.
	st = e.admin(bson.D{{Key: "serverStatus", Value: 1}, {Key: "asserts", Value: 0}, {Key: "extra_info", Value: 0},
		{Key: "globalLock", Value: 0}, {Key: "storageEngine", Value: 0}})
	for _, absent := range []string{"asserts", "extra_info", "globalLock", "storageEngine"} {
		if has(st, absent) {
			t.Errorf("serverStatus with %s: 0 still has it", absent)
		}
	}
}

func TestIssue19StatusCompressionCounters(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	e := newClockEnv(t)
	uri := externalURI
	if e.inProcess() {
		uri = e.tg.srv.URI()
	}
	cli, err := mongo.Connect(options.Client().ApplyURI(uri).SetCompressors([]string{"zstd"}))
	noErr(t, err, "connect with zstd")
	defer func() { _ = cli.Disconnect(e.ctx) }()
	paths := []string{
		"network.compression.zstd.compressor.bytesIn", "network.compression.zstd.compressor.bytesOut",
		"network.compression.zstd.decompressor.bytesIn", "network.compression.zstd.decompressor.bytesOut",
	}
	for _, name := range []string{"snappy", "zstd", "zlib"} {
		st := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
		for _, part := range []string{"compressor.bytesIn", "compressor.bytesOut", "decompressor.bytesIn", "decompressor.bytesOut"} {
			p := "network.compression." + name + "." + part
			if v := val(t, st, p); v.Type != bson.TypeInt64 {
				t.Errorf("%s is %s, want long", p, v.Type)
			}
		}
	}
	b := statusFigures(t, e, paths)
	c := cli.Database(e.db.Name()).Collection("z")
	docs := []any{}
	for i := 0; i < 50; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("compressible ", 40)}})
	}
	_, err = c.InsertMany(e.ctx, docs)
	noErr(t, err, "insertMany over zstd")
	cur, err := c.Find(e.ctx, bson.D{})
	noErr(t, err, "find over zstd")
	var got []bson.Raw
	noErr(t, cur.All(e.ctx, &got), "read the cursor")
	if len(got) != 50 {
		t.Fatalf("found %d documents", len(got))
	}
	a := statusFigures(t, e, paths)
	for _, p := range paths {
		if a[p] <= b[p] {
			t.Errorf("%s did not move: %v -> %v", p, b[p], a[p])
		}
	}
	// The documents compress well: the compressor's output is smaller than its input.
	in := a["network.compression.zstd.compressor.bytesIn"] - b["network.compression.zstd.compressor.bytesIn"]
	out := a["network.compression.zstd.compressor.bytesOut"] - b["network.compression.zstd.compressor.bytesOut"]
	if !(out < in) {
		t.Errorf("zstd compressor: %v bytes in, %v out", in, out)
	}
}

// slowFilter makes every document cost a 200000-element $range: a scan
// of a few thousand documents takes seconds (it checks for killOp every
// 1024 documents).
var slowFilter = bson.D{{Key: "$expr", Value: bson.D{{Key: "$lt", Value: bson.A{
	bson.D{{Key: "$size", Value: bson.D{{Key: "$range", Value: bson.A{0, 200000}}}}}, 0}}}}}

// serverStatus.globalLock.activeClients counts the commands in flight by
// kind: a long find scan is a reader, a long updateMany a writer; both
// show in currentOp, killOp stops them (Interrupted), and the counts go
// back down. currentQueue stays empty (mayfly queues nobody).
func TestIssue19StatusActiveClients(t *testing.T) {
	needsAdmin(t, "serverStatus, $currentOp and killOp (clusterMonitor, clusterManager)")
	e := newClockEnv(t) // a private server: no other test's commands in flight
	var docs []any
	for i := 0; i < 5000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}})
	}
	_, err := e.coll("c").InsertMany(e.ctx, docs)
	noErr(t, err, "insert")
	figures := func() (readers, writers, total, queued float64) {
		st := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
		return num(t, st, "globalLock.activeClients.readers"), num(t, st, "globalLock.activeClients.writers"),
			num(t, st, "globalLock.activeClients.total"), num(t, st, "globalLock.currentQueue.total")
	}
	if r, w, _, _ := figures(); e.inProcess() && (r != 0 || w != 0) {
		t.Fatalf("idle server: %v readers, %v writers active", r, w)
	}
	// killSlow finds the operation tagged comment in $currentOp, kills it
	// and waits for it to fail with Interrupted.
	killSlow := func(comment string, done chan error) {
		t.Helper()
		var opid bson.RawValue
		waitFor(t, 20*time.Second, comment+" in $currentOp", func() bool {
			got, err := opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: bson.D{}}},
				bson.D{{Key: "$match", Value: bson.D{{Key: "command.comment", Value: comment}}}}})
			if err != nil || len(got) != 1 {
				return false
			}
			opid = val(t, got[0], "opid")
			return true
		})
		raw := e.admin(bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
		valEq(t, raw, "info", "attempting to kill op")
		select {
		case err := <-done:
			wantCode(t, err, 11601, "Interrupted")
		case <-time.After(30 * time.Second):
			t.Fatalf("the killed %s did not stop", comment)
		}
	}

	reading := make(chan error, 1)
	go func() {
		cur, err := e.coll("c").Find(e.ctx, slowFilter, options.Find().SetComment("issue19-slow-find"))
		if err == nil {
			err = cur.Close(e.ctx)
		}
		reading <- err
	}()
	waitFor(t, 20*time.Second, "a reader in globalLock.activeClients", func() bool { r, _, _, _ := figures(); return r >= 1 })
	r, w, total, queued := figures()
	if (e.inProcess() && w != 0) || total < r+1 || queued != 0 {
		t.Fatalf("a find in flight: readers %v writers %v total %v queued %v", r, w, total, queued)
	}
	killSlow("issue19-slow-find", reading)

	writing := make(chan error, 1)
	go func() {
		_, err := e.coll("c").UpdateMany(e.ctx, slowFilter, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}, options.UpdateMany().SetComment("issue19-slow-update"))
		writing <- err
	}()
	waitFor(t, 20*time.Second, "a writer in globalLock.activeClients", func() bool { _, w, _, _ := figures(); return w >= 1 })
	if r, _, _, _ := figures(); e.inProcess() && r != 0 {
		t.Fatalf("an update in flight counts %v readers", r)
	}
	killSlow("issue19-slow-update", writing)
	if e.inProcess() {
		waitFor(t, 10*time.Second, "activeClients back to 0", func() bool { r, w, _, _ := figures(); return r == 0 && w == 0 })
	}
}
