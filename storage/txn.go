package storage

import (
	"context"
	"errors"
)

// ErrConflict is returned by Txn.Commit (and by LockKeys when the store
// detects it early) when another transaction committed a write to a key this
// transaction wrote or locked after this transaction's snapshot was taken:
// first committer wins. The caller rolls back and retries the whole
// transaction from a fresh snapshot; the engine maps it to mongod's
// WriteConflict (112) where mongod surfaces one.
var ErrConflict = errors.New("storage: write conflict")

// ErrTxnDone is returned by every method of a transaction that has already
// committed or rolled back.
var ErrTxnDone = errors.New("storage: transaction already finished")

// Txn is a snapshot-isolated read-write transaction, shaped after TiKV's
// client-go txnkv transactions (a start timestamp, Get/Iter/Set/Delete,
// LockKeys, Commit failing with a write conflict) so that a distributed
// store implements it without contortions.
//
// Reads see a snapshot of the store plus the transaction's own buffered
// writes (an own Set is visible, an own Delete hides the key).
// An iterator sees the writes buffered before NewIter was called, not later
// ones (so a scan that writes what it visits never meets its own writes).
// Writes are buffered until Commit, which applies all of them atomically or
// none. Commit fails with ErrConflict when, after this transaction started,
// another transaction or a plain Batch committed a write to a key this one
// wrote (Set, Delete) or locked (LockKeys): snapshot isolation, as
// WiredTiger gives. Keys that were only read are not checked: lock a key you
// read when the decision you take depends on it (the document being updated,
// a unique-index probe), which turns write skew on those keys into a
// conflict.
//
// A Txn is used by one goroutine at a time. Always end it with Commit or
// Rollback (Rollback after Commit is a no-op), or it pins its snapshot.
// Close iterators before: ending the transaction invalidates them (they
// report ErrTxnDone from Error).
type Txn interface {
	Reader
	// Set buffers key = value.
	Set(key, value []byte) error
	// Delete buffers the deletion of key.
	Delete(key []byte) error
	// DeleteSized is Delete with the size of the value being deleted, a hint
	// for the store's tombstone compaction heuristics (see Batch).
	DeleteSized(key []byte, valueSize uint32) error
	// LockKeys marks keys as read for update: Commit fails with ErrConflict
	// if another transaction committed a write to (or a lock of) one of them
	// after this transaction started, even if this transaction does not
	// write them; and once this transaction commits, its locks count as
	// writes of those keys for transactions running concurrently (as a
	// TiKV optimistic transaction's Lock record does). Two transactions that
	// lock one key therefore never both commit: a key nobody stores can
	// guard a decision (a unique value claimed, a missing document upserted).
	LockKeys(keys ...[]byte) error
	// Commit applies the buffered writes atomically, or fails with
	// ErrConflict and applies nothing. With sync the call returns only after
	// the write-ahead log is on stable storage (see Batch.Commit). A
	// transaction without writes or locks commits trivially. Commit ends the
	// transaction whatever it returns: after an error nothing was applied
	// unless the error came from making an applied commit durable (sync).
	// A ctx already done fails the commit with ctx.Err().
	Commit(ctx context.Context, sync bool) error
	// Rollback discards the buffered writes and releases the snapshot.
	Rollback() error
	// StartTS identifies the transaction's start (Begin): transactions
	// begun later have larger or equal values. Informational (logs,
	// operationTime).
	StartTS() uint64
	// Len is the number of buffered write operations.
	Len() int
}

// TxnKV is a store that offers transactions.
type TxnKV interface {
	KV
	// Begin starts a transaction. Its reads see everything committed
	// before Begin returned; a store may take the snapshot as late as the
	// first read, and a commit made in between may then be visible too,
	// but a transaction still conflicts with every commit made after
	// Begin to a key it writes or locks.
	Begin() (Txn, error)
}

// IsConflict reports whether err is (or wraps) a write conflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }
