package engine_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

// testServer is an in-process mayfly: in-memory Pebble, the engine with a
// fake clock and the reaper off (tests run passes), the wire server on a
// random loopback port, and a connected driver client.
type testServer struct {
	e      *engine.Engine
	clock  *ttl.FakeClock
	client *mongo.Client
	uri    string
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func startServer(t testing.TB) *testServer {
	t.Helper()
	kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	clock := ttl.NewFakeClock(t0)
	e, err := engine.Open(engine.Config{KV: kv, Clock: clock, Logger: zaptest.NewLogger(t).WithOptions(), Reaper: engine.ReaperConfig{Disabled: true, CompactThreshold: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	ws := wire.NewServer(e, wire.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ws.Serve(ln)
	uri := "mongodb://" + ln.Addr().String() + "/?directConnection=true"
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{e: e, clock: clock, client: client, uri: uri}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
		ws.Shutdown(ctx)
		e.Close()
		kv.Close()
	})
	return ts
}

func (ts *testServer) db(name string) *mongo.Database { return ts.client.Database(name) }

func (ts *testServer) run(t testing.TB, db string, cmd bson.D) bson.D {
	t.Helper()
	var out bson.D
	if err := ts.client.Database(db).RunCommand(context.Background(), cmd).Decode(&out); err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return out
}

func cmdErr(t testing.TB, err error) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if err == nil {
		t.Fatalf("expected an error")
	}
	if !errorsAs(err, &ce) {
		var we mongo.WriteException
		if errorsAs(err, &we) && len(we.WriteErrors) > 0 {
			return mongo.CommandError{Code: int32(we.WriteErrors[0].Code), Message: we.WriteErrors[0].Message}
		}
		t.Fatalf("not a command error: %T %v", err, err)
	}
	return ce
}

func findAll(t testing.TB, c *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) []bson.D {
	t.Helper()
	cur, err := c.Find(context.Background(), filter, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var out []bson.D
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// m turns a document into a map for field lookups in assertions.
func m(d any) map[string]any {
	out := map[string]any{}
	if dd, ok := d.(bson.D); ok {
		for _, e := range dd {
			out[e.Key] = e.Value
		}
	}
	return out
}
