package engine

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/wire"
)

// BenchmarkUpdateOneHandle is YCSB's update ($set of one field of a
// document found by _id) through Handle, serially and from parallel
// goroutines over 1000 documents (the parallel case contends for the
// write path: locks, the storage transaction's commit).
func BenchmarkUpdateOneHandle(b *testing.B) {
	e := openBenchEngine(b)
	ctx := context.Background()
	conn := &wire.ConnInfo{}
	docs := bson.A{}
	for j := 0; j < 1000; j++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(j)}, {Key: "f", Value: "0123456789abcdef0123456789abcdef"}})
	}
	ins, _ := bson.Marshal(bson.D{{Key: "insert", Value: "u"}, {Key: "documents", Value: docs}, {Key: "$db", Value: "bench"}})
	e.Handle(ctx, &wire.Request{Conn: conn, Command: ins})
	cmds := make([][]byte, 1000)
	for j := range cmds {
		cmds[j], _ = bson.Marshal(bson.D{{Key: "update", Value: "u"}, {Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: int32(j)}}},
			{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "f", Value: "fedcba9876543210fedcba9876543210"}}}}}}}}, {Key: "$db", Value: "bench"}})
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			e.Handle(ctx, &wire.Request{Conn: conn, Command: cmds[i%len(cmds)]})
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				// A few hot documents, as YCSB's zipfian draws.
				e.Handle(ctx, &wire.Request{Conn: conn, Command: cmds[(i*7)%8]})
				i++
			}
		})
	})
}
