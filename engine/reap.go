package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// ReaperConfig configures background TTL deletion.
type ReaperConfig struct {
	// Rate caps deletions per second (0 = unlimited): the --reaper-rate flag.
	Rate int
	// Interval between passes (default 1 s).
	Interval time.Duration
	// Disabled turns the background loop off (tests drive passes by hand).
	Disabled bool
	// CompactThreshold is how many bytes of reaped documents in a collection
	// trigger a requested compaction of its ranges (default 4 MiB).
	CompactThreshold int64
}

// reaper adapts the engine to ttl.Reaper (ttl.Purger).
type reaper struct {
	e       *Engine
	r       *ttl.Reaper
	cfg     ReaperConfig
	mu      sync.Mutex
	pending map[uint64]int64 // collection id → reaped bytes since its last compaction
	next    int              // round-robin position across collections
	started atomic.Bool
}

func newReaper(e *Engine, cfg ReaperConfig) *reaper {
	if cfg.CompactThreshold <= 0 {
		cfg.CompactThreshold = 4 << 20
	}
	rp := &reaper{e: e, cfg: cfg, pending: map[uint64]int64{}}
	rp.r = ttl.NewReaper(rp, ttl.ReaperConfig{
		Interval: cfg.Interval, Rate: cfg.Rate, Logger: e.log.Named("ttl"),
		// Busy: requests are being served right now, or were very recently.
		Busy: func() bool { return e.inflight.Load() > 0 },
	})
	return rp
}

func (rp *reaper) start() {
	if !rp.cfg.Disabled {
		rp.started.Store(true)
		rp.r.Start()
	}
}

func (rp *reaper) wait() {
	if rp.started.Load() {
		rp.r.Stop()
	}
}

// NowMS implements ttl.Purger.
func (rp *reaper) NowMS() int64 { return rp.e.nowMS() }

// ReaperStats returns the reaper's counters.
func (e *Engine) ReaperStats() ttl.Stats { return e.reaper.r.Stats() }

// RunTTLPass runs one reaper pass synchronously and returns how many
// documents it deleted (tests and the bench tool).
func (e *Engine) RunTTLPass(ctx context.Context) (int64, error) { return e.reaper.r.Pass(ctx) }

// PurgeBatch implements ttl.Purger: it deletes up to max expired documents,
// visiting collections round-robin.
func (rp *reaper) PurgeBatch(ctx context.Context, nowMS int64, max int) (int, int64, bool, error) {
	colls := rp.e.cat.All()
	deleted, bytes := 0, int64(0)
	for i := 0; i < len(colls) && deleted < max; i++ {
		rp.mu.Lock()
		c := colls[(rp.next+i)%len(colls)]
		rp.mu.Unlock()
		if c.st().policy == nil {
			continue
		}
		n, b, err := c.purgeExpired(nowMS, max-deleted, false)
		deleted += n
		bytes += b
		if b > 0 {
			rp.mu.Lock()
			rp.pending[c.Meta().ID] += b
			rp.mu.Unlock()
		}
		if err != nil {
			return deleted, bytes, false, err
		}
		if n > 0 {
			c.ttlDeleted.Add(int64(n))
		}
	}
	rp.mu.Lock()
	if len(colls) > 0 {
		rp.next = (rp.next + 1) % len(colls)
	}
	rp.mu.Unlock()
	return deleted, bytes, deleted >= max, ctx.Err()
}

// Compact implements ttl.Purger: collections whose reaped bytes passed the
// threshold, or whose tombstones the store estimates as reclaimable beyond
// it, get a compaction of their document, index and expiry ranges, so the
// space really comes back even when nothing else would trigger one.
func (rp *reaper) Compact(ctx context.Context) (int64, error) {
	var total int64
	for _, c := range rp.e.cat.All() {
		if err := c.rangeDeleteConsumed(); err != nil {
			return total, err
		}
		id := c.Meta().ID
		rp.mu.Lock()
		pend := rp.pending[id]
		rp.mu.Unlock()
		lo, hi := docstore.CollPrefix(docstore.PfxDoc, id), docstore.PrefixEnd(docstore.CollPrefix(docstore.PfxDoc, id))
		reclaimable := int64(0)
		if pend < rp.cfg.CompactThreshold {
			if rb, err := rp.e.kv.ReclaimableBytes(lo, hi); err == nil {
				reclaimable = int64(rb)
			}
		}
		if pend < rp.cfg.CompactThreshold && reclaimable < rp.cfg.CompactThreshold {
			continue
		}
		before, _ := rp.e.kv.EstimateDiskUsage(lo, docstore.PrefixEnd(docstore.CollPrefix(docstore.PfxExpiry, id)))
		start := time.Now()
		for _, kind := range []byte{docstore.PfxDoc, docstore.PfxIndex, docstore.PfxExpiry} {
			p := docstore.CollPrefix(kind, id)
			if err := rp.e.kv.Compact(ctx, p, docstore.PrefixEnd(p)); err != nil {
				return total, err
			}
		}
		after, _ := rp.e.kv.EstimateDiskUsage(lo, docstore.PrefixEnd(docstore.CollPrefix(docstore.PfxExpiry, id)))
		rec := int64(before) - int64(after)
		if rec < 0 {
			rec = 0
		}
		total += rec
		rp.mu.Lock()
		rp.pending[id] = 0
		rp.mu.Unlock()
		rp.e.log.Info("ttl compaction", zap.String("ns", c.Meta().ns()), zap.Int64("reapedBytes", pend),
			zap.Uint64("diskBefore", before), zap.Uint64("diskAfter", after), zap.Duration("took", time.Since(start)))
	}
	return total, nil
}

