package engine

import (
	"context"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
)

// Every document write runs as one storage transaction (storage.Txn):
// the document, its index entries and its expiry-index entry are read at
// one snapshot and committed together, first committer wins. Two writers of
// one document both write its key, so the later committer fails with
// storage.ErrConflict and runs again from a fresh snapshot, where it sees
// the other's result: no lost update, without any per-document lock.
// Decisions that depend on keys a transaction does not write are protected
// by locking those keys (Txn.LockKeys): the unique-index guard of a claimed
// value (docstore's checkUnique), and the collection's upsert guard (an
// upsert that found nothing inserts under it, so two upserts of one
// missing document serialize). The staging of a document write itself
// (its index and expiry entries, the unique checks) is the document
// store's (engine/docstore); this file runs and retries the transactions.
//
// As in mongod, single-document writes never surface a write conflict to
// clients: runTxn retries them, with a short randomised backoff, until they
// commit, fail for another reason, or the operation's deadline passes.
// Collection-level exclusion against DDL (createIndexes, collMod, drop,
// rename) stays the collection's RWMutex: writers hold it shared.

// testHookBeforeCommit, set by tests only, runs between a write's staging
// and its commit.
var testHookBeforeCommit func(r *Request)

// maxTxnAttempts bounds the retries of one write; a write conflicting this
// often is starved and answers WriteConflict (112) rather than spinning.
const maxTxnAttempts = 1000

// runTxn runs fn in a storage transaction and commits it, retrying on
// conflict. fn stages writes into tx and may return an onCommit function,
// run once after the successful commit (counters, results: anything fn
// must not leave behind when its attempt is thrown away).
//
// Inside a multi-document transaction (r.txn set) fn stages into that
// transaction once, nothing commits, and a conflict is the transaction's
// WriteConflict, which the client retries whole.
func (e *Engine) runTxn(r *Request, fn func(tx storage.Txn) (onCommit func(), err error)) error {
	if r != nil && r.txn != nil {
		done, err := fn(r.txn)
		if err != nil {
			if storage.IsConflict(err) {
				e.writeConflicts.Add(1)
				return errWriteConflictInTxn()
			}
			return err
		}
		if done != nil && r.txnOnCommit != nil {
			*r.txnOnCommit = append(*r.txnOnCommit, done)
		}
		return nil
	}
	sync := r != nil && r.SyncRequested()
	ctx := context.Background()
	if r != nil && r.Ctx != nil {
		ctx = r.Ctx
	}
	for attempt := 0; ; attempt++ {
		tx, err := e.beginDocTxn()
		if err != nil {
			return err
		}
		if r != nil && r.retry != nil {
			r.retry.reset()
		}
		done, err := fn(tx)
		var recorded, changed func()
		if err == nil && r != nil && r.retry != nil {
			// A retryable write's statements are recorded in the
			// transaction of their write (retry.go).
			recorded, err = r.stageRetry(tx)
		}
		if err == nil {
			// Its changes too, in the change history (changes.go).
			changed, err = e.stageChanges(tx, nil, 0)
		}
		if err == nil {
			if h := testHookBeforeCommit; h != nil {
				h(r)
			}
			err = tx.Commit(ctx, sync)
		}
		_ = tx.Rollback()
		if changed != nil {
			changed()
		}
		if err == nil {
			if recorded != nil {
				recorded()
			}
			if done != nil {
				done()
			}
			return nil
		}
		if !storage.IsConflict(err) {
			return err
		}
		e.writeConflicts.Add(1)
		if attempt+1 >= maxTxnAttempts {
			return mongoerr.New(mongoerr.WriteConflict, "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.")
		}
		if r != nil {
			if derr := r.CheckDeadline(); derr != nil {
				return derr
			}
		}
		if attempt > 0 {
			backoff(attempt)
		}
	}
}

// docTxn is the engine's storage transaction of document writes: the
// document store's Txn (the _id and unique-index values its writes took,
// docstore/txn.go) and, for a multi-document transaction, the documents it
// wrote, which commit restamps with the commit's time (_ts, spec §1: the
// last modification is the commit).
type docTxn struct {
	*docstore.Txn
	staged []stagedDoc
	// events are the document changes the transaction records in the
	// change history at its commit (replica-set mode; changes.go).
	events []changeEvent
}

type stagedDoc struct {
	c     *Collection
	idKey []byte
	ts    int64
}

// noteStaged records a document a multi-document transaction wrote.
func noteStaged(tx storage.Txn, c *Collection, idKey []byte, ts int64) {
	if dt, ok := tx.(*docTxn); ok && dt.Multi {
		dt.staged = append(dt.staged, stagedDoc{c: c, idKey: idKey, ts: ts})
	}
}

// restamp gives the documents a multi-document transaction wrote the
// commit's _ts (ts): each still stored by the transaction with an earlier
// _ts is rewritten in place (same body, so no index key changes; its
// expiry-index entry moves). Called just before the commit.
func (dt *docTxn) restamp(ts int64) error {
	done := map[string]bool{}
	for i := len(dt.staged) - 1; i >= 0; i-- {
		sd := dt.staged[i]
		k := string(docstore.DocKey(sd.c.Meta().ID, sd.idKey))
		if done[k] || sd.ts == ts {
			done[k] = true
			continue
		}
		done[k] = true
		if sd.c.dropped.Load() {
			continue
		}
		s := sd.c.st()
		rec, err := sd.c.getRecord(dt, sd.idKey)
		if err != nil {
			return err
		}
		if rec == nil || rec.TS == ts {
			continue // deleted later in the transaction, or already stamped
		}
		doc, err := rec.Doc()
		if err != nil {
			return err
		}
		saved := dt.Multi
		dt.Multi = false // the rewrite is not a new staged write
		_, err = sd.c.writeDoc(dt, s, rec, doc, ts, rec.Raw)
		dt.Multi = saved
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) beginDocTxn() (*docTxn, error) {
	tx, err := e.ds.Begin()
	if err != nil {
		return nil, err
	}
	return &docTxn{Txn: tx}, nil
}

// errWriteConflictInTxn is mongod's answer to a conflict inside a
// multi-document transaction: WriteConflict with the TransientTransactionError
// label, which makes the drivers retry the whole transaction.
func errWriteConflictInTxn() error {
	err := mongoerr.New(mongoerr.WriteConflict, "Caused by :: Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.")
	err.Extra = bson.D{{Key: "errorLabels", Value: bson.A{"TransientTransactionError"}}}
	return err
}

// commitWrite commits a write's storage transaction begun outside runTxn
// (an upsert's guard transaction), with a retryable write's records
// staged into it.
func (e *Engine) commitWrite(ctx context.Context, r *Request, tx storage.Txn) error {
	var recorded func()
	if r.retry != nil {
		var err error
		if recorded, err = r.stageRetry(tx); err != nil {
			return err
		}
	}
	changed, err := e.stageChanges(tx, nil, 0)
	if err != nil {
		return err
	}
	err = tx.Commit(ctx, r.SyncRequested())
	if changed != nil {
		changed()
	}
	if err != nil {
		return err
	}
	if recorded != nil {
		recorded()
	}
	return nil
}

// backoff sleeps a little before the attempt-th retry: growing, randomised
// (so conflicting writers do not retry in lockstep), capped at 10 ms.
func backoff(attempt int) {
	limit := time.Duration(1<<min(attempt, 10)) * 10 * time.Microsecond
	limit = min(limit, 10*time.Millisecond)
	time.Sleep(rand.N(limit) + time.Microsecond)
}
