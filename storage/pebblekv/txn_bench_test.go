package pebblekv

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mayflydb/mayfly/storage"
)

// The benchmarks write what one document insert or update writes: a 1 KB
// document under its _id key and three small index entries, on an on-disk
// store with unsynced commits (w: 1 without j), unless named Sync.

func benchOpen(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{CacheSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

type writer interface {
	Set(key, value []byte) error
}

var benchDoc = func() []byte {
	v := make([]byte, 1024)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	return v
}()

// docKeys fills the four keys of document i into buf.
func docKeys(buf *[4][16]byte, i uint64) {
	for j, p := range []byte{'d', 'a', 'b', 'c'} {
		buf[j][0] = p
		buf[j][1] = '/'
		binary.BigEndian.PutUint64(buf[j][2:10], i)
	}
}

func writeDoc(w writer, keys *[4][16]byte) error {
	if err := w.Set(keys[0][:10], benchDoc); err != nil {
		return err
	}
	for j := 1; j < 4; j++ {
		if err := w.Set(keys[j][:10], keys[0][:10]); err != nil {
			return err
		}
	}
	return nil
}

func batchWrite(s *Store, i uint64, sync bool) error {
	var k [4][16]byte
	docKeys(&k, i)
	bt := s.NewBatch()
	defer bt.Close()
	if err := writeDoc(bt, &k); err != nil {
		return err
	}
	return bt.Commit(sync)
}

func txnWrite(s *Store, i uint64, sync bool) error {
	var k [4][16]byte
	docKeys(&k, i)
	tx, err := s.Begin()
	if err != nil {
		return err
	}
	if err := writeDoc(tx, &k); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit(context.Background(), sync)
}

// rawWrite is the batch path before transactions: Pebble's own commit,
// without the store's commit mutex (reference only).
func rawWrite(s *Store, i uint64, sync bool) error {
	var k [4][16]byte
	docKeys(&k, i)
	bt := s.db.NewBatch()
	defer bt.Close()
	for j := 0; j < 4; j++ {
		v := benchDoc
		if j > 0 {
			v = k[0][:10]
		}
		bt.Set(k[j][:10], v, nil)
	}
	o := pebble.NoSync
	if sync {
		o = pebble.Sync
	}
	return bt.Commit(o)
}

// txnRMW reads document i, locks it and rewrites it with its index keys:
// an update by _id.
func txnRMW(s *Store, i uint64, sync bool) error {
	var k [4][16]byte
	docKeys(&k, i)
	for {
		tx, err := s.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Get(k[0][:10]); err != nil {
			tx.Rollback()
			return err
		}
		tx.LockKeys(k[0][:10])
		if err := writeDoc(tx, &k); err != nil {
			tx.Rollback()
			return err
		}
		err = tx.Commit(context.Background(), sync)
		if err == nil || !storage.IsConflict(err) {
			return err
		}
	}
}

func batchRMW(s *Store, i uint64, sync bool) error {
	var k [4][16]byte
	docKeys(&k, i)
	if _, err := s.Get(k[0][:10]); err != nil {
		return err
	}
	bt := s.NewBatch()
	defer bt.Close()
	if err := writeDoc(bt, &k); err != nil {
		return err
	}
	return bt.Commit(sync)
}

const rmwDocs = 10000

func preload(b *testing.B, s *Store) {
	b.Helper()
	for i := uint64(0); i < rmwDocs; i++ {
		if err := batchWrite(s, i, false); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSerial(b *testing.B, f func(*Store, uint64, bool) error, sync, load bool) {
	s := benchOpen(b)
	if load {
		preload(b, s)
	}
	b.SetBytes(int64(len(benchDoc)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := uint64(i)
		if load {
			n %= rmwDocs
		}
		if err := f(s, n, sync); err != nil {
			b.Fatal(err)
		}
	}
}

func benchParallel(b *testing.B, f func(*Store, uint64, bool) error, sync, load bool) {
	s := benchOpen(b)
	if sync {
		b.SetParallelism(8) // enough committers to share fsyncs
	}
	if load {
		preload(b, s)
	}
	var next atomic.Uint64
	b.SetBytes(int64(len(benchDoc)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			if load {
				n %= rmwDocs
			}
			if err := f(s, n, sync); err != nil {
				panic(fmt.Sprint(err))
			}
		}
	})
}

func BenchmarkRawPebbleSetCommit(b *testing.B) { benchSerial(b, rawWrite, false, false) }
func BenchmarkBatchSetCommit(b *testing.B)     { benchSerial(b, batchWrite, false, false) }
func BenchmarkTxnSetCommit(b *testing.B)       { benchSerial(b, txnWrite, false, false) }
func BenchmarkBatchGetSetCommit(b *testing.B)  { benchSerial(b, batchRMW, false, true) }
func BenchmarkTxnGetLockSetCommit(b *testing.B) {
	benchSerial(b, txnRMW, false, true)
}

func BenchmarkRawPebbleSetCommitParallel(b *testing.B) { benchParallel(b, rawWrite, false, false) }
func BenchmarkBatchSetCommitParallel(b *testing.B)     { benchParallel(b, batchWrite, false, false) }
func BenchmarkTxnSetCommitParallel(b *testing.B)       { benchParallel(b, txnWrite, false, false) }
func BenchmarkBatchGetSetCommitParallel(b *testing.B)  { benchParallel(b, batchRMW, false, true) }
func BenchmarkTxnGetLockSetCommitParallel(b *testing.B) {
	benchParallel(b, txnRMW, false, true)
}

// Synced commits: the fsync is taken outside the commit mutex, so
// concurrent committers still share one.
func BenchmarkRawPebbleSetCommitSyncParallel(b *testing.B) { benchParallel(b, rawWrite, true, false) }
func BenchmarkBatchSetCommitSyncParallel(b *testing.B)     { benchParallel(b, batchWrite, true, false) }
func BenchmarkTxnSetCommitSyncParallel(b *testing.B)       { benchParallel(b, txnWrite, true, false) }
