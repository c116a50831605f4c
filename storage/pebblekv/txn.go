package pebblekv

// Transactions (storage.TxnKV) on Pebble.
//
// Isolation. A transaction reads a Pebble snapshot (taken at its first read,
// see below) overlaid with its own buffered writes, and commits
// first-committer-wins: Commit fails with storage.ErrConflict when a commit
// made after Begin wrote a key this transaction writes or locked. That is
// snapshot isolation, what WiredTiger gives mongod: no dirty or
// non-repeatable reads, no lost updates, but write skew between transactions
// that decide on keys they only read and then write disjoint keys. LockKeys
// closes that gap for the keys that matter: a locked key is checked at
// commit like a written one, so a transaction that locks what it read (the
// document it updates, the unique-index entry it probed for absence) is
// serializable with respect to those keys. Checking every read key instead
// would make every scan a conflict source; the caller knows which reads its
// decision rests on.
//
// Conflict table. Every commit that changes data (a transaction or a plain
// Batch) gets the next commit sequence number under conflicts.commitMu, which
// is held while the commit is checked and applied to Pebble. A table maps each
// recently written key to the sequence number of the last commit that wrote
// it; DeleteRange spans of plain batches go to a list of spans. The table is
// keyed by a 64-bit hash of the key (maphash, seeded per process), not the
// key: no allocation per recorded key, and a collision can only make a
// transaction conflict needlessly, never miss a conflict. Commit of a
// transaction that started at startSeq fails when a written or locked key has
// a table entry above startSeq or lies in a span recorded above startSeq;
// otherwise the batch is applied and its keys recorded with the new number.
// Plain batches are never refused (they are blind writes, serialized at their
// commit point) but are recorded, so a transaction that touches a key a batch
// changed after the transaction began conflicts.
//
// Begin and the snapshot. Begin reads the last published commit number
// (applied) as the transaction's startSeq and registers it, under activeMu, a
// mutex held only for those few instructions; a commit publishes its number
// under activeMu after Pebble returned from applying it. The Pebble snapshot
// is taken at the transaction's first read, not in Begin: it then contains
// every commit numbered at most startSeq (they were visible before Begin
// returned), and possibly later ones. A later one the transaction sees and
// then writes or locks is a needless conflict (a retry, never an anomaly):
// the transaction is snapshot-isolated at its first read and conflicts with
// everything committed since Begin. Deferring the snapshot matters because
// closing Pebble's earliest snapshot schedules a compaction pick (about a
// microsecond, 15 % of a document write); a transaction that only writes
// never takes one. And a finished transaction's snapshot is not closed at
// once but retired: the WAL syncer's tick (Options.WALSyncInterval, 100 ms)
// closes the retired snapshots newest first, so that only the last close of
// a round is the earliest snapshot's and runs the picker. The price is that
// versions overwritten within the last tick may survive one more compaction.
// Without the syncer, snapshots close at once. Begin never waits for a
// commit (nor for a write stall Pebble imposes on a committer): only
// committers queue on commitMu.
//
// Pruning. An entry only matters to a live transaction that started before
// it. activeMu also guards the multiset of start numbers of live transactions
// (a deque in start order); entries numbered at or below the oldest live start
// (or all of them when no transaction is live) are dropped, oldest first, from
// a FIFO that records them in commit order (a table entry is deleted only if no
// later commit rewrote the key). Committers prune under commitMu on their way
// out; a transaction that ends without committing prunes if commitMu is free.
// A commit made while no other transaction is live records nothing at all, so
// the plain-batch cost outside transactions is one uncontended mutex pair. A
// long-running transaction keeps entries alive until it ends.
//
// Durability. The exclusive section must not include an fsync, or every
// writer would wait for the disk one by one. A synced commit is applied under
// commitMu with Pebble's ApplyNoSyncWait (the WAL record is queued, the
// memtable updated and the batch published, exactly as a Sync commit does
// before it waits), commitMu is released, and Batch.SyncWait then waits for
// the group fsync that covers the record, shared with concurrent committers
// (Pebble marks ApplyNoSyncWait experimental; CockroachDB commits its Raft
// log with it).
// An unsynced commit is applied with NoSync and left to the store's background
// WAL syncer (Options.WALSyncInterval), as plain batches are. The disk-space
// guard admits a transaction's batch exactly like a plain batch, before the
// exclusive section.
//
// Own writes. Writes go into a Pebble batch that is not indexed, so a
// transaction that only writes pays nothing for reads it does not do. On the
// first read after writes, a map from key to the newest buffered operation is
// built from the batch (and extended incrementally afterwards): Get consults
// it before the snapshot. On the first NewIter after writes, the batch is
// converted to an indexed batch, whose batch-only iterator (NewBatchOnlyIter)
// gives the transaction's live Sets in key order in both directions; Pebble
// offers no iterator over a snapshot overlaid with a batch, so txnIter merges
// the snapshot iterator and the batch-only iterator, skipping snapshot keys
// the transaction wrote (set or deleted) before the iterator was created. The
// map records, per key, the ordinal of its first buffered write, which tells
// an iterator which writes it must ignore: like Pebble's batch iterators it
// sees the writes made before it was created and no later ones. A transaction
// without writes reads straight from its snapshot.

