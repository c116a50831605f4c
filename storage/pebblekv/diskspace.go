package pebblekv

// The disk-space guard keeps a full disk from killing the server.
//
// Pebble treats a failed write-ahead-log or MANIFEST write as fatal: the
// commit pipeline panics (db.go, commitWrite) or calls Logger.Fatalf ("fatal
// commit error", "MANIFEST sync failed") and the database cannot be used
// again in this process. So a full disk must never reach Pebble's WAL. Three
// lines of defence:
//
//  1. A watcher measures the free space of the data directory's filesystem
//     every DiskGuardOptions.Interval (1 s) and the commit path subtracts an
//     estimate of what each batch will take, so that writes are refused with
//     mongod's OutOfDiskSpace (14031) before the disk is actually full, while
//     reads keep working. When a later measurement finds enough space again,
//     writes resume: no restart.
//  2. An emergency ballast file (auxiliary/EMERGENCY_BALLAST, as CockroachDB
//     keeps one) reserves space the operator can delete to get going again.
//  3. If a write to the WAL or the MANIFEST reaches the filesystem anyway
//     and fails with ENOSPC (the disk filled faster than the watcher
//     measures, or another process filled it), the filesystem wrapper
//     (guardFS) calls onDiskFull before retrying the write once: it deletes
//     the ballast if there is one, and otherwise holds the write until space
//     is freed, instead of letting Pebble see the error and exit. Writes are
//     refused meanwhile. (Like vfs.OnDiskFull, but only for the files whose
//     failure is fatal, and for every file while the store opens: a flush
//     or compaction that fails for lack of space at run time is retried by
//     Pebble and must not consume the ballast or hold the filesystem; it is
//     slowed to one attempt a second, as Pebble retries at once.)
//  4. Open refuses, with a clear error, a disk too full to hold what opening
//     writes (the MANIFEST, the flush of the WAL to replay) even with the
//     ballast given up, instead of Pebble exiting or spinning inside Open.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// DiskUsage is a filesystem's space as statfs reports it.
type DiskUsage = vfs.DiskUsage

// Defaults of the disk-space guard.
const (
	// DefaultMinFreeDisk is the free space below which writes are refused.
	DefaultMinFreeDisk = 256 << 20
	// DefaultBallastSize is the emergency ballast's size, capped at
	// DefaultBallastPercent of the filesystem (CockroachDB's default).
	DefaultBallastSize    = 1 << 30
	DefaultBallastPercent = 1.0
	// DefaultDiskCheckInterval is how often free space is measured
	// (mongod's DiskSpaceMonitor runs every second too).
	DefaultDiskCheckInterval = time.Second
)

// BallastPath is where the emergency ballast lives, relative to the data
// directory.
var BallastPath = filepath.Join("auxiliary", "EMERGENCY_BALLAST")

// writeAmplification is how many bytes of disk a committed byte is assumed
// to take before the next measurement: the WAL record now and the sstable
// its memtable flushes to.
const writeAmplification = 2

// DiskSize is an amount of disk space: a number of bytes, or a percentage
// of the filesystem's size.
type DiskSize struct {
	Bytes   int64
	Percent float64
}

// IsZero reports whether the size is zero.
func (d DiskSize) IsZero() bool { return d.Bytes == 0 && d.Percent == 0 }

// Of resolves the size on a filesystem of total bytes.
func (d DiskSize) Of(total uint64) int64 {
	if d.Percent > 0 {
		return int64(float64(total) * d.Percent / 100)
	}
	return d.Bytes
}

func (d DiskSize) String() string {
	if d.Percent > 0 {
		return strconv.FormatFloat(d.Percent, 'f', -1, 64) + "%"
	}
	return strconv.FormatInt(d.Bytes, 10)
}

var diskUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseDiskSize parses "0", "268435456", "256MiB", "1.5G", "500MB" (K, M,
// G, T and KiB... are powers of 1024; KB, MB, GB, TB powers of 1000) or a
// percentage of the filesystem, "5%".
func ParseDiskSize(s string) (DiskSize, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return DiskSize{}, fmt.Errorf("invalid disk size %q: a percentage must be between 0 and 100", s)
		}
		return DiskSize{Percent: v}, nil
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	mult, ok := diskUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	v, err := strconv.ParseFloat(t[:i], 64)
	if !ok || err != nil || i == 0 {
		return DiskSize{}, fmt.Errorf("invalid disk size %q: want bytes, a size such as 256MiB or 1GB, or a percentage such as 5%%", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return DiskSize{}, fmt.Errorf("invalid disk size %q: too large", s)
	}
	return DiskSize{Bytes: int64(b)}, nil
}

// DiskGuardOptions configure the disk-space guard (Options.DiskGuard).
type DiskGuardOptions struct {
	// MinFree is the free space below which writes are refused with
	// OutOfDiskSpace (14031). Zero refuses writes only once the disk is
	// actually full.
	MinFree DiskSize
	// Ballast is the emergency ballast's size; zero means no ballast (and
	// removes one left by an earlier run). BallastCapPercent, when set,
	// caps it at that percentage of the filesystem.
	Ballast           DiskSize
	BallastCapPercent float64
	// Interval between measurements (default 1 s).
	Interval time.Duration
	// Stat measures the filesystem holding dir; nil uses the store's
	// filesystem (statfs for the real one). Tests inject a fake.
	Stat func(dir string) (DiskUsage, error)
}

// DefaultDiskGuard is the guard a server runs with by default.
func DefaultDiskGuard() *DiskGuardOptions {
	return &DiskGuardOptions{
		MinFree:           DiskSize{Bytes: DefaultMinFreeDisk},
		Ballast:           DiskSize{Bytes: DefaultBallastSize},
		BallastCapPercent: DefaultBallastPercent,
	}
}

// OutOfDiskSpace is the error writes get while free space is short: mongod's
// code and wording (IndexBuildsCoordinator's disk-space check).
func OutOfDiskSpace(avail, required int64) *mongoerr.Error {
	if avail < 0 {
		avail = 0
	}
	return &mongoerr.Error{Code: mongoerr.OutOfDiskSpace, Msg: fmt.Sprintf("available disk space of %d bytes is less than required minimum of %d", avail, required)}
}

// diskGuard is the running guard of one Store.
type diskGuard struct {
	fs       vfs.FS // the unwrapped filesystem
	dir      string
	stat     func(string) (DiskUsage, error)
	minFree  int64
	ballast  string // path of the ballast file; "" without one
	interval time.Duration
	log      *zap.Logger

	// avail is the last measured free space less the estimated cost of
	// the batches admitted since.
	avail atomic.Int64
	// refusing is set while writes are refused (reported once per change).
	refusing atomic.Bool
	// emergency is set when an ENOSPC reached the filesystem; cleared by a
	// measurement that finds MinFree free again.
	emergency atomic.Bool
	// opening is set while Pebble opens: onDiskFull does not wait then, so
	// that a full disk fails Open with a clear error instead of hanging.
	opening atomic.Bool
	closing atomic.Bool
	statErr atomic.Bool
	// fullMu serialises onDiskFull (and guards ballast after startup).
	fullMu sync.Mutex
	// bgENOSPC counts background writes that failed for lack of space;
	// bgLogged is when that was last logged (Unix ns).
	bgENOSPC atomic.Int64
	bgLogged atomic.Int64

	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started bool
}

func newDiskGuard(fs vfs.FS, dir string, o *DiskGuardOptions, log *zap.Logger) (*diskGuard, error) {
	g := &diskGuard{fs: fs, dir: dir, stat: o.Stat, interval: o.Interval, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
	if g.stat == nil {
		g.stat = fs.GetDiskUsage
	}
	if g.interval <= 0 {
		g.interval = DefaultDiskCheckInterval
	}
	u, err := g.stat(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblekv: cannot measure free space of %s: %w", dir, err)
	}
	g.minFree = o.MinFree.Of(u.TotalBytes)
	g.avail.Store(clampInt64(u.AvailBytes))
	if err := g.ensureBallast(o, u); err != nil {
		return nil, err
	}
	g.measure()
	return g, nil
}

// openNeeds is a floor on the free space Pebble needs to open a store: it
// writes a new MANIFEST (a snapshot of the current one), a WAL and an
// OPTIONS file, and a failed MANIFEST write there is fatal too.
const openNeeds = 1 << 20

// checkOpenSpace fails Open with a clear error when the disk is too full to
// open the store: Pebble would otherwise exit the process from inside Open
// ("MANIFEST flush failed") or retry flushing the replayed WAL forever. It
// needs about the current MANIFEST, the WAL to replay (flushed at open) and
// a margin; a ballast counts, as onDiskFull gives it up during Open.
func (g *diskGuard) checkOpenSpace() error {
	var manifest, wal int64
	if names, err := g.fs.List(g.dir); err == nil {
		for _, n := range names {
			fi, err := g.fs.Stat(filepath.Join(g.dir, n))
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(n, "MANIFEST-"):
				manifest = max(manifest, fi.Size())
			case strings.HasSuffix(n, ".log"):
				wal += fi.Size()
			}
		}
	}
	need := manifest + wal + openNeeds
	avail := max(g.avail.Load(), 0)
	var ballast int64
	if g.ballast != "" {
		if fi, err := g.fs.Stat(g.ballast); err == nil {
			ballast = fi.Size()
		}
	}
	if avail+ballast < need {
		return fmt.Errorf("pebblekv: the disk holding %s is full: %d bytes available, about %d needed to open the store; free some space", g.dir, avail, need)
	}
	return nil
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// ensureBallast creates (or grows) the ballast when free space allows it:
// afterwards at least twice MinFree and at least the ballast's size must
// remain free, so that it is never what fills the disk and is not
// recreated while space is low. A zero size removes an existing ballast.
func (g *diskGuard) ensureBallast(o *DiskGuardOptions, u DiskUsage) error {
	path := filepath.Join(g.dir, BallastPath)
	want := o.Ballast.Of(u.TotalBytes)
	if o.BallastCapPercent > 0 {
		if c := (DiskSize{Percent: o.BallastCapPercent}).Of(u.TotalBytes); want > c {
			want = c
		}
	}
	var have int64
	if fi, err := g.fs.Stat(path); err == nil {
		have = fi.Size()
	}
	if want <= 0 {
		if have > 0 || g.exists(path) {
			if err := g.fs.Remove(path); err != nil {
				return fmt.Errorf("pebblekv: remove the emergency ballast %s: %w", path, err)
			}
			g.log.Info("emergency ballast removed (ballast disabled)", zap.String("path", path))
		}
		return nil
	}
	g.ballast = path
	if have >= want {
		return nil
	}
	need := want - have
	margin := max(2*g.minFree, want)
	if clampInt64(u.AvailBytes) < need+margin {
		g.log.Warn("emergency ballast not created: free space is low",
			zap.String("path", path), zap.Int64("size", want), zap.Uint64("available", u.AvailBytes))
		return nil
	}
	if err := g.fs.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("pebblekv: create %s: %w", filepath.Dir(path), err)
	}
	if err := writeBallast(g.fs, path, have, want); err != nil {
		_ = g.fs.Remove(path)
		return fmt.Errorf("pebblekv: create the emergency ballast %s: %w", path, err)
	}
	g.log.Info("emergency ballast created: delete it to free space if the disk fills up",
		zap.String("path", path), zap.Int64("size", want))
	return nil
}

func (g *diskGuard) exists(path string) bool {
	_, err := g.fs.Stat(path)
	return err == nil
}

// writeBallast extends path from have to want bytes: fallocate where the
// filesystem supports it (instant, and the blocks are really reserved),
// zeros otherwise.
func writeBallast(fs vfs.FS, path string, have, want int64) error {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer f.Close()
	if fd := f.Fd(); fd != vfs.InvalidFd && fallocate(fd, want) == nil {
		return f.Sync()
	}
	buf := make([]byte, 1<<20)
	for off := have; off < want; {
		n := int64(len(buf))
		if want-off < n {
			n = want - off
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return f.Sync()
}

func (g *diskGuard) start() {
	g.started = true
	go g.run()
}

func (g *diskGuard) run() {
	defer close(g.done)
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.measure()
		}
	}
}

// measure takes a measurement and updates the refusal state.
func (g *diskGuard) measure() {
	u, err := g.stat(g.dir)
	if err != nil {
		if !g.statErr.Swap(true) {
			g.log.Error("cannot measure free disk space", zap.String("dir", g.dir), zap.Error(err))
		}
		return
	}
	g.statErr.Store(false)
	avail := clampInt64(u.AvailBytes)
	g.avail.Store(avail)
	low := avail < g.minFree || avail == 0
	if !low && g.emergency.Swap(false) {
		g.log.Warn("free disk space is back after a disk-full error", zap.Int64("available", avail))
	}
	g.setRefusing(low || g.emergency.Load(), avail)
}

func (g *diskGuard) setRefusing(on bool, avail int64) {
	if g.refusing.Swap(on) == on {
		return
	}
	if on {
		g.log.Error("free disk space is low: refusing writes until space is freed (delete "+filepath.Join(g.dir, BallastPath)+" if it exists)",
			zap.Int64("available", avail), zap.Int64("minFree", g.minFree))
	} else {
		g.log.Warn("free disk space recovered: accepting writes again", zap.Int64("available", avail), zap.Int64("minFree", g.minFree))
	}
}

// Classes of batches, by how far into the free-space margin they may go.
const (
	admitWrite     = iota // anything that stores data: refused below MinFree
	admitDelete           // only deletes (frees space): down to MinFree/2
	admitEssential        // tiny bookkeeping (the expiry clock's lease): until the disk is full
)

// admit decides whether a batch of size bytes may commit. Every write is
// refused after an ENOSPC until a measurement finds space again.
func (g *diskGuard) admit(size int, class int) error {
	cost := int64(size) * writeAmplification
	floor := g.minFree
	switch class {
	case admitDelete:
		floor = g.minFree / 2
	case admitEssential:
		floor = 0
	}
	avail := g.avail.Load()
	if g.emergency.Load() || avail-cost < floor || avail <= 0 {
		if class == admitWrite {
			g.setRefusing(true, avail)
		}
		return OutOfDiskSpace(avail, g.minFree)
	}
	g.avail.Add(-cost)
	return nil
}

// onDiskFull runs when a filesystem write failed with ENOSPC, before the
// write is retried once; every other write to the filesystem waits
// meanwhile. Pebble cannot survive that retry failing on its WAL or
// MANIFEST, so the ballast goes first; without one the write is held
// until a measurement finds space (half of MinFree, at least 1 MiB), or
// the store closes.
func (g *diskGuard) onDiskFull() {
	g.fullMu.Lock()
	defer g.fullMu.Unlock()
	g.emergency.Store(true)
	g.remeasure()
	g.setRefusing(true, g.avail.Load())
	if g.ballast != "" {
		if err := g.fs.Remove(g.ballast); err == nil {
			g.log.Error("the disk is full (ENOSPC): deleted the emergency ballast to keep the store alive; writes are refused until free space is back above the minimum",
				zap.String("path", g.ballast))
			g.ballast = ""
			g.remeasure()
			return
		} else if !errors.Is(err, os.ErrNotExist) {
			g.log.Error("cannot delete the emergency ballast", zap.String("path", g.ballast), zap.Error(err))
		}
		g.ballast = ""
	}
	if g.opening.Load() {
		return
	}
	want := max(g.minFree/2, 1<<20)
	g.log.Error("the disk is full (ENOSPC) and no ballast is left: holding the write until space is freed; writes are refused",
		zap.Int64("waitingFor", want))
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !g.closing.Load() {
		if u, err := g.stat(g.dir); err == nil && clampInt64(u.AvailBytes) >= want {
			g.log.Warn("free disk space is back: resuming the held write", zap.Uint64("available", u.AvailBytes))
			g.avail.Store(clampInt64(u.AvailBytes))
			return
		}
		select {
		case <-t.C:
		case <-g.stop:
		}
	}
}

// noteBackgroundENOSPC counts a flush or compaction that failed for lack of
// space; BackgroundError logs such failures once a minute, not each retry.
func (g *diskGuard) noteBackgroundENOSPC() { g.bgENOSPC.Add(1) }

// logBackgroundError is Pebble's BackgroundError with ENOSPC failures
// summarised.
func (g *diskGuard) logBackgroundError(l *zap.Logger, err error) {
	if !isENOSPC(err) {
		l.Error("background error", zap.Error(err))
		return
	}
	now := time.Now().UnixNano()
	last := g.bgLogged.Load()
	if now-last < int64(time.Minute) || !g.bgLogged.CompareAndSwap(last, now) {
		return
	}
	l.Error("flush or compaction failed: the disk is full; retrying every second", zap.Error(err), zap.Int64("failuresSoFar", g.bgENOSPC.Load()))
}

// remeasure refreshes the free-space figure refusals report, without
// leaving the emergency (only the watcher does that).
func (g *diskGuard) remeasure() {
	if u, err := g.stat(g.dir); err == nil {
		g.avail.Store(clampInt64(u.AvailBytes))
	}
}

// close stops the watcher and releases a held write.
func (g *diskGuard) close() {
	g.once.Do(func() {
		g.closing.Store(true)
		close(g.stop)
		if g.started {
			<-g.done
		}
	})
}

// guardFS hands the files whose failed writes Pebble cannot survive (the
// write-ahead log, the MANIFEST and its marker files) a second chance
// after onDiskFull when a write or create fails with ENOSPC.
type guardFS struct {
	vfs.FS
	g *diskGuard
}

// criticalFile reports whether name is a WAL segment, a MANIFEST or a
// marker file (which names the current MANIFEST).
func criticalFile(name string) bool {
	b := filepath.Base(name)
	return strings.HasSuffix(b, ".log") || strings.HasPrefix(b, "MANIFEST-") || strings.HasPrefix(b, "marker.")
}

func isENOSPC(err error) bool { return err != nil && errors.Is(err, syscall.ENOSPC) }

func (fs *guardFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &guardFile{File: f, g: fs.g, critical: criticalFile(name)}, nil
}

// rescue decides what a write that failed with ENOSPC does next: true to
// retry it (after onDiskFull), false to return the error. Writes Pebble
// cannot survive are rescued, and every write while the store opens (a
// flush of the replayed WAL that fails is retried for ever, and Open with
// it). Other failures are returned after a pause: Pebble retries a failed
// flush at once, and would spin on a full disk.
func (g *diskGuard) rescue(critical bool) bool {
	if critical || g.opening.Load() {
		g.onDiskFull()
		return true
	}
	g.noteBackgroundENOSPC()
	select {
	case <-time.After(time.Second):
	case <-g.stop:
	}
	return false
}

func (fs *guardFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if isENOSPC(err) && fs.g.rescue(criticalFile(name)) {
		f, err = fs.FS.Create(name, c)
	}
	return fs.wrap(name, f, err)
}

func (fs *guardFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name, c)
	if isENOSPC(err) && fs.g.rescue(criticalFile(name)) {
		f, err = fs.FS.ReuseForWrite(old, name, c)
	}
	return fs.wrap(name, f, err)
}

func (fs *guardFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

// Unwrap returns the filesystem underneath.
func (fs *guardFS) Unwrap() vfs.FS { return fs.FS }

// guardFile retries a write that failed with ENOSPC once, after
// onDiskFull. A failed Sync is not retried: a sync after a failed one
// guarantees nothing (PostgreSQL's "fsyncgate").
type guardFile struct {
	vfs.File
	g        *diskGuard
	critical bool
}

func (f *guardFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if isENOSPC(err) && f.g.rescue(f.critical) {
		var m int
		m, err = f.File.Write(p[n:])
		n += m
	}
	return n, err
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if isENOSPC(err) && f.g.rescue(f.critical) {
		var m int
		m, err = f.File.WriteAt(p[n:], off+int64(n))
		n += m
	}
	return n, err
}
