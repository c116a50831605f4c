package engine

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

func txnFields(lsid bson.Binary, n int64, start bool) bson.D {
	d := bson.D{{Key: "lsid", Value: bson.D{{Key: "id", Value: lsid}}}, {Key: "txnNumber", Value: n}, {Key: "autocommit", Value: false}}
	if start {
		d = append(d, bson.E{Key: "startTransaction", Value: true})
	}
	return d
}

func newLSID(b byte) bson.Binary {
	return bson.Binary{Subtype: 4, Data: []byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b}}
}

func errCodeOf(err error) int32 {
	if err == nil {
		return 0
	}
	return mongoerr.From(err).Code
}

func (e *Engine) adminRun(t *testing.T, cmd bson.D) (bson.D, error) {
	t.Helper()
	cmd = append(cmd, bson.E{Key: "$db", Value: "admin"})
	return e.dispatch(&Request{Name: cmd[0].Key, Cmd: cmd})
}

func countDocs(t *testing.T, e *Engine, filter bson.D) int {
	t.Helper()
	res, err := e.testRun(t, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: filter}})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := bsonx.Get(res, "cursor")
	fb, _ := bsonx.Get(cur.(bson.D), "firstBatch")
	return len(fb.(bson.A))
}

// A transaction's writes are invisible outside it until commit, visible to
// its own reads, and applied atomically by commitTransaction; an aborted
// transaction leaves nothing; a retried commit answers ok; mongod's
// refusals hold.
func TestTransactionCommitAbortAndRefusals(t *testing.T) {
	e := openTxnTestEngine(t)
	e.repl = newReplState(ReplConfig{SetName: "rs0", Me: "127.0.0.1:27017"}, e.opTime.Next())
	ls := newLSID(1)
	if _, err := e.testRun(t, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "in", Value: "txn"}}}}}, txnFields(ls, 1, true)...)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.testRun(t, append(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}}}, txnFields(ls, 1, false)...)); err != nil {
		t.Fatal(err)
	}
	if n := countDocs(t, e, bson.D{}); n != 0 {
		t.Fatalf("uncommitted insert visible outside the transaction: %d", n)
	}
	res, err := e.testRun(t, append(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "x", Value: 1}}}}, txnFields(ls, 1, false)...))
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := bsonx.Get(res, "cursor")
	if fb, _ := bsonx.Get(cur.(bson.D), "firstBatch"); len(fb.(bson.A)) != 1 {
		t.Fatalf("the transaction does not read its own writes: %v", res)
	}
	if _, err := e.testRun(t, append(bson.D{{Key: "count", Value: "c"}}, txnFields(ls, 1, false)...)); errCodeOf(err) != mongoerr.OperationNotSupportedInTransaction {
		t.Fatalf("count in a transaction: %v", err)
	}
	// count failed, which aborted the transaction (as mongod).
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(ls, 1, false)...)); errCodeOf(err) != mongoerr.NoSuchTransaction {
		t.Fatalf("commit after a failed statement: %v", err)
	}
	if n := countDocs(t, e, bson.D{}); n != 0 {
		t.Fatalf("aborted transaction left %d documents", n)
	}

	// Transaction 2 commits.
	if _, err := e.testRun(t, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}}}, txnFields(ls, 2, true)...)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(ls, 2, false)...)); err != nil {
		t.Fatal(err)
	}
	if n := countDocs(t, e, bson.D{}); n != 2 {
		t.Fatalf("committed transaction: %d documents", n)
	}
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(ls, 2, false)...)); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	if _, err := e.adminRun(t, append(bson.D{{Key: "abortTransaction", Value: 1}}, txnFields(ls, 2, false)...)); errCodeOf(err) != mongoerr.TransactionCommitted {
		t.Fatalf("abort after commit: %v", err)
	}
	if _, err := e.testRun(t, append(bson.D{{Key: "find", Value: "c"}}, txnFields(ls, 1, true)...)); errCodeOf(err) != mongoerr.TransactionTooOld {
		t.Fatalf("older txnNumber: %v", err)
	}
	if _, err := e.testRun(t, append(bson.D{{Key: "find", Value: "c"}}, txnFields(ls, 7, false)...)); errCodeOf(err) != mongoerr.NoSuchTransaction {
		t.Fatalf("continue a transaction never started: %v", err)
	}
	cmd := append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 9}}}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}}}}, txnFields(ls, 8, true)...)
	if _, err := e.testRun(t, cmd); errCodeOf(err) != mongoerr.InvalidOptions {
		t.Fatalf("writeConcern on a statement: %v", err)
	}

	// Standalone: code 20.
	e.repl = nil
	if _, err := e.testRun(t, append(bson.D{{Key: "find", Value: "c"}}, txnFields(ls, 9, true)...)); errCodeOf(err) != mongoerr.IllegalOperation {
		t.Fatalf("standalone transaction: %v", err)
	}
}

