package engine

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/wire"
)

func metricsFindReply() bson.D {
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: "firstBatch", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"},
	}}}
}

// Counting a command allocates nothing: the hot path is a map lookup and
// atomic adds.
func TestIssue19MetricsObserveNoAlloc(t *testing.T) {
	m := newCommandMetrics()
	body := metricsFindReply()
	ins := bson.D{{Key: "n", Value: int32(3)}}
	allocs := testing.AllocsPerRun(1000, func() {
		m.observe("find", 300*time.Microsecond, body, nil)
		m.observe("insert", 2*time.Millisecond, ins, nil)
		m.observe("noSuchCommand", time.Microsecond, nil, nil)
	})
	if allocs != 0 {
		t.Errorf("observe allocates %v times per run", allocs)
	}
	if got := m.docsReturned.Load(); got < 1000 {
		t.Errorf("returned %d", got)
	}
	if got := m.docsInserted.Load(); got < 3000 {
		t.Errorf("inserted %d", got)
	}
	e := &Engine{cmdMetrics: m}
	for _, cs := range e.CommandStats() {
		if cs.Name == "find" && (cs.Buckets[len(cs.Buckets)-1] != uint64(cs.Count) || cs.Buckets[1] != 0 || cs.Buckets[2] != uint64(cs.Count)) {
			t.Errorf("find histogram %+v (300µs belongs in the ≤ 0.5 ms bucket)", cs)
		}
	}
}

func BenchmarkIssue19MetricsObserve(b *testing.B) {
	m := newCommandMetrics()
	body := metricsFindReply()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.observe("find", 300*time.Microsecond, body, nil)
		}
	})
}

// BenchmarkIssue19MetricsHandlePointRead is a point read through Handle
// (decode, dispatch, find, encode) with command metrics off and on.
func BenchmarkIssue19MetricsHandlePointRead(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
			if err != nil {
				b.Fatal(err)
			}
			defer kv.Close()
			e, err := Open(Config{KV: kv, CommandMetrics: on, Reaper: ReaperConfig{Disabled: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			conn := &wire.ConnInfo{}
			docs := bson.A{}
			for i := 0; i < 1000; i++ {
				docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}})
			}
			ins, _ := bson.Marshal(bson.D{{Key: "insert", Value: "p"}, {Key: "documents", Value: docs}, {Key: "$db", Value: "bench"}})
			e.Handle(ctx, &wire.Request{Conn: conn, Command: ins})
			reqs := make([]bson.Raw, 1000)
			for i := range reqs {
				reqs[i], _ = bson.Marshal(bson.D{{Key: "find", Value: "p"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: int32(i)}}},
					{Key: "limit", Value: int32(1)}, {Key: "singleBatch", Value: true}, {Key: "$db", Value: "bench"}})
			}
			if rep := e.Handle(ctx, &wire.Request{Conn: conn, Command: reqs[7]}); !bytes.Contains(rep, []byte("0123456789abcdef")) {
				b.Fatalf("point read found nothing: %v", rep)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.Handle(ctx, &wire.Request{Conn: conn, Command: reqs[i%len(reqs)]})
			}
		})
	}
}
