package engine

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
)

// openReplOnDir opens a replica-set engine on dir; the returned function
// closes it.
func openReplOnDir(t *testing.T, dir string, clk ttl.Clock) (*Engine, func()) {
	t.Helper()
	kv, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{KV: kv, Clock: clk, Logger: zaptest.NewLogger(t), Reaper: ReaperConfig{Disabled: true},
		Repl: ReplConfig{SetName: "rs0", Me: "db.example:27017"}})
	if err != nil {
		t.Fatal(err)
	}
	return e, func() { e.Close(); kv.Close() }
}

// retryRecordKeys counts the stored retryable-write records.
func retryRecordKeys(t *testing.T, e *Engine) int { return prefixKeys(t, e, docstore.PfxRetry) }

// prefixKeys counts the stored keys whose first byte is prefix.
func prefixKeys(t *testing.T, e *Engine, prefix byte) int {
	t.Helper()
	it, err := e.kv.NewIter([]byte{prefix}, []byte{prefix + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// TestRetryableWritesDurableAcrossRestart: the results of retryable
// writes are stored with the writes; after a restart a retry of each
// (insert batch spanning several storage transactions, update with $inc,
// upsert, delete, findAndModify with a projection) answers the first
// reply and changes nothing; an older txnNumber is still refused.
func TestRetryableWritesDurableAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := ttl.NewFakeClock(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	e, stop := openReplOnDir(t, dir, clk)
	lsid := bson.D{{Key: "id", Value: testSessionID(3)}}
	with := func(cmd bson.D, txn int64) bson.D {
		return append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txn})
	}
	// An ordered insert of 300 documents (two storage transactions) whose
	// 280th is a duplicate: 279 written, records in both transactions.
	docs := bson.A{}
	for i := 0; i < 300; i++ {
		id := i
		if i == 279 {
			id = 0
		}
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: 0}})
	}
	ins := with(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}}, 1)
	upd := with(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 5}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "new"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "upsert", Value: true}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 6}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 0}}}}}},
	}}}, 2)
	del := with(bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 7}}}, {Key: "limit", Value: 1}}}}}, 3)
	fam := with(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 8}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 10}}}}}, {Key: "new", Value: true}, {Key: "fields", Value: bson.D{{Key: "v", Value: 1}}}}, 4)
	famUpsert := with(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: "fam"}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "upsert", Value: true}, {Key: "new", Value: true}}, 1)
	lsid2 := bson.D{{Key: "id", Value: testSessionID(4)}}
	famUpsert[len(famUpsert)-2].Value = lsid2

	strip := func(r bson.Raw) string {
		var d bson.D
		_ = bson.Unmarshal(r, &d)
		out := bson.D{}
		for _, f := range d {
			switch f.Key {
			case "opTime", "electionId", "operationTime", "$clusterTime", "retriedStmtIds", "retriedStmtId":
				continue
			}
			out = append(out, f)
		}
		return fmt.Sprint(out)
	}
	type step struct {
		cmd   bson.D
		first string
	}
	var steps []step
	for _, c := range []bson.D{ins, upd, del} {
		steps = append(steps, step{cmd: c, first: strip(srvTestOK(t, e, "db", c))})
	}
	// findAndModify's session moves on to txnNumber 4 after txnNumber 3.
	steps = append(steps, step{cmd: fam, first: strip(srvTestOK(t, e, "db", fam))})
	steps = append(steps, step{cmd: famUpsert, first: strip(srvTestOK(t, e, "db", famUpsert))})
	if got := retryRecordKeys(t, e); got != 2 {
		// session 3 keeps txnNumber 4's one statement; session 4 its one.
		t.Fatalf("stored records = %d, want 2 (a newer txnNumber replaces the older records)", got)
	}
	stop()

	// The records of the last txnNumber of each session survive; the
	// others are gone, as in mongod (a retry of txnNumber 1..3 is too old).
	e, stop = openReplOnDir(t, dir, clk)
	defer stop()
	for _, s := range steps[3:] {
		r := srvTestOK(t, e, "db", s.cmd)
		if got := strip(r); got != s.first {
			t.Errorf("retry after restart answered\n%s\nfirst reply\n%s", got, s.first)
		}
		if _, err := r.LookupErr("retriedStmtId"); err != nil {
			t.Errorf("retry after restart was executed again: %v", r)
		}
	}
	srvTestErr(t, e, "db", upd, 225, "")
	r := srvTestOK(t, e, "db", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{5, 8, "new", "fam"}}}}}}, {Key: "sort", Value: bson.D{{Key: "v", Value: 1}}}})
	want := map[string]int32{"5": 1, "new": 1, "fam": 1, "8": 10}
	arr, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	if len(arr) != 4 {
		t.Fatalf("documents: %v", arr)
	}
	for _, v := range arr {
		d := v.Document()
		id, ok := d.Lookup("_id").StringValueOK()
		if n, isInt := d.Lookup("_id").Int32OK(); isInt {
			id, ok = fmt.Sprint(n), true
		}
		if !ok {
			t.Fatalf("unexpected _id %v", d.Lookup("_id"))
		}
		if d.Lookup("v").Int32() != want[id] {
			t.Errorf("document %v: v = %v, want %d (applied once)", id, d.Lookup("v"), want[id])
		}
	}
}

