package engine_test

import (
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

// openOnDir runs an engine on a data directory and returns a client and a
// stop function that shuts everything down cleanly.
func openOnDir(t *testing.T, dir string, clock ttl.Clock) (*mongo.Client, *engine.Engine, func()) {
	t.Helper()
	kv, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Config{KV: kv, Clock: clock, Reaper: engine.ReaperConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	ws := wire.NewServer(e, wire.Options{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go ws.Serve(ln)
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + ln.Addr().String() + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	return client, e, func() {
		client.Disconnect(ctx)
		ws.Close()
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		if err := kv.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	clock := ttl.NewFakeClock(t0)
	client, _, stop := openOnDir(t, dir, clock)
	db := client.Database("r")
	db.RunCommand(ctx, bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 100}})
	c := db.Collection("c")
	var docs []any
	for i := 0; i < 500; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 5}, {Key: "d", Value: bson.NewDecimal128(0, uint64(i))}})
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(false)})
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: "short"}, {Key: "ttl", Value: 50}})
	clock.Advance(60 * time.Second) // "short" expires
	time.Sleep(1100 * time.Millisecond)
	stop()

	// Reopen with the clock set back: the high-water mark keeps expired
	// documents expired (spec §6.5).
	clock.Set(t0)
	client, _, stop = openOnDir(t, dir, clock)
	defer stop()
	c = client.Database("r").Collection("c")
	if got := len(findAll(t, c, bson.D{})); got != 500 {
		t.Fatalf("after restart: %d documents, want 500", got)
	}
	if got := len(findAll(t, c, bson.D{{Key: "k", Value: 3}})); got != 100 {
		t.Fatalf("index after restart: %d", got)
	}
	specs, _ := c.Indexes().ListSpecifications(ctx)
	if len(specs) != 3 { // _id_, _ts_1 (DefaultTTL), k_1
		t.Fatalf("indexes after restart: %v", specs)
	}
	var info bson.D
	client.Database("r").RunCommand(ctx, bson.D{{Key: "collStats", Value: "c"}}).Decode(&info)
	if m(info)["count"] != int64(500) {
		t.Fatalf("collStats after restart: %v", info)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate after restart: %v", err)
	}
}
