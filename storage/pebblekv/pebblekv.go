// Package pebblekv implements storage.KV on CockroachDB's Pebble LSM.
//
// The defaults Pebble ships with are tuned for tests, not servers, so Open
// changes the ones that matter for a document store (see
// /work/shared/reference/pebble-notes.md): the newest on-disk format (needed
// for DeleteSized and the tombstone statistics the TTL reaper relies on),
// bloom filters on every level (point lookups by _id and unique-index probes
// would otherwise read a data block per level), a real block cache, large
// memtables and L0 thresholds that keep write stalls rare.
package pebblekv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/storage"
)

// Defaults applied by Open when the corresponding Options field is zero.
const (
	DefaultCacheSize          = 256 << 20
	DefaultMemTableSize       = 64 << 20
	DefaultWALMinSyncInterval = 100 * time.Microsecond
	DefaultWALSyncInterval    = 100 * time.Millisecond
)

// Options configure Open. The zero value is a sensible on-disk store.
type Options struct {
	// InMemory keeps everything in an in-memory filesystem (vfs.NewMem):
	// fast tests, nothing survives Close. dir is then only a name.
	InMemory bool
	// FS overrides the filesystem (for fault-injection tests). It wins over
	// InMemory when both are set.
	FS vfs.FS
	// CacheSize is the block cache size in bytes (default 256 MiB).
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes (default 64 MiB).
	MemTableSize uint64
	// WALMinSyncInterval widens the group-commit window: concurrent Sync
	// commits arriving within it share one fsync (default 100µs). A negative
	// value disables the delay.
	WALMinSyncInterval time.Duration
	// WALSyncInterval bounds how long an unsynced commit (Commit(false))
	// stays only in memory: a background goroutine makes the write-ahead
	// log durable this often when such commits happened since its last
	// sync, so a process or machine crash loses at most about this window
	// of them (mongod's journalCommitInterval; default 100 ms). A negative
	// value disables the background sync.
	WALSyncInterval time.Duration
	// MaxConcurrentCompactions bounds background compactions (default 2:
	// the server shares few cores with query work).
	MaxConcurrentCompactions int
	// DiskGuard, when set, watches the free space of dir's filesystem,
	// refuses writes with OutOfDiskSpace (14031) below a threshold, keeps
	// an emergency ballast file and keeps an ENOSPC from reaching Pebble's
	// WAL (see diskspace.go). nil disables all of it.
	DiskGuard *DiskGuardOptions
	// Logger receives Pebble's log output (name it yourself, e.g.
	// log.Named("pebble")); Pebble's chatty info messages go to Debug. nil
	// discards everything.
	Logger *zap.Logger
}

// Store is a Pebble-backed storage.KV.
type Store struct {
	db    *pebble.DB
	cache interface{ Unref() }
	// cacheCapacity is the block cache's size limit (Options.CacheSize).
	cacheCapacity int64
	dir           string
	closed        atomic.Bool
	mu            sync.Mutex // serialises Close

	// unsynced is set by every Commit(false) after it returns; the WAL
	// syncer clears it and makes the log durable.
	unsynced   atomic.Bool
	stopSyncer chan struct{}
	syncerDone chan struct{}
	log        *zap.Logger
	guard      *diskGuard // nil without Options.DiskGuard

	// cc orders commits and detects transaction conflicts (txn.go).
	cc conflicts
	// retired holds finished transactions' snapshots until the WAL
	// syncer's next tick closes them (txn.go).
	retiredMu sync.Mutex
	retired   []retiredSnap
}

var _ storage.KV = (*Store)(nil)

