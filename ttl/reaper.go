package ttl

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Purger is what the reaper drives: the storage side of physical deletion.
// PurgeBatch deletes up to max documents expired at nowMS (each re-checked
// under the writers' protection) and reports what it did; more is true while
// expired documents remain. Compact asks the store to reclaim space where
// tombstones piled up.
type Purger interface {
	PurgeBatch(ctx context.Context, nowMS int64, max int) (deleted int, bytes int64, more bool, err error)
	Compact(ctx context.Context) (reclaimed int64, err error)
	NowMS() int64
}

// ReaperConfig tunes background deletion.
type ReaperConfig struct {
	// Interval between passes (default 1 s).
	Interval time.Duration
	// BatchSize documents per batch, each batch one atomic commit (default 256).
	BatchSize int
	// Rate caps deletions per second (0 = unlimited).
	Rate int
	// Busy reports foreground load; while it is true the reaper backs off
	// between batches so requests keep priority (spec §8.1).
	Busy func() bool
	// BackoffMax bounds how long the reaper waits for load to drop before
	// doing one more batch anyway (default 200 ms), so a server that is
	// never idle still purges.
	BackoffMax time.Duration
	Logger     *zap.Logger
}

// Stats are the reaper's counters (spec §9).
type Stats struct {
	Passes           int64
	DeletedDocuments int64
	DeletedBytes     int64
	ReclaimedBytes   int64
	Backoffs         int64
	LastPassStart    time.Time
	LastPassDuration time.Duration
	// PurgeRate is documents per second over the last pass that deleted.
	PurgeRate float64
}

// Reaper runs passes in the background.
type Reaper struct {
	cfg        ReaperConfig
	p          Purger
	kick       chan struct{}
	stop       chan struct{}
	done       sync.WaitGroup
	mu         sync.Mutex
	stats      Stats
	idlePasses atomic.Int64
}

// NewReaper makes a reaper; Start runs it.
func NewReaper(p Purger, cfg ReaperConfig) *Reaper {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Reaper{cfg: cfg, p: p, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Start launches the background loop.
func (r *Reaper) Start() {
	r.done.Add(1)
	go r.loop()
}

// Stop ends the loop and waits for the current batch.
func (r *Reaper) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
}

// Kick asks for a pass now (tests; after a clock move).
func (r *Reaper) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Stats returns a copy of the counters.
func (r *Reaper) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *Reaper) loop() {
	defer r.done.Done()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-r.stop; cancel() }()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		r.Pass(ctx)
	}
}

// Pass runs one pass to completion (or until stopped): batches until no
// expired document remains, pacing by the rate limit and the foreground
// load. Exported so tests can run passes deterministically.
func (r *Reaper) Pass(ctx context.Context) (deleted int64, err error) {
	start := time.Now()
	now := r.p.NowMS()
	var bytes int64
	batches := 0
	for ctx.Err() == nil {
		r.pace(ctx, batches)
		n, b, more, err := r.p.PurgeBatch(ctx, now, r.cfg.BatchSize)
		deleted += int64(n)
		bytes += b
		batches++
		if err != nil {
			r.cfg.Logger.Warn("ttl pass failed", zap.Error(err))
			break
		}
		if r.cfg.Rate > 0 && n > 0 {
			// Token bucket in its simplest form: each batch "costs" n/Rate s.
			wait := time.Duration(float64(n) / float64(r.cfg.Rate) * float64(time.Second))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if !more {
			break
		}
	}
	took := time.Since(start)
	// Ask for compactions after a pass that deleted, and now and then on
	// an idle server (tombstones from earlier passes may only now be
	// measurable once flushed), so space comes back on a quiet database.
	var reclaimed int64
	if deleted > 0 || r.idlePasses.Add(1)%30 == 0 {
		if rc, cerr := r.p.Compact(ctx); cerr == nil {
			reclaimed = rc
		}
	}
	r.mu.Lock()
	r.stats.Passes++
	r.stats.DeletedDocuments += deleted
	r.stats.DeletedBytes += bytes
	r.stats.ReclaimedBytes += reclaimed
	r.stats.LastPassStart = start
	r.stats.LastPassDuration = took
	if deleted > 0 && took > 0 {
		r.stats.PurgeRate = float64(deleted) / took.Seconds()
	}
	r.mu.Unlock()
	if deleted > 0 || reclaimed > 0 {
		r.cfg.Logger.Info("ttl pass", zap.Time("start", start), zap.Duration("took", took),
			zap.Int64("deletedDocuments", deleted), zap.Int64("deletedBytes", bytes),
			zap.Int("batches", batches), zap.Int64("reclaimedBytes", reclaimed))
	} else {
		r.cfg.Logger.Debug("ttl pass", zap.Duration("took", took), zap.Int64("deletedDocuments", 0))
	}
	return deleted, err
}

// pace waits while the foreground is busy, bounded by BackoffMax.
func (r *Reaper) pace(ctx context.Context, batches int) {
	if r.cfg.Busy == nil || batches == 0 {
		return
	}
	deadline := time.Now().Add(r.cfg.BackoffMax)
	backedOff := false
	for r.cfg.Busy() && time.Now().Before(deadline) && ctx.Err() == nil {
		backedOff = true
		time.Sleep(2 * time.Millisecond)
	}
	if backedOff {
		r.mu.Lock()
		r.stats.Backoffs++
		r.mu.Unlock()
	}
}
