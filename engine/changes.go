package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/storage"
)

// The change history (replica-set mode only; a standalone writes none):
// every committed document change leaves one record under
// docstore.PfxChange, keyed by the cluster time of its commit (an OpClock
// timestamp taken just before the commit) and its position among the
// commit's changes, written in the same storage transaction as the change
// itself: no event without its write, no write without its event. Change
// streams (changestream.go) read it in key order.
//
// Visibility: two commits may take timestamps in one order and become
// readable in the other. A reader must never pass over a timestamp whose
// commit is still in flight, or it would miss that commit's events for
// good. changeHistory keeps the timestamps in flight; a reader only reads
// up to visible(), the time before the oldest of them.

// defaultChangeHistory is the retention of the change history when the
// configuration says nothing (--change-history-hours).
const defaultChangeHistory = 24 * time.Hour

// changeEvent is one document change staged in a storage transaction.
type changeEvent struct {
	op       string // insert, update, replace, delete
	db, coll string
	id       any    // the document's _id
	full     bson.D // insert, replace: the document written
	upd      bson.D // update: updateDescription
}

// changeHistory tracks the commits in flight and wakes waiting streams.
type changeHistory struct {
	mu      sync.Mutex
	pending map[bson.Timestamp]int
	notify  chan struct{} // closed and replaced after every commit with events
	// trimmed: every record before this time has been (or may have been)
	// removed by the retention trim.
	trimmed bson.Timestamp
	keep    time.Duration
}

func newChangeHistory(keep time.Duration) *changeHistory {
	if keep <= 0 {
		keep = defaultChangeHistory
	}
	return &changeHistory{pending: map[bson.Timestamp]int{}, notify: make(chan struct{}), keep: keep}
}

// begin takes the cluster time of a commit with events and marks it in
// flight until end.
func (h *changeHistory) begin(clock *OpClock) bson.Timestamp {
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := clock.Next()
	h.pending[ts]++
	return ts
}

// end marks a commit begun at ts finished (committed or not) and wakes the
// waiting streams.
func (h *changeHistory) end(ts bson.Timestamp) {
	h.mu.Lock()
	if h.pending[ts] <= 1 {
		delete(h.pending, ts)
	} else {
		h.pending[ts]--
	}
	ch := h.notify
	h.notify = make(chan struct{})
	h.mu.Unlock()
	close(ch)
}

// visible returns the latest time up to which the history is complete,
// and a channel closed at the next commit.
func (h *changeHistory) visible(clock *OpClock) (bson.Timestamp, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) == 0 {
		return clock.Last(), h.notify
	}
	var oldest bson.Timestamp
	first := true
	for ts := range h.pending {
		if first || tsAfter(oldest, ts) {
			oldest, first = ts, false
		}
	}
	return tsBefore(oldest), h.notify
}

func (h *changeHistory) trimPoint() bson.Timestamp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.trimmed
}

// tsBefore is the timestamp just before ts.
func tsBefore(ts bson.Timestamp) bson.Timestamp {
	if ts.I > 0 {
		return bson.Timestamp{T: ts.T, I: ts.I - 1}
	}
	if ts.T == 0 {
		return ts
	}
	return bson.Timestamp{T: ts.T - 1, I: math.MaxUint32}
}

// changeKey is the history key of the seq-th event of the commit at ts.
func changeKey(ts bson.Timestamp, seq uint32) []byte {
	k := make([]byte, 1, 13)
	k[0] = docstore.PfxChange
	k = binary.BigEndian.AppendUint32(k, ts.T)
	k = binary.BigEndian.AppendUint32(k, ts.I)
	return binary.BigEndian.AppendUint32(k, seq)
}

// changeKeyTS reads the cluster time back from a history key.
func changeKeyTS(k []byte) (bson.Timestamp, bool) {
	if len(k) < 13 || k[0] != docstore.PfxChange {
		return bson.Timestamp{}, false
	}
	return bson.Timestamp{T: binary.BigEndian.Uint32(k[1:]), I: binary.BigEndian.Uint32(k[5:])}, true
}

