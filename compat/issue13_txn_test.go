package compat

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// A withTransaction callback's writes to two collections land together at
// commit: inside, the transaction reads its own writes; outside, nothing is
// visible until the commit, then everything is.
func TestIssue13TxnWithTransactionCommits(t *testing.T) {
	e := newReplEnv(t)
	e.insert("orders", bson.D{{Key: "_id", Value: 0}})
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	defer sess.EndSession(e.ctx)
	_, err = sess.WithTransaction(e.ctx, func(ctx context.Context) (any, error) {
		if _, err := e.coll("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "book"}}); err != nil {
			return nil, err
		}
		if _, err := e.coll("stock").UpdateOne(ctx, bson.D{{Key: "_id", Value: "book"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: -1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
			return nil, err
		}
		// Own writes are visible inside ...
		if n, err := e.coll("orders").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
			return nil, fmt.Errorf("inside the transaction: %d orders, %v", n, err)
		}
		// ... and nothing outside (a read without the session).
		if n := e.count("orders", bson.D{}); n != 1 {
			return nil, fmt.Errorf("outside the transaction before commit: %d orders", n)
		}
		if n := e.count("stock", bson.D{}); n != 0 {
			return nil, fmt.Errorf("outside the transaction before commit: %d stock documents", n)
		}
		return nil, nil
	})
	noErr(t, err, "withTransaction")
	eq(t, "orders after commit", e.count("orders", bson.D{}), int64(2))
	var stock bson.M
	noErr(t, e.coll("stock").FindOne(e.ctx, bson.D{{Key: "_id", Value: "book"}}).Decode(&stock), "stock")
	eq(t, "stock after commit", stock["n"], any(int32(-1)))
	st := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
	if n := val(t, st, "transactions.totalCommitted").AsInt64(); n < 1 {
		t.Fatalf("serverStatus transactions.totalCommitted %d", n)
	}
}

// abortTransaction leaves nothing; the session can run a new transaction.
func TestIssue13TxnAbort(t *testing.T) {
	e := newReplEnv(t)
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	defer sess.EndSession(e.ctx)
	noErr(t, sess.StartTransaction(), "start")
	ctx := mongo.NewSessionContext(e.ctx, sess)
	_, err = e.coll("c").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}})
	noErr(t, err, "insert in transaction")
	noErr(t, sess.AbortTransaction(e.ctx), "abort")
	eq(t, "documents after abort", e.count("c", bson.D{}), int64(0))
	noErr(t, sess.StartTransaction(), "start again")
	_, err = e.coll("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	noErr(t, err, "insert in the second transaction")
	noErr(t, sess.CommitTransaction(e.ctx), "commit")
	eq(t, "documents after the second transaction", e.count("c", bson.D{}), int64(1))
}

// Snapshot isolation: a transaction reads the state as of its first read,
// not a write committed by another client afterwards.
func TestIssue13TxnSnapshotReads(t *testing.T) {
	e := newReplEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "old"}})
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	defer sess.EndSession(e.ctx)
	noErr(t, sess.StartTransaction(options.Transaction().SetReadConcern(readconcern.Snapshot())), "start")
	ctx := mongo.NewSessionContext(e.ctx, sess)
	var d bson.M
	noErr(t, e.coll("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d), "first read")
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "new"}}}})
	noErr(t, err, "update outside")
	noErr(t, e.coll("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d), "second read")
	eq(t, "value inside the transaction", d["v"], any("old"))
	noErr(t, sess.CommitTransaction(e.ctx), "commit (read-only)")
	noErr(t, e.coll("c").FindOne(e.ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d), "read after")
	eq(t, "value after", d["v"], any("new"))
}

// Two transactions writing one document: the second committer gets
// WriteConflict (112) with the TransientTransactionError label, and its
// write is not applied.
func TestIssue13TxnWriteConflictLabel(t *testing.T) {
	e := newReplEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	s1, err := e.cli.StartSession()
	noErr(t, err, "session 1")
	defer s1.EndSession(e.ctx)
	s2, err := e.cli.StartSession()
	noErr(t, err, "session 2")
	defer s2.EndSession(e.ctx)
	noErr(t, s1.StartTransaction(), "start 1")
	noErr(t, s2.StartTransaction(), "start 2")
	c1, c2 := mongo.NewSessionContext(e.ctx, s1), mongo.NewSessionContext(e.ctx, s2)
	_, err = e.coll("c").UpdateOne(c1, bson.D{{Key: "_id", Value: 1}}, inc)
	noErr(t, err, "update 1")
	_, err = e.coll("c").UpdateOne(c2, bson.D{{Key: "_id", Value: 1}}, inc)
	noErr(t, err, "update 2")
	noErr(t, s1.CommitTransaction(e.ctx), "commit 1")
	err = s2.CommitTransaction(e.ctx)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 112 || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("second commit: %v, want WriteConflict with TransientTransactionError", err)
	}
	var d bson.M
	noErr(t, e.coll("c").FindOne(e.ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d), "read")
	eq(t, "n", d["n"], any(int32(1)))
}

