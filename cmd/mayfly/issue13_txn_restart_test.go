package main

import (
	"fmt"
	"syscall"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIssue13RestartMidTransaction: a transaction with writes is left
// open while another commits (journaled); the binary is killed with
// SIGKILL and restarted on the same --dbpath: the committed transaction's
// documents are there, the open one's insert and update are not, and
// committing the open one after the restart is NoSuchTransaction (251), as
// mongod answers for a transaction that was in progress at a restart,
// while a retried commit of the committed one is answered ok (its commit
// record was stored with its writes).
func TestIssue13RestartMidTransaction(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--replSet", "rs0", "--dbpath", dir, "--bind_ip", "127.0.0.1"}
	p := launch(t, args...)
	lsid := func(b byte) bson.D {
		id := make([]byte, 16)
		id[0], id[6], id[8] = b, 0x40, 0x80
		return bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id}}}
	}
	j := bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 1}, {Key: "j", Value: true}}}
	ok := func(addr string, cmd bson.D) bson.D {
		t.Helper()
		r := opMsg(t, addr, cmd)
		if field(r, "ok") != 1.0 || field(r, "writeErrors") != nil {
			t.Fatalf("%v: %v", cmd, r)
		}
		return r
	}
	ok(p.addr, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "base"}, {Key: "v", Value: 0}}}}, j, {Key: "$db", Value: "tx"}})
	inTxn := func(id byte, first bool) bson.D {
		d := bson.D{{Key: "lsid", Value: lsid(id)}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}}
		if first {
			d = append(d, bson.E{Key: "startTransaction", Value: true})
		}
		return d
	}
	// A: open, with an insert and an update.
	ok(p.addr, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "a1"}}}}}, append(inTxn(1, true), bson.E{Key: "$db", Value: "tx"})...))
	ok(p.addr, append(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "base"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "A"}}}}}}}}}, append(inTxn(1, false), bson.E{Key: "$db", Value: "tx"})...))
	// B: two inserts, committed with j: true.
	ok(p.addr, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "b1"}}}}}, append(inTxn(2, true), bson.E{Key: "$db", Value: "tx"})...))
	ok(p.addr, append(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "b2"}}}}}, append(inTxn(2, false), bson.E{Key: "$db", Value: "tx"})...))
	commitB := append(bson.D{{Key: "commitTransaction", Value: 1}}, append(inTxn(2, false), j, bson.E{Key: "$db", Value: "admin"})...)
	ok(p.addr, commitB)

	docs := func(addr string) string {
		r := ok(addr, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "$db", Value: "tx"}})
		batch, _ := field(field(r, "cursor").(bson.D), "firstBatch").(bson.A)
		out := []string{}
		for _, d := range batch {
			out = append(out, fmt.Sprintf("%v:%v", field(d.(bson.D), "_id"), field(d.(bson.D), "v")))
		}
		return fmt.Sprint(out)
	}
	const want = "[b1:<nil> b2:<nil> base:0]"
	if got := docs(p.addr); got != want {
		t.Fatalf("before the kill, outside the transactions: %s, want %s", got, want)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()

	p2 := launch(t, args...)
	if got := docs(p2.addr); got != want {
		t.Fatalf("after kill -9 mid-transaction: %s, want %s (B committed, A gone)", got, want)
	}
	commitA := append(bson.D{{Key: "commitTransaction", Value: 1}}, append(inTxn(1, false), bson.E{Key: "$db", Value: "admin"})...)
	r := opMsg(t, p2.addr, commitA)
	if field(r, "ok") != 0.0 || field(r, "code") != int32(251) {
		t.Errorf("commitTransaction of the transaction open at the kill: %v, want NoSuchTransaction (251)", r)
	}
	// B's commit retried after the restart (its reply lost) is answered
	// as committed, as mongod answers from config.transactions, and
	// changes nothing.
	if r := opMsg(t, p2.addr, commitB); field(r, "ok") != 1.0 {
		t.Errorf("commitTransaction of the transaction committed before the kill: %v, want ok", r)
	}
	if got := docs(p2.addr); got != want {
		t.Fatalf("after the commits sent again: %s, want %s", got, want)
	}
}
