package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
)

// Multi-document transactions, as mongod runs them on a replica set: a
// command with lsid, txnNumber, autocommit: false and startTransaction:
// true opens a transaction on its session; later commands with the same
// txnNumber and autocommit: false continue it; commitTransaction and
// abortTransaction end it. The transaction is one storage transaction
// (storage.Txn): every statement reads its snapshot plus its own writes
// (Request.txn reaches the scanners and the write path), writes are staged
// into it, and commitTransaction commits it atomically, failing with
// WriteConflict and the TransientTransactionError label when a concurrent
// commit changed a key it wrote or locked (first committer wins), which the
// drivers' withTransaction answers by running the transaction again.
//
// A session runs one command at a time (its mutex is held for the whole
// command, as mongod checks a session out). A statement that fails aborts
// the transaction, as in mongod; so does exceeding
// transactionLifetimeLimitSeconds (the sweeper), ending or killing the
// session, and starting a newer transaction on it.

type txnPhase int

const (
	txnNone txnPhase = iota
	txnActive
	txnCommitted
	txnAborted
)

// sessionTxn is a session's transaction state.
type sessionTxn struct {
	mu       sync.Mutex // held by the command using the session
	number   int64      // the active (or last) txnNumber; -1 before any
	phase    txnPhase
	tx       storage.Txn
	onCommit []func()
	expires  time.Time
	lastUse  time.Time
	cursors  []int64 // cursors opened in the transaction, killed when it ends
	// abortedBy says why an aborted transaction ended, for logs.
	abortedBy string
}

// txnTable holds the transaction state of every session that ran one.
type txnTable struct {
	mu sync.Mutex
	m  map[string]*sessionTxn
	// lifetime is transactionLifetimeLimitSeconds (0: the default, 60).
	lifetime atomic.Int64
	// figures for serverStatus.transactions
	started, committed, aborted atomic.Int64
}

const defaultTxnLifetimeSeconds = 60

func (t *txnTable) lifetimeLimit() time.Duration {
	if s := t.lifetime.Load(); s > 0 {
		return time.Duration(s) * time.Second
	}
	return defaultTxnLifetimeSeconds * time.Second
}

// session returns the state of the session lsid, creating it.
func (t *txnTable) session(lsid string) *sessionTxn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*sessionTxn{}
	}
	st := t.m[lsid]
	if st == nil {
		st = &sessionTxn{number: -1}
		t.m[lsid] = st
	}
	return st
}

// lsidKey renders a command's lsid as the transaction table's key.
func lsidKey(cmd bson.D) (string, bool, error) {
	id, ok, err := lsidOf(cmd)
	return string(id.Data), ok, err
}

// txnAllowed are the commands a transaction may run (mongod's allow-list,
// transaction_participant.cpp, with 4.4's create and createIndexes).
var txnAllowed = map[string]bool{
	"abortTransaction": true, "aggregate": true, "commitTransaction": true, "delete": true,
	"distinct": true, "find": true, "findAndModify": true, "getMore": true, "insert": true,
	"killCursors": true, "update": true, "create": true, "createIndexes": true, "bulkWrite": true,
	// informational commands run outside the transaction's snapshot
	"hello": true, "isMaster": true, "buildInfo": true, "connectionStatus": true,
}

// txnRefusedStages are aggregation stages a transaction cannot run.
var txnRefusedStages = map[string]bool{
	"$out": true, "$merge": true, "$collStats": true, "$currentOp": true, "$indexStats": true,
	"$listSessions": true, "$listLocalSessions": true, "$planCacheStats": true, "$changeStream": true,
}

func noSuchTxn(msg string, args ...any) error {
	err := mongoerr.New(mongoerr.NoSuchTransaction, msg, args...)
	err.Extra = bson.D{{Key: "errorLabels", Value: bson.A{"TransientTransactionError"}}}
	return err
}