import (
	"bytes"
	"context"
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"

	"github.com/mayflydb/mayfly/storage"
)

var _ storage.TxnKV = (*Store)(nil)

// conflicts is the store's commit-ordering and conflict-detection state.
type conflicts struct {
	// commitMu serialises the check, apply and record of every commit.
	commitMu sync.Mutex
	table    map[uint64]uint64 // key hash → seq of the last commit writing it
	fifo     []keyRec          // table entries in commit order
	spans    []spanRec         // DeleteRange spans in commit order
	// pending counts fifo and spans entries: a lock-free hint that pruning
	// has work.
	pending atomic.Int64

	// activeMu guards applied and the live transactions' start numbers.
	activeMu sync.Mutex
	applied  uint64 // last published commit; written under both mutexes
	active   []activeRec
	nActive  int
	// activeBuf is active's array, reused whenever active empties.
	activeBuf []activeRec
}

type keyRec struct {
	seq, hash uint64
}

// keySeed seeds the key hashes of the conflict table.
var keySeed = maphash.MakeSeed()

func keyHash(k []byte) uint64 { return maphash.Bytes(keySeed, k) }

type spanRec struct {
	seq    uint64
	lo, hi string
}

// activeRec counts the live transactions that started at seq.
type activeRec struct {
	seq uint64
	n   int
}

// register adds a live transaction started at seq (not below any earlier
// registration). Called under activeMu.
func (c *conflicts) register(seq uint64) {
	c.nActive++
	if n := len(c.active); n > 0 && c.active[n-1].seq == seq {
		c.active[n-1].n++
		return
	}
	if len(c.active) == 0 {
		c.active = c.activeBuf[:0]
	}
	c.active = append(c.active, activeRec{seq: seq, n: 1})
	if len(c.active) == 1 {
		c.activeBuf = c.active
	}
}

// deregister removes a live transaction started at seq. Called under
// activeMu.
func (c *conflicts) deregister(seq uint64) {
	i := sort.Search(len(c.active), func(i int) bool { return c.active[i].seq >= seq })
	if i == len(c.active) || c.active[i].seq != seq || c.active[i].n == 0 {
		panic("pebblekv: deregistering a transaction that is not live")
	}
	c.active[i].n--
	c.nActive--
	for len(c.active) > 0 && c.active[0].n == 0 {
		c.active = c.active[1:]
	}
}

// horizon is the number at or below which recorded commits no longer matter:
// the oldest live start, or the last commit when nothing is live. Called
// under activeMu.
func (c *conflicts) horizon() uint64 {
	if len(c.active) > 0 {
		return c.active[0].seq
	}
	return c.applied
}

