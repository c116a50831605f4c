package engine_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

// syncSpy counts batch and transaction commits by their sync flag.
type syncSpy struct {
	storage.TxnKV
	synced, unsynced atomic.Int64
}

type spyTxn struct {
	storage.Txn
	s *syncSpy
}

func (s *syncSpy) Begin() (storage.Txn, error) {
	tx, err := s.TxnKV.Begin()
	if err != nil {
		return nil, err
	}
	return &spyTxn{Txn: tx, s: s}, nil
}

func (t *spyTxn) Commit(ctx context.Context, sync bool) error {
	if t.Len() > 0 {
		if sync {
			t.s.synced.Add(1)
		} else {
			t.s.unsynced.Add(1)
		}
	}
	return t.Txn.Commit(ctx, sync)
}

type spyBatch struct {
	storage.Batch
	s *syncSpy
}

func (s *syncSpy) NewBatch() storage.Batch { return &spyBatch{Batch: s.TxnKV.NewBatch(), s: s} }

func (b *spyBatch) Commit(sync bool) error {
	if sync {
		b.s.synced.Add(1)
	} else {
		b.s.unsynced.Add(1)
	}
	return b.Batch.Commit(sync)
}

// TestJournaledWritesCommitWithSync: j: true makes the document's batch
// commit with a WAL sync before the reply; the default (w: 1) does not.
func TestJournaledWritesCommitWithSync(t *testing.T) {
	kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	spy := &syncSpy{TxnKV: kv}
	// A stopped clock: the expiry clock's lease (a synced write once per
	// second of activity) is written once, by the warm-up insert below.
	e, err := engine.Open(engine.Config{KV: spy, Clock: ttl.NewFakeClock(t0), Reaper: engine.ReaperConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	ws := wire.NewServer(e, wire.Options{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go ws.Serve(ln)
	defer func() { ws.Close(); e.Close(); kv.Close() }()
	client, _ := mongo.Connect(options.Client().ApplyURI("mongodb://" + ln.Addr().String() + "/?directConnection=true"))
	defer client.Disconnect(context.Background())
	db := client.Database("s")
	db.RunCommand(ctx, bson.D{{Key: "create", Value: "c"}})
	plain := db.Collection("c")
	journaled := db.Collection("c", options.Collection().SetWriteConcern(writeconcern.Journaled()))

	plain.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}})
	s0, u0 := spy.synced.Load(), spy.unsynced.Load()
	plain.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if spy.synced.Load() != s0 || spy.unsynced.Load() != u0+1 {
		t.Fatalf("w:1 insert: synced %d→%d unsynced %d→%d", s0, spy.synced.Load(), u0, spy.unsynced.Load())
	}
	journaled.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	journaled.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	journaled.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}})
	if got := spy.synced.Load() - s0; got != 3 {
		t.Fatalf("j:true writes committed with sync %d times, want 3", got)
	}
}
