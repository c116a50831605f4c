package engine

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/wire"
)

// openBenchEngine opens an engine over an in-memory store, closed when
// the benchmark ends.
func openBenchEngine(b *testing.B) *Engine {
	b.Helper()
	kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(Config{KV: kv, Reaper: ReaperConfig{Disabled: true}})
	if err != nil {
		kv.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); kv.Close() })
	return e
}

// BenchmarkInsertManyHandle is an insert of 1000 small documents (one
// secondary index) through Handle: decode, dispatch, validation, the write
// path and the reply, without the network.
func BenchmarkInsertManyHandle(b *testing.B) {
	e := openBenchEngine(b)
	ctx := context.Background()
	conn := &wire.ConnInfo{}
	idx, _ := bson.Marshal(bson.D{{Key: "createIndexes", Value: "p"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "name", Value: "n_1"}}}}, {Key: "$db", Value: "bench"}})
	e.Handle(ctx, &wire.Request{Conn: conn, Command: idx})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		docs := bson.A{}
		for j := 0; j < 1000; j++ {
			docs = append(docs, bson.D{{Key: "_id", Value: int64(i*1000 + j)}, {Key: "n", Value: int32(j)}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}})
		}
		ins, _ := bson.Marshal(bson.D{{Key: "insert", Value: "p"}, {Key: "documents", Value: docs}, {Key: "$db", Value: "bench"}})
		b.StartTimer()
		e.Handle(ctx, &wire.Request{Conn: conn, Command: ins})
	}
}