// prune drops the records numbered at or below horizon. Called under
// commitMu.
func (c *conflicts) prune(horizon uint64) {
	n := 0
	for n < len(c.fifo) && c.fifo[n].seq <= horizon {
		r := &c.fifo[n]
		if c.table[r.hash] == r.seq {
			delete(c.table, r.hash)
		}
		*r = keyRec{}
		n++
	}
	m := 0
	for m < len(c.spans) && c.spans[m].seq <= horizon {
		c.spans[m] = spanRec{}
		m++
	}
	if n == 0 && m == 0 {
		return
	}
	c.fifo = compact(c.fifo, n)
	c.spans = compact(c.spans, m)
	c.pending.Add(-int64(n + m))
	if len(c.fifo) == 0 && len(c.table) == 0 && cap(c.fifo) > maxIdleTable {
		// A burst (a long transaction, a huge batch) grew the table: Go maps
		// never shrink, so an emptied one is dropped and made afresh.
		c.table, c.fifo = nil, nil
	}
}

// maxIdleTable is the conflict-table size kept allocated once it empties.
const maxIdleTable = 1 << 16

// compact drops s's first n elements, reusing the array when it is empty.
func compact[T any](s []T, n int) []T {
	if n == len(s) {
		return s[:0]
	}
	return s[n:]
}

// publish numbers a commit that Pebble has applied, makes the number visible
// to Begin, records the keys of repr if a live transaction could conflict
// with them and prunes. t is the committing transaction (nil for a plain
// batch): it is no longer live afterwards. Called under commitMu.
func (c *conflicts) publish(repr []byte, t *txn) (uint64, error) {
	c.activeMu.Lock()
	seq := c.applied + 1
	c.applied = seq
	if t != nil {
		c.deregister(t.start)
		t.commitSeq = seq
	}
	others := c.nActive
	h := c.horizon()
	c.activeMu.Unlock()
	var err error
	if others > 0 {
		if repr != nil {
			err = c.record(repr, seq)
		}
		if t != nil && len(t.locks) > 0 {
			c.recordLocks(t.locks, seq)
		}
	}
	c.prune(h)
	return seq, err
}

// recordLocks enters a committed transaction's locked keys into the table
// as if it had written them: two transactions that lock one key (two
// claims of one unique value, two upserts of one missing document) then
// conflict, the later committer failing, as TiKV's optimistic transactions
// treat a locked key (a Lock record written at commit).
func (c *conflicts) recordLocks(keys [][]byte, seq uint64) {
	if c.table == nil {
		c.table = make(map[uint64]uint64)
	}
	for _, k := range keys {
		h := keyHash(k)
		c.table[h] = seq
		c.fifo = append(c.fifo, keyRec{seq: seq, hash: h})
	}
	c.pending.Add(int64(len(keys)))
}

// record enters the keys a batch wrote into the table under seq.
func (c *conflicts) record(repr []byte, seq uint64) error {
	if c.table == nil {
		c.table = make(map[uint64]uint64)
	}
	added := 0
	for r := batchrepr.Read(repr); ; {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			// The batch was applied: Pebble parsed it. A record we cannot
			// read would let a conflict through, so say so.
			c.pending.Add(int64(added))
			return err
		}
		if !ok {
			break
		}
		switch kind {
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindDelete, pebble.InternalKeyKindDeleteSized,
			pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindMerge, pebble.InternalKeyKindSetWithDelete:
			h := keyHash(k)
			c.table[h] = seq
			c.fifo = append(c.fifo, keyRec{seq: seq, hash: h})
			added++
		case pebble.InternalKeyKindRangeDelete:
			c.spans = append(c.spans, spanRec{seq: seq, lo: string(k), hi: string(v)})
			added++
		}
	}
	c.pending.Add(int64(added))
	return nil
}

// conflicted reports whether a commit numbered above start wrote key.
// Called under commitMu.
func (c *conflicts) conflicted(key []byte, start uint64) bool {
	if seq, ok := c.table[keyHash(key)]; ok && seq > start {
		return true
	}
	for i := len(c.spans) - 1; i >= 0; i-- {
		sp := &c.spans[i]
		if sp.seq <= start {
			break // older spans are older still
		}
		if string(key) >= sp.lo && string(key) < sp.hi {
			return true
		}
	}
	return false
}

