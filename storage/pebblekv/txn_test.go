package pebblekv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mayflydb/mayfly/storage"
)

func begin(t *testing.T, s *Store) storage.Txn {
	t.Helper()
	tx, err := s.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantGet(t *testing.T, r storage.Reader, key, want string) {
	t.Helper()
	v, err := r.Get([]byte(key))
	if want == "" {
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Get %s = %q, %v; want not found", key, v, err)
		}
		return
	}
	if err != nil || string(v) != want {
		t.Fatalf("Get %s = %q, %v; want %q", key, v, err, want)
	}
}

func wantConflict(t *testing.T, err error) {
	t.Helper()
	if !storage.IsConflict(err) {
		t.Fatalf("want a write conflict, got %v", err)
	}
}

func commit(t *testing.T, tx storage.Txn) {
	t.Helper()
	if err := tx.Commit(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

// TestTxnOwnWritesGet: Get sees the snapshot overlaid with the
// transaction's own writes, including writes made after earlier reads; the
// store sees nothing until Commit, then everything.
func TestTxnOwnWritesGet(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1", "b", "2", "c", "3")
	tx := begin(t, s)
	wantGet(t, tx, "a", "1")
	must(t, tx.Set([]byte("b"), []byte("20")))
	must(t, tx.Delete([]byte("c")))
	must(t, tx.Set([]byte("d"), []byte("4")))
	wantGet(t, tx, "a", "1")
	wantGet(t, tx, "b", "20")
	wantGet(t, tx, "c", "")
	wantGet(t, tx, "d", "4")
	must(t, tx.Set([]byte("a"), []byte("10")))
	must(t, tx.DeleteSized([]byte("d"), 1))
	must(t, tx.Set([]byte("c"), []byte("30")))
	wantGet(t, tx, "a", "10")
	wantGet(t, tx, "c", "30")
	wantGet(t, tx, "d", "")
	if tx.Len() != 6 {
		t.Fatalf("Len = %d, want 6", tx.Len())
	}
	wantGet(t, s, "a", "1")
	wantGet(t, s, "d", "")
	commit(t, tx)
	wantGet(t, s, "a", "10")
	wantGet(t, s, "b", "20")
	wantGet(t, s, "c", "30")
	wantGet(t, s, "d", "")
}

// iterModel is the expected behaviour of an iterator over sorted keys,
// including Pebble's rules for stepping off either end.
type iterModel struct {
	keys, vals []string
	pos        int // -1 before the start, len(keys) after the end
}

func (m *iterModel) valid() bool { return m.pos >= 0 && m.pos < len(m.keys) }

func (m *iterModel) step(op string, arg string) bool {
	n := len(m.keys)
	switch op {
	case "First":
		m.pos = 0
		if n == 0 {
			m.pos = n
		}
	case "Last":
		m.pos = n - 1
	case "SeekGE":
		m.pos = sort.SearchStrings(m.keys, arg)
	case "SeekLT":
		m.pos = sort.SearchStrings(m.keys, arg) - 1
	case "Next":
		if m.pos < n {
			m.pos++
		}
	case "Prev":
		if m.pos >= 0 {
			m.pos--
		}
	}
	return m.valid()
}

func doOp(it storage.Iterator, op, arg string) bool {
	switch op {
	case "First":
		return it.First()
	case "Last":
		return it.Last()
	case "SeekGE":
		return it.SeekGE([]byte(arg))
	case "SeekLT":
		return it.SeekLT([]byte(arg))
	case "Next":
		return it.Next()
	default:
		return it.Prev()
	}
}

// TestTxnIteratorMergesOwnWrites: random committed data, random own writes
// (sets, overwrites, deletes of present and absent keys), random bounds and
// random walks mixing seeks and both directions, checked step by step
// against a model. Writes made after an iterator was created are invisible
// to it. A transaction without writes takes the plain snapshot path, which
// checks the model itself against Pebble.
func TestTxnIteratorMergesOwnWrites(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	key := func() string { return fmt.Sprintf("k%02d", rng.Intn(40)) }
	rounds := 200
	if testing.Short() {
		rounds = 60
	}
	for round := 0; round < rounds; round++ {
		s, err := Open("mem", Options{InMemory: true, CacheSize: 1 << 20, WALSyncInterval: -1})
		must(t, err)
		state := map[string]string{}
		b := s.NewBatch()
		for i := rng.Intn(25); i > 0; i-- {
			k := key()
			v := "c" + k
			b.Set([]byte(k), []byte(v))
			state[k] = v
		}
		must(t, b.Commit(false))
		b.Close()
		tx := begin(t, s)
		tx.Get([]byte("k00")) // takes the snapshot
		// Committed after the snapshot: invisible.
		put(t, s, "k05", "late", "k33", "late", "zz", "late")
		nw := rng.Intn(15)
		if round%5 == 0 {
			nw = 0
		}
		for i := 0; i < nw; i++ {
			k := key()
			if rng.Intn(3) == 0 {
				must(t, tx.Delete([]byte(k)))
				delete(state, k)
			} else {
				v := fmt.Sprintf("w%d", i)
				must(t, tx.Set([]byte(k), []byte(v)))
				state[k] = v
			}
			if rng.Intn(4) == 0 {
				tx.Get([]byte(k)) // interleaved reads extend the map
			}
		}
		for k := range state {
			wantGet(t, tx, k, state[k])
		}
		var lo, hi []byte
		if rng.Intn(2) == 0 {
			lo = []byte(key())
		}
		if rng.Intn(2) == 0 {
			hi = []byte(key())
		}
		m := &iterModel{}
		for k := range state {
			if (lo == nil || k >= string(lo)) && (hi == nil || k < string(hi)) {
				m.keys = append(m.keys, k)
			}
		}
		sort.Strings(m.keys)
		for _, k := range m.keys {
			m.vals = append(m.vals, state[k])
		}
		it, err := tx.NewIter(lo, hi)
		must(t, err)
		// Later writes do not reach the open iterator.
		must(t, tx.Set([]byte("k01x"), []byte("after")))
		for i := 0; i < 3; i++ {
			must(t, tx.Delete([]byte(key())))
		}
		tx.Get([]byte("k01x")) // brings the later writes into the own-write map
		ops := []string{"First", "Last", "SeekGE", "SeekLT", "Next", "Prev", "Next", "Prev", "Next", "Prev"}
		var trace []string
		for step := 0; step < 60; step++ {
			op := ops[rng.Intn(len(ops))]
			if step == 0 {
				op = ops[rng.Intn(4)] // stepping an unpositioned iterator is undefined
			}
			arg := key()
			if rng.Intn(3) == 0 {
				arg += "5" // between keys
			}
			got, want := doOp(it, op, arg), m.step(op, arg)
			trace = append(trace, op+" "+arg)
			if got != want || got != it.Valid() {
				t.Fatalf("round %d lo=%q hi=%q keys=%v: %s: valid %v, want %v", round, lo, hi, m.keys, strings.Join(trace, ", "), got, want)
			}
			if got && (string(it.Key()) != m.keys[m.pos] || string(it.Value()) != m.vals[m.pos]) {
				t.Fatalf("round %d lo=%q hi=%q keys=%v: %s: at %s=%s, want %s=%s", round, lo, hi, m.keys, strings.Join(trace, ", "),
					it.Key(), it.Value(), m.keys[m.pos], m.vals[m.pos])
			}
		}
		must(t, it.Error())
		must(t, it.Close())
		must(t, tx.Rollback())
		wantGet(t, s, "k01x", "")
		must(t, s.Close())
	}
}

// TestTxnIteratorBasics spells out the common cases: forward, reverse,
// seeks, deletes shadowing committed keys, own keys past the committed ones.
func TestTxnIteratorBasics(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1", "c", "3", "e", "5", "g", "7")
	tx := begin(t, s)
	defer tx.Rollback()
	must(t, tx.Set([]byte("b"), []byte("2")))
	must(t, tx.Set([]byte("c"), []byte("30")))
	must(t, tx.Delete([]byte("e")))
	must(t, tx.Set([]byte("h"), []byte("8")))
	must(t, tx.Delete([]byte("x")))
	if got := strings.Join(keys(t, tx, "", ""), ","); got != "a=1,b=2,c=30,g=7,h=8" {
		t.Fatalf("forward: %s", got)
	}
	if got := strings.Join(keys(t, tx, "b", "g"), ","); got != "b=2,c=30" {
		t.Fatalf("bounded: %s", got)
	}
	it, err := tx.NewIter(nil, nil)
	must(t, err)
	defer it.Close()
	var rev []string
	for ok := it.Last(); ok; ok = it.Prev() {
		rev = append(rev, string(it.Key()))
	}
	if got := strings.Join(rev, ","); got != "h,g,c,b,a" {
		t.Fatalf("reverse: %s", got)
	}
	if !it.SeekGE([]byte("d")) || string(it.Key()) != "g" {
		t.Fatalf("SeekGE d: %q", it.Key())
	}
	if !it.Prev() || string(it.Key()) != "c" || string(it.Value()) != "30" {
		t.Fatalf("Prev after SeekGE d: %q", it.Key())
	}
	if !it.Next() || string(it.Key()) != "g" {
		t.Fatalf("Next back: %q", it.Key())
	}
	if !it.SeekLT([]byte("e")) || string(it.Key()) != "c" {
		t.Fatalf("SeekLT e: %q", it.Key())
	}
	if !it.SeekLT([]byte("zz")) || string(it.Key()) != "h" {
		t.Fatalf("SeekLT zz: %q", it.Key())
	}
	if it.Next() || it.Valid() {
		t.Fatal("Next past the end")
	}
	if !it.Prev() || string(it.Key()) != "h" {
		t.Fatalf("Prev from past the end: %q", it.Key())
	}
}

// TestTxnSnapshotIsolation: commits after the first read are invisible to
// Get and iterators; a transaction begun afterwards sees them.
func TestTxnSnapshotIsolation(t *testing.T) {
	s := openMem(t)
	put(t, s, "x", "1", "y", "1")
	tx := begin(t, s)
	defer tx.Rollback()
	wantGet(t, tx, "y", "1")
	other := begin(t, s)
	must(t, other.Set([]byte("x"), []byte("2")))
	must(t, other.Set([]byte("z"), []byte("2")))
	commit(t, other)
	put(t, s, "y", "2")
	b := s.NewBatch()
	b.DeleteRange([]byte("a"), []byte("zz"))
	must(t, b.Commit(true))
	b.Close()
	wantGet(t, tx, "x", "1")
	wantGet(t, tx, "y", "1")
	wantGet(t, tx, "z", "")
	if got := strings.Join(keys(t, tx, "", ""), ","); got != "x=1,y=1" {
		t.Fatalf("snapshot scan: %s", got)
	}
	later := begin(t, s)
	defer later.Rollback()
	if later.StartTS() <= tx.StartTS() {
		t.Fatalf("StartTS %d after %d", later.StartTS(), tx.StartTS())
	}
	wantGet(t, later, "x", "")
	if got := keys(t, later, "", ""); len(got) != 0 {
		t.Fatalf("later scan: %v", got)
	}
}

// TestTxnSnapshotAtFirstRead: the snapshot is taken by the first read, so
// a commit between Begin and that read is visible; conflicts still count
// from Begin, so writing or locking what that commit wrote conflicts,
// even for a transaction that never reads.
func TestTxnSnapshotAtFirstRead(t *testing.T) {
	s := openMem(t)
	put(t, s, "k", "0")
	reader, blind, locker, other := begin(t, s), begin(t, s), begin(t, s), begin(t, s)
	put(t, s, "k", "1")
	wantGet(t, reader, "k", "1")
	must(t, reader.Set([]byte("k"), []byte("2")))
	wantConflict(t, reader.Commit(context.Background(), false))
	must(t, blind.Set([]byte("k"), []byte("3")))
	wantConflict(t, blind.Commit(context.Background(), false))
	must(t, locker.LockKeys([]byte("k")))
	wantConflict(t, locker.Commit(context.Background(), false))
	wantGet(t, other, "k", "1")
	must(t, other.Set([]byte("j"), []byte("4")))
	commit(t, other)
	wantGet(t, s, "k", "1")
}

// TestTxnDone: every method of a finished transaction returns ErrTxnDone,
// Rollback is a no-op, and an iterator left open is invalidated.
func TestTxnDone(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1")
	for _, end := range []string{"commit", "rollback", "conflict"} {
		tx := begin(t, s)
		must(t, tx.Set([]byte("b"), []byte("2")))
		it, err := tx.NewIter(nil, nil)
		must(t, err)
		if !it.First() {
			t.Fatal("First")
		}
		switch end {
		case "commit":
			commit(t, tx)
		case "rollback":
			must(t, tx.Rollback())
		case "conflict":
			put(t, s, "b", "x")
			wantConflict(t, tx.Commit(context.Background(), true))
		}
		if it.Valid() || it.Next() || it.First() || it.SeekGE([]byte("a")) {
			t.Fatalf("%s: iterator still usable", end)
		}
		if !errors.Is(it.Error(), storage.ErrTxnDone) {
			t.Fatalf("%s: iterator error %v", end, it.Error())
		}
		must(t, it.Close())
		for name, err := range map[string]error{
			"Set":         tx.Set([]byte("c"), nil),
			"Delete":      tx.Delete([]byte("c")),
			"DeleteSized": tx.DeleteSized([]byte("c"), 1),
			"LockKeys":    tx.LockKeys([]byte("c")),
			"Commit":      tx.Commit(context.Background(), false),
		} {
			if !errors.Is(err, storage.ErrTxnDone) {
				t.Fatalf("%s after %s: %v", name, end, err)
			}
		}
		if _, err := tx.Get([]byte("a")); !errors.Is(err, storage.ErrTxnDone) {
			t.Fatalf("Get after %s: %v", end, err)
		}
		if _, err := tx.NewIter(nil, nil); !errors.Is(err, storage.ErrTxnDone) {
			t.Fatalf("NewIter after %s: %v", end, err)
		}
		must(t, tx.Rollback())
	}
	wantGet(t, s, "b", "x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tx := begin(t, s)
	must(t, tx.Set([]byte("c"), []byte("3")))
	if err := tx.Commit(ctx, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with a cancelled context: %v", err)
	}
	wantGet(t, s, "c", "")
}

// TestTxnWriteWriteConflict: of two transactions writing the same key the
// first to commit wins; the loser applies nothing, not even its other keys.
func TestTxnWriteWriteConflict(t *testing.T) {
	s := openMem(t)
	put(t, s, "k", "0")
	t1, t2 := begin(t, s), begin(t, s)
	must(t, t1.Set([]byte("k"), []byte("1")))
	must(t, t2.Set([]byte("other"), []byte("2")))
	must(t, t2.Delete([]byte("k")))
	commit(t, t1)
	wantConflict(t, t2.Commit(context.Background(), false))
	wantGet(t, s, "k", "1")
	wantGet(t, s, "other", "")
	// Synced commits conflict alike.
	t3, t4 := begin(t, s), begin(t, s)
	must(t, t3.Set([]byte("k"), []byte("3")))
	must(t, t4.Set([]byte("k"), []byte("4")))
	must(t, t4.Commit(context.Background(), true))
	wantConflict(t, t3.Commit(context.Background(), true))
	wantGet(t, s, "k", "4")
	// A transaction begun after the winner committed does not conflict.
	t5 := begin(t, s)
	must(t, t5.Set([]byte("k"), []byte("5")))
	commit(t, t5)
	wantGet(t, s, "k", "5")
}

// TestTxnLockedKeyConflict: a locked key conflicts like a written one, also
// in a transaction that writes nothing; locking is what turns write skew
// into a conflict.
func TestTxnLockedKeyConflict(t *testing.T) {
	s := openMem(t)
	put(t, s, "x", "1", "y", "1")
	// Write skew: each reads both, writes one. Without locks both commit.
	t1, t2 := begin(t, s), begin(t, s)
	must(t, t1.Set([]byte("x"), []byte("0")))
	must(t, t2.Set([]byte("y"), []byte("0")))
	commit(t, t1)
	commit(t, t2)
	put(t, s, "x", "1", "y", "1")
	// With the read keys locked the second one conflicts.
	t1, t2 = begin(t, s), begin(t, s)
	must(t, t1.LockKeys([]byte("x"), []byte("y")))
	must(t, t2.LockKeys([]byte("x"), []byte("y")))
	must(t, t1.Set([]byte("x"), []byte("0")))
	must(t, t2.Set([]byte("y"), []byte("0")))
	commit(t, t1)
	wantConflict(t, t2.Commit(context.Background(), false))
	wantGet(t, s, "y", "1")
	// Lock only, no writes.
	t3 := begin(t, s)
	must(t, t3.LockKeys([]byte("y")))
	put(t, s, "y", "2")
	wantConflict(t, t3.Commit(context.Background(), false))
	// Lock only, untouched: commits.
	t4 := begin(t, s)
	must(t, t4.LockKeys([]byte("y")))
	put(t, s, "x", "2")
	commit(t, t4)
}

// TestTxnLockedKeysCountAsWrites: a committed transaction's locks are
// recorded like writes, so two transactions that lock one key (a guard key
// nobody writes: two claims of one unique value) cannot both commit, with
// or without writes of their own; locks that do not overlap do not conflict.
func TestTxnLockedKeysCountAsWrites(t *testing.T) {
	s := openMem(t)
	t1, t2 := begin(t, s), begin(t, s)
	must(t, t1.LockKeys([]byte("guard")))
	must(t, t2.LockKeys([]byte("guard")))
	must(t, t1.Set([]byte("a"), []byte("1")))
	must(t, t2.Set([]byte("b"), []byte("1")))
	commit(t, t1)
	wantConflict(t, t2.Commit(context.Background(), false))
	// Lock-only transactions too.
	t3, t4 := begin(t, s), begin(t, s)
	must(t, t3.LockKeys([]byte("g2")))
	must(t, t4.LockKeys([]byte("g2")))
	commit(t, t3)
	wantConflict(t, t4.Commit(context.Background(), false))
	// Different guards: both commit.
	t5, t6 := begin(t, s), begin(t, s)
	must(t, t5.LockKeys([]byte("g3")))
	must(t, t6.LockKeys([]byte("g4")))
	commit(t, t5)
	commit(t, t6)
	// A transaction begun after the lock's commit does not conflict.
	t7 := begin(t, s)
	must(t, t7.LockKeys([]byte("guard")))
	commit(t, t7)
}

// TestTxnNoConflictDisjointOrRead: disjoint writes commit, and a key that
// was only read (not locked) does not conflict: snapshot isolation.
func TestTxnNoConflictDisjointOrRead(t *testing.T) {
	s := openMem(t)
	put(t, s, "a", "1", "b", "1")
	t1, t2 := begin(t, s), begin(t, s)
	wantGet(t, t1, "b", "1")
	keys(t, t1, "", "")
	must(t, t1.Set([]byte("a"), []byte("2")))
	must(t, t2.Set([]byte("b"), []byte("2")))
	commit(t, t2)
	commit(t, t1)
	wantGet(t, s, "a", "2")
	wantGet(t, s, "b", "2")
}

// TestTxnPlainBatchConflict: plain batches count as commits: a point write
// or a DeleteRange after the transaction began conflicts with a key it
// writes or locks; before it began, or elsewhere, it does not.
func TestTxnPlainBatchConflict(t *testing.T) {
	s := openMem(t)
	put(t, s, "k", "0", "c", "0")
	t1 := begin(t, s)
	must(t, t1.Set([]byte("k"), []byte("1")))
	put(t, s, "k", "batch")
	wantConflict(t, t1.Commit(context.Background(), false))
	wantGet(t, s, "k", "batch")

	t0 := begin(t, s) // keeps conflict records alive
	defer t0.Rollback()
	put(t, s, "k", "before")
	t2 := begin(t, s)
	must(t, t2.Set([]byte("k"), []byte("2")))
	commit(t, t2)

	rangeDel := func(lo, hi string) {
		b := s.NewBatch()
		defer b.Close()
		must(t, b.DeleteRange([]byte(lo), []byte(hi)))
		must(t, b.Commit(false))
	}
	tw, tl, tout, tedge := begin(t, s), begin(t, s), begin(t, s), begin(t, s)
	must(t, tw.Set([]byte("c"), []byte("w")))
	must(t, tl.LockKeys([]byte("b")))
	must(t, tl.Set([]byte("z"), []byte("l")))
	must(t, tout.Set([]byte("x"), []byte("o")))
	must(t, tedge.Set([]byte("m"), []byte("e"))) // hi is exclusive
	rangeDel("a", "m")
	wantConflict(t, tw.Commit(context.Background(), false))
	wantConflict(t, tl.Commit(context.Background(), false))
	commit(t, tout)
	commit(t, tedge)
	wantGet(t, s, "c", "")
	// A DeleteRange committed before Begin is no conflict.
	t3 := begin(t, s)
	must(t, t3.Set([]byte("c"), []byte("3")))
	commit(t, t3)
	wantGet(t, s, "c", "3")
}

// TestTxnTablePruning: conflict records exist only while a transaction
// that could conflict with them is live; once the long-running
// transaction ends the table empties, and commits without concurrent
// transactions record nothing.
func TestTxnTablePruning(t *testing.T) {
	s := openMem(t)
	for i := 0; i < 100; i++ {
		put(t, s, fmt.Sprintf("p%03d", i), "v")
		tx := begin(t, s)
		must(t, tx.Set([]byte(fmt.Sprintf("t%03d", i)), []byte("v")))
		commit(t, tx)
	}
	if n, f := s.cc.entries(); n != 0 || f != 0 {
		t.Fatalf("without concurrent transactions: %d table entries, %d queued", n, f)
	}
	long := begin(t, s)
	for i := 0; i < 100; i++ {
		put(t, s, fmt.Sprintf("p%03d", i), "w")
		tx := begin(t, s)
		must(t, tx.Set([]byte(fmt.Sprintf("t%03d", i)), []byte("w")))
		commit(t, tx)
	}
	b := s.NewBatch()
	b.DeleteRange([]byte("p"), []byte("q"))
	must(t, b.Commit(false))
	b.Close()
	if n, f := s.cc.entries(); n != 201 || f != 201 {
		t.Fatalf("with a live transaction: %d table entries, %d queued; want 201", n, f)
	}
	// The long transaction still sees its conflicts.
	must(t, long.Set([]byte("t050"), []byte("x")))
	wantConflict(t, long.Commit(context.Background(), false))
	if n, f := s.cc.entries(); n != 0 || f != 0 {
		t.Fatalf("after the last transaction ended: %d table entries, %d queued", n, f)
	}
	// Rolled back and read-only transactions prune too.
	long = begin(t, s)
	reader := begin(t, s)
	wantGet(t, reader, "p001", "")
	put(t, s, "p001", "x")
	wantGet(t, reader, "p001", "")
	must(t, long.Rollback())
	if n, _ := s.cc.entries(); n != 1 {
		t.Fatalf("reader still live: %d entries", n)
	}
	commit(t, reader)
	if n, f := s.cc.entries(); n != 0 || f != 0 {
		t.Fatalf("after rollback and read-only commit: %d table entries, %d queued", n, f)
	}
	s.cc.activeMu.Lock()
	live := s.cc.nActive
	s.cc.activeMu.Unlock()
	if live != 0 {
		t.Fatalf("%d transactions still registered", live)
	}
}

// TestTxnDurability: a synced transaction commit survives a crash; an
// unsynced one is made durable by the background WAL syncer.
func TestTxnDurability(t *testing.T) {
	for _, sync := range []bool{true, false} {
		fs := vfs.NewCrashableMem()
		interval := time.Duration(-1)
		if !sync {
			interval = 5 * time.Millisecond
		}
		s, err := Open("db", Options{FS: fs, WALSyncInterval: interval})
		must(t, err)
		tx := begin(t, s)
		must(t, tx.Set([]byte("k"), []byte("v")))
		must(t, tx.Commit(context.Background(), sync))
		if !sync {
			time.Sleep(100 * time.Millisecond)
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{})
		s.Close()
		s2, err := Open("db", Options{FS: crashed, WALSyncInterval: -1})
		must(t, err)
		wantGet(t, s2, "k", "v")
		s2.Close()
	}
}

// TestTxnDiskGuard: a transaction's commit is admitted by the disk-space
// guard like a plain batch: refused below the threshold, nothing applied.
func TestTxnDiskGuard(t *testing.T) {
	d := newSmallDisk()
	s := openSmall(t, d, &DiskGuardOptions{MinFree: DiskSize{Bytes: 64 << 20}, Interval: time.Hour})
	defer s.Close()
	d.avail.Store(65 << 20)
	s.guard.measure()
	tx := begin(t, s)
	must(t, tx.Set([]byte("big"), make([]byte, 1<<20)))
	wantOutOfDisk(t, tx.Commit(context.Background(), true), "transaction larger than the margin")
	wantGet(t, s, "big", "")
	tx = begin(t, s)
	must(t, tx.Set([]byte("small"), []byte("v")))
	must(t, tx.Commit(context.Background(), true))
	wantGet(t, s, "small", "v")
}

// TestTxnLargeBatch: a transaction larger than Pebble's large-batch
// threshold (half a memtable), which Pebble applies as a flushable batch,
// still records its keys for conflicts.
func TestTxnLargeBatch(t *testing.T) {
	s, err := Open("mem", Options{InMemory: true, MemTableSize: 4 << 20, WALSyncInterval: -1})
	must(t, err)
	defer s.Close()
	keep := begin(t, s)
	defer keep.Rollback()
	must(t, keep.Set([]byte("k0"), []byte("mine")))
	big := begin(t, s)
	val := bytes.Repeat([]byte("v"), 64<<10)
	for i := 0; i < 64; i++ {
		must(t, big.Set([]byte(fmt.Sprintf("k%d", i)), val))
	}
	must(t, big.Commit(context.Background(), true))
	wantConflict(t, keep.Commit(context.Background(), false))
	v, err := s.Get([]byte("k63"))
	if err != nil || len(v) != len(val) {
		t.Fatalf("k63: %d bytes, %v", len(v), err)
	}
}

// histOp is one write of a committed transaction or batch.
type histOp struct {
	kind  byte // 's' set, 'd' delete, 'r' DeleteRange [key, hi)
	key   string
	val   string
	hi    string
	vnull bool
}

// histEntry is a committed transaction (or plain batch) as the serial
// history checker replays it.
type histEntry struct {
	seq    uint64
	writer bool
	reads  map[string]*string // first read of a key not yet written by the txn; nil = absent
	locks  map[string]bool
	ops    []histOp
	name   string
}

// recTxn records what a transaction read, locked and wrote.
type recTxn struct {
	storage.Txn
	h histEntry
}

func newRecTxn(s *Store, name string) (*recTxn, error) {
	tx, err := s.Begin()
	if err != nil {
		return nil, err
	}
	return &recTxn{Txn: tx, h: histEntry{name: name, reads: map[string]*string{}, locks: map[string]bool{}}}, nil
}

func (r *recTxn) written(k string) bool {
	for _, o := range r.h.ops {
		if o.key == k {
			return true
		}
	}
	return false
}

func (r *recTxn) Get(key []byte) ([]byte, error) {
	v, err := r.Txn.Get(key)
	k := string(key)
	if _, seen := r.h.reads[k]; !seen && !r.written(k) {
		switch {
		case err == nil:
			s := string(v)
			r.h.reads[k] = &s
		case errors.Is(err, storage.ErrNotFound):
			r.h.reads[k] = nil
		}
	}
	return v, err
}

func (r *recTxn) Set(key, value []byte) error {
	r.h.ops = append(r.h.ops, histOp{kind: 's', key: string(key), val: string(value)})
	return r.Txn.Set(key, value)
}

func (r *recTxn) Delete(key []byte) error {
	r.h.ops = append(r.h.ops, histOp{kind: 'd', key: string(key)})
	return r.Txn.Delete(key)
}

func (r *recTxn) LockKeys(keys ...[]byte) error {
	for _, k := range keys {
		r.h.locks[string(k)] = true
	}
	return r.Txn.LockKeys(keys...)
}

func (r *recTxn) getInt(key string) (int, error) {
	v, err := r.Get([]byte(key))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(string(v), &n)
	return n, err
}

func (r *recTxn) setInt(key string, n int) error {
	return r.Set([]byte(key), []byte(fmt.Sprint(n)))
}

// sumRange sums the integer values of the keys with prefix through an
// iterator (the snapshot merged with the transaction's writes).
func sumRange(tx storage.Reader, prefix string) (int, int, error) {
	hi := []byte(prefix)
	hi[len(hi)-1]++
	it, err := tx.NewIter([]byte(prefix), hi)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	sum, n := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		var v int
		if _, err := fmt.Sscan(string(it.Value()), &v); err != nil {
			return 0, 0, fmt.Errorf("%s=%q: %v", it.Key(), it.Value(), err)
		}
		sum += v
		n++
	}
	// And backwards, the same.
	rsum, rn := 0, 0
	for ok := it.Last(); ok; ok = it.Prev() {
		var v int
		fmt.Sscan(string(it.Value()), &v)
		rsum += v
		rn++
	}
	if rsum != sum || rn != n {
		return 0, 0, fmt.Errorf("%s: forward scan %d keys sum %d, reverse %d keys sum %d", prefix, n, sum, rn, rsum)
	}
	return sum, n, it.Error()
}

// TestTxnConcurrentProperties runs random transactions from many goroutines,
// retrying on conflict, together with plain batches, and checks:
//   - bank transfers (read two accounts, lock both, write both) never change
//     the total, seen by read-only auditors and by the transfers' own
//     merged scans;
//   - counters incremented by read + Set lose no update;
//   - x+y ≥ 0 survives transactions that each check the sum of both keys
//     (locking both) and decrement one: locking prevents write skew;
//   - a unique key claimed by Get (absent) + LockKeys + Set never has two
//     owners, and claims may be released by Delete;
//   - transactions copying keys that plain batches keep rewriting (Set and
//     DeleteRange) read what was there at their commit point;
//   - serial history: replaying every committed transaction and batch in
//     commit order, each transaction's reads of keys it locked or wrote
//     equal the replayed state, and the replay ends in the store's state.
func TestTxnConcurrentProperties(t *testing.T) {
	dur := 2 * time.Second
	if testing.Short() {
		dur = 400 * time.Millisecond
	}
	s, err := Open("mem", Options{InMemory: true, CacheSize: 8 << 20, WALSyncInterval: 20 * time.Millisecond})
	must(t, err)
	defer s.Close()

	const (
		accounts = 8
		balance  = 100
		counters = 4
		slots    = 16
		plains   = 4
	)
	acct := func(i int) string { return fmt.Sprintf("bank/%02d", i) }
	ctr := func(i int) string { return fmt.Sprintf("ctr/%d", i) }
	slot := func(i int) string { return fmt.Sprintf("uniq/%02d", i) }
	plain := func(i int) string { return fmt.Sprintf("plain/%d", i) }

	var (
		mu       sync.Mutex
		hist     []histEntry
		incs     [counters]int
		commits  = map[string]int{}
		conflict = map[string]int{}
	)
	init := s.NewBatch()
	initial := histEntry{writer: true, name: "init"}
	for i := 0; i < accounts; i++ {
		init.Set([]byte(acct(i)), []byte(fmt.Sprint(balance)))
		initial.ops = append(initial.ops, histOp{kind: 's', key: acct(i), val: fmt.Sprint(balance)})
	}
	for _, k := range []string{"skew/x", "skew/y"} {
		init.Set([]byte(k), []byte("5"))
		initial.ops = append(initial.ops, histOp{kind: 's', key: k, val: "5"})
	}
	must(t, init.Commit(false))
	initial.seq = init.(*batch).seq
	init.Close()
	hist = append(hist, initial)

	// run executes body in a fresh transaction until it commits.
	run := func(rng *rand.Rand, name string, body func(tx *recTxn) (func(), error)) error {
		for {
			tx, err := newRecTxn(s, name)
			if err != nil {
				return err
			}
			done, err := body(tx)
			if err != nil {
				tx.Rollback()
				return fmt.Errorf("%s: %w", name, err)
			}
			err = tx.Commit(context.Background(), rng.Intn(8) == 0)
			if storage.IsConflict(err) {
				mu.Lock()
				conflict[name]++
				mu.Unlock()
				continue
			}
			if err != nil {
				return fmt.Errorf("%s commit: %w", name, err)
			}
			tx.h.seq = tx.Txn.(*txn).commitSeq
			tx.h.writer = len(tx.h.ops) > 0
			mu.Lock()
			commits[name]++
			if len(tx.h.ops) > 0 || len(tx.h.locks) > 0 {
				hist = append(hist, tx.h)
			}
			if done != nil {
				done()
			}
			mu.Unlock()
			return nil
		}
	}

	transfer := func(rng *rand.Rand) func(tx *recTxn) (func(), error) {
		i, j := rng.Intn(accounts), rng.Intn(accounts-1)
		if j >= i {
			j++
		}
		amt := 1 + rng.Intn(30)
		return func(tx *recTxn) (func(), error) {
			bi, err := tx.getInt(acct(i))
			if err != nil {
				return nil, err
			}
			bj, err := tx.getInt(acct(j))
			if err != nil {
				return nil, err
			}
			tx.LockKeys([]byte(acct(i)), []byte(acct(j)))
			if bi < amt {
				return nil, nil
			}
			tx.setInt(acct(i), bi-amt)
			tx.setInt(acct(j), bj+amt)
			sum, n, err := sumRange(tx, "bank/")
			if err != nil {
				return nil, err
			}
			if sum != accounts*balance || n != accounts {
				return nil, fmt.Errorf("transfer's own scan: %d accounts, total %d", n, sum)
			}
			return nil, nil
		}
	}
	audit := func(tx *recTxn) (func(), error) {
		sum, n, err := sumRange(tx, "bank/")
		if err != nil {
			return nil, err
		}
		if sum != accounts*balance || n != accounts {
			return nil, fmt.Errorf("audit: %d accounts, total %d", n, sum)
		}
		x, err := tx.getInt("skew/x")
		if err != nil {
			return nil, err
		}
		y, err := tx.getInt("skew/y")
		if err != nil {
			return nil, err
		}
		if x+y < 0 {
			return nil, fmt.Errorf("write skew: x=%d y=%d", x, y)
		}
		return nil, nil
	}
	increment := func(rng *rand.Rand) func(tx *recTxn) (func(), error) {
		c := rng.Intn(counters)
		return func(tx *recTxn) (func(), error) {
			v, err := tx.getInt(ctr(c))
			if err != nil {
				return nil, err
			}
			return func() { incs[c]++ }, tx.setInt(ctr(c), v+1)
		}
	}
	skew := func(rng *rand.Rand) func(tx *recTxn) (func(), error) {
		k := []string{"skew/x", "skew/y"}[rng.Intn(2)]
		refill := rng.Intn(4) == 0
		r := rng.Int()
		return func(tx *recTxn) (func(), error) {
			x, err := tx.getInt("skew/x")
			if err != nil {
				return nil, err
			}
			y, err := tx.getInt("skew/y")
			if err != nil {
				return nil, err
			}
			tx.LockKeys([]byte("skew/x"), []byte("skew/y"))
			v := x
			if k == "skew/y" {
				v = y
			}
			switch {
			case refill:
				return nil, tx.setInt(k, v+1+r%5)
			case x+y > 0:
				return nil, tx.setInt(k, v-1-r%(x+y))
			}
			return nil, nil
		}
	}
	claim := func(rng *rand.Rand, me string) func(tx *recTxn) (func(), error) {
		sl := slot(rng.Intn(slots))
		release := rng.Intn(3) == 0
		return func(tx *recTxn) (func(), error) {
			_, err := tx.Get([]byte(sl))
			switch {
			case errors.Is(err, storage.ErrNotFound):
				tx.LockKeys([]byte(sl))
				return nil, tx.Set([]byte(sl), []byte(me))
			case err != nil:
				return nil, err
			case release:
				tx.LockKeys([]byte(sl))
				return nil, tx.Delete([]byte(sl))
			}
			return nil, nil
		}
	}
	copyPlain := func(rng *rand.Rand) func(tx *recTxn) (func(), error) {
		p := rng.Intn(plains)
		return func(tx *recTxn) (func(), error) {
			v, err := tx.Get([]byte(plain(p)))
			if errors.Is(err, storage.ErrNotFound) {
				v, err = []byte("none"), nil
			}
			if err != nil {
				return nil, err
			}
			tx.LockKeys([]byte(plain(p)))
			return nil, tx.Set([]byte("copy/"+fmt.Sprint(p)), v)
		}
	}
	plainWrite := func(rng *rand.Rand, gen int) error {
		b := s.NewBatch()
		defer b.Close()
		e := histEntry{writer: true, name: "plain"}
		if rng.Intn(5) == 0 {
			b.DeleteRange([]byte("plain/"), []byte("plain0"))
			e.ops = append(e.ops, histOp{kind: 'r', key: "plain/", hi: "plain0"})
		} else {
			k, v := plain(rng.Intn(plains)), fmt.Sprint(gen)
			b.Set([]byte(k), []byte(v))
			e.ops = append(e.ops, histOp{kind: 's', key: k, val: v})
		}
		if err := b.Commit(rng.Intn(8) == 0); err != nil {
			return err
		}
		e.seq = b.(*batch).seq
		mu.Lock()
		hist = append(hist, e)
		commits["plain"]++
		mu.Unlock()
		return nil
	}

	workers := 8
	deadline := time.Now().Add(dur)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			rng := rand.New(rand.NewSource(int64(w)))
			var err error
			for n := 0; err == nil && time.Now().Before(deadline); n++ {
				switch rng.Intn(7) {
				case 0:
					err = run(rng, "transfer", transfer(rng))
				case 1:
					err = run(rng, "audit", audit)
				case 2:
					err = run(rng, "increment", increment(rng))
				case 3:
					err = run(rng, "skew", skew(rng))
				case 4:
					err = run(rng, "claim", claim(rng, fmt.Sprintf("w%d-%d", w, n)))
				case 5:
					err = run(rng, "copy", copyPlain(rng))
				default:
					err = plainWrite(rng, w*1000000+n)
				}
			}
			errs <- err
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("commits %v, conflicts %v", commits, conflict)
	total := 0
	for _, n := range conflict {
		total += n
	}
	if total == 0 {
		t.Error("no conflict at all: the test did not exercise conflict detection")
	}

	// Counters lost no update.
	for c := 0; c < counters; c++ {
		v, err := s.Get([]byte(ctr(c)))
		got := 0
		if err == nil {
			fmt.Sscan(string(v), &got)
		}
		if got != incs[c] {
			t.Errorf("counter %d = %d after %d committed increments", c, got, incs[c])
		}
	}
	if sum, n, err := sumRange(s, "bank/"); err != nil || sum != accounts*balance || n != accounts {
		t.Errorf("final bank: %d accounts, total %d, %v", n, sum, err)
	}

	// Serial history: writers at their number, lock-only transactions
	// right after the commit their check followed.
	sort.SliceStable(hist, func(i, j int) bool {
		a, b := 2*hist[i].seq, 2*hist[j].seq
		if !hist[i].writer {
			a++
		}
		if !hist[j].writer {
			b++
		}
		return a < b
	})
	state := map[string]string{}
	var prev uint64
	for i, h := range hist {
		if h.writer {
			if i > 0 && h.seq == prev {
				t.Fatalf("two writers numbered %d", h.seq)
			}
			prev = h.seq
		}
		for k, v := range h.reads {
			if !h.locks[k] && !written(h, k) {
				continue // only read: snapshot isolation does not promise it
			}
			cur, ok := state[k]
			switch {
			case v == nil && ok:
				t.Fatalf("%s #%d (writer %v) read %s absent, but at its commit point it is %q", h.name, h.seq, h.writer, k, cur)
			case v != nil && (!ok || cur != *v):
				t.Fatalf("%s #%d (writer %v) read %s=%q, but at its commit point it is %q (present %v)", h.name, h.seq, h.writer, k, *v, cur, ok)
			}
		}
		for _, o := range h.ops {
			switch o.kind {
			case 's':
				state[o.key] = o.val
			case 'd':
				delete(state, o.key)
			case 'r':
				for k := range state {
					if k >= o.key && k < o.hi {
						delete(state, k)
					}
				}
			}
		}
	}
	it, err := s.NewIter(nil, nil)
	must(t, err)
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
		if v, ok := state[string(it.Key())]; !ok || v != string(it.Value()) {
			t.Fatalf("store has %s=%q, replay %q (present %v)", it.Key(), it.Value(), v, ok)
		}
	}
	if n != len(state) {
		t.Fatalf("store has %d keys, replay %d", n, len(state))
	}
}

func written(h histEntry, k string) bool {
	for _, o := range h.ops {
		if o.key == k {
			return true
		}
	}
	return false
}

// TestTxnRetiredSnapshots: finished transactions' snapshots are closed by
// the WAL syncer's next tick (at once without a syncer, and by Close), so
// none stays open to pin deleted data.
func TestTxnRetiredSnapshots(t *testing.T) {
	for _, interval := range []time.Duration{-1, 5 * time.Millisecond, time.Hour} {
		s, err := Open("mem", Options{InMemory: true, WALSyncInterval: interval})
		must(t, err)
		put(t, s, "k", "v")
		for i := 0; i < 10; i++ {
			tx := begin(t, s)
			wantGet(t, tx, "k", "v")
			if i%2 == 0 {
				must(t, tx.Set([]byte("k"), []byte("v")))
			}
			commit(t, tx)
		}
		open := func() int { return s.db.Metrics().Snapshots.Count }
		switch interval {
		case -1:
			if n := open(); n != 0 {
				t.Fatalf("without a syncer %d snapshots stay open", n)
			}
		case time.Hour:
			if n := open(); n != 10 {
				t.Fatalf("%d snapshots retired before the tick, want 10", n)
			}
		default:
			deadline := time.Now().Add(5 * time.Second)
			for open() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d snapshots still open after the syncer's ticks", open())
				}
				time.Sleep(time.Millisecond)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close with retired snapshots: %v", err)
		}
	}
}