// First committer wins: two transactions that update one document both
// stage their write; the second to commit gets WriteConflict with the
// TransientTransactionError label and changes nothing.
func TestTransactionWriteConflict(t *testing.T) {
	e := openTxnTestEngine(t)
	e.repl = newReplState(ReplConfig{SetName: "rs0", Me: "127.0.0.1:27017"}, e.opTime.Next())
	if _, err := e.testRun(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}}}}); err != nil {
		t.Fatal(err)
	}
	inc := func(ls bson.Binary, start bool) error {
		_, err := e.testRun(t, append(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}}}}, txnFields(ls, 1, start)...))
		return err
	}
	a, b := newLSID(2), newLSID(3)
	if err := inc(a, true); err != nil {
		t.Fatal(err)
	}
	if err := inc(b, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(a, 1, false)...)); err != nil {
		t.Fatal(err)
	}
	_, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(b, 1, false)...))
	me := mongoerr.From(err)
	if me == nil || me.Code != mongoerr.WriteConflict {
		t.Fatalf("second committer: %v", err)
	}
	if labels, _ := bsonx.Get(me.Extra, "errorLabels"); labels == nil {
		t.Fatalf("WriteConflict without TransientTransactionError: %v", me.Reply())
	}
	if n := countDocs(t, e, bson.D{{Key: "n", Value: 1}}); n != 1 {
		t.Fatalf("n is not 1 after one committed $inc")
	}
}

// A transaction older than transactionLifetimeLimitSeconds is aborted: its
// next command gets NoSuchTransaction and its writes never land.
func TestTransactionLifetimeLimit(t *testing.T) {
	e := openTxnTestEngine(t)
	e.repl = newReplState(ReplConfig{SetName: "rs0", Me: "127.0.0.1:27017"}, e.opTime.Next())
	clock := e.clock.(*ttl.FakeClock)
	if _, err := e.adminRun(t, bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	ls := newLSID(4)
	if _, err := e.testRun(t, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, txnFields(ls, 1, true)...)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(6 * time.Second)
	if n := e.sweepTxns(clock.Now()); n != 1 {
		t.Fatalf("sweeper aborted %d transactions", n)
	}
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(ls, 1, false)...)); errCodeOf(err) != mongoerr.NoSuchTransaction {
		t.Fatalf("commit after the lifetime limit: %v", err)
	}
	if n := countDocs(t, e, bson.D{}); n != 0 {
		t.Fatalf("expired transaction left %d documents", n)
	}
}

// The documents a transaction writes get the commit's time as _ts (spec
// §1: _ts is the last modification, which happens at the commit), however
// long the transaction ran.
func TestTransactionWritesGetTheCommitTS(t *testing.T) {
	e := openTxnTestEngine(t)
	e.repl = newReplState(ReplConfig{SetName: "rs0", Me: "127.0.0.1:27017"}, e.opTime.Next())
	clock := e.clock.(*ttl.FakeClock)
	ls := newLSID(5)
	if _, err := e.testRun(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.testRun(t, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, txnFields(ls, 1, true)...)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	if _, err := e.testRun(t, append(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}}}, txnFields(ls, 1, false)...)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	commitTS := clock.Now().Unix()
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(ls, 1, false)...)); err != nil {
		t.Fatal(err)
	}
	res, err := e.testRun(t, bson.D{{Key: "find", Value: "c"}, {Key: "projection", Value: bson.D{{Key: "_ts", Value: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := bsonx.Get(res, "cursor")
	fb, _ := bsonx.Get(cur.(bson.D), "firstBatch")
	docs := fb.(bson.A)
	if len(docs) != 2 {
		t.Fatalf("%d documents", len(docs))
	}
	for _, d := range docs {
		raw := d.(bson.Raw)
		n, _ := raw.Lookup("_ts").AsInt64OK()
		if n != commitTS {
			ts := raw.Lookup("_ts")
			t.Fatalf("%v: _ts %v, want the commit's %d", d, ts, commitTS)
		}
	}
}

// TTL inside a transaction: the rule holds at every read of the
// transaction, as everywhere (spec: expired = absent from the instant of
// expiry). A document the transaction saw live and that expires while it
// runs is absent from its later reads and cannot be updated; one that
// expires between the transaction's writes and its commit is written with
// the commit's _ts (TestTransactionWritesGetTheCommitTS), so a write
// extends its life from the commit.
func TestTransactionReadsApplyTheTTLRule(t *testing.T) {
	e := openTxnTestEngine(t)
	e.repl = newReplState(ReplConfig{SetName: "rs0", Me: "127.0.0.1:27017"}, e.opTime.Next())
	clock := e.clock.(*ttl.FakeClock)
	if _, err := e.testRun(t, bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 10}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.testRun(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "ttl", Value: 5}}, bson.D{{Key: "_id", Value: 2}}}}}); err != nil {
		t.Fatal(err)
	}
	ls := newLSID(6)
	find := func(start bool) int {
		res, err := e.testRun(t, append(bson.D{{Key: "find", Value: "c"}}, txnFields(ls, 1, start)...))
		if err != nil {
			t.Fatal(err)
		}
		cur, _ := bsonx.Get(res, "cursor")
		fb, _ := bsonx.Get(cur.(bson.D), "firstBatch")
		return len(fb.(bson.A))
	}
	if n := find(true); n != 2 {
		t.Fatalf("%d documents at the start", n)
	}
	clock.Advance(6 * time.Second) // document 1 expires (ttl 5)
	if n := find(false); n != 1 {
		t.Fatalf("%d documents after document 1 expired, want 1", n)
	}
	res, err := e.testRun(t, append(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}}}, txnFields(ls, 1, false)...))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := bsonx.Get(res, "n"); n != int32(0) {
		t.Fatalf("update of an expired document in a transaction matched: %v", res)
	}
	if _, err := e.adminRun(t, append(bson.D{{Key: "commitTransaction", Value: 1}}, txnFields(ls, 1, false)...)); err != nil {
		t.Fatal(err)
	}
}