// check fails with ErrConflict when a key t wrote or locked was written by a
// commit numbered above t's start. Called under commitMu.
func (c *conflicts) check(t *txn, repr []byte) error {
	if len(c.table) == 0 && len(c.spans) == 0 {
		return nil
	}
	if repr != nil {
		for r := batchrepr.Read(repr); ; {
			_, k, _, ok, err := r.Next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if c.conflicted(k, t.start) {
				return storage.ErrConflict
			}
		}
	}
	for _, k := range t.locks {
		if c.conflicted(k, t.start) {
			return storage.ErrConflict
		}
	}
	return nil
}

// tryPrune prunes if there is something to prune and no commit is running
// (which would prune on its way out anyway).
func (c *conflicts) tryPrune() {
	if c.pending.Load() == 0 || !c.commitMu.TryLock() {
		return
	}
	c.activeMu.Lock()
	h := c.horizon()
	c.activeMu.Unlock()
	c.prune(h)
	c.commitMu.Unlock()
}

// entries is the number of records held (tests watch pruning with it).
func (c *conflicts) entries() (table, fifo int) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	return len(c.table) + len(c.spans), len(c.fifo) + len(c.spans)
}

// apply hands a batch to Pebble under commitMu. A synced commit does not wait
// for the fsync here: the caller calls SyncWait after releasing commitMu.
func (s *Store) apply(b *pebble.Batch, sync bool) error {
	if sync {
		return s.db.ApplyNoSyncWait(b, pebble.Sync)
	}
	return s.db.Apply(b, pebble.NoSync)
}

// commitBatch commits a plain batch: applied and numbered like a
// transaction's, never refused for a conflict. It returns the commit's
// number.
func (s *Store) commitBatch(b *pebble.Batch, sync bool) (uint64, error) {
	c := &s.cc
	// Read before the apply: Pebble drops a large batch's buffer once it
	// hands it to the memtable queue (the bytes stay valid, unchanged).
	repr := b.Repr()
	c.commitMu.Lock()
	if err := s.apply(b, sync); err != nil {
		c.commitMu.Unlock()
		return 0, err
	}
	seq, recErr := c.publish(repr, nil)
	c.commitMu.Unlock()
	if sync {
		if err := b.SyncWait(); err != nil {
			return seq, err
		}
	} else {
		s.unsynced.Store(true)
	}
	return seq, recErr
}

// Begin starts a transaction: it registers the start number; the snapshot
// is taken by the first read (see the file comment).
func (s *Store) Begin() (storage.Txn, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	c := &s.cc
	c.activeMu.Lock()
	start := c.applied
	c.register(start)
	c.activeMu.Unlock()
	return &txn{s: s, start: start}, nil
}

// txn is a storage.Txn on a Store.
type txn struct {
	s     *Store
	snap  *pebble.Snapshot // taken by the first read
	start uint64
	// b buffers the writes; nil until the first one. indexed once NewIter
	// needed Pebble's index of it.
	b       *pebble.Batch
	indexed bool
	hasSet  bool
	locks   [][]byte
	// own maps each written key to its newest buffered operation; it
	// covers the first ownOff bytes (ownN records) of b's representation.
	own    map[string]*ownWrite
	ownOff int
	ownN   uint32
	iters  []*txnIter // open iterators, invalidated when the txn ends
	done   bool
	// commitSeq is the commit's number, or for a commit without writes the
	// last number published when it was checked (tests replay histories
	// with it).
	commitSeq uint64
}

type ownWrite struct {
	val   []byte // points into b's representation; nil when deleted
	del   bool
	first uint32 // ordinal of the first buffered write of the key
}

// view is the transaction's snapshot, taken on first use.
func (t *txn) view() *pebble.Snapshot {
	if t.snap == nil {
		t.snap = t.s.db.NewSnapshot()
	}
	return t.snap
}

func (t *txn) batch() *pebble.Batch {
	if t.b == nil {
		t.b = t.s.db.NewBatch()
	}
	return t.b
}

func (t *txn) hasWrites() bool { return t.b != nil && t.b.Count() > 0 }

func (t *txn) Set(key, value []byte) error {
	if t.done {
		return storage.ErrTxnDone
	}
	t.hasSet = true
	return t.batch().Set(key, value, nil)
}

func (t *txn) Delete(key []byte) error {
	if t.done {
		return storage.ErrTxnDone
	}
	return t.batch().Delete(key, nil)
}

func (t *txn) DeleteSized(key []byte, valueSize uint32) error {
	if t.done {
		return storage.ErrTxnDone
	}
	return t.batch().DeleteSized(key, valueSize, nil)
}

func (t *txn) LockKeys(keys ...[]byte) error {
	if t.done {
		return storage.ErrTxnDone
	}
	for _, k := range keys {
		t.locks = append(t.locks, bytes.Clone(k))
	}
	return nil
}

func (t *txn) StartTS() uint64 { return t.start }

func (t *txn) Len() int {
	if t.b == nil {
		return 0
	}
	return int(t.b.Count())
}

// ensureOwn extends the own-write map over the writes buffered since its last
// use.
func (t *txn) ensureOwn() error {
	repr := t.b.Repr()
	if t.ownOff == len(repr) {
		return nil
	}
	if t.own == nil {
		t.own = make(map[string]*ownWrite)
	}
	var r batchrepr.Reader
	if t.ownOff == 0 {
		r = batchrepr.Read(repr)
	} else {
		r = batchrepr.Reader(repr[t.ownOff:])
	}
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		e := t.own[string(k)]
		if e == nil {
			e = &ownWrite{first: t.ownN}
			t.own[string(k)] = e
		}
		if kind == pebble.InternalKeyKindSet {
			e.val, e.del = v, false
		} else {
			e.val, e.del = nil, true
		}
		t.ownN++
	}
	t.ownOff = len(repr)
	return nil
}

// ensureIndexed moves the buffered writes into an indexed batch, which
// iterators need.
func (t *txn) ensureIndexed() error {
	if t.indexed {
		return nil
	}
	ib := t.s.db.NewIndexedBatch()
	if t.b != nil {
		if err := ib.Apply(t.b, nil); err != nil {
			ib.Close()
			return err
		}
		t.b.Close()
	}
	t.b, t.indexed = ib, true
	// The map pointed into the old batch's buffer.
	t.own, t.ownOff, t.ownN = nil, 0, 0
	return nil
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, storage.ErrTxnDone
	}
	if t.s.closed.Load() {
		return nil, ErrClosed
	}
	if t.hasWrites() {
		if err := t.ensureOwn(); err != nil {
			return nil, err
		}
		if e := t.own[string(key)]; e != nil {
			if e.del {
				return nil, storage.ErrNotFound
			}
			return bytes.Clone(e.val), nil
		}
	}
	return get(t.view(), key)
}

func (t *txn) NewIter(lo, hi []byte) (storage.Iterator, error) {
	if t.done {
		return nil, storage.ErrTxnDone
	}
	if t.s.closed.Load() {
		return nil, ErrClosed
	}
	o := iterOptions(lo, hi)
	it := &txnIter{t: t}
	if t.hasWrites() {
		if err := t.ensureIndexed(); err != nil {
			return nil, err
		}
		if err := t.ensureOwn(); err != nil {
			return nil, err
		}
		w, err := t.b.NewBatchOnlyIter(context.Background(), o)
		if err != nil {
			return nil, err
		}
		it.w, it.n = w, t.ownN
	}
	si, err := t.view().NewIter(o)
	if err != nil {
		if it.w != nil {
			it.w.Close()
		}
		return nil, err
	}
	it.s = si
	t.iters = append(t.iters, it)
	return it, nil
}