// slowSyncFS delays every sync of a write-ahead log file while delay is
// set: a slow disk.
type slowSyncFS struct {
	vfs.FS
	delay atomic.Int64 // nanoseconds
}

type slowSyncFile struct {
	vfs.File
	fs *slowSyncFS
}

func (fs *slowSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &slowSyncFile{File: f, fs: fs}, nil
}

func (fs *slowSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *slowSyncFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name, c)
	return fs.wrap(name, f, err)
}

func (f *slowSyncFile) wait() { time.Sleep(time.Duration(f.fs.delay.Load())) }

func (f *slowSyncFile) Sync() error { f.wait(); return f.File.Sync() }

func (f *slowSyncFile) SyncData() error { f.wait(); return f.File.SyncData() }

func (f *slowSyncFile) SyncTo(n int64) (bool, error) { f.wait(); return f.File.SyncTo(n) }

// TestTxnFsyncOutsideCommitLock: while a synced transaction waits for a
// slow fsync, other commits (transactions and plain batches, unsynced)
// and Begin go through: the fsync is not taken under the commit mutex.
func TestTxnFsyncOutsideCommitLock(t *testing.T) {
	fs := &slowSyncFS{FS: vfs.NewMem()}
	s, err := Open("db", Options{FS: fs, WALSyncInterval: -1})
	must(t, err)
	defer s.Close()
	const delay = 600 * time.Millisecond
	fs.delay.Store(int64(delay))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		tx, err := s.Begin()
		if err == nil {
			tx.Set([]byte("synced"), []byte("v"))
			err = tx.Commit(context.Background(), true)
		}
		done <- err
	}()
	// Wait until the synced commit is applied, hence in its fsync.
	for _, err := s.Get([]byte("synced")); err != nil; _, err = s.Get([]byte("synced")) {
		if time.Since(start) > delay/2 {
			t.Fatalf("the synced commit is not applied after %v: %v", time.Since(start), err)
		}
		time.Sleep(time.Millisecond)
	}
	other := time.Now()
	tx := begin(t, s)
	wantGet(t, tx, "synced", "v") // applied, visible, not yet durable
	must(t, tx.Set([]byte("fast"), []byte("v")))
	commit(t, tx)
	put(t, s, "batch", "v")
	if d := time.Since(other); d > delay/2 {
		t.Fatalf("unsynced commits took %v behind a %v fsync", d, delay)
	}
	select {
	case err := <-done:
		t.Fatalf("the synced commit returned before its fsync: %v after %v", err, time.Since(start))
	default:
	}
	must(t, <-done)
	if d := time.Since(start); d < delay {
		t.Fatalf("the synced commit returned after %v, before the %v fsync", d, delay)
	}
	fs.delay.Store(0)
}
