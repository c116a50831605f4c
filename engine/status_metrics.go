package engine

import (
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

// serverStatus's engine-wide sections that mongostat, Compass and
// monitoring agents read: asserts, extra_info, globalLock,
// metrics.document, metrics.queryExecutor, network.compression and
// storageEngine. Counters are atomics added once per command or per scan
// batch, never per document.

// statusCounters are serverStatus's engine-wide counters.
type statusCounters struct {
	userAsserts atomic.Int64 // commands answered with ok: 0
	keysScanned atomic.Int64 // metrics.queryExecutor.scanned
	docsScanned atomic.Int64 // metrics.queryExecutor.scannedObjects
	collScans   atomic.Int64 // metrics.queryExecutor.collectionScans.total
}

// docKindOf says how a command's reply counts documents, for
// metrics.document when per-command metrics are off.
func docKindOf(name string) docKind {
	switch name {
	case "insert":
		return docInsert
	case "update":
		return docUpdate
	case "delete":
		return docDelete
	case "findAndModify", "findandmodify":
		return docFindAndModify
	case "find", "aggregate":
		return docFirstBatch
	case "getMore":
		return docNextBatch
	}
	return docNone
}

// flushScan adds what a scan examined since its last flush to the
// queryExecutor counters. Scanners call it when they pause (end of a
// batch) or finish; a query counts as one collection scan, once.
func (e *Engine) flushScan(st *scanStats, collScan bool) {
	if e == nil || st == nil {
		return
	}
	if d := st.keysExamined - st.flushedKeys; d > 0 {
		e.status.keysScanned.Add(d)
		st.flushedKeys = st.keysExamined
	}
	if d := st.docsExamined - st.flushedDocs; d > 0 {
		e.status.docsScanned.Add(d)
		st.flushedDocs = st.docsExamined
	}
	if collScan && !st.collScanned {
		st.collScanned = true
		e.status.collScans.Add(1)
	}
}

func (e *Engine) documentStatus() bson.D {
	dc := e.DocumentCounts()
	return bson.D{
		{Key: "deleted", Value: dc.Deleted},
		{Key: "inserted", Value: dc.Inserted},
		{Key: "returned", Value: dc.Returned},
		{Key: "updated", Value: dc.Updated},
	}
}

// queryExecutorStatus is metrics.queryExecutor. mayfly has no tailable
// cursors, so every collection scan is non-tailable.
func (e *Engine) queryExecutorStatus() bson.D {
	cs := e.status.collScans.Load()
	return bson.D{
		{Key: "scanned", Value: e.status.keysScanned.Load()},
		{Key: "scannedObjects", Value: e.status.docsScanned.Load()},
		{Key: "collectionScans", Value: bson.D{
			{Key: "nonTailable", Value: cs},
			{Key: "total", Value: cs},
		}},
	}
}

// assertsStatus is serverStatus.asserts: user counts the commands that
// failed; mayfly raises no regular, warning, msg or tripwire asserts.
func (e *Engine) assertsStatus() bson.D {
	return bson.D{
		{Key: "regular", Value: int32(0)},
		{Key: "warning", Value: int32(0)},
		{Key: "msg", Value: int32(0)},
		{Key: "user", Value: srvIntValue(e.status.userAsserts.Load())},
		{Key: "tripwire", Value: int32(0)},
		{Key: "rollovers", Value: int32(0)},
	}
}

// extraInfoStatus is serverStatus.extra_info, from getrusage as mongod's
// Linux build reports it.
func extraInfoStatus() bson.D {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	us := func(tv syscall.Timeval) int64 { return int64(tv.Sec)*1e6 + int64(tv.Usec) }
	return bson.D{
		{Key: "note", Value: "fields vary by platform"},
		{Key: "user_time_us", Value: us(ru.Utime)},
		{Key: "system_time_us", Value: us(ru.Stime)},
		{Key: "maximum_resident_set_kb", Value: int64(ru.Maxrss)},
		{Key: "page_faults", Value: int64(ru.Majflt)},
	}
}

// globalLockStatus is serverStatus.globalLock. mayfly has no global lock
// and no admission queue, so currentQueue is always empty; activeClients
// counts the commands in flight (total, serverStatus itself included) and
// among them those that read collections (readers: the intent-shared
// lock of mongod) and those that write them (writers: intent-exclusive),
// as lockKindOf classes them.
func (e *Engine) globalLockStatus(up time.Duration) bson.D {
	total := e.inflight.Load()
	return bson.D{
		{Key: "totalTime", Value: up.Microseconds()},
		{Key: "currentQueue", Value: bson.D{
			{Key: "total", Value: int32(0)}, {Key: "readers", Value: int32(0)}, {Key: "writers", Value: int32(0)},
		}},
		{Key: "activeClients", Value: bson.D{
			{Key: "total", Value: int32(total)},
			{Key: "readers", Value: int32(e.activeReaders.Load())},
			{Key: "writers", Value: int32(e.activeWriters.Load())},
		}},
	}
}

// Kinds of command for globalLock.activeClients.
const (
	lockNone = iota
	lockReader
	lockWriter
)

// lockKindOf says whether a command reads collections, writes them, or
// neither (handshake, diagnostics, sessions…): the commands registered as
// writes, aggregates that end in $out or $merge and compact write; the
// query and catalog reads read.
func lockKindOf(name string, cmd bson.D) int {
	c := commands[name]
	if c != nil {
		name = c.Name // one spelling: findandmodify is findAndModify
	}
	switch name {
	case "find", "getMore", "count", "distinct", "listIndexes", "listCollections", "collStats", "dbStats",
		"validate", "explain", "dataSize", "listDatabases":
		return lockReader
	case "aggregate":
		if p, ok := bsonx.Get(cmd, "pipeline"); ok {
			if stages, ok := p.(bson.A); ok && len(stages) > 0 {
				if last, ok := stages[len(stages)-1].(bson.D); ok && len(last) > 0 && (last[0].Key == "$out" || last[0].Key == "$merge") {
					return lockWriter
				}
			}
		}
		return lockReader
	case "compact":
		return lockWriter
	}
	if c != nil && c.Write {
		return lockWriter
	}
	return lockNone
}

// compressionStatus is serverStatus.network.compression, nil when the
// wire layer gave no figures.
func (e *Engine) compressionStatus() bson.D {
	if e.info.CompressionStats == nil {
		return nil
	}
	m := e.info.CompressionStats()
	names := make([]string, 0, len(m))
	for n := range m {
		if n != "noop" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := bson.D{}
	for _, n := range names {
		f := m[n]
		out = append(out, bson.E{Key: n, Value: bson.D{
			{Key: "compressor", Value: bson.D{{Key: "bytesIn", Value: f.CompressorBytesIn}, {Key: "bytesOut", Value: f.CompressorBytesOut}}},
			{Key: "decompressor", Value: bson.D{{Key: "bytesIn", Value: f.DecompressorBytesIn}, {Key: "bytesOut", Value: f.DecompressorBytesOut}}},
		}})
	}
	return out
}

// storageEngineStatus is serverStatus.storageEngine. mayfly stores in
// Pebble: there is no wiredTiger section.
func (e *Engine) storageEngineStatus() bson.D {
	return bson.D{
		{Key: "name", Value: "mayfly-pebble"},
		{Key: "supportsCommittedReads", Value: true},
		{Key: "readOnly", Value: false},
		{Key: "persistent", Value: !e.info.InMemory},
	}
}

// opcountersReplStatus is serverStatus.opcountersRepl: mayfly applies no
// replicated operations.
func opcountersReplStatus() bson.D {
	return bson.D{
		{Key: "insert", Value: int64(0)},
		{Key: "query", Value: int64(0)},
		{Key: "update", Value: int64(0)},
		{Key: "delete", Value: int64(0)},
		{Key: "getmore", Value: int64(0)},
		{Key: "command", Value: int64(0)},
	}
}
