package pebblekv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
)

// smallDisk is a filesystem that can run out of space: while full, every
// write fails with ENOSPC as a real full disk's would, and GetDiskUsage
// reports the free space the test sets. Deleting the ballast frees its
// bytes, as it would on a real disk.
type smallDisk struct {
	vfs.FS
	full     atomic.Bool
	avail    atomic.Uint64
	enospc   atomic.Int64 // writes refused
	onRemove func(name string)
}

const smallDiskTotal = 1 << 40

func newSmallDisk() *smallDisk {
	d := &smallDisk{FS: vfs.NewMem()}
	d.avail.Store(100 << 30)
	return d
}

func (d *smallDisk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	a := d.avail.Load()
	return vfs.DiskUsage{AvailBytes: a, TotalBytes: smallDiskTotal, UsedBytes: smallDiskTotal - a}, nil
}

func (d *smallDisk) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &smallDiskFile{File: f, d: d}, nil
}

func (d *smallDisk) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if d.full.Load() {
		d.enospc.Add(1)
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	return d.wrap(d.FS.Create(name, c))
}

func (d *smallDisk) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return d.wrap(d.FS.OpenReadWrite(name, c, opts...))
}

func (d *smallDisk) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if d.full.Load() {
		d.enospc.Add(1)
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	return d.wrap(d.FS.ReuseForWrite(old, name, c))
}

func (d *smallDisk) Remove(name string) error {
	fi, statErr := d.FS.Stat(name)
	err := d.FS.Remove(name)
	if err == nil && statErr == nil && strings.HasSuffix(name, "EMERGENCY_BALLAST") {
		d.full.Store(false)
		d.avail.Store(uint64(fi.Size()))
	}
	return err
}

type smallDiskFile struct {
	vfs.File
	d *smallDisk
}

