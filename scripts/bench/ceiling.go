package main

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/storage/pebblekv"
)

const kvValueLen = 1024

// kvKey is shaped like a document key: 0x10, an 8-byte collection id, then
// the record's key.
func kvKey(n int64) []byte {
	k := make([]byte, 9, 24)
	k[0] = 0x10
	binary.BigEndian.PutUint64(k[1:], 1)
	return append(k, userKey(n)...)
}

// kvCeiling is the engine ceiling: the key-value work behind insertMany and
// point reads done directly on Pebble through pebblekv (same options as the
// server, same directory kind, same clients): batched Sets of 1000 1 KB
// values committed without sync (the server's default write concern), then
// point Gets of those values by key.
func (b *bench) kvCeiling(ctx context.Context) error {
	dir := filepath.Join(b.dir, "kv-ceiling")
	kv, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer kv.Close()

	n := b.cfg.records
	var next atomic.Int64
	m, err := runPhase("engine ceiling: Set x1000", b.cfg.clients, 0, b.cfg.seed, func(w int, r *rand.Rand) (int, error) {
		lo := next.Add(loadBatch) - loadBatch
		if lo >= n {
			return 0, errDone
		}
		hi := min(lo+loadBatch, n)
		bt := kv.NewBatch()
		defer bt.Close()
		val := make([]byte, kvValueLen)
		for i := lo; i < hi; i++ {
			letters(r, val)
			if err := bt.Set(kvKey(i), val); err != nil {
				return 0, err
			}
		}
		return int(hi - lo), bt.Commit(false)
	})
	if err != nil {
		return err
	}
	b.setCeil = m.perSec()
	b.rep.add(Result{Name: "engine ceiling: Pebble Set (batches of 1000, 1 KB)", Group: "baseline", Unit: "docs"}, m, "", 0)

	m, err = runPhase("engine ceiling: Get", b.cfg.clients, b.cfg.duration, b.cfg.seed, func(w int, r *rand.Rand) (int, error) {
		_, err := kv.Get(kvKey(r.Int64N(n)))
		if errors.Is(err, storage.ErrNotFound) {
			return 1, errors.New("engine ceiling: a loaded key is missing")
		}
		return 1, err
	})
	if err != nil {
		return err
	}
	b.getCeil = m.perSec()
	b.rep.add(Result{Name: "engine ceiling: Pebble Get (1 KB)", Group: "baseline", Unit: "ops"}, m, "", 0)
	return ctx.Err()
}
