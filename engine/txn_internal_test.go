package engine

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
)

func openTxnTestEngine(t *testing.T) *Engine {
	t.Helper()
	kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{KV: kv, Clock: ttl.NewFakeClock(time.Unix(1_700_000_000, 0)), Reaper: ReaperConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); kv.Close() })
	return e
}

func (e *Engine) testRun(t *testing.T, cmd bson.D) (bson.D, error) {
	t.Helper()
	cmd = append(cmd, bson.E{Key: "$db", Value: "txn"})
	return e.dispatch(&Request{Ctx: context.Background(), Name: cmd[0].Key, Cmd: cmd})
}

// Two writers of different documents in a collection with a unique index
// run in parallel: while one insert is held between staging and commit,
// an insert and an update of other documents complete. (Before storage
// transactions, a unique index made every writer take the collection
// exclusively.) The held writer then commits, and a third writer that
// claims its unique value is refused.
func TestWritersOfDifferentDocumentsRunInParallel(t *testing.T) {
	e := openTxnTestEngine(t)
	mustRun := func(cmd bson.D) bson.D {
		t.Helper()
		res, err := e.testRun(t, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if we, ok := bsonx.Get(res, "writeErrors"); ok {
			t.Fatalf("%v: %v", cmd, we)
		}
		return res
	}
	mustRun(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{
		{Key: "key", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "name", Value: "email_1"}, {Key: "unique", Value: true}}}}})
	mustRun(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "b"}}}}})

	held, release := make(chan struct{}), make(chan struct{})
	testHookBeforeCommit = func(r *Request) {
		if r != nil && r.Cmd != nil {
			if v, _ := bsonx.Get(r.Cmd, "comment"); v == "hold" {
				close(held)
				<-release
			}
		}
	}
	t.Cleanup(func() { testHookBeforeCommit = nil })
	first := make(chan error, 1)
	go func() {
		_, err := e.testRun(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a"}}}}, {Key: "comment", Value: "hold"}})
		first <- err
	}()
	<-held
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustRun(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "c"}}}}})
		mustRun(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "b2"}}}}}}}}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writers of other documents waited for the held writer")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	res, err := e.testRun(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 4}, {Key: "email", Value: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bsonx.Get(res, "writeErrors"); !ok {
		t.Fatalf("duplicate unique value accepted: %v", res)
	}
}

// TestDocTxnIsTheStoresTxn: the engine's docTxn embeds the document
// store's Txn, and the store finds it through the embedding: a
// single-document write reads the latest committed state, a
// multi-document transaction its snapshot (docstore.Store.ReaderOf).
func TestDocTxnIsTheStoresTxn(t *testing.T) {
	e := openTxnTestEngine(t)
	tx, err := e.beginDocTxn()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if rd, latest := e.ds.ReaderOf(tx); !latest || rd != storage.Reader(e.kv) {
		t.Fatalf("single-document write: latest %v, want the store", latest)
	}
	tx.Multi = true
	if rd, latest := e.ds.ReaderOf(tx); latest || rd != storage.Reader(tx) {
		t.Fatalf("multi-document transaction: latest %v, want its snapshot", latest)
	}
}
