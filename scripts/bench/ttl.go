package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

// ttlFigures are the TTL section's figures that are not throughput rows.
type ttlFigures struct {
	ScanDocs           int64   `json:"scanDocs"`
	ScanOffDocsPerSec  float64 `json:"scanOffDocsPerSec,omitempty"`
	ScanOnDocsPerSec   float64 `json:"scanOnDocsPerSec,omitempty"`
	ScanOffMedian      float64 `json:"scanOffMedianDocsPerSec,omitempty"`
	ScanOnMedian       float64 `json:"scanOnMedianDocsPerSec,omitempty"`
	PredicateOverhead  float64 `json:"predicateOverhead,omitempty"` // 1 - on/off, best of each
	CollModOnSeconds   float64 `json:"collModOnSeconds,omitempty"`
	LiveDocs           int64   `json:"liveDocs,omitempty"`
	IdleSetDocs        int64   `json:"idlePurgeDocs,omitempty"`
	LoadSetDocs        int64   `json:"loadPurgeDocs,omitempty"`
	IdlePurgePerSec    float64 `json:"idlePurgeDocsPerSec,omitempty"`
	IdlePurgeSeconds   float64 `json:"idlePurgeSeconds,omitempty"`
	LoadPurgeSeconds   float64 `json:"loadPurgeSeconds,omitempty"`
	LoadPurgePerSec    float64 `json:"loadPurgeDocsPerSec,omitempty"`
	PurgeOutlived      bool    `json:"purgeOutlivedReadWindow,omitempty"`
	LoadPurged         int64   `json:"loadPurged"`
	RestPurged         int64   `json:"restPurged"`
	RestPurgeSeconds   float64 `json:"restPurgeSeconds,omitempty"`
	Unpurged           int64   `json:"unpurgedAtEnd"`
	Backoffs           int64   `json:"reaperBackoffs,omitempty"`
	IdleP99us          float64 `json:"idleP99us,omitempty"`
	PurgeP99us         float64 `json:"purgeP99us,omitempty"`
	P99Ratio           float64 `json:"p99Ratio,omitempty"`
	LiveBytes          diskUse `json:"liveDir"`
	WithExpiredBytes   diskUse `json:"withExpiredDir"`
	AfterPurgeBytes    diskUse `json:"afterPurgeDir"`
	AfterCompactBytes  diskUse `json:"afterFullCompactionDir"`
	AfterPurgeRatio    float64 `json:"afterPurgeToLiveSST,omitempty"`
	AfterCompactRatio  float64 `json:"afterFullCompactionToLiveSST,omitempty"`
	ReclaimedByReaper  int64   `json:"reclaimedBytesReportedByReaper,omitempty"`
	EstimateLiveBytes  uint64  `json:"estimateDiskUsageLive,omitempty"`
	EstimateAfterBytes uint64  `json:"estimateDiskUsageAfterPurge,omitempty"`
}