// Open opens (creating if needed) the store in dir. If another process (or
// another Store in this process) holds the directory's lock, the error says
// so plainly instead of surfacing Pebble's raw "resource temporarily
// unavailable".
func Open(dir string, opts Options) (*Store, error) {
	fs := opts.FS
	if fs == nil {
		if opts.InMemory {
			fs = vfs.NewMem()
		} else {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("pebblekv: create data directory %s: %w", dir, err)
			}
			fs = vfs.Default
		}
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = DefaultMemTableSize
	}
	if opts.WALMinSyncInterval == 0 {
		opts.WALMinSyncInterval = DefaultWALMinSyncInterval
	} else if opts.WALMinSyncInterval < 0 {
		opts.WALMinSyncInterval = 0
	}
	if opts.MaxConcurrentCompactions <= 0 {
		opts.MaxConcurrentCompactions = 2
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}

	var guard *diskGuard
	if opts.DiskGuard != nil {
		g, err := newDiskGuard(fs, dir, opts.DiskGuard, logger.Named("disk"))
		if err != nil {
			return nil, err
		}
		if err := g.checkOpenSpace(); err != nil {
			return nil, err
		}
		guard = g
		fs = &guardFS{FS: fs, g: g}
		g.opening.Store(true)
	}

	plog := logger
	cache := pebble.NewCache(opts.CacheSize)
	syncInterval := opts.WALMinSyncInterval
	maxCompactions := opts.MaxConcurrentCompactions
	po := &pebble.Options{
		FS:                 fs,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       opts.MemTableSize,
		// Two memtables in flight before writes stall: one flushing while
		// the next fills.
		MemTableStopWritesThreshold: 4,
		// Compact L0 early (reads fan out over every L0 sublevel) but stall
		// writes only in a genuine emergency: a stalled write holds a client.
		L0CompactionThreshold:     2,
		L0CompactionFileThreshold: 500,
		L0StopWritesThreshold:     1000,
		LBaseMaxBytes:             256 << 20,
		MaxOpenFiles:              4096,
		CompactionConcurrencyRange: func() (int, int) {
			return 1, maxCompactions
		},
		WALMinSyncInterval: func() time.Duration { return syncInterval },
		Logger:             zapLogger{plog.WithOptions(zap.AddCallerSkip(1))},
		EventListener:      eventListener(plog),
	}
	if guard != nil {
		po.EventListener.BackgroundError = func(err error) { guard.logBackgroundError(plog, err) }
	}
	for i := range po.Levels {
		l := &po.Levels[i]
		l.FilterPolicy = bloom.FilterPolicy(10)
		l.FilterType = pebble.TableFilter
		l.BlockSize = 32 << 10
		l.IndexBlockSize = 256 << 10
	}
	po.EnsureDefaults()

	db, err := pebble.Open(dir, po)
	if guard != nil {
		guard.opening.Store(false)
	}
	if err != nil {
		cache.Unref()
		if isLockError(err) {
			return nil, &LockedError{Dir: dir, Err: err}
		}
		return nil, fmt.Errorf("pebblekv: open %s: %w", dir, err)
	}
	s := &Store{db: db, cache: cache, cacheCapacity: opts.CacheSize, dir: dir, log: logger, guard: guard}
	if guard != nil {
		guard.start()
	}
	if opts.WALSyncInterval == 0 {
		opts.WALSyncInterval = DefaultWALSyncInterval
	}
	if opts.WALSyncInterval > 0 {
		s.stopSyncer, s.syncerDone = make(chan struct{}), make(chan struct{})
		go s.walSyncer(opts.WALSyncInterval)
	}
	return s, nil
}

// walSyncer makes the write-ahead log durable every interval when unsynced
// commits happened since the last round. Pebble keeps a NoSync commit in
// its own in-process WAL buffer until a block fills or a synced write
// comes along, so without this nothing bounds how long an acknowledged
// w: 1 write can be lost to a crash. A synced empty LogData record is the
// cheapest way to ask Pebble for that: it forces out and fsyncs everything
// queued before it, and groups with concurrent synced commits.
func (s *Store) walSyncer(interval time.Duration) {
	defer close(s.syncerDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopSyncer:
			return
		case <-t.C:
			s.closeRetired()
			if !s.unsynced.Swap(false) {
				continue
			}
			if err := s.db.LogData(nil, pebble.Sync); err != nil {
				s.unsynced.Store(true)
				s.log.Error("background WAL sync failed", zap.Error(err))
			}
		}
	}
}

// ErrClosed is returned by operations on a closed Store. Pebble itself
// panics on use after close; a server shutting down with a reaper or cursor
// still running should get an error instead. (Operations racing with Close
// itself remain the caller's bug.)
var ErrClosed = errors.New("pebblekv: store is closed")

// ErrLocked matches (errors.Is) Open's error when the data directory's lock
// is held, so the server can exit with a clear message instead of a retry.
var ErrLocked = errors.New("data directory locked")

// LockedError is Open's error when another process (or another Store in this
// process) holds the data directory.
type LockedError struct {
	Dir string
	Err error // Pebble's underlying error
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("data directory %s is in use by another mayfly process (lock held)", e.Dir)
}

