package engine_test

import (
	"context"
	"net"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

// TestIssue21WriteConcernSpellingsSync: j and fsync are mongod's safeBool,
// so every truthy spelling (true, a non-zero int32, int64, double or
// decimal) commits the write with a WAL sync, exactly as j: true does, and
// every falsy one (false, 0, 0.0, null) does not.
func TestIssue21WriteConcernSpellingsSync(t *testing.T) {
	kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	spy := &syncSpy{TxnKV: kv}
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
	db := client.Database("wc")
	db.RunCommand(ctx, bson.D{{Key: "create", Value: "c"}})

	d1, _ := bson.ParseDecimal128("1")
	dHalf, _ := bson.ParseDecimal128("0.5")
	d0, _ := bson.ParseDecimal128("0E+3")
	cases := []struct {
		wc   bson.D
		sync bool
	}{
		{bson.D{{Key: "j", Value: true}}, true},
		{bson.D{{Key: "j", Value: int32(1)}}, true},
		{bson.D{{Key: "j", Value: int64(1)}}, true},
		{bson.D{{Key: "j", Value: 1.0}}, true},
		{bson.D{{Key: "j", Value: 0.5}}, true},
		{bson.D{{Key: "j", Value: int32(-3)}}, true},
		{bson.D{{Key: "j", Value: d1}}, true},
		{bson.D{{Key: "j", Value: dHalf}}, true},
		{bson.D{{Key: "w", Value: int32(1)}, {Key: "j", Value: int32(1)}}, true},
		{bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: 1.0}}, true},
		{bson.D{{Key: "fsync", Value: true}}, true},
		{bson.D{{Key: "fsync", Value: int32(1)}}, true},
		{bson.D{{Key: "fsync", Value: int64(2)}}, true},
		{bson.D{{Key: "fsync", Value: 1.0}}, true},
		{bson.D{{Key: "j", Value: false}, {Key: "fsync", Value: int32(1)}}, true},
		{bson.D{{Key: "j", Value: false}}, false},
		{bson.D{{Key: "j", Value: int32(0)}}, false},
		{bson.D{{Key: "j", Value: 0.0}}, false},
		{bson.D{{Key: "j", Value: d0}}, false},
		{bson.D{{Key: "j", Value: nil}}, false},
		{bson.D{{Key: "fsync", Value: int64(0)}}, false},
		{bson.D{{Key: "w", Value: int32(1)}}, false},
	}
	// Warm-up: the first write also syncs the catalog and the clock lease.
	db.RunCommand(ctx, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	for i, c := range cases {
		s0, u0 := spy.synced.Load(), spy.unsynced.Load()
		for _, cmd := range []bson.D{
			{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i}}}}, {Key: "writeConcern", Value: c.wc}},
			{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: i}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}}, {Key: "writeConcern", Value: c.wc}},
			{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: i}}}, {Key: "limit", Value: 1}}}}, {Key: "writeConcern", Value: c.wc}},
		} {
			if err := db.RunCommand(ctx, cmd).Err(); err != nil {
				t.Fatalf("%v: %s failed: %v", c.wc, cmd[0].Key, err)
			}
		}
		synced, unsynced := spy.synced.Load()-s0, spy.unsynced.Load()-u0
		if c.sync && (synced != 3 || unsynced != 0) {
			t.Errorf("writeConcern %v: %d synced and %d unsynced commits, want 3 synced", c.wc, synced, unsynced)
		}
		if !c.sync && (synced != 0 || unsynced != 3) {
			t.Errorf("writeConcern %v: %d synced and %d unsynced commits, want 3 unsynced", c.wc, synced, unsynced)
		}
	}
}