// expiryRanges lists the expiry-index key ranges holding entries of
// documents expired at nowMS under the collection's policy: own deadlines
// <= now, and (with DefaultTTL n > 0) inherited _ts <= now/1000 - n.
func (s *collState) expiryRanges(nowMS int64) [][2][]byte {
	m := s.meta
	var out [][2][]byte
	if !m.HasTTL {
		return nil
	}
	dp := docstore.ExpiryPrefix(m.ID, docstore.ExpDeadline)
	out = append(out, [2][]byte{dp, docstore.AppendInstant(append([]byte(nil), dp...), nowMS+1)})
	if m.DefaultTTL > 0 {
		tp := docstore.ExpiryPrefix(m.ID, docstore.ExpTS)
		cut := nowMS/1000 - m.DefaultTTL
		out = append(out, [2][]byte{tp, docstore.AppendInstant(append([]byte(nil), tp...), cut+1)})
	}
	return out
}

// ttlIndexRanges lists, per MongoDB TTL index, the index range holding
// Dates old enough to have expired at nowMS.
func (s *collState) ttlIndexRanges(nowMS int64) [][2][]byte {
	var out [][2][]byte
	for _, ix := range s.indexes {
		if !ix.HasTTL || ix.isTSIndex() {
			continue
		}
		cut := nowMS - ix.TTL*1000
		p := &pred{hasHi: true, hi: bson.DateTime(cut), hiIncl: true}
		r := rangeFor(nil, p, docstore.IsDescending(ix.Key[0].Value))
		pre := docstore.IndexPrefix(s.meta.ID, ix.ID)
		out = append(out, [2][]byte{cat(pre, r.lo), cat(pre, r.hi)})
	}
	return out
}

// purgeExpired physically deletes up to max documents expired at nowMS.
// Candidates come from range scans of the expiry index and TTL indexes;
// each is re-read and re-checked with the rule in the storage transaction
// that deletes it, so a live document is never deleted: a concurrent write
// that makes a candidate live again writes its key, and whichever commits
// second conflicts and re-checks. Consumed expiry-index ranges go with one
// DeleteRange. With held the caller already holds the collection's lock
// (exclusively: collMod's purge before lengthening expiry).
func (c *Collection) purgeExpired(nowMS int64, max int, held bool) (int, int64, error) {
	s := c.st()
	if s.policy == nil {
		return 0, 0, nil
	}
	var cands [][]byte
	seen := map[string]bool{}
	type consumed struct{ lo, last []byte }
	var ranges []consumed
	scan := func(lo, hi []byte, isIndex bool) error {
		it, err := c.e.kv.NewIter(lo, hi)
		if err != nil {
			return err
		}
		defer it.Close()
		var last []byte
		for ok := it.First(); ok && len(cands) < max; ok = it.Next() {
			k := it.Key()
			var idKey []byte
			if isIndex {
				idKey = append([]byte(nil), it.Value()...)
			} else {
				// 0x12 <collID:8> <kind:1> <instant:8> <_id>
				idKey = append([]byte(nil), k[18:]...)
			}
			last = append(last[:0], k...)
			if !seen[string(idKey)] {
				seen[string(idKey)] = true
				cands = append(cands, idKey)
			}
		}
		if !isIndex && last != nil {
			ranges = append(ranges, consumed{lo, append([]byte(nil), last...)})
		}
		return it.Error()
	}
	for _, r := range s.expiryRanges(nowMS) {
		kind := r[0][9]
		lo := r[0]
		if from := c.reapFrom(kind); from != nil && bytes.Compare(from, lo) > 0 {
			lo = from
		}
		if bytes.Compare(lo, r[1]) >= 0 {
			continue
		}
		if err := scan(lo, r[1], false); err != nil {
			return 0, 0, err
		}
	}
	for _, r := range s.ttlIndexRanges(nowMS) {
		if len(cands) >= max {
			break
		}
		if err := scan(r[0], r[1], true); err != nil {
			return 0, 0, err
		}
	}
	if len(cands) == 0 {
		return 0, 0, nil
	}
	if !held {
		// Shared: the deletes are one storage transaction, so a write that
		// makes a candidate live again conflicts with it (and the retry
		// re-checks), while foreground writes of other documents go on.
		c.mu.RLock()
		defer c.mu.RUnlock()
	}
	if c.dropped.Load() {
		return 0, 0, nil
	}
	n, bytes := 0, int64(0)
	c.purgeMu.Lock()
	defer c.purgeMu.Unlock()
	err := c.e.runTxn(nil, func(tx storage.Txn) (func(), error) {
		n, bytes = 0, 0
		s := c.st()
		rd, _ := c.e.ds.ReaderOf(tx)
		for _, idKey := range cands {
			rec, err := c.getRecord(rd, idKey)
			if err != nil {
				return nil, err
			}
			if rec == nil || !ttl.Expired(s.deadline(rec), nowMS) {
				continue // re-checked: changed meanwhile, or not expired after all
			}
			if err := docstore.DeleteDoc(tx, &s.ds, rec); err != nil {
				return nil, err
			}
			n++
			bytes += int64(len(rec.Raw))
		}
		return nil, nil
	})
	if err != nil {
		return 0, 0, err
	}
	// Every entry up to the last one scanned in these expiry ranges belonged
	// to a document expired at nowMS (entries mirror documents exactly), and
	// each was deleted with its document above: the next scan starts after
	// them.
	for _, r := range ranges {
		c.advanceReap(r.lo[9], r.lo, append(r.last, 0))
	}
	c.nDocs.Add(-int64(n))
	c.size.Add(-bytes)
	return n, bytes, nil
}