// noteChange records a document change in the transaction that stages it
// (replica-set mode only). oldDoc is the document replaced or deleted (nil
// for an insert), newDoc the one written (nil for a delete); op is
// "update" or "replace" for a change of a live document.
func (c *Collection) noteChange(tx storage.Txn, op string, oldDoc, newDoc bson.D) {
	if c.e.repl == nil {
		return
	}
	dt, ok := tx.(*docTxn)
	if !ok {
		return
	}
	m := c.Meta()
	ev := changeEvent{op: op, db: m.DB, coll: m.Name}
	switch op {
	case "insert", "replace":
		ev.full = newDoc
		ev.id, _ = bsonx.Get(newDoc, "_id")
	case "update":
		ev.id, _ = bsonx.Get(newDoc, "_id")
		ev.upd = updateDescription(oldDoc, newDoc)
	case "delete":
		ev.id, _ = bsonx.Get(oldDoc, "_id")
	}
	dt.events = append(dt.events, ev)
}

// stageChanges writes a transaction's events into it under one cluster
// time, taken now; the returned function must run after the commit
// attempt, whatever its outcome. Nothing to do: nil.
func (e *Engine) stageChanges(tx storage.Txn, lsid *bson.Binary, txnNumber int64) (func(), error) {
	dt, ok := tx.(*docTxn)
	if !ok || len(dt.events) == 0 || e.hist == nil {
		return nil, nil
	}
	ts := e.hist.begin(e.opTime)
	done := func() { e.hist.end(ts) }
	wall := bson.DateTime(e.clock.Now().UnixMilli())
	for i, ev := range dt.events {
		rec := bson.D{{Key: "o", Value: ev.op}, {Key: "db", Value: ev.db}, {Key: "c", Value: ev.coll},
			{Key: "k", Value: ev.id}, {Key: "w", Value: wall}}
		if ev.full != nil {
			rec = append(rec, bson.E{Key: "f", Value: ev.full})
		}
		if ev.upd != nil {
			rec = append(rec, bson.E{Key: "u", Value: ev.upd})
		}
		if lsid != nil {
			rec = append(rec, bson.E{Key: "l", Value: *lsid}, bson.E{Key: "n", Value: txnNumber})
		}
		b, err := bson.Marshal(rec)
		if err != nil {
			done()
			return nil, err
		}
		if err := tx.Set(changeKey(ts, uint32(i)), b); err != nil {
			done()
			return nil, err
		}
	}
	return done, nil
}

// stageDDLChange records a drop ("drop" of db.coll), a database's drop
// ("dropDatabase" of db) or a rename ("rename" of db.coll, with the
// target's db and coll in to) in the batch that applies it; the returned
// function must run after the commit attempt. Standalone: nothing.
func (e *Engine) stageDDLChange(b interface{ Set(k, v []byte) error }, op, db, coll string, to ...string) (func(), error) {
	if e.hist == nil {
		return nil, nil
	}
	ts := e.hist.begin(e.opTime)
	done := func() { e.hist.end(ts) }
	d := bson.D{{Key: "o", Value: op}, {Key: "db", Value: db}, {Key: "c", Value: coll},
		{Key: "w", Value: bson.DateTime(e.clock.Now().UnixMilli())}}
	if len(to) == 2 {
		d = append(d, bson.E{Key: "t", Value: bson.D{{Key: "db", Value: to[0]}, {Key: "coll", Value: to[1]}}})
	}
	rec, err := bson.Marshal(d)
	if err == nil {
		err = b.Set(changeKey(ts, 0), rec)
	}
	if err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// trimChanges removes the history older than the retention bound.
func (e *Engine) trimChanges() {
	if e.hist == nil {
		return
	}
	cut := e.clock.Now().Add(-e.hist.keep).Unix()
	if cut <= 0 {
		return
	}
	bound := bson.Timestamp{T: uint32(cut)}
	hi := changeKey(bound, 0)
	lo := []byte{docstore.PfxChange}
	it, err := e.kv.NewIter(lo, hi)
	if err != nil {
		return
	}
	any := it.First()
	it.Close()
	e.hist.mu.Lock()
	if tsAfter(bound, e.hist.trimmed) {
		e.hist.trimmed = bound
	}
	e.hist.mu.Unlock()
	if !any {
		return
	}
	// Records this old are never written again: a batch, no transaction.
	b := e.kv.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, hi); err != nil {
		return
	}
	if err := b.Commit(false); err != nil {
		e.log.Warn("change history trim failed", zap.Error(err))
	}
}