func (t *ttlFigures) print(w io.Writer) {
	fmt.Fprintf(w, "\nTTL\n")
	if t.ScanOffDocsPerSec > 0 {
		fmt.Fprintf(w, "  query-time predicate: full scan of %d docs, best of alternating runs %.0f docs/s with TTL on vs %.0f off → overhead %.1f%% (medians %.0f vs %.0f)\n",
			t.ScanDocs, t.ScanOnDocsPerSec, t.ScanOffDocsPerSec, 100*t.PredicateOverhead, t.ScanOnMedian, t.ScanOffMedian)
	}
	if t.LoadSetDocs > 0 {
		fmt.Fprintf(w, "  reaper purge, no load: %d docs in %.2fs = %.0f docs/s (incl. the pass's compaction)\n", t.IdleSetDocs, t.IdlePurgeSeconds, t.IdlePurgePerSec)
		fmt.Fprintf(w, "  reaper purge under read load: %d of %d docs in the %.2fs read window = %.0f docs/s, %d backoffs\n",
			t.LoadPurged, t.LoadSetDocs, t.LoadPurgeSeconds, t.LoadPurgePerSec, t.Backoffs)
		if t.RestPurgeSeconds > 0 {
			fmt.Fprintf(w, "  then the rest with no load: %d docs in %.2fs = %.0f docs/s; unpurged at the end: %d\n",
				t.RestPurged, t.RestPurgeSeconds, float64(t.RestPurged)/t.RestPurgeSeconds, t.Unpurged)
		}
		fmt.Fprintf(w, "  point-read p99: %s idle, %s while purging → ×%.2f\n", fmtUs(t.IdleP99us), fmtUs(t.PurgeP99us), t.P99Ratio)
		fmt.Fprintf(w, "  disk: live only %v; + expired set %v\n", t.LiveBytes, t.WithExpiredBytes)
		fmt.Fprintf(w, "        after purge (reaper's compactions) %v → sst ×%.2f live; after a full compaction %v → sst ×%.2f live\n",
			t.AfterPurgeBytes, t.AfterPurgeRatio, t.AfterCompactBytes, t.AfterCompactRatio)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func (b *bench) ttlFig() *ttlFigures {
	if b.rep.TTL == nil {
		b.rep.TTL = &ttlFigures{}
	}
	return b.rep.TTL
}

// scanAll reads every document of coll once and returns the count.
func scanAll(ctx context.Context, coll *mongo.Collection) (int64, error) {
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1000))
	if err != nil {
		return 0, err
	}
	defer cur.Close(ctx)
	var n int64
	for cur.Next(ctx) {
		n++
	}
	return n, cur.Err()
}

// ttlScan measures the query-time expiry predicate: full scans of the same
// usertable with TTL off and on (defaultTimeToLive 2147483647: nothing
// expires, but every document's header is checked), alternating to even
// out noise; the median of each.
func (b *bench) ttlScan(ctx context.Context) error {
	if b.client == nil || !b.loaded {
		return errors.New("ttlscan needs the loaded usertable (run it with load)")
	}
	reps := 5
	if b.cfg.small {
		reps = 2
	}
	db := b.coll.Database()
	setTTL := func(v any) (time.Duration, error) {
		t0 := time.Now()
		err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: b.coll.Name()}, {Key: "defaultTimeToLive", Value: v}}).Err()
		return time.Since(t0), err
	}
	var off, on []float64
	var n int64
	var mOn, mOff measure
	t := b.ttlFig()
	prog.note("full scan, warm-up")
	if _, err := scanAll(ctx, b.coll); err != nil {
		return err
	}
	prog.end()
	for i := 0; i < 2*reps; i++ {
		ttlOn := i%2 == 1
		name := "full scan, TTL off"
		if ttlOn {
			name = "full scan, TTL on"
			d, err := setTTL(int32(2147483647))
			if err != nil {
				return fmt.Errorf("collMod defaultTimeToLive: %w", err)
			}
			t.CollModOnSeconds = d.Seconds()
		}
		prog.begin(name)
		t0 := time.Now()
		k, err := scanAll(ctx, b.coll)
		el := time.Since(t0)
		prog.add(k)
		prog.end()
		if err != nil {
			return err
		}
		n = k
		rate := float64(k) / el.Seconds()
		m := &mOff
		if ttlOn {
			on = append(on, rate)
			m = &mOn
			if _, err := setTTL(nil); err != nil {
				return fmt.Errorf("collMod defaultTimeToLive null: %w", err)
			}
		} else {
			off = append(off, rate)
		}
		m.units += k
		m.elapsed += el
		m.h.record(el)
	}
	t.ScanDocs = n
	// Best of each: on a shared machine noise only ever slows a scan down.
	t.ScanOffDocsPerSec, t.ScanOnDocsPerSec = maxOf(off), maxOf(on)
	t.ScanOffMedian, t.ScanOnMedian = median(off), median(on)
	t.PredicateOverhead = 1 - t.ScanOnDocsPerSec/t.ScanOffDocsPerSec
	mOff.calls, mOn.calls = mOff.h.n, mOn.h.n
	b.rep.add(Result{Name: "full scan, TTL off", Group: "ttl", Unit: "docs", Note: "best of alternating runs (medians in the ttl section); latency = one whole scan"}, &mOff, "", 0)
	b.rep.Results[len(b.rep.Results)-1].PerSec = t.ScanOffDocsPerSec
	b.rep.add(Result{Name: "full scan, TTL on (nothing expired)", Group: "ttl", Unit: "docs"}, &mOn, "", 0)
	last := &b.rep.Results[len(b.rep.Results)-1]
	last.PerSec, last.Vs, last.Ratio = t.ScanOnDocsPerSec, "scan TTL off", t.ScanOnDocsPerSec/t.ScanOffDocsPerSec
	return nil
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// diskUse is a data directory's size: every file, and the sstables alone
// (the WAL files Pebble keeps for recycling are bounded by the memtable
// size, not by the data).
type diskUse struct {
	Total int64 `json:"total"`
	SST   int64 `json:"sst"`
}