// Unwrap exposes Pebble's error.
func (e *LockedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// isLockError recognises a failure to take the directory's LOCK file: fcntl
// reports EAGAIN/EACCES when another process holds it, and Pebble's vfs
// reports "lock held by current process" for a second Open in this one.
func isLockError(err error) bool {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "lock held") || strings.Contains(msg, "resource temporarily unavailable")
}

// DB exposes the underlying Pebble database for engine code that needs an
// API storage.KV does not cover. Prefer the interface.
func (s *Store) DB() *pebble.DB { return s.db }

// Dir is the directory the store was opened on.
func (s *Store) Dir() string { return s.dir }

// Get returns a copy of key's value: Pebble's slice is only valid until the
// closer runs, and callers keep values around.
func (s *Store) Get(key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return get(s.db, key)
}

func get(r interface {
	Get([]byte) ([]byte, io.Closer, error)
}, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(v))
	copy(out, v)
	if err := closer.Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// NewIter iterates [lo, hi); nil hi means unbounded. Bounds let Pebble skip
// whole tables and stop at the end of an index range.
func (s *Store) NewIter(lo, hi []byte) (storage.Iterator, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	it, err := s.db.NewIter(iterOptions(lo, hi))
	if err != nil {
		return nil, err
	}
	return &iterator{it: it}, nil
}

// iterOptions copies the bounds: Pebble keeps referring to them for the
// iterator's lifetime, and callers build bounds in reusable buffers. An
// inverted range (lo > hi), which Pebble does not allow, becomes the empty
// range [lo, lo).
func iterOptions(lo, hi []byte) *pebble.IterOptions {
	o := &pebble.IterOptions{}
	if lo != nil && hi != nil && bytes.Compare(lo, hi) > 0 {
		hi = lo
	}
	if lo != nil {
		o.LowerBound = append(make([]byte, 0, len(lo)), lo...)
	}
	if hi != nil {
		o.UpperBound = append(make([]byte, 0, len(hi)), hi...)
	}
	return o
}

// NewBatch starts a write batch.
func (s *Store) NewBatch() storage.Batch {
	return &batch{b: s.db.NewBatch(), s: s}
}

// NewSnapshot opens a point-in-time view. Close it promptly: it pins
// deleted data.
func (s *Store) NewSnapshot() storage.Snapshot {
	if s.closed.Load() {
		return closedSnapshot{}
	}
	return &snapshot{s: s.db.NewSnapshot()}
}

// EstimateDiskUsage estimates on-disk bytes of sstables overlapping [lo, hi)
// (memtable and WAL contents are not counted: Flush first for a full
// figure). nil lo/hi mean unbounded.
func (s *Store) EstimateDiskUsage(lo, hi []byte) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	lo, hi, ok, err := s.bounds(lo, hi)
	if err != nil || !ok {
		return 0, err
	}
	return s.db.EstimateDiskUsage(lo, hi)
}

// bounds turns open-ended [lo, hi) into the concrete range Pebble's range
// APIs need. ok is false when the range is empty.
func (s *Store) bounds(lo, hi []byte) ([]byte, []byte, bool, error) {
	if lo == nil {
		lo = []byte{}
	}
	if hi == nil {
		max, err := s.maxTableKey()
		if err != nil {
			return nil, nil, false, err
		}
		if max == nil {
			return nil, nil, false, nil
		}
		hi = append(max, 0)
	}
	if bytes.Compare(lo, hi) >= 0 {
		return nil, nil, false, nil
	}
	return lo, hi, true, nil
}

// maxTableKey returns a copy of the largest user key bounding any sstable,
// or nil when there are no sstables.
func (s *Store) maxTableKey() ([]byte, error) {
	levels, err := s.db.SSTables()
	if err != nil {
		return nil, err
	}
	var max []byte
	for _, level := range levels {
		for i := range level {
			k := level[i].Largest.UserKey
			if max == nil || bytes.Compare(k, max) > 0 {
				max = k
			}
		}
	}
	if max == nil {
		return nil, nil
	}
	return append([]byte(nil), max...), nil
}