func (f *smallDiskFile) Write(p []byte) (int, error) {
	if f.d.full.Load() {
		f.d.enospc.Add(1)
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (f *smallDiskFile) WriteAt(p []byte, off int64) (int, error) {
	if f.d.full.Load() {
		f.d.enospc.Add(1)
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(p, off)
}

func openSmall(t *testing.T, d *smallDisk, g *DiskGuardOptions) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: d, DiskGuard: g, WALSyncInterval: -1, CacheSize: 8 << 20, MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putKey(s *Store, k string, sync bool) error {
	b := s.NewBatch()
	defer b.Close()
	b.Set([]byte(k), []byte("value of "+k))
	return b.Commit(sync)
}

func wantOutOfDisk(t *testing.T, err error, what string) {
	t.Helper()
	if !mongoerr.Is(err, mongoerr.OutOfDiskSpace) {
		t.Fatalf("%s: want OutOfDiskSpace (14031), got %v", what, err)
	}
	if me := mongoerr.From(err); me.CodeName() != "OutOfDiskSpace" || !strings.Contains(me.Msg, "available disk space of") {
		t.Fatalf("%s: error %v", what, me)
	}
}

func checkKeys(t *testing.T, s *Store, keys []string) {
	t.Helper()
	for _, k := range keys {
		v, err := s.Get([]byte(k))
		if err != nil || string(v) != "value of "+k {
			t.Fatalf("acknowledged key %s: %q, %v", k, v, err)
		}
	}
}

// TestIssue21DiskGuardThreshold: below the free-space threshold writes get
// 14031 while reads work; deletions may go on into half the reserve; an
// oversized batch is refused before any measurement shows the space gone;
// once space is back, writes resume without a restart.
func TestIssue21DiskGuardThreshold(t *testing.T) {
	d := newSmallDisk()
	s := openSmall(t, d, &DiskGuardOptions{MinFree: DiskSize{Bytes: 64 << 20}, Interval: 5 * time.Millisecond})
	defer s.Close()
	var acked []string
	for i := 0; i < 50; i++ {
		k := fmt.Sprintf("k%03d", i)
		if err := putKey(s, k, i%2 == 0); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, k)
	}

	// Estimated use counts before the next measurement: 64 MiB + 1 MiB
	// free, and a 1 MiB value (2 MiB estimated) is refused at once.
	d.avail.Store(65 << 20)
	s.guard.measure()
	b := s.NewBatch()
	b.Set([]byte("big"), make([]byte, 1<<20))
	wantOutOfDisk(t, b.Commit(false), "batch larger than the margin")
	b.Close()

	d.avail.Store(40 << 20) // below 64 MiB, above half of it
	deadline := time.Now().Add(5 * time.Second)
	for putKey(s, "probe", false) == nil {
		acked = append(acked, "probe")
		if time.Now().After(deadline) {
			t.Fatal("writes still accepted below the threshold")
		}
		time.Sleep(time.Millisecond)
	}
	wantOutOfDisk(t, putKey(s, "refused", true), "insert below the threshold")
	checkKeys(t, s, acked)
	it, err := s.NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Close()
	if n != 51 && n != 50 { // "probe" may or may not have been written
		t.Fatalf("scan saw %d keys", n)
	}
	del := s.NewBatch()
	del.Delete([]byte("k049"))
	if err := del.Commit(true); err != nil {
		t.Fatalf("a delete-only batch above half the threshold: %v", err)
	}
	del.Close()
	acked = acked[:49]
	if _, err := s.Get([]byte("k049")); err != storage.ErrNotFound {
		t.Fatalf("deleted key: %v", err)
	}
	d.avail.Store(10 << 20) // below half: even deletions are refused
	s.guard.measure()
	del = s.NewBatch()
	del.Delete([]byte("k048"))
	wantOutOfDisk(t, del.Commit(true), "delete below half the threshold")
	del.Close()
	// The expiry clock's lease still commits: refusing it would fail reads.
	ess := s.NewBatch()
	ess.Set([]byte("lease"), []byte("value of lease"))
	ess.(interface{ MarkEssential() }).MarkEssential()
	if err := ess.Commit(true); err != nil {
		t.Fatalf("essential batch: %v", err)
	}
	ess.Close()
	acked = append(acked, "lease")

	d.avail.Store(100 << 30)
	deadline = time.Now().Add(5 * time.Second)
	for putKey(s, "after", true) != nil {
		if time.Now().After(deadline) {
			t.Fatal("writes still refused after space came back")
		}
		time.Sleep(time.Millisecond)
	}
	checkKeys(t, s, append(acked, "after"))
}

// TestIssue21ENOSPCUsesBallast: the disk fills between two measurements, so
// a WAL write reaches the filesystem and fails with ENOSPC. Pebble would
// exit; instead the ballast is deleted, the write is retried and
// acknowledged, later writes are refused with 14031 until space is back,
// and nothing acknowledged is lost across a reopen.
func TestIssue21ENOSPCUsesBallast(t *testing.T) {
	d := newSmallDisk()
	g := &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Ballast: DiskSize{Bytes: 256 << 10}, Interval: time.Hour}
	s := openSmall(t, d, g)
	fi, err := d.Stat(filepath.Join("db", BallastPath))
	if err != nil || fi.Size() != 256<<10 {
		t.Fatalf("ballast: %v, %v", fi, err)
	}
	var acked []string
	for i := 0; i < 20; i++ {
		k := fmt.Sprintf("k%03d", i)
		if err := putKey(s, k, true); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, k)
	}

	d.avail.Store(0)
	d.full.Store(true)
	if err := putKey(s, "during", true); err != nil {
		t.Fatalf("the write that hit ENOSPC: %v", err)
	}
	acked = append(acked, "during")
	if d.enospc.Load() == 0 {
		t.Fatal("the filesystem never reported ENOSPC")
	}
	if _, err := d.Stat(filepath.Join("db", BallastPath)); err == nil {
		t.Fatal("ballast still there")
	}
	wantOutOfDisk(t, putKey(s, "refused", false), "write after ENOSPC")
	checkKeys(t, s, acked)

	d.avail.Store(100 << 30)
	s.guard.measure()
	if err := putKey(s, "after", true); err != nil {
		t.Fatalf("write after space came back: %v", err)
	}
	acked = append(acked, "after")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSmall(t, d, g)
	defer s.Close()
	checkKeys(t, s, acked)
	if _, err := s.Get([]byte("refused")); err != storage.ErrNotFound {
		t.Fatalf("refused write is there: %v", err)
	}
	if fi, err := d.Stat(filepath.Join("db", BallastPath)); err != nil || fi.Size() != 256<<10 {
		t.Fatalf("ballast not recreated at open with space back: %v, %v", fi, err)
	}
}