func (d diskUse) String() string { return fmt.Sprintf("%s (sst %s)", mib(d.Total), mib(d.SST)) }

// dirSize walks dir and sums file sizes. Pebble deletes obsolete files in
// the background after a compaction, so it waits (up to 5 s) for the total
// to hold still. With BENCH_DEBUG_DISK set it prints the walk on stderr.
func dirSize(dir string) diskUse {
	walk := func() diskUse {
		var d diskUse
		filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if fi, err := e.Info(); err == nil {
					d.Total += fi.Size()
					if filepath.Ext(p) == ".sst" {
						d.SST += fi.Size()
					}
				}
			}
			return nil
		})
		return d
	}
	d := walk()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		d2 := walk()
		if d2 == d {
			break
		}
		d = d2
	}
	if os.Getenv("BENCH_DEBUG_DISK") != "" {
		fmt.Fprintf(os.Stderr, "dirSize %s: %+v\n", dir, d)
	}
	return d
}

// loadColl inserts n documents made by mk with insertMany in batches of 1000.
func (b *bench) loadColl(ctx context.Context, name string, coll *mongo.Collection, n int64, mk func(i int64, r *rand.Rand) bson.D) (*measure, error) {
	var next atomic.Int64
	return runPhase(name, b.cfg.clients, 0, b.cfg.seed+9, func(w int, r *rand.Rand) (int, error) {
		lo := next.Add(loadBatch) - loadBatch
		if lo >= n {
			return 0, errDone
		}
		hi := min(lo+loadBatch, n)
		docs := make([]any, 0, hi-lo)
		for i := lo; i < hi; i++ {
			docs = append(docs, mk(i, r))
		}
		_, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		return int(hi - lo), err
	})
}