// ReclaimableBytes sums Pebble's per-table estimates of the bytes point and
// range tombstones would free in tables overlapping [lo, hi). The figures
// are computed asynchronously after a flush or compaction, so a freshly
// written table may briefly count as zero; DeleteSized makes the point
// estimate accurate.
func (s *Store) ReclaimableBytes(lo, hi []byte) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	opts := []pebble.SSTablesOption{}
	if lo != nil && hi != nil {
		opts = append(opts, pebble.WithKeyRangeFilter(lo, hi))
	}
	levels, err := s.db.SSTables(opts...)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, level := range levels {
		for i := range level {
			t := &level[i]
			if lo != nil && hi == nil && bytes.Compare(t.Largest.UserKey, lo) < 0 {
				continue
			}
			if lo == nil && hi != nil && bytes.Compare(t.Smallest.UserKey, hi) >= 0 {
				continue
			}
			total += t.TableStats.PointDeletionsBytesEstimate + t.TableStats.RangeDeletionsBytesEstimate
		}
	}
	return total, nil
}

// Compact compacts [lo, hi) to the bottom level, which is the only way to
// reclaim space on a quiet store: Pebble's automatic compactions are driven
// by write pressure and may never visit tombstoned ranges. nil lo/hi mean
// unbounded. The memtable overlapping the range is flushed first.
func (s *Store) Compact(ctx context.Context, lo, hi []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	// Finished transactions' snapshots still open would keep the versions
	// they see (the documents the reaper just deleted) from being dropped.
	s.closeRetired()
	if hi == nil {
		// The unbounded end is derived from the sstables, so unflushed
		// writes must reach them first.
		if err := s.db.Flush(); err != nil {
			return err
		}
	}
	lo, hi, ok, err := s.bounds(lo, hi)
	if err != nil || !ok {
		return err
	}
	return s.db.Compact(ctx, lo, hi, true)
}

// Flush flushes the memtable and waits for it to reach an sstable.
func (s *Store) Flush() error {
	s.closeRetired() // finished transactions' snapshots would pin what the flush writes
	if s.closed.Load() {
		return ErrClosed
	}
	return s.db.Flush()
}

// Stats reports store-wide figures from Pebble's metrics.
func (s *Store) Stats() storage.Stats {
	if s.closed.Load() {
		return storage.Stats{}
	}
	m := s.db.Metrics()
	total := m.Total()
	return storage.Stats{
		DiskUsageBytes:    m.DiskSpaceUsage(),
		LiveSizeEstimate:  uint64(total.TablesSize),
		CompactionCount:   m.Compact.Count,
		BlockCacheSize:    m.BlockCache.Size,
		BlockCacheHits:    m.BlockCache.Hits,
		BlockCacheMisses:  m.BlockCache.Misses,
		MemtableSizeBytes: m.MemTable.Size,
	}
}

// Close closes the database and releases the block cache. Closing twice is
// a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopSyncer != nil {
		// Pebble panics on use after Close: the syncer stops first.
		close(s.stopSyncer)
		<-s.syncerDone
		s.closeRetired()
	}
	if s.guard != nil {
		s.guard.close()
	}
	err := s.db.Close()
	s.cache.Unref()
	return err
}

type iterator struct {
	it *pebble.Iterator
}

func (i *iterator) First() bool            { return i.it.First() }
func (i *iterator) Last() bool             { return i.it.Last() }
func (i *iterator) SeekGE(key []byte) bool { return i.it.SeekGE(key) }
func (i *iterator) SeekLT(key []byte) bool { return i.it.SeekLT(key) }
func (i *iterator) Next() bool             { return i.it.Next() }
func (i *iterator) Prev() bool             { return i.it.Prev() }
func (i *iterator) Valid() bool            { return i.it.Valid() }
func (i *iterator) Key() []byte            { return i.it.Key() }
func (i *iterator) Error() error           { return i.it.Error() }
func (i *iterator) Close() error           { return i.it.Close() }

// Value returns the current value; a failure to load it (a separated value
// that cannot be read) surfaces through Error.
func (i *iterator) Value() []byte { v, _ := i.it.ValueAndErr(); return v }

type batch struct {
	b *pebble.Batch
	s *Store
	// hasSet and essential decide how far into the disk-space reserve
	// the batch may go: deletions and essential bookkeeping may use it.
	hasSet    bool
	essential bool
	seq       uint64 // commit number once committed (tests order histories by it)
}