// enterTxn runs before a command: when the command belongs to a
// multi-document transaction it starts or continues the transaction, holds
// the session for the command and sets r.txn; the returned function, run
// after the command, releases the session (aborting the transaction when
// the statement failed). Both are nil for commands outside transactions.
func (e *Engine) enterTxn(r *Request, c *Command) (func(body bson.D, err error), error) {
	ac, hasAC := bsonx.Get(r.Cmd, "autocommit")
	st, hasST := bsonx.Get(r.Cmd, "startTransaction")
	tn, hasTN := bsonx.Get(r.Cmd, "txnNumber")
	if !hasAC {
		if hasST {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and startTransaction was provided")
		}
		if (c.Name == "commitTransaction" || c.Name == "abortTransaction") && !hasTN {
			return nil, mongoerr.New(mongoerr.CommandFailed, "%s must be run within a transaction", c.Name)
		}
		return nil, nil // not a transaction (a retryable write, or no session at all)
	}
	if b, ok := ac.(bool); !ok || b {
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.autocommit' is the wrong type '%s', expected type 'bool'", bsonx.TypeName(ac))
		}
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Specifying autocommit=true is not allowed.")
	}
	if !hasTN {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "'autocommit' field requires a transaction number to also be specified")
	}
	number, ok := tn.(int64)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '%s', expected type 'long'", bsonx.TypeName(tn))
	}
	if number < 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Transaction number cannot be negative")
	}
	start := false
	if hasST {
		if b, ok := st.(bool); !ok || !b {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Specifying startTransaction=false is not allowed.")
		}
		start = true
	}
	if !e.replSetMode() {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
	}
	key, hasLSID, err := lsidKey(r.Cmd)
	if err != nil {
		return nil, err
	}
	if !hasLSID {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Transaction number requires a session ID to also be specified")
	}
	s := e.txns.session(key)
	s.mu.Lock()
	release := func() { s.lastUse = e.clock.Now(); s.mu.Unlock() }
	now := e.clock.Now()
	if s.phase == txnActive && now.After(s.expires) {
		e.abortTxn(s, "expired")
	}
	if number < s.number {
		release()
		return nil, mongoerr.New(mongoerr.TransactionTooOld, "Cannot start transaction with { txnNumber: %d } on session %s because a newer transaction with txnNumber %d has already started on this session.", number, cmdLsidString(r.Cmd), s.number)
	}
	if start {
		if number == s.number && s.phase != txnNone {
			release()
			return nil, mongoerr.New(mongoerr.ConflictingOperationInProgress, "Only servers in a sharded cluster can start a new transaction at the active transaction number")
		}
		if s.phase == txnActive {
			e.abortTxn(s, "a newer transaction started on the session")
		}
		tx, err := e.beginDocTxn()
		if err != nil {
			release()
			return nil, err
		}
		tx.Multi = true
		s.number, s.phase, s.tx, s.onCommit, s.cursors = number, txnActive, tx, nil, nil
		s.expires = now.Add(e.txns.lifetimeLimit())
		e.txns.started.Add(1)
	} else {
		switch {
		case number != s.number || s.phase == txnNone:
			release()
			return nil, noSuchTxn("Given transaction number %d does not match any in-progress transactions. The active transaction number is %d", number, s.number)
		case s.phase == txnAborted:
			release()
			if c.Name == "abortTransaction" {
				return nil, noSuchTxn("Transaction with { txnNumber: %d } has been aborted.", number)
			}
			return nil, noSuchTxn("Transaction with { txnNumber: %d } has been aborted.", number)
		case s.phase == txnCommitted:
			if c.Name == "commitTransaction" {
				// A retried commit answers as the commit did.
				r.sessTxn = s
				return func(bson.D, error) { release() }, nil
			}
			release()
			return nil, mongoerr.New(mongoerr.TransactionCommitted, "Transaction with { txnNumber: %d } has been committed.", number)
		}
	}
	if err := checkTxnStatement(r, c, start); err != nil {
		// A refused statement aborts the transaction, as any failed one.
		e.abortTxn(s, "a statement was refused")
		release()
		return nil, err
	}
	r.sessTxn = s
	r.txn = s.tx
	r.txnOnCommit = &s.onCommit
	return func(body bson.D, err error) {
		defer release()
		if s.phase != txnActive {
			return // committed or aborted by this command
		}
		failed := err != nil
		if !failed {
			if we, ok := bsonx.Get(body, "writeErrors"); ok {
				if a, ok := we.(bson.A); ok && len(a) > 0 {
					failed = true
				}
			}
		}
		if failed {
			e.abortTxn(s, "a statement failed")
			return
		}
		if id := cursorIDOf(body); id != 0 {
			s.cursors = append(s.cursors, id)
		}
	}, nil
}

