package pebblekv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mayflydb/mayfly/storage"
)

func openMem(t *testing.T) *Store {
	t.Helper()
	s, err := Open("mem", Options{InMemory: true, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t *testing.T, s storage.KV, kv ...string) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for i := 0; i < len(kv); i += 2 {
		if err := b.Set([]byte(kv[i]), []byte(kv[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

func keys(t *testing.T, r storage.Reader, lo, hi string) []string {
	t.Helper()
	var l, h []byte
	if lo != "" {
		l = []byte(lo)
	}
	if hi != "" {
		h = []byte(hi)
	}
	it, err := r.NewIter(l, h)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSetGetIterate(t *testing.T) {
	s := openMem(t)
	put(t, s, "b", "2", "a", "1", "c", "3", "d", "4")
	v, err := s.Get([]byte("b"))
	if err != nil || string(v) != "2" {
		t.Fatalf("Get b = %q, %v", v, err)
	}
	if _, err := s.Get([]byte("zz")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if got := strings.Join(keys(t, s, "", ""), ","); got != "a=1,b=2,c=3,d=4" {
		t.Fatalf("full scan %s", got)
	}
	if got := strings.Join(keys(t, s, "b", "d"), ","); got != "b=2,c=3" {
		t.Fatalf("bounded scan %s", got)
	}
	it, _ := s.NewIter([]byte("b"), []byte("d"))
	defer it.Close()
	if !it.Last() || string(it.Key()) != "c" {
		t.Fatal("Last")
	}
	if !it.SeekLT([]byte("c")) || string(it.Key()) != "b" {
		t.Fatal("SeekLT")
	}
	if it.Prev() {
		t.Fatal("Prev past lower bound")
	}
	if !it.SeekGE([]byte("bb")) || string(it.Key()) != "c" || it.Next() || it.Valid() {
		t.Fatal("SeekGE/Next past upper bound")
	}
}

func TestGetReturnsCopy(t *testing.T) {
	s := openMem(t)
	put(t, s, "k", "value")
	v, _ := s.Get([]byte("k"))
	v[0] = 'X'
	w, _ := s.Get([]byte("k"))
	if string(w) != "value" {
		t.Fatalf("stored value changed through returned slice: %q", w)
	}
}

func TestBatchAtomicityAndLen(t *testing.T) {
	s := openMem(t)
	put(t, s, "x", "old")
	b := s.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	b.Delete([]byte("x"))
	b.DeleteSized([]byte("y"), 10)
	if b.Len() != 3 {
		t.Fatalf("Len = %d, want 3", b.Len())
	}
	// Nothing is visible before Commit.
	if got := keys(t, s, "", ""); strings.Join(got, ",") != "x=old" {
		t.Fatalf("uncommitted batch visible: %v", got)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := strings.Join(keys(t, s, "", ""), ","); got != "a=1" {
		t.Fatalf("after commit %s", got)
	}
	// A closed, uncommitted batch leaves nothing behind.
	b = s.NewBatch()
	b.Set([]byte("z"), []byte("9"))
	b.Close()
	if _, err := s.Get([]byte("z")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("abandoned batch applied")
	}
}

func TestSnapshotIsolation(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1", "b", "2")
	snap := s.NewSnapshot()
	defer snap.Close()
	put(t, s, "a", "changed", "c", "3")
	b := s.NewBatch()
	b.Delete([]byte("b"))
	b.Commit(false)
	b.Close()
	if got := strings.Join(keys(t, snap, "", ""), ","); got != "a=1,b=2" {
		t.Fatalf("snapshot sees %s", got)
	}
	if v, err := snap.Get([]byte("b")); err != nil || string(v) != "2" {
		t.Fatalf("snapshot Get b = %q %v", v, err)
	}
	if _, err := snap.Get([]byte("c")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("snapshot sees later insert")
	}
	if got := strings.Join(keys(t, s, "", ""), ","); got != "a=changed,c=3" {
		t.Fatalf("live view %s", got)
	}
	// A compaction must not drop versions the snapshot still needs.
	if err := s.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys(t, snap, "", ""), ","); got != "a=1,b=2" {
		t.Fatalf("snapshot after compaction sees %s", got)
	}
}

func TestDeleteRange(t *testing.T) {
	s := openMem(t)
	for i := 0; i < 100; i++ {
		put(t, s, fmt.Sprintf("k%03d", i), "v")
	}
	b := s.NewBatch()
	b.DeleteRange([]byte("k010"), []byte("k090"))
	b.Commit(false)
	b.Close()
	if n := len(keys(t, s, "", "")); n != 20 {
		t.Fatalf("%d keys left, want 20", n)
	}
	if _, err := s.Get([]byte("k050")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("k050 survived DeleteRange")
	}
	if _, err := s.Get([]byte("k090")); err != nil {
		t.Fatal("DeleteRange end is exclusive")
	}
}

func TestReopenKeepsDataAndLock(t *testing.T) {
	dir := t.TempDir() + "/data/db"
	s, err := Open(dir, Options{CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "durable", "yes")
	b := s.NewBatch()
	b.Set([]byte("synced"), []byte("yes"))
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()

	_, err = Open(dir, Options{CacheSize: 8 << 20})
	if err == nil {
		t.Fatal("second Open on a locked directory succeeded")
	}
	want := fmt.Sprintf("data directory %s is in use by another mayfly process (lock held)", dir)
	if err.Error() != want || !errors.Is(err, ErrLocked) {
		t.Fatalf("lock error = %q", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	s, err = Open(dir, Options{CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"durable", "synced"} {
		if v, err := s.Get([]byte(k)); err != nil || string(v) != "yes" {
			t.Fatalf("after reopen %s = %q %v", k, v, err)
		}
	}
}

// TestCompactReclaimsDeletedSpace is the TTL reaper's path: delete many
// documents with DeleteSized, see the tombstone estimate, compact the range
// and watch the disk usage fall.
func TestCompactReclaimsDeletedSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 MB")
	}
	s, err := Open(t.TempDir(), Options{CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 20000
	val := make([]byte, 1000)
	key := func(i int) []byte { return []byte(fmt.Sprintf("doc/%08d", i)) }
	for start := 0; start < n; start += 1000 {
		b := s.NewBatch()
		for i := start; i < start+1000; i++ {
			// Distinct, poorly compressible values: a fixed pattern would
			// compress to nothing and hide the effect.
			for j := range val {
				val[j] = byte((i*7919 + j*104729 + j*j) >> 3)
			}
			b.Set(key(i), val)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	// Keep a small live tail outside the deleted range.
	put(t, s, "keep/1", "x")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Compact(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	before, err := s.EstimateDiskUsage(nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	for start := 0; start < n; start += 1000 {
		b := s.NewBatch()
		for i := start; i < start+1000; i++ {
			b.DeleteSized(key(i), uint32(len(val)))
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	lo, hi := []byte("doc/"), []byte("doc0")
	// Table statistics are computed in the background after the flush.
	var reclaimable uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if reclaimable, err = s.ReclaimableBytes(lo, hi); err != nil {
			t.Fatal(err)
		}
		if reclaimable > 0 {
			break
		}
	}
	if reclaimable == 0 {
		t.Fatal("ReclaimableBytes stayed 0 after deleting 20k documents")
	}
	all, _ := s.ReclaimableBytes(nil, nil)
	if all < reclaimable {
		t.Fatalf("unbounded ReclaimableBytes %d < bounded %d", all, reclaimable)
	}

	withTombstones, _ := s.EstimateDiskUsage(nil, nil)
	if err := s.Compact(ctx, lo, hi); err != nil {
		t.Fatal(err)
	}
	after, err := s.EstimateDiskUsage(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := s.ReclaimableBytes(lo, hi)
	t.Logf("disk: %d bytes live, %d with tombstones flushed (ReclaimableBytes %d), %d after Compact (ReclaimableBytes %d)",
		before, withTombstones, reclaimable, after, left)
	if after*10 > before {
		t.Fatalf("compaction reclaimed too little: %d -> %d", before, after)
	}
	if v, err := s.Get([]byte("keep/1")); err != nil || string(v) != "x" {
		t.Fatal("live key lost in compaction")
	}
	st := s.Stats()
	if st.CompactionCount == 0 || st.DiskUsageBytes == 0 {
		t.Fatalf("stats look empty: %+v", st)
	}
	t.Logf("stats %+v", st)
}

func TestUnboundedRangesOnEmptyStore(t *testing.T) {
	s := openMem(t)
	if n, err := s.EstimateDiskUsage(nil, nil); err != nil || n != 0 {
		t.Fatalf("empty EstimateDiskUsage = %d %v", n, err)
	}
	if err := s.Compact(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ReclaimableBytes(nil, nil); err != nil || n != 0 {
		t.Fatalf("empty ReclaimableBytes = %d %v", n, err)
	}
	if err := s.Compact(context.Background(), []byte("b"), []byte("a")); err != nil {
		t.Fatal("inverted range should be a no-op:", err)
	}
}

func TestStatsAfterReads(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1")
	s.Flush()
	s.Get([]byte("a"))
	st := s.Stats()
	if st.BlockCacheHits+st.BlockCacheMisses == 0 {
		t.Fatalf("no block cache traffic: %+v", st)
	}
}

func TestUseAfterClose(t *testing.T) {
	s, err := Open("", Options{InMemory: true, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	s.Close()
	if err := b.Commit(true); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
	b.Close()
	if _, err := s.Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := s.NewIter(nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewIter after Close: %v", err)
	}
	if _, err := s.NewSnapshot().Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("snapshot after Close: %v", err)
	}
	if err := s.Compact(context.Background(), nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact after Close: %v", err)
	}
	if st := s.Stats(); st != (storage.Stats{}) {
		t.Fatalf("Stats after Close: %+v", st)
	}
}

func TestIterBoundsAreCopied(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1", "b", "2", "c", "3")
	lo, hi := []byte("b"), []byte("c")
	it, err := s.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	lo[0], hi[0] = 'a', 'z' // caller reuses its buffers
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, string(it.Key()))
	}
	if strings.Join(got, ",") != "b" {
		t.Fatalf("iterated %v, want [b]", got)
	}
}

func TestPebbleLogsAreQuiet(t *testing.T) {
	for _, level := range []zapcore.Level{zapcore.InfoLevel, zapcore.DebugLevel} {
		core, logs := observer.New(level)
		s, err := Open("mem", Options{InMemory: true, CacheSize: 1 << 20, Logger: zap.New(core).Named("pebble")})
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, "a", "1")
		s.Flush()
		s.Compact(context.Background(), nil, nil)
		s.Close()
		n := logs.Len()
		if level == zapcore.InfoLevel && n != 0 {
			t.Fatalf("routine work logged at info: %v", logs.All())
		}
		if level == zapcore.DebugLevel && n == 0 {
			t.Fatal("nothing reached the debug log")
		}
		for _, e := range logs.All() {
			if e.LoggerName != "pebble" {
				t.Fatalf("log entry from %q", e.LoggerName)
			}
		}
	}
}

// TestLockHeldByAnotherProcess re-runs the test binary as a second process
// against a directory this one holds: the child sees fcntl's EAGAIN, not the
// in-process "lock held by current process" path.
func TestLockHeldByAnotherProcess(t *testing.T) {
	if dir := os.Getenv("PEBBLEKV_LOCK_CHILD_DIR"); dir != "" {
		_, err := Open(dir, Options{CacheSize: 1 << 20})
		fmt.Printf("child-error: %v (locked=%v)\n", err, errors.Is(err, ErrLocked))
		return
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHeldByAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PEBBLEKV_LOCK_CHILD_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := fmt.Sprintf("child-error: data directory %s is in use by another mayfly process (lock held) (locked=true)", dir)
	if !strings.Contains(string(out), want) {
		t.Fatalf("child output:\n%s\nwant %q", out, want)
	}
}