func (b *batch) Set(key, value []byte) error {
	b.hasSet = true
	return b.b.Set(key, value, nil)
}
func (b *batch) Delete(key []byte) error { return b.b.Delete(key, nil) }
func (b *batch) DeleteSized(key []byte, valueSize uint32) error {
	return b.b.DeleteSized(key, valueSize, nil)
}
func (b *batch) DeleteRange(lo, hi []byte) error { return b.b.DeleteRange(lo, hi, nil) }

// MarkEssential lets a small bookkeeping batch (the expiry clock's
// high-water mark) commit while ordinary writes are refused for lack of
// disk space, until the disk is actually full.
func (b *batch) MarkEssential() { b.essential = true }

// Commit applies the batch. With sync it returns after the WAL fsync
// (shared with concurrent committers): the write survives a process crash
// and a power loss. Without sync the record is only copied into Pebble's
// in-process WAL buffer, written to the file when a 32 KiB block fills or
// a later synced write forces it out, and fsynced with that write: until
// then a process crash (kill -9) loses it, as a machine crash loses what
// the OS had not written back. The store's WAL syncer bounds that window
// to Options.WALSyncInterval. The commit is numbered and recorded like a
// transaction's, so transactions that touch its keys conflict (txn.go).
func (b *batch) Commit(sync bool) error {
	if b.s.closed.Load() {
		return ErrClosed
	}
	if g := b.s.guard; g != nil {
		class := admitWrite
		if b.essential {
			class = admitEssential
		} else if !b.hasSet {
			class = admitDelete
		}
		if err := g.admit(b.b.Len(), class); err != nil {
			return err
		}
	}
	var err error
	b.seq, err = b.s.commitBatch(b.b, sync)
	return err
}

// Len is the number of operations (Pebble's own Len is the byte size).
func (b *batch) Len() int     { return int(b.b.Count()) }
func (b *batch) Close() error { return b.b.Close() }

type snapshot struct {
	s *pebble.Snapshot
}

func (s *snapshot) Get(key []byte) ([]byte, error) { return get(s.s, key) }
func (s *snapshot) NewIter(lo, hi []byte) (storage.Iterator, error) {
	it, err := s.s.NewIter(iterOptions(lo, hi))
	if err != nil {
		return nil, err
	}
	return &iterator{it: it}, nil
}
func (s *snapshot) Close() error { return s.s.Close() }

// eventListener surfaces the few Pebble events an operator must see —
// write stalls (clients are blocked) and slow disks — and keeps the routine
// flush/compaction chatter at Debug.
func eventListener(l *zap.Logger) *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			l.Warn("write stall begins", zap.String("reason", info.Reason))
		},
		WriteStallEnd: func() { l.Info("write stall ends") },
		DiskSlow: func(info pebble.DiskSlowInfo) {
			l.Warn("slow disk operation", zap.String("path", info.Path), zap.Duration("duration", info.Duration))
		},
		FlushEnd: func(info pebble.FlushInfo) {
			if ce := l.Check(zap.DebugLevel, "flush"); ce != nil {
				ce.Write(zap.Stringer("info", info))
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if ce := l.Check(zap.DebugLevel, "compaction"); ce != nil {
				ce.Write(zap.Stringer("info", info))
			}
		},
	}
}

// closedSnapshot is what NewSnapshot returns after Close.
type closedSnapshot struct{}

func (closedSnapshot) Get([]byte) ([]byte, error)                    { return nil, ErrClosed }
func (closedSnapshot) NewIter(_, _ []byte) (storage.Iterator, error) { return nil, ErrClosed }
func (closedSnapshot) Close() error                                  { return nil }

// zapLogger adapts zap to Pebble's Logger. Pebble logs every flush,
// compaction and WAL event at info; those go to Debug so a production log
// stays readable, errors stay errors.
type zapLogger struct{ l *zap.Logger }

func (z zapLogger) Infof(format string, args ...any) {
	if ce := z.l.Check(zap.DebugLevel, ""); ce != nil {
		ce.Message = strings.TrimSpace(fmt.Sprintf(format, args...))
		ce.Write()
	}
}
func (z zapLogger) Errorf(format string, args ...any) {
	z.l.Error(strings.TrimSpace(fmt.Sprintf(format, args...)))
}
func (z zapLogger) Fatalf(format string, args ...any) {
	z.l.Fatal(strings.TrimSpace(fmt.Sprintf(format, args...)))
}