// checkTxnStatement refuses what a transaction cannot run: commands
// outside mongod's allow-list, refused aggregation stages, a write concern
// on a statement, a read concern after the first statement.
func checkTxnStatement(r *Request, c *Command, start bool) error {
	if c.Name == "count" {
		return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run 'count' in a multi-document transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended alternative.")
	}
	if !txnAllowed[c.Name] {
		return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", r.Name)
	}
	// The namespaces a transaction cannot touch (mongod's
	// CommandHelpers::canUseTransactions).
	if c.Name != "commitTransaction" && c.Name != "abortTransaction" {
		coll := r.Target()
		switch {
		case r.DB == "local":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run command against the 'local' database in a transaction.")
		case coll == "system.profile" || coll == "system.views":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run command against the '%s.%s' collection in a transaction.", r.DB, coll)
		case r.DB == "config":
			return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run command against the config database in a transaction.")
		}
	}
	if c.Name == "aggregate" {
		if p, ok := bsonx.Get(r.Cmd, "pipeline"); ok {
			if stages, ok := p.(bson.A); ok {
				for _, s := range stages {
					if sd, ok := s.(bson.D); ok && len(sd) > 0 && txnRefusedStages[sd[0].Key] {
						return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "%s cannot be used in a transaction", sd[0].Key)
					}
				}
			}
		}
	}
	if c.Name != "commitTransaction" && c.Name != "abortTransaction" {
		if _, ok := bsonx.Get(r.Cmd, "writeConcern"); ok {
			return mongoerr.New(mongoerr.InvalidOptions, "Cannot set write concern after starting a transaction.")
		}
	}
	rc, hasRC := bsonx.Get(r.Cmd, "readConcern")
	if hasRC && !start {
		return mongoerr.New(mongoerr.InvalidOptions, "Only the first command in a transaction may specify a readConcern")
	}
	if hasRC {
		if err := checkTxnReadConcern(rc); err != nil {
			return err
		}
	}

	return nil
}

// checkTxnReadConcern accepts the read concerns a transaction may start
// with: local, majority, snapshot (and afterClusterTime).
func checkTxnReadConcern(v any) error {
	rc, err := parseReadConcern(v)
	if err != nil {
		return err
	}
	switch rc.level {
	case "", "local", "majority", "snapshot":
		return nil
	}
	return mongoerr.New(mongoerr.InvalidOptions, "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction")
}

// cursorIDOf returns the id of the cursor a reply opened (0 when none).
func cursorIDOf(body bson.D) int64 {
	cur, ok := bsonx.Get(body, "cursor")
	if !ok {
		return 0
	}
	d, ok := cur.(bson.D)
	if !ok {
		return 0
	}
	id, _ := bsonx.Get(d, "id")
	n, _ := id.(int64)
	return n
}

// abortTxn ends s's active transaction without committing. The caller
// holds s.mu.
func (e *Engine) abortTxn(s *sessionTxn, why string) {
	if s.phase != txnActive {
		return
	}
	_ = s.tx.Rollback()
	e.endTxn(s, txnAborted)
	s.abortedBy = why
	e.txns.aborted.Add(1)
	e.log.Debug("transaction aborted", zapTxn(s, why)...)
}

func (e *Engine) endTxn(s *sessionTxn, phase txnPhase) {
	for _, id := range s.cursors {
		e.cursors.kill(id)
	}
	s.phase, s.tx, s.onCommit, s.cursors = phase, nil, nil, nil
}

// commitTxn commits s's transaction. The caller holds s.mu.
func (e *Engine) commitTxn(r *Request, s *sessionTxn) error {
	if s.phase == txnCommitted {
		return nil
	}
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var err error
	if dt, ok := s.tx.(*docTxn); ok {
		err = dt.restamp(e.nowTS())
	}
	var changed func()
	if err == nil {
		// The transaction's events share its commit and carry its lsid
		// and txnNumber (changes.go).
		var lsid *bson.Binary
		if id, has, _ := lsidOf(r.Cmd); has {
			lsid = &id
		}
		changed, err = e.stageChanges(s.tx, lsid, s.number)
	}
	if err == nil {
		err = s.tx.Commit(ctx, r.SyncRequested())
	}
	if changed != nil {
		changed()
	}
	if err != nil {
		e.abortTxn(s, "commit failed: "+err.Error())
		if storage.IsConflict(err) {
			e.writeConflicts.Add(1)
			return errWriteConflictInTxn()
		}
		return err
	}
	for _, f := range s.onCommit {
		f()
	}
	e.endTxn(s, txnCommitted)
	e.txns.committed.Add(1)
	return nil
}