// TestRetryableInsertBatchRecordsEachChunk: after a restart, a retry of
// an insert batch that spanned two storage transactions answers every
// written statement from the stored records and writes nothing again.
func TestRetryableInsertBatchRecordsEachChunk(t *testing.T) {
	dir := t.TempDir()
	clk := ttl.NewFakeClock(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	e, stop := openReplOnDir(t, dir, clk)
	docs := bson.A{}
	for i := 0; i < 300; i++ {
		id := i
		if i == 279 {
			id = 0 // duplicate: the ordered batch stops there
		}
		docs = append(docs, bson.D{{Key: "_id", Value: id}})
	}
	ins := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}, {Key: "lsid", Value: bson.D{{Key: "id", Value: testSessionID(5)}}}, {Key: "txnNumber", Value: int64(9)}}
	r := srvTestOK(t, e, "db", ins)
	if r.Lookup("n").Int32() != 279 {
		t.Fatalf("first insert: %v", r)
	}
	if got := retryRecordKeys(t, e); got != 279 {
		t.Fatalf("stored records = %d, want 279", got)
	}
	stop()
	e, stop = openReplOnDir(t, dir, clk)
	defer stop()
	// Remove the duplicate's holder: a re-executed statement 279 would now
	// succeed, but statements 0..278 must not run again.
	srvTestOK(t, e, "db", bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}}}}})
	r = srvTestOK(t, e, "db", ins)
	ids, _ := r.Lookup("retriedStmtIds").Array().Values()
	if len(ids) != 279 {
		t.Fatalf("retriedStmtIds has %d entries, want 279: %v", len(ids), r.Lookup("n"))
	}
	if _, err := r.LookupErr("writeErrors"); err != nil || r.Lookup("n").Int32() != 279 {
		t.Fatalf("retry reply: n %v writeErrors %v", r.Lookup("n"), r.Lookup("writeErrors"))
	}
	cnt := srvTestOK(t, e, "db", bson.D{{Key: "count", Value: "c"}})
	if cnt.Lookup("n").Int32() != 278 {
		t.Fatalf("count = %v, want 278 (document 1 deleted, nothing re-inserted)", cnt.Lookup("n"))
	}
}

// TestRetryRecordsSweptAfterExpiry: the records of a session unused for
// the session timeout are dropped by the sweep; a live session's stay.
func TestRetryRecordsSweptAfterExpiry(t *testing.T) {
	dir := t.TempDir()
	clk := ttl.NewFakeClock(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	e, stop := openReplOnDir(t, dir, clk)
	defer stop()
	for i := byte(1); i <= 2; i++ {
		srvTestOK(t, e, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(i)}}}},
			{Key: "lsid", Value: bson.D{{Key: "id", Value: testSessionID(i)}}}, {Key: "txnNumber", Value: int64(1)}})
	}
	e.sweepRetryRecords()
	if n := retryRecordKeys(t, e); n != 2 {
		t.Fatalf("records before expiry: %d", n)
	}
	clk.Advance(31 * time.Minute)
	e.sessions.Touch(testSessionID(2)) // still in use
	e.sweepRetryRecords()
	if n := retryRecordKeys(t, e); n != 1 {
		t.Fatalf("records after expiry: %d, want 1", n)
	}
}
