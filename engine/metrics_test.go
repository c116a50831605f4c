package engine

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
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