func init() {
	Register(
		&Command{Name: "commitTransaction", Help: "commit a multi-document transaction", AdminOnly: true, Write: true, Run: cmdCommitTransaction},
		&Command{Name: "abortTransaction", Help: "abort a multi-document transaction", AdminOnly: true, Write: true, Run: cmdAbortTransaction},
	)
}

func cmdCommitTransaction(e *Engine, r *Request) (bson.D, error) {
	s := r.sessTxn
	if s == nil {
		return nil, mongoerr.New(mongoerr.CommandFailed, "commitTransaction must be run within a transaction")
	}
	if err := e.commitTxn(r, s); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

func cmdAbortTransaction(e *Engine, r *Request) (bson.D, error) {
	s := r.sessTxn
	if s == nil {
		return nil, mongoerr.New(mongoerr.CommandFailed, "abortTransaction must be run within a transaction")
	}
	e.abortTxn(s, "abortTransaction")
	return bson.D{}, nil
}

// sweepTxns aborts transactions that outlived
// transactionLifetimeLimitSeconds and forgets idle sessions. Sessions in
// use by a command are left to the next sweep.
func (e *Engine) sweepTxns(now time.Time) (aborted int) {
	e.txns.mu.Lock()
	all := make(map[string]*sessionTxn, len(e.txns.m))
	for k, s := range e.txns.m {
		all[k] = s
	}
	e.txns.mu.Unlock()
	for k, s := range all {
		if !s.mu.TryLock() {
			continue
		}
		if s.phase == txnActive && now.After(s.expires) {
			e.log.Info("Aborting transaction because it has been running for longer than 'transactionLifetimeLimitSeconds'", zapTxn(s, "expired")...)
			e.abortTxn(s, "expired")
			aborted++
		}
		idle := s.phase != txnActive && now.Sub(s.lastUse) > 30*time.Minute
		s.mu.Unlock()
		if idle {
			e.txns.mu.Lock()
			if e.txns.m[k] == s {
				delete(e.txns.m, k)
			}
			e.txns.mu.Unlock()
		}
	}
	return aborted
}

// endSessionTxns aborts the transactions of sessions that end or are
// killed (every session's when all is true).
func (e *Engine) endSessionTxns(ids []bson.Binary, all bool) {
	if all {
		e.txns.mu.Lock()
		for k := range e.txns.m {
			ids = append(ids, bson.Binary{Subtype: 4, Data: []byte(k)})
		}
		e.txns.mu.Unlock()
	}
	for _, id := range ids {
		e.endSessionTxn(string(id.Data))
	}
}

func (e *Engine) endSessionTxn(lsid string) {
	e.txns.mu.Lock()
	s := e.txns.m[lsid]
	delete(e.txns.m, lsid)
	e.txns.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		e.abortTxn(s, "session ended")
		s.mu.Unlock()
	}
}

// txnStatus is serverStatus.transactions.
func (e *Engine) txnStatus() bson.D {
	e.txns.mu.Lock()
	open := 0
	for _, s := range e.txns.m {
		if s.phase == txnActive {
			open++
		}
	}
	e.txns.mu.Unlock()
	return bson.D{
		{Key: "currentActive", Value: int64(0)},
		{Key: "currentInactive", Value: int64(open)},
		{Key: "currentOpen", Value: int64(open)},
		{Key: "totalAborted", Value: e.txns.aborted.Load()},
		{Key: "totalCommitted", Value: e.txns.committed.Load()},
		{Key: "totalStarted", Value: e.txns.started.Load()},
	}
}

func zapTxn(s *sessionTxn, why string) []zap.Field {
	return []zap.Field{zap.Int64("txnNumber", s.number), zap.String("reason", why)}
}

// replSetMode reports whether mayfly answers as a replica set member
// (transactions need one, as in mongod).
func (e *Engine) replSetMode() bool { return e.repl != nil }

// cmdLsidString renders a command's lsid as mongod does in messages.
func cmdLsidString(cmd bson.D) string {
	id, _, _ := lsidOf(cmd)
	return lsidString(id)
}

func init() {
	RegisterStatusSection("transactions", func(e *Engine) any { return e.txnStatus() })
}