// TestIssue21ENOSPCWithoutBallastWaits: with no ballast left, the write that
// hit ENOSPC is held (not failed, not fatal) until space is freed; reads
// and refusals go on meanwhile.
func TestIssue21ENOSPCWithoutBallastWaits(t *testing.T) {
	d := newSmallDisk()
	g := &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Interval: time.Hour}
	s := openSmall(t, d, g)
	if err := putKey(s, "before", true); err != nil {
		t.Fatal(err)
	}
	d.avail.Store(0)
	d.full.Store(true)
	done := make(chan error, 1)
	go func() { done <- putKey(s, "held", true) }()
	deadline := time.Now().Add(5 * time.Second)
	for d.enospc.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no ENOSPC")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("held write returned while the disk is full: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	wantOutOfDisk(t, putKey(s, "refused", false), "write while one is held")
	checkKeys(t, s, []string{"before"})

	d.full.Store(false)
	d.avail.Store(100 << 30)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("held write: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held write not released after space came back")
	}
	s.guard.measure()
	if err := putKey(s, "after", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSmall(t, d, g)
	defer s.Close()
	checkKeys(t, s, []string{"before", "held", "after"})
}

// TestIssue21Ballast: on a real directory the ballast is allocated at its
// size, capped at a percentage of the filesystem, not created while space
// is low, and removed when disabled.
func TestIssue21Ballast(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, BallastPath)
	s, err := Open(dir, Options{DiskGuard: &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Ballast: DiskSize{Bytes: 4 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, err := os.Stat(path); err != nil || fi.Size() != 4<<20 {
		t.Fatalf("ballast: %v, %v", fi, err)
	}
	// Disabled: removed.
	s, err = Open(dir, Options{DiskGuard: &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("disabled ballast still there: %v", err)
	}
	// Low space: not created (5 MiB free cannot hold 4 MiB and keep twice
	// 1 MiB and another 4 MiB free).
	low := func(string) (DiskUsage, error) { return DiskUsage{AvailBytes: 5 << 20, TotalBytes: 1 << 40}, nil }
	s, err = Open(dir, Options{DiskGuard: &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Ballast: DiskSize{Bytes: 4 << 20}, Stat: low}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("ballast created with low space: %v", err)
	}
	// Capped at a percentage: 1% of 100 MiB.
	small := func(string) (DiskUsage, error) { return DiskUsage{AvailBytes: 90 << 20, TotalBytes: 100 << 20}, nil }
	s, err = Open(dir, Options{DiskGuard: &DiskGuardOptions{Ballast: DiskSize{Bytes: 1 << 30}, BallastCapPercent: 1, Stat: small}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, err := os.Stat(path); err != nil || fi.Size() != (100<<20)/100 {
		t.Fatalf("capped ballast: %v, %v", fi, err)
	}
}

func TestIssue21ParseDiskSize(t *testing.T) {
	for in, want := range map[string]DiskSize{
		"0": {}, "1024": {Bytes: 1024}, "256MiB": {Bytes: 256 << 20}, "256M": {Bytes: 256 << 20},
		"1GB": {Bytes: 1e9}, "1.5 GiB": {Bytes: 3 << 29}, "5%": {Percent: 5}, "0.5%": {Percent: 0.5}, "2tb": {Bytes: 2e12},
	} {
		got, err := ParseDiskSize(in)
		if err != nil || got != want {
			t.Errorf("ParseDiskSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "-1", "1XB", "101%", "%", "MB", "1e30"} {
		if _, err := ParseDiskSize(in); err == nil {
			t.Errorf("ParseDiskSize(%q) accepted", in)
		}
	}
}

// TestIssue21ENOSPCOnlyRescuesFatalWrites: Pebble survives a flush or a
// compaction failing for lack of space (it retries later), so an ENOSPC on
// an sstable neither consumes the ballast nor holds the filesystem; on the
// WAL or the MANIFEST, whose failure Pebble cannot survive, the ballast is
// deleted and the write retried.
func TestIssue21ENOSPCOnlyRescuesFatalWrites(t *testing.T) {
	d := newSmallDisk()
	g := &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Ballast: DiskSize{Bytes: 64 << 10}, Interval: time.Hour}
	s := openSmall(t, d, g)
	defer s.Close()
	gfs := &guardFS{FS: d, g: s.guard}
	ballast := filepath.Join("db", BallastPath)

	d.full.Store(true)
	if _, err := gfs.Create("db/999990.sst", vfs.WriteCategoryUnspecified); !isENOSPC(err) {
		t.Fatalf("sstable create on a full disk: %v", err)
	}
	d.full.Store(false)
	f, err := gfs.Create("db/999991.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	d.full.Store(true)
	if _, err := f.Write([]byte("data")); !isENOSPC(err) {
		t.Fatalf("sstable write on a full disk: %v", err)
	}
	f.Close()
	if _, err := d.Stat(ballast); err != nil {
		t.Fatalf("an sstable's ENOSPC consumed the ballast: %v", err)
	}
	if s.guard.emergency.Load() {
		t.Fatal("an sstable's ENOSPC is treated as an emergency")
	}

	d.full.Store(false)
	w, err := gfs.Create("db/999992.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	d.full.Store(true)
	if n, err := w.Write([]byte("record")); err != nil || n != 6 {
		t.Fatalf("WAL write on a full disk with a ballast: %d, %v", n, err)
	}
	w.Close()
	if _, err := d.Stat(ballast); err == nil {
		t.Fatal("ballast not deleted for the WAL")
	}
	if !s.guard.emergency.Load() {
		t.Fatal("no emergency after the WAL's ENOSPC")
	}
	for _, name := range []string{"000001.log", "MANIFEST-000007", "marker.manifest.000002.MANIFEST-000007"} {
		if !criticalFile("db/" + name) {
			t.Errorf("%s not critical", name)
		}
	}
	for _, name := range []string{"000001.sst", "000002.blob", "OPTIONS-000003", "LOCK"} {
		if criticalFile("db/" + name) {
			t.Errorf("%s critical", name)
		}
	}
}

// TestIssue21OpenOnFullDisk: reopening a store on a disk with no space at
// all fails with a clear error instead of Pebble exiting the process from
// inside Open; with a ballast left, the ballast gives Open its room, and
// the store serves reads and refuses writes.
func TestIssue21OpenOnFullDisk(t *testing.T) {
	d := newSmallDisk()
	noBallast := &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Interval: time.Hour}
	s := openSmall(t, d, noBallast)
	for i := 0; i < 10; i++ {
		if err := putKey(s, fmt.Sprintf("k%d", i), true); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	d.avail.Store(0)
	d.full.Store(true)
	_, err := Open("db", Options{FS: d, DiskGuard: noBallast})
	if err == nil || !strings.Contains(err.Error(), "is full: 0 bytes available") {
		t.Fatalf("open on a full disk without a ballast: %v", err)
	}

	// With a ballast (created while there was space).
	d.full.Store(false)
	d.avail.Store(100 << 30)
	withBallast := &DiskGuardOptions{MinFree: DiskSize{Bytes: 1 << 20}, Ballast: DiskSize{Bytes: 2 << 20}, Interval: time.Hour}
	s = openSmall(t, d, withBallast)
	s.Close()
	d.avail.Store(0)
	d.full.Store(true)
	s = openSmall(t, d, withBallast)
	defer s.Close()
	if _, err := d.Stat(filepath.Join("db", BallastPath)); err == nil {
		t.Fatal("Open on a full disk did not need the ballast: the test proves nothing")
	}
	for i := 0; i < 10; i++ {
		checkKeys(t, s, []string{fmt.Sprintf("k%d", i)})
	}
	wantOutOfDisk(t, putKey(s, "new", true), "write after opening on a full disk")
}