// loadChangeHistory sets the trim point at startup: the history before its
// first record is gone.
func (e *Engine) loadChangeHistory() {
	if e.hist == nil {
		return
	}
	it, err := e.kv.NewIter([]byte{docstore.PfxChange}, []byte{docstore.PfxChange + 1})
	if err != nil {
		return
	}
	defer it.Close()
	if it.First() {
		if ts, ok := changeKeyTS(it.Key()); ok {
			e.hist.trimmed = ts
		}
	} else {
		e.hist.trimmed = e.opTime.Last()
	}
}

// updateDescription computes a change stream update event's
// updateDescription from the document before and after: updatedFields
// (dotted paths to new or changed values), removedFields, truncatedArrays
// ({field, newSize}: arrays that got shorter; their remaining changed
// elements are in updatedFields by index).
func updateDescription(before, after bson.D) bson.D {
	upd := bson.D{}
	removed := bson.A{}
	trunc := bson.A{}
	diffDocs("", before, after, &upd, &removed, &trunc)
	return bson.D{{Key: "updatedFields", Value: upd}, {Key: "removedFields", Value: removed}, {Key: "truncatedArrays", Value: trunc}}
}

func diffDocs(prefix string, before, after bson.D, upd *bson.D, removed, trunc *bson.A) {
	old := make(map[string]any, len(before))
	for _, e := range before {
		old[e.Key] = e.Value
	}
	seen := make(map[string]bool, len(after))
	for _, e := range after {
		seen[e.Key] = true
		path := prefix + e.Key
		ov, had := old[e.Key]
		if !had {
			*upd = append(*upd, bson.E{Key: path, Value: e.Value})
			continue
		}
		diffValue(path, ov, e.Value, upd, removed, trunc)
	}
	for _, e := range before {
		if !seen[e.Key] {
			*removed = append(*removed, prefix+e.Key)
		}
	}
}

func diffValue(path string, ov, nv any, upd *bson.D, removed, trunc *bson.A) {
	switch n := nv.(type) {
	case bson.D:
		if o, ok := ov.(bson.D); ok {
			diffDocs(path+".", o, n, upd, removed, trunc)
			return
		}
	case bson.A:
		if o, ok := ov.(bson.A); ok {
			for i, x := range n {
				p := path + "." + strconv.Itoa(i)
				if i >= len(o) {
					*upd = append(*upd, bson.E{Key: p, Value: x})
					continue
				}
				diffValue(p, o[i], x, upd, removed, trunc)
			}
			if len(n) < len(o) {
				*trunc = append(*trunc, bson.D{{Key: "field", Value: path}, {Key: "newSize", Value: int32(len(n))}})
			}
			return
		}
	}
	if !sameValue(ov, nv) {
		*upd = append(*upd, bson.E{Key: path, Value: nv})
	}
}

// sameValue compares two values by type and bytes, as an oplog diff does.
func sameValue(a, b any) bool {
	ba, err1 := bson.Marshal(bson.D{{Key: "v", Value: a}})
	bb, err2 := bson.Marshal(bson.D{{Key: "v", Value: b}})
	return err1 == nil && err2 == nil && bytes.Equal(ba, bb)
}