// Commit checks for conflicts and applies the buffered writes (see the
// file comment).
func (t *txn) Commit(ctx context.Context, sync bool) error {
	if t.done {
		return storage.ErrTxnDone
	}
	if err := ctx.Err(); err != nil {
		t.rollback()
		return err
	}
	writes := t.hasWrites()
	if !writes && len(t.locks) == 0 {
		t.rollback()
		return nil
	}
	s := t.s
	if s.closed.Load() {
		t.rollback()
		return ErrClosed
	}
	if writes && s.guard != nil {
		class := admitWrite
		if !t.hasSet {
			class = admitDelete
		}
		if err := s.guard.admit(t.b.Len(), class); err != nil {
			t.rollback()
			return err
		}
	}
	var repr []byte
	if writes {
		repr = t.b.Repr()
	}
	c := &s.cc
	c.commitMu.Lock()
	if err := c.check(t, repr); err != nil {
		c.commitMu.Unlock()
		t.rollback()
		return err
	}
	if !writes {
		// Locks only: nothing to apply, but the locks are recorded as
		// writes under a new number, so a transaction that locked one of
		// them concurrently conflicts.
		_, err := c.publish(nil, t)
		c.commitMu.Unlock()
		t.finish()
		return err
	}
	if err := s.apply(t.b, sync); err != nil {
		c.commitMu.Unlock()
		t.rollback()
		return err
	}
	_, err := c.publish(repr, t)
	c.commitMu.Unlock()
	if sync {
		if serr := t.b.SyncWait(); serr != nil {
			err = serr
		}
	} else {
		s.unsynced.Store(true)
	}
	t.finish()
	return err
}

func (t *txn) Rollback() error {
	if t.done {
		return nil
	}
	t.rollback()
	return nil
}

// rollback ends a transaction that did not commit.
func (t *txn) rollback() {
	c := &t.s.cc
	c.activeMu.Lock()
	c.deregister(t.start)
	c.activeMu.Unlock()
	t.finish()
	c.tryPrune()
}

// finish releases what the transaction holds; it is no longer registered
// as live.
func (t *txn) finish() {
	t.done = true
	for _, it := range t.iters {
		it.release()
	}
	t.iters = nil
	if t.b != nil {
		t.b.Close()
		t.b = nil
	}
	if t.snap != nil && !t.s.closed.Load() {
		t.s.retireSnapshot(t.start, t.snap)
	}
	t.snap = nil
	t.own, t.locks = nil, nil
}

// txnIter iterates a transaction's view: the snapshot iterator s merged with
// the batch-only iterator w over the writes buffered before the iterator was
// created (w is nil when there were none). The two never hold the same key
// at a position the merge looks at: a snapshot key the transaction had
// written is skipped, and the batch holds only keys the transaction wrote.
type txnIter struct {
	t    *txn
	s, w *pebble.Iterator
	n    uint32 // own writes with an ordinal below n are visible
	cur  *pebble.Iterator
	rev  bool // the last positioning moved backwards
	err  error
}

// release closes the Pebble iterators when the transaction ends first.
func (it *txnIter) release() {
	if it.s == nil {
		return
	}
	it.s.Close()
	if it.w != nil {
		it.w.Close()
	}
	it.s, it.w, it.cur = nil, nil, nil
	it.err = storage.ErrTxnDone
}

func (it *txnIter) Close() error {
	if it.s == nil {
		return nil
	}
	err := it.s.Close()
	if it.w != nil {
		if werr := it.w.Close(); err == nil {
			err = werr
		}
	}
	it.s, it.w, it.cur = nil, nil, nil
	for i, o := range it.t.iters {
		if o == it {
			it.t.iters = append(it.t.iters[:i], it.t.iters[i+1:]...)
			break
		}
	}
	return err
}

// shadowed reports whether the transaction wrote key before the iterator
// was created: the snapshot's version is then hidden.
func (it *txnIter) shadowed(key []byte) bool {
	e := it.t.own[string(key)]
	return e != nil && e.first < it.n
}

func (it *txnIter) skipFwd() {
	for it.s.Valid() && it.shadowed(it.s.Key()) {
		it.s.Next()
	}
}

func (it *txnIter) skipRev() {
	for it.s.Valid() && it.shadowed(it.s.Key()) {
		it.s.Prev()
	}
}

// pick makes the smaller (forward) or larger (reverse) of the two current
// keys the current entry.
func (it *txnIter) pick(rev bool) bool {
	it.rev = rev
	sv, wv := it.s.Valid(), it.w.Valid()
	switch {
	case sv && wv:
		c := bytes.Compare(it.s.Key(), it.w.Key())
		if (c < 0) != rev {
			it.cur = it.s
		} else {
			it.cur = it.w
		}
	case sv:
		it.cur = it.s
	case wv:
		it.cur = it.w
	default:
		it.cur = nil
	}
	return it.cur != nil
}