// What mongod refuses inside a transaction is refused with its codes;
// creating a collection inside one is allowed (4.4+).
func TestIssue13TxnRefusals(t *testing.T) {
	e := newReplEnv(t)
	sess, err := e.cli.StartSession()
	noErr(t, err, "session")
	defer sess.EndSession(e.ctx)
	ctx := mongo.NewSessionContext(e.ctx, sess)

	// commitTransaction / abortTransaction outside a transaction: 125, as
	// mongod's CmdCommitTxn.
	for _, cmd := range []string{"commitTransaction", "abortTransaction"} {
		code, name, _ := errCode(e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: cmd, Value: 1}}).Err())
		eq(t, cmd+" outside a transaction", code, int32(125))
		eq(t, cmd+" codeName", name, "CommandFailed")
	}

	noErr(t, sess.StartTransaction(), "start")
	err = e.db.RunCommand(ctx, bson.D{{Key: "count", Value: "c"}}).Err()
	code, name, _ := errCode(err)
	eq(t, "count in a transaction", code, int32(263))
	eq(t, "codeName", name, "OperationNotSupportedInTransaction")
	_ = sess.AbortTransaction(e.ctx)

	// Namespaces a transaction cannot touch.
	for _, db := range []string{"local", "config"} {
		noErr(t, sess.StartTransaction(), "start")
		_, err = e.cli.Database(db).Collection("x").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
		code, _, _ = errCode(err)
		eq(t, "insert into "+db+" in a transaction", code, int32(263))
		_ = sess.AbortTransaction(e.ctx)
	}

	noErr(t, sess.StartTransaction(), "start")
	_, err = e.coll("c").Aggregate(ctx, bson.A{bson.D{{Key: "$out", Value: "o"}}})
	code, _, _ = errCode(err)
	eq(t, "$out in a transaction", code, int32(263))
	_ = sess.AbortTransaction(e.ctx)

	noErr(t, sess.StartTransaction(), "start")
	_, err = e.coll("brandnew").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "implicit collection creation in a transaction")
	noErr(t, sess.CommitTransaction(e.ctx), "commit")
	eq(t, "created in a transaction", e.count("brandnew", bson.D{}), int64(1))

	// A duplicate key inside a transaction fails the statement and aborts
	// the transaction: its earlier writes are gone.
	noErr(t, sess.StartTransaction(), "start")
	_, err = e.coll("brandnew").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "insert")
	_, err = e.coll("brandnew").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate in a transaction: %v", err)
	}
	err = sess.CommitTransaction(e.ctx)
	code, _, _ = errCode(err)
	eq(t, "commit after a failed statement", code, int32(251))
	eq(t, "documents after the aborted transaction", e.count("brandnew", bson.D{}), int64(1))
}

// A standalone refuses transactions with code 20, as mongod.
func TestIssue13TxnStandaloneRefuses(t *testing.T) {
	e := newEnv(t)
	sess, err := e.cli.StartSession()
	noErr(t, err, "session")
	defer sess.EndSession(e.ctx)
	noErr(t, sess.StartTransaction(), "start")
	_, err = e.coll("c").InsertOne(mongo.NewSessionContext(e.ctx, sess), bson.D{{Key: "_id", Value: 1}})
	code, _, _ := errCode(err)
	eq(t, "transaction on a standalone", code, int32(20))
	_ = sess.AbortTransaction(e.ctx)
}

// A transaction running longer than transactionLifetimeLimitSeconds is
// aborted: its commit fails with NoSuchTransaction and nothing lands.
func TestIssue13TxnLifetimeLimit(t *testing.T) {
	e := newReplEnv(t)
	e.admin(bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 2}})
	res := e.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 1}})
	eq(t, "getParameter", val(t, res, "transactionLifetimeLimitSeconds").AsInt64(), int64(2))
	sess, err := e.cli.StartSession()
	noErr(t, err, "session")
	defer sess.EndSession(e.ctx)
	noErr(t, sess.StartTransaction(), "start")
	_, err = e.coll("c").InsertOne(mongo.NewSessionContext(e.ctx, sess), bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert")
	e.advance(3 * time.Second)
	err = sess.CommitTransaction(e.ctx)
	code, _, _ := errCode(err)
	eq(t, "commit after the lifetime limit", code, int32(251))
	eq(t, "documents", e.count("c", bson.D{}), int64(0))
}

func asInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	}
	return 0, fmt.Errorf("not an integer: %T %v", v, v)
}

// The bank: 16 clients move money between accounts in transactions (the
// driver's withTransaction retries conflicts) for a while; the total never
// changes, seen from outside at any moment, and every committed transfer
// is in the ledger exactly once (each transfer writes its ledger entry in
// the same transaction), so balances reconcile with the ledger.
func TestIssue13TxnBankTransfers(t *testing.T) {
	e := newReplEnv(t)
	const accounts, initial, clients = 10, 1000, 16
	dur := 30 * time.Second
	if testing.Short() {
		dur = 3 * time.Second
	}
	var docs []any
	for i := 0; i < accounts; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "balance", Value: int32(initial)}})
	}
	e.insert("accounts", docs...)
	total := func(ctx context.Context) (int64, error) {
		cur, err := e.coll("accounts").Aggregate(ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "t", Value: bson.D{{Key: "$sum", Value: "$balance"}}}}}}})
		if err != nil {
			return 0, err
		}
		var out []bson.M
		if err := cur.All(ctx, &out); err != nil {
			return 0, err
		}
		return asInt64(out[0]["t"])
	}
	deadline := time.Now().Add(dur)
	var committed, conflicts atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, clients+1)
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			sess, err := e.cli.StartSession()
			if err != nil {
				errc <- err
				return
			}
			defer sess.EndSession(e.ctx)
			for n := 0; time.Now().Before(deadline); n++ {
				from, to := rng.Intn(accounts), rng.Intn(accounts)
				if from == to {
					continue
				}
				amount := 1 + rng.Intn(50)
				id := fmt.Sprintf("%d-%d", g, n)
				attempts := 0
				_, err := sess.WithTransaction(e.ctx, func(ctx context.Context) (any, error) {
					attempts++
					var a bson.M
					if err := e.coll("accounts").FindOne(ctx, bson.D{{Key: "_id", Value: from}}).Decode(&a); err != nil {
						return nil, err
					}
					if bal, _ := asInt64(a["balance"]); bal < int64(amount) {
						return nil, nil // insufficient funds: nothing moves
					}
					if _, err := e.coll("accounts").UpdateOne(ctx, bson.D{{Key: "_id", Value: from}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: int32(-amount)}}}}); err != nil {
						return nil, err
					}
					if _, err := e.coll("accounts").UpdateOne(ctx, bson.D{{Key: "_id", Value: to}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: int32(amount)}}}}); err != nil {
						return nil, err
					}
					_, err := e.coll("ledger").InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "from", Value: int32(from)}, {Key: "to", Value: int32(to)}, {Key: "amount", Value: int32(amount)}})
					return nil, err
				})
				if err != nil {
					errc <- fmt.Errorf("transfer %s: %w", id, err)
					return
				}
				committed.Add(1)
				conflicts.Add(int64(attempts - 1))
			}
		}(g)
	}
	// An observer checks the invariant from outside while transfers run.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			sum, err := total(e.ctx)
			if err != nil {
				errc <- err
				return
			}
			if sum != accounts*initial {
				errc <- fmt.Errorf("total %d while transfers run, want %d", sum, accounts*initial)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	sum, err := total(e.ctx)
	noErr(t, err, "total")
	eq(t, "total after the run", sum, int64(accounts*initial))
	// Reconcile: every account's balance is initial + what the ledger says.
	cur, err := e.coll("ledger").Find(e.ctx, bson.D{})
	noErr(t, err, "ledger")
	var ledger []bson.M
	noErr(t, cur.All(e.ctx, &ledger), "ledger")
	want := make([]int64, accounts)
	for i := range want {
		want[i] = initial
	}
	for _, l := range ledger {
		amt := int64(l["amount"].(int32))
		want[l["from"].(int32)] -= amt
		want[l["to"].(int32)] += amt
	}
	for i := 0; i < accounts; i++ {
		var a bson.M
		noErr(t, e.coll("accounts").FindOne(e.ctx, bson.D{{Key: "_id", Value: i}}).Decode(&a), "account")
		if got, _ := asInt64(a["balance"]); got != want[i] {
			t.Fatalf("account %d: balance %d, ledger says %d", i, got, want[i])
		}
	}
	if committed.Load() == 0 {
		t.Fatal("no transfer committed")
	}
	t.Logf("%d transfers committed (%d in the ledger), %d retried after a conflict, in %v", committed.Load(), len(ledger), conflicts.Load(), dur)
}
