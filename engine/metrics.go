package engine

import (
	"math"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

// Command metrics for the Prometheus endpoint (server/metrics.go). They
// are kept here as plain atomics, counted in Handle only when
// Config.CommandMetrics is set, and read at scrape time: the hot path pays
// a map lookup (no allocation) and a few atomic adds, and nothing at all
// when metrics are off.

// LatencyBounds are the upper bounds, in seconds, of the command latency
// histogram's buckets (the +Inf bucket is implied).
var LatencyBounds = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// latencyBoundsNS are LatencyBounds in nanoseconds, for the hot path.
var latencyBoundsNS = func() []int64 {
	ns := make([]int64, len(LatencyBounds))
	for i, b := range LatencyBounds {
		ns[i] = int64(math.Round(b * 1e9))
	}
	return ns
}()

// docKind says how a command's reply counts documents.
type docKind uint8

const (
	docNone docKind = iota
	docInsert
	docUpdate
	docDelete
	docFindAndModify
	docFirstBatch
	docNextBatch
)

type cmdStat struct {
	name    string
	kind    docKind
	count   atomic.Int64
	errors  atomic.Int64
	sumNS   atomic.Int64
	buckets []atomic.Int64 // per bucket (not cumulative); the last is +Inf
}

// commandMetrics are the per-command counters. byName is built once and
// only read afterwards, so lookups need no lock.
type commandMetrics struct {
	byName map[string]*cmdStat // every spelling → its command's counters
	all    []*cmdStat          // canonical order, then other
	other  *cmdStat            // names not in the command table

	docCounters
}

// docCounters are the documents commands inserted, updated, deleted and
// returned.
type docCounters struct {
	docsInserted, docsUpdated, docsDeleted, docsReturned atomic.Int64
}

func newCommandMetrics() *commandMetrics {
	m := &commandMetrics{byName: map[string]*cmdStat{}}
	mk := func(name string) *cmdStat {
		st := &cmdStat{name: name, buckets: make([]atomic.Int64, len(latencyBoundsNS)+1)}
		switch strings.ToLower(name) {
		case "insert":
			st.kind = docInsert
		case "update":
			st.kind = docUpdate
		case "delete":
			st.kind = docDelete
		case "findandmodify":
			st.kind = docFindAndModify
		case "find", "aggregate":
			st.kind = docFirstBatch
		case "getmore":
			st.kind = docNextBatch
		}
		m.all = append(m.all, st)
		return st
	}
	for _, c := range Commands() {
		st := mk(c.Name)
		m.byName[c.Name] = st
		for _, a := range c.Aliases {
			m.byName[a] = st
		}
	}
	m.other = mk("other")
	return m
}

// observe counts one command: its latency, whether it failed, and the
// documents its reply says it wrote or returned.
func (m *commandMetrics) observe(name string, d time.Duration, body bson.D, err error) {
	st := m.byName[name]
	if st == nil {
		st = m.other
	}
	st.count.Add(1)
	ns := int64(d)
	st.sumNS.Add(ns)
	i := 0
	for i < len(latencyBoundsNS) && ns > latencyBoundsNS[i] {
		i++
	}
	st.buckets[i].Add(1)
	if err != nil {
		st.errors.Add(1)
		return
	}
	m.count(st.kind, body)
}

// count adds the documents a successful reply says were written or returned.
func (m *docCounters) count(kind docKind, body bson.D) {
	switch kind {
	case docInsert:
		m.docsInserted.Add(metricInt(body, "n"))
	case docUpdate:
		// mongod's metrics.document.updated counts the documents updates
		// matched, not only those they changed (DOCS-15950): n less the
		// upserts.
		ups := metricLen(body, "upserted")
		m.docsUpdated.Add(metricInt(body, "n") - ups)
		m.docsInserted.Add(ups)
	case docDelete:
		m.docsDeleted.Add(metricInt(body, "n"))
	case docFindAndModify:
		m.countFindAndModify(body)
	case docFirstBatch, docNextBatch:
		cv, _ := bsonx.Get(body, "cursor")
		cd, _ := cv.(bson.D)
		key := "firstBatch"
		if kind == docNextBatch {
			key = "nextBatch"
		}
		m.docsReturned.Add(metricLen(cd, key))
	}
}

func (m *docCounters) countFindAndModify(body bson.D) {
	lv, _ := bsonx.Get(body, "lastErrorObject")
	leo, _ := lv.(bson.D)
	n := metricInt(leo, "n")
	if n == 0 {
		return
	}
	if _, ok := bsonx.Get(leo, "upserted"); ok {
		m.docsInserted.Add(n)
		return
	}
	if _, ok := bsonx.Get(leo, "updatedExisting"); ok {
		m.docsUpdated.Add(n)
		return
	}
	m.docsDeleted.Add(n)
}

func metricInt(d bson.D, key string) int64 {
	v, _ := bsonx.Get(d, key)
	n, _ := bsonx.ToInt64(v)
	return n
}

func metricLen(d bson.D, key string) int64 {
	v, _ := bsonx.Get(d, key)
	switch a := v.(type) {
	case bson.A:
		return int64(len(a))
	case []bson.D:
		return int64(len(a))
	case []any:
		return int64(len(a))
	}
	return 0
}

// CommandStat is one command's counters: how often it ran, how often it
// failed, its total latency and its latency histogram (Buckets[i] counts
// the runs at or below LatencyBounds[i], cumulative as Prometheus wants).
type CommandStat struct {
	Name    string
	Count   int64
	Errors  int64
	Sum     time.Duration
	Buckets []uint64
}

// CommandStats returns the counters of the commands that have run, or nil
// when the engine was opened without Config.CommandMetrics.
func (e *Engine) CommandStats() []CommandStat {
	m := e.cmdMetrics
	if m == nil {
		return nil
	}
	var out []CommandStat
	for _, st := range m.all {
		n := st.count.Load()
		if n == 0 {
			continue
		}
		cs := CommandStat{Name: st.name, Count: n, Errors: st.errors.Load(), Sum: time.Duration(st.sumNS.Load()),
			Buckets: make([]uint64, len(latencyBoundsNS))}
		var cum uint64
		for i := range cs.Buckets {
			cum += uint64(st.buckets[i].Load())
			cs.Buckets[i] = cum
		}
		// Counters are read one by one while commands run: keep the
		// histogram self-consistent (no bucket above the count).
		total := cum + uint64(st.buckets[len(latencyBoundsNS)].Load())
		if total > uint64(n) {
			cs.Count = int64(total)
		}
		out = append(out, cs)
	}
	return out
}

// DocumentCounts are the documents commands inserted, updated, deleted and
// returned to clients (as mongod's metrics.document; TTL deletions are
// counted apart, in ReaperStats).
type DocumentCounts struct {
	Inserted, Updated, Deleted, Returned int64
}

// DocumentCounts returns the document counters.
func (e *Engine) DocumentCounts() DocumentCounts {
	m := e.docs
	if m == nil {
		return DocumentCounts{}
	}
	return DocumentCounts{m.docsInserted.Load(), m.docsUpdated.Load(), m.docsDeleted.Load(), m.docsReturned.Load()}
}

// OpenCursors is the number of open cursors.
func (e *Engine) OpenCursors() int { return e.cursors.open() }

// IsOpen reports whether the engine is open (not yet closed).
func (e *Engine) IsOpen() bool { return !e.closed.Load() }

// TTLFigures are the TTL figures of serverStatus.ttl.
type TTLFigures struct {
	CollectionsWithTTL      int64
	ExpiredBacklog          int64
	ExpiredBacklogBytes     int64
	OldestExpiredLagSeconds float64
	PurgeRatePerSecond      float64
	DeletedDocuments        int64
	DeletedBytes            int64
	ReclaimedBytes          int64
	Passes                  int64
	Backoffs                int64
}

// TTLFigures computes the TTL figures, the same ones serverStatus.ttl
// reports.
func (e *Engine) TTLFigures() TTLFigures {
	d := e.ttlStatus()
	f := func(k string) float64 {
		v, _ := bsonx.Get(d, k)
		x, _ := bsonx.ToFloat(v)
		return x
	}
	i := func(k string) int64 { return metricInt(d, k) }
	return TTLFigures{
		CollectionsWithTTL:      i("collectionsWithTTL"),
		ExpiredBacklog:          i("expiredBacklog"),
		ExpiredBacklogBytes:     i("expiredBacklogBytes"),
		OldestExpiredLagSeconds: f("oldestExpiredLagSeconds"),
		PurgeRatePerSecond:      f("purgeRatePerSecond"),
		DeletedDocuments:        i("deletedDocuments"),
		DeletedBytes:            i("deletedBytes"),
		ReclaimedBytes:          i("reclaimedBytes"),
		Passes:                  i("passes"),
		Backoffs:                i("backoffs"),
	}
}