// ttlPurge measures physical deletion on an in-process engine whose clock is
// a ttl.FakeClock (so expiry is instant and exact) with the background
// reaper off (passes are run here): an on-disk store holding a live
// usertable and an "expiring" collection with two sets, A (ttl 100 s, a
// tenth of --ttl-docs) and B (ttl 200 s, --ttl-docs). Moving the clock
// 150 s expires A, purged with no other load; moving it 100 s more expires
// B, purged while the clients do point reads on the live set for one read
// window; the pass is then stopped and the rest of B purged with no load,
// for at most --purge-cap (disk figures are then for what was purged).
func (b *bench) ttlPurge(ctx context.Context) error {
	t := b.ttlFig()
	dir := filepath.Join(b.dir, "ttl")
	kv, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer kv.Close()
	clock := ttl.NewFakeClock(time.Now())
	eng, err := engine.Open(engine.Config{KV: kv, Clock: clock, Logger: zap.NewNop(), Reaper: engine.ReaperConfig{Disabled: true}})
	if err != nil {
		return err
	}
	defer eng.Close()
	ws := wire.NewServer(eng, wire.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go ws.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws.Shutdown(sctx)
	}()
	cl, err := connect("mongodb://"+ln.Addr().String()+"/", b.cfg.clients)
	if err != nil {
		return err
	}
	defer cl.Disconnect(context.Background())
	db := cl.Database("ttlbench")
	live := db.Collection("live")

	nLive := min(b.cfg.records, 100_000)
	t.LiveDocs = nLive
	if _, err := b.loadColl(ctx, "ttl: load live set", live, nLive, b.doc); err != nil {
		return err
	}
	everything := [2][]byte{{0x00}, {0xff}}
	settle := func(what string) error {
		prog.note("ttl: flush + compact (%s)", what)
		defer prog.end()
		if err := kv.Flush(); err != nil {
			return err
		}
		return kv.Compact(ctx, everything[0], everything[1])
	}
	if err := settle("live"); err != nil {
		return err
	}
	t.LiveBytes = dirSize(dir)
	t.EstimateLiveBytes, _ = kv.EstimateDiskUsage(everything[0], everything[1])

	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "expiring"}, {Key: "defaultTimeToLive", Value: -1}}).Err(); err != nil {
		return fmt.Errorf("create expiring: %w", err)
	}
	exp := db.Collection("expiring")
	t.IdleSetDocs, t.LoadSetDocs = max(b.cfg.ttlDocs/10, 100), b.cfg.ttlDocs
	mk := func(prefix string, ttlSecs int32) func(int64, *rand.Rand) bson.D {
		return func(i int64, r *rand.Rand) bson.D {
			return bson.D{{Key: "_id", Value: prefix + fmt.Sprint(i)}, {Key: "ttl", Value: ttlSecs}, {Key: "payload", Value: randField(r)}}
		}
	}
	if _, err := b.loadColl(ctx, "ttl: load set A (ttl 100)", exp, t.IdleSetDocs, mk("a", 100)); err != nil {
		return err
	}
	if _, err := b.loadColl(ctx, "ttl: load set B (ttl 200)", exp, t.LoadSetDocs, mk("b", 200)); err != nil {
		return err
	}
	prog.note("ttl: flush")
	if err := kv.Flush(); err != nil {
		return err
	}
	prog.end()
	t.WithExpiredBytes = dirSize(dir)

	readLive := func(w int, r *rand.Rand) (int, error) {
		err := live.FindOne(ctx, bson.D{{Key: "_id", Value: userKey(r.Int64N(nLive))}}).Err()
		return 1, err
	}
	idle, err := runPhase("ttl: point reads, reaper idle", b.cfg.clients, b.cfg.duration, b.cfg.seed+5, readLive)
	if err != nil {
		return err
	}

	// A: purge with nothing else running.
	clock.Advance(150 * time.Second)
	prog.note("ttl: purge set A, no load")
	t0 := time.Now()
	nA, err := eng.RunTTLPass(ctx)
	elA := time.Since(t0)
	prog.add(nA)
	prog.end()
	if err != nil {
		return err
	}
	if nA != t.IdleSetDocs {
		return fmt.Errorf("ttl: the pass purged %d documents of set A, want %d", nA, t.IdleSetDocs)
	}
	t.IdlePurgeSeconds, t.IdlePurgePerSec = elA.Seconds(), float64(nA)/elA.Seconds()

	// B: purge while the clients read, for one read window; then the pass
	// is stopped and the rest purged with no load, within --purge-cap.
	before := eng.ReaperStats()
	clock.Advance(100 * time.Second)
	type passResult struct {
		n   int64
		el  time.Duration
		err error
	}
	passCtx, stopPass := context.WithCancel(ctx)
	defer stopPass()
	done := make(chan passResult, 1)
	t0 = time.Now()
	go func() {
		n, err := eng.RunTTLPass(passCtx)
		done <- passResult{n, time.Since(t0), err}
	}()
	busy, err := runPhase("ttl: point reads while purging", b.cfg.clients, b.cfg.duration, b.cfg.seed+6, readLive)
	if err != nil {
		return err
	}
	stopPass()
	pr := <-done
	if pr.err != nil && ctx.Err() == nil && !errors.Is(pr.err, context.Canceled) {
		return pr.err
	}
	t.LoadPurged = pr.n
	t.LoadPurgeSeconds, t.LoadPurgePerSec = pr.el.Seconds(), float64(pr.n)/pr.el.Seconds()
	t.PurgeOutlived = pr.n < t.LoadSetDocs

	remaining := t.LoadSetDocs - pr.n
	if remaining > 0 {
		prog.note("ttl: purge the rest of set B, no load (cap %s)", b.cfg.purgeCap)
		capCtx, cancel := context.WithTimeout(ctx, b.cfg.purgeCap)
		t0 = time.Now()
		n, err := eng.RunTTLPass(capCtx)
		el := time.Since(t0)
		cancel()
		prog.add(n)
		prog.end()
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		t.RestPurged, t.RestPurgeSeconds = n, el.Seconds()
		remaining -= n
	}
	t.Unpurged = remaining
	after := eng.ReaperStats()
	t.Backoffs = after.Backoffs - before.Backoffs
	t.ReclaimedByReaper = after.ReclaimedBytes
	t.IdleP99us = float64(idle.h.quantile(0.99)) / 1e3
	t.PurgeP99us = float64(busy.h.quantile(0.99)) / 1e3
	if t.IdleP99us > 0 {
		t.P99Ratio = t.PurgeP99us / t.IdleP99us
	}

	if err := kv.Flush(); err != nil {
		return err
	}
	t.AfterPurgeBytes = dirSize(dir)
	t.EstimateAfterBytes, _ = kv.EstimateDiskUsage(everything[0], everything[1])
	if err := settle("after purge"); err != nil {
		return err
	}
	t.AfterCompactBytes = dirSize(dir)
	if t.LiveBytes.SST > 0 {
		t.AfterPurgeRatio = float64(t.AfterPurgeBytes.SST) / float64(t.LiveBytes.SST)
		t.AfterCompactRatio = float64(t.AfterCompactBytes.SST) / float64(t.LiveBytes.SST)
	}

	b.rep.add(Result{Name: "ttl: point read, reaper idle", Group: "ttl", Unit: "ops"}, idle, "", 0)
	b.rep.add(Result{Name: "ttl: point read while reaper purges", Group: "ttl", Unit: "ops"}, busy, "", 0)
	last := &b.rep.Results[len(b.rep.Results)-1]
	last.Vs, last.Ratio = "p99 ÷ idle p99", t.P99Ratio
	b.rep.Results = append(b.rep.Results,
		Result{Name: "ttl: reaper purge, no load", Group: "ttl", Unit: "docs", Units: nA, Secs: elA.Seconds(), PerSec: t.IdlePurgePerSec},
		Result{Name: "ttl: reaper purge under read load", Group: "ttl", Unit: "docs", Units: pr.n, Secs: pr.el.Seconds(), PerSec: t.LoadPurgePerSec,
			Vs: "no-load purge", Ratio: t.LoadPurgePerSec / t.IdlePurgePerSec})
	if t.RestPurgeSeconds > 0 {
		b.rep.Results = append(b.rep.Results, Result{Name: "ttl: reaper purge, rest of the large set", Group: "ttl", Unit: "docs",
			Units: t.RestPurged, Secs: t.RestPurgeSeconds, PerSec: float64(t.RestPurged) / t.RestPurgeSeconds,
			Note: fmt.Sprintf("%d of %d still unpurged after --purge-cap", t.Unpurged, t.LoadSetDocs)})
	}
	return nil
}