func (it *txnIter) First() bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.First()
	}
	it.s.First()
	it.skipFwd()
	it.w.First()
	return it.pick(false)
}

func (it *txnIter) Last() bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.Last()
	}
	it.s.Last()
	it.skipRev()
	it.w.Last()
	return it.pick(true)
}

func (it *txnIter) SeekGE(key []byte) bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.SeekGE(key)
	}
	it.s.SeekGE(key)
	it.skipFwd()
	it.w.SeekGE(key)
	return it.pick(false)
}

func (it *txnIter) SeekLT(key []byte) bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.SeekLT(key)
	}
	it.s.SeekLT(key)
	it.skipRev()
	it.w.SeekLT(key)
	return it.pick(true)
}

func (it *txnIter) Next() bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.Next()
	}
	if it.cur == nil {
		// Like Pebble: Next after running off the start goes to the
		// first entry; after running off the end it stays exhausted.
		if it.rev {
			return it.First()
		}
		return false
	}
	if it.rev {
		// Both sit at or before the current key; bring the other one to
		// the first key after it (it cannot hold the current key).
		other := it.s
		if it.cur == it.s {
			other = it.w
		}
		other.SeekGE(it.cur.Key())
		if other == it.s {
			it.skipFwd()
		}
	}
	it.cur.Next()
	if it.cur == it.s {
		it.skipFwd()
	}
	return it.pick(false)
}

func (it *txnIter) Prev() bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.Prev()
	}
	if it.cur == nil {
		if !it.rev {
			return it.Last()
		}
		return false
	}
	if !it.rev {
		other := it.s
		if it.cur == it.s {
			other = it.w
		}
		other.SeekLT(it.cur.Key())
		if other == it.s {
			it.skipRev()
		}
	}
	it.cur.Prev()
	if it.cur == it.s {
		it.skipRev()
	}
	return it.pick(true)
}

func (it *txnIter) Valid() bool {
	if it.s == nil {
		return false
	}
	if it.w == nil {
		return it.s.Valid()
	}
	return it.cur != nil
}

func (it *txnIter) cursor() *pebble.Iterator {
	if it.w == nil {
		return it.s
	}
	return it.cur
}

func (it *txnIter) Key() []byte {
	if c := it.cursor(); c != nil {
		return c.Key()
	}
	return nil
}

// Value returns the current value; a failure to load it surfaces through
// Error.
func (it *txnIter) Value() []byte {
	if c := it.cursor(); c != nil {
		v, _ := c.ValueAndErr()
		return v
	}
	return nil
}

func (it *txnIter) Error() error {
	if it.s == nil {
		return it.err
	}
	if err := it.s.Error(); err != nil {
		return err
	}
	if it.w != nil {
		return it.w.Error()
	}
	return nil
}

// retiredSnap is a finished transaction's snapshot awaiting its close.
type retiredSnap struct {
	start uint64
	snap  *pebble.Snapshot
}

// maxRetired bounds the retired snapshots between two ticks.
const maxRetired = 1024

// retireSnapshot hands a finished transaction's snapshot to the next round
// of closeRetired (see the file comment).
func (s *Store) retireSnapshot(start uint64, snap *pebble.Snapshot) {
	if s.stopSyncer == nil {
		snap.Close()
		return
	}
	s.retiredMu.Lock()
	s.retired = append(s.retired, retiredSnap{start, snap})
	full := len(s.retired) >= maxRetired
	s.retiredMu.Unlock()
	if full {
		s.closeRetired()
	}
}

// closeRetired closes the retired snapshots, newest first, so that only
// the last close (the earliest snapshot) schedules Pebble's compaction
// picker.
func (s *Store) closeRetired() {
	s.retiredMu.Lock()
	r := s.retired
	s.retired = nil
	s.retiredMu.Unlock()
	if len(r) == 0 {
		return
	}
	sort.Slice(r, func(i, j int) bool { return r[i].start > r[j].start })
	for _, x := range r {
		x.snap.Close()
	}
}
