package engine

import (
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
)

func replTestEngine(t *testing.T) *Engine {
	t.Helper()
	kv, err := pebblekv.Open("repltest", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{KV: kv, Logger: zaptest.NewLogger(t), Reaper: ReaperConfig{Disabled: true},
		Repl: ReplConfig{SetName: "rs0", Me: "db.example:27017"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); kv.Close() })
	return e
}

// TestRetryableWriteConcurrentRetriesRunOnce: retries of one statement
// racing each other (a driver that timed out and retried while the first
// attempt still ran) execute it once: the session is checked out to one
// command at a time.
func TestRetryableWriteConcurrentRetriesRunOnce(t *testing.T) {
	e := replTestEngine(t)
	lsid := bson.D{{Key: "id", Value: testSessionID(7)}}
	cmd := bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := srvTestRun(t, e, "db", cmd)
			if r.Lookup("ok").Double() != 1 || r.Lookup("n").Int32() != 1 {
				t.Errorf("retry reply %v", r)
			}
		}()
	}
	wg.Wait()
	r := srvTestOK(t, e, "db", bson.D{{Key: "find", Value: "c"}})
	doc := r.Lookup("cursor", "firstBatch", "0", "n")
	if doc.Int32() != 1 {
		t.Fatalf("16 concurrent retries of one $inc applied it %v times", doc)
	}
}

// TestReplHelloAdvertisesMe: hello's me/primary/hosts are Config.Repl.Me.
func TestReplHelloAdvertisesMe(t *testing.T) {
	e := replTestEngine(t)
	r := srvTestOK(t, e, "admin", bson.D{{Key: "hello", Value: 1}})
	for _, k := range []string{"me", "primary"} {
		if r.Lookup(k).StringValue() != "db.example:27017" {
			t.Errorf("%s = %v", k, r.Lookup(k))
		}
	}
	if r.Lookup("hosts", "0").StringValue() != "db.example:27017" {
		t.Errorf("hosts = %v", r.Lookup("hosts"))
	}
}

// TestOpTimeMonotonicAcrossRestart: a restarted server times its writes
// after every write timed before the restart, even when its clock reads an
// earlier time (the expiry clock's persisted lease).
func TestOpTimeMonotonicAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := ttl.NewFakeClock(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() (*Engine, func()) {
		kv, err := pebblekv.Open(dir, pebblekv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(Config{KV: kv, Clock: clk, Logger: zaptest.NewLogger(t), Reaper: ReaperConfig{Disabled: true}, Repl: ReplConfig{SetName: "rs0", Me: "h:1"}})
		if err != nil {
			t.Fatal(err)
		}
		return e, func() { e.Close(); kv.Close() }
	}
	e, closeE := open()
	var last bson.Timestamp
	for i := 0; i < 3; i++ {
		r := srvTestOK(t, e, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "i", Value: i}}}}})
		tt, ii := r.Lookup("operationTime").Timestamp()
		last = bson.Timestamp{T: tt, I: ii}
	}
	closeE()
	clk.Set(clk.Now().Add(-time.Hour)) // the clock went back while the server was down
	e, closeE = open()
	defer closeE()
	r := srvTestOK(t, e, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	tt, ii := r.Lookup("operationTime").Timestamp()
	if !tsAfter(bson.Timestamp{T: tt, I: ii}, last) {
		t.Fatalf("after a restart a write was timed %d.%d, not after the last one before it %v", tt, ii, last)
	}
}

// TestReplGossipedClusterTime: a client's $clusterTime ahead of the clock
// moves it (the next write is timed after it); one more than a year ahead
// is refused.
func TestReplGossipedClusterTime(t *testing.T) {
	e := replTestEngine(t)
	now := uint32(time.Now().Unix())
	ahead := bson.Timestamp{T: now + 100, I: 5}
	sig := bson.D{{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}
	r := srvTestOK(t, e, "admin", bson.D{{Key: "ping", Value: 1}, {Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: ahead}, {Key: "signature", Value: sig}}}})
	if tt, ii := r.Lookup("$clusterTime", "clusterTime").Timestamp(); tt != ahead.T || ii != ahead.I {
		t.Fatalf("clusterTime after gossip = %d.%d", tt, ii)
	}
	r = srvTestOK(t, e, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	tt, ii := r.Lookup("operationTime").Timestamp()
	if !tsAfter(bson.Timestamp{T: tt, I: ii}, ahead) {
		t.Fatalf("a write after gossip was timed %d.%d, not after %v", tt, ii, ahead)
	}
	srvTestErr(t, e, "admin", bson.D{{Key: "ping", Value: 1}, {Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: bson.Timestamp{T: now + 400*24*3600, I: 1}}, {Key: "signature", Value: sig}}}},
		209, "is too far from this node's wall clock time")
}