func (c *Collection) reapFrom(kind byte) []byte {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	if p := c.reap[kind]; p != nil {
		return p.from
	}
	return nil
}

func (c *Collection) advanceReap(kind byte, scannedFrom, next []byte) {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	if c.reap == nil {
		c.reap = map[byte]*reapPos{}
	}
	p := c.reap[kind]
	if p == nil {
		p = &reapPos{rangeFrom: scannedFrom}
		c.reap[kind] = p
	}
	if bytes.Compare(next, p.from) > 0 {
		p.from = next
	}
}

// rangeDeleteConsumed lays one range tombstone per expiry-index kind over
// the span the reaper consumed since the last call (once per pass): the
// entries in it are already point-deleted, and the range tombstone lets
// compaction drop those point tombstones wholesale. Spans of consecutive
// passes do not overlap, so tombstones do not pile up on each other.
func (c *Collection) rangeDeleteConsumed() error {
	c.reapMu.Lock()
	type span struct{ lo, hi []byte }
	var spans []span
	for _, p := range c.reap {
		if p.from != nil && bytes.Compare(p.rangeFrom, p.from) < 0 {
			spans = append(spans, span{p.rangeFrom, p.from})
			p.rangeFrom = p.from
		}
	}
	c.reapMu.Unlock()
	if len(spans) == 0 || c.dropped.Load() {
		return nil
	}
	b := c.e.kv.NewBatch()
	defer b.Close()
	for _, sp := range spans {
		if err := b.DeleteRange(sp.lo, sp.hi); err != nil {
			return err
		}
	}
	return b.Commit(false)
}

// purgeAll removes every document expired under the current policy at
// nowMS. Called, under the exclusive lock, before a change that would
// lengthen or switch off expiry (spec §6.5: no resurrection).
func (c *Collection) purgeAll(nowMS int64) (int64, error) {
	var total int64
	for {
		n, _, err := c.purgeExpired(nowMS, 4096, true)
		total += int64(n)
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// backlog counts documents expired but not yet purged, their bytes and the
// earliest deadline among them (spec §9).
func (c *Collection) backlog(nowMS int64) (n int64, nbytes int64, oldest int64) {
	s := c.st()
	oldest = math.MaxInt64
	if s.policy == nil {
		return 0, 0, oldest
	}
	seen := map[string]bool{}
	for _, r := range s.expiryRanges(nowMS) {
		lo := r[0]
		if from := c.reapFrom(lo[9]); from != nil && bytes.Compare(from, lo) > 0 {
			lo = from
		}
		if bytes.Compare(lo, r[1]) >= 0 {
			continue
		}
		it, err := c.e.kv.NewIter(lo, r[1])
		if err != nil {
			continue
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			seen[string(k[18:])] = true
			n++
			if v := it.Value(); len(v) == 4 {
				nbytes += int64(binary.BigEndian.Uint32(v))
			}
			inst := docstore.ReadInstant(k[10:18])
			dl := inst
			if k[9] == docstore.ExpTS {
				dl = (inst + s.meta.DefaultTTL) * 1000
			}
			if dl < oldest {
				oldest = dl
			}
		}
		it.Close()
	}
	for _, r := range s.ttlIndexRanges(nowMS) {
		it, err := c.e.kv.NewIter(r[0], r[1])
		if err != nil {
			continue
		}
		for ok := it.First(); ok; ok = it.Next() {
			id := string(it.Value())
			if seen[id] {
				continue
			}
			seen[id] = true
			rec, err := c.getRecord(c.e.kv, []byte(id))
			if err != nil || rec == nil {
				continue
			}
			dl := s.deadline(rec)
			if ttl.Expired(dl, nowMS) {
				n++
				nbytes += int64(len(rec.Raw))
				if dl < oldest {
					oldest = dl
				}
			}
		}
		it.Close()
	}
	return n, nbytes, oldest
}
