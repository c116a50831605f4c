package ttl

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// fakePurger holds n expired documents and deletes them in batches.
type fakePurger struct {
	left     atomic.Int64
	batches  atomic.Int64
	compacts atomic.Int64
}

func (f *fakePurger) PurgeBatch(ctx context.Context, nowMS int64, max int) (int, int64, bool, error) {
	f.batches.Add(1)
	n := min(int64(max), f.left.Load())
	f.left.Add(-n)
	return int(n), n * 100, f.left.Load() > 0, nil
}

func (f *fakePurger) Compact(ctx context.Context) (int64, error) { f.compacts.Add(1); return 42, nil }
func (f *fakePurger) NowMS() int64                               { return 0 }

func TestPassDrainsInBatches(t *testing.T) {
	p := &fakePurger{}
	p.left.Store(1000)
	r := NewReaper(p, ReaperConfig{BatchSize: 100})
	n, err := r.Pass(context.Background())
	if err != nil || n != 1000 || p.batches.Load() != 10 {
		t.Fatalf("deleted %d in %d batches (%v)", n, p.batches.Load(), err)
	}
	st := r.Stats()
	if st.Passes != 1 || st.DeletedDocuments != 1000 || st.DeletedBytes != 100000 || st.ReclaimedBytes != 42 {
		t.Fatalf("stats %+v", st)
	}
}

// While the foreground is busy the reaper waits between batches (bounded),
// so a pass of 5 batches under constant load takes >= 4 backoff periods.
func TestPassBacksOffUnderLoad(t *testing.T) {
	p := &fakePurger{}
	p.left.Store(500)
	r := NewReaper(p, ReaperConfig{BatchSize: 100, Busy: func() bool { return true }, BackoffMax: 20 * time.Millisecond})
	start := time.Now()
	r.Pass(context.Background())
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Fatalf("pass under load took %v: no back-off", took)
	}
	if r.Stats().Backoffs != 4 {
		t.Fatalf("backoffs %d, want 4", r.Stats().Backoffs)
	}
}

func TestRateLimit(t *testing.T) {
	p := &fakePurger{}
	p.left.Store(300)
	r := NewReaper(p, ReaperConfig{BatchSize: 100, Rate: 1000}) // 300 docs at 1000/s ≈ 300 ms
	start := time.Now()
	r.Pass(context.Background())
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("rate limit not applied: %v", took)
	}
}
