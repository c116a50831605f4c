// Package storage is the narrow key-value interface the engine stores
// everything through: point reads, ordered range scans, atomic batches and
// snapshots. Pebble implements it (storage/pebblekv); another engine can be
// plugged in by implementing these few methods.
package storage

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Get when the key does not exist.
var ErrNotFound = errors.New("storage: not found")

// Reader reads committed data (or a snapshot of it).
type Reader interface {
	// Get returns a copy of the value stored under key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// NewIter returns an iterator over keys in [lo, hi). A nil hi means no
	// upper bound.
	NewIter(lo, hi []byte) (Iterator, error)
}

// Iterator walks keys in order. Key and Value are valid until the next
// positioning call; copy them to keep them.
type Iterator interface {
	First() bool
	Last() bool
	SeekGE(key []byte) bool
	SeekLT(key []byte) bool
	Next() bool
	Prev() bool
	Valid() bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// Batch collects writes that commit atomically.
type Batch interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	// DeleteSized deletes key whose value is known to be valueSize bytes:
	// the size feeds the store's tombstone-density compaction heuristics.
	DeleteSized(key []byte, valueSize uint32) error
	// DeleteRange deletes every key in [lo, hi).
	DeleteRange(lo, hi []byte) error
	// Commit applies the batch atomically. With sync the call returns only
	// after the write-ahead log is on stable storage. Without sync a crash
	// of the process or of the machine can lose the batch until the store
	// next syncs its log (pebblekv bounds that window). Readers may see the
	// batch before Commit returns; acknowledge clients only afterwards.
	Commit(sync bool) error
	// Len is the number of operations in the batch.
	Len() int
	Close() error
}

// Snapshot is a point-in-time view. Hold it briefly: a live snapshot keeps
// deleted data from being reclaimed.
type Snapshot interface {
	Reader
	Close() error
}

// Stats are the store-wide figures the server reports.
type Stats struct {
	DiskUsageBytes    uint64
	LiveSizeEstimate  uint64
	CompactionCount   int64
	BlockCacheSize    int64
	BlockCacheHits    int64
	BlockCacheMisses  int64
	MemtableSizeBytes uint64
}

// KV is a whole store.
type KV interface {
	Reader
	NewBatch() Batch
	NewSnapshot() Snapshot
	// EstimateDiskUsage estimates the on-disk bytes of keys in [lo, hi).
	EstimateDiskUsage(lo, hi []byte) (uint64, error)
	// ReclaimableBytes estimates the bytes in [lo, hi) that deletion
	// tombstones (point and range) would free once compacted.
	ReclaimableBytes(lo, hi []byte) (uint64, error)
	// Compact compacts [lo, hi) down to the bottom level, dropping deleted
	// data.
	Compact(ctx context.Context, lo, hi []byte) error
	// Flush flushes the memtable to disk.
	Flush() error
	Stats() Stats
	Close() error
}
