package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
)

// Retryable writes and txnNumber, as mongod's command layer runs them
// (service_entry_point_common.cpp, write_ops_exec.cpp): a standalone
// refuses txnNumber; a replica-set member takes lsid + txnNumber on
// insert, update, delete and findAndModify, remembers for each session the
// result of every statement executed under its highest txnNumber, and
// answers a retry of that txnNumber for the statements already executed,
// running only the others. An older txnNumber is refused
// (TransactionTooOld). The results are persisted with the writes
// (kvRetryStore), so a retry after a lost reply is never applied twice,
// across a restart too. Multi-document transactions are transactions.go's.

// StmtResult is what a retry of an executed statement answers.
type StmtResult struct {
	// N and NModified are the statement's counts; Upserted the _id it
	// upserted (nil: none).
	N, NModified int64
	Upserted     any
	// Reply is a findAndModify's whole reply.
	Reply bson.D
}

// RetryStore keeps the executed statements of retryable writes. Callers
// hold the session checked out. The engine's store (kvRetryStore) keeps
// them durably: each statement's record is staged into the storage
// transaction of the write it records (Stage), as mongod writes
// config.transactions with the oplog entry, so a write and the memory of it
// commit together or not at all, across a crash too.
type RetryStore interface {
	// Begin starts (or continues) txnNumber on the session: an older one
	// than the session's highest is TransactionTooOld; a newer one forgets
	// the statements of the previous.
	Begin(s *Session, txnNumber int64) error
	// Lookup returns the result of a statement executed under txnNumber.
	Lookup(s *Session, txnNumber int64, stmtID int32) (StmtResult, bool)
	// Record remembers an executed statement (in memory: statements whose
	// write committed were made durable by Stage).
	Record(s *Session, txnNumber int64, stmtID int32, res StmtResult)
	// Stage writes into tx the records of statements executed by tx's
	// writes; a newer txnNumber's first records replace the session's
	// older ones in the same transaction. The returned function, run
	// once tx committed, remembers them in memory.
	Stage(tx storage.Txn, s *Session, txnNumber int64, recs []StmtRecord) (committed func(), err error)
}

// StmtRecord is one executed statement: its id and result.
type StmtRecord struct {
	StmtID int32
	Res    StmtResult
}

// retryState is a session's retryable-write state.
type retryState struct {
	txnNumber int64 // highest seen; valid when started
	started   bool
	stmts     map[int32]StmtResult
	// The durable store's view of the session's stored records: their
	// txnNumber, statements and the time of the last one (Unix ms).
	storedTxn   int64
	stored      []int32
	storedAt    int64
	storedValid bool
	// lastUse is when the durable store last began a write on the
	// session (Unix ms): state unused for the session timeout is
	// forgotten, as the session itself expires.
	lastUse int64
}

func (st *retryState) begin(s *Session, txn int64) error {
	switch {
	case st.started && txn < st.txnNumber:
		return mongoerr.New(mongoerr.TransactionTooOld, "Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			txn, lsidString(s.ID), st.txnNumber)
	case !st.started || txn > st.txnNumber:
		st.started, st.txnNumber, st.stmts = true, txn, map[int32]StmtResult{}
	}
	return nil
}

func (st *retryState) lookup(txn int64, id int32) (StmtResult, bool) {
	if !st.started || st.txnNumber != txn {
		return StmtResult{}, false
	}
	r, ok := st.stmts[id]
	return r, ok
}

func (st *retryState) record(txn int64, id int32, res StmtResult) {
	if st.started && st.txnNumber == txn {
		st.stmts[id] = res
	}
}

// memRetryStore is an in-memory RetryStore keeping the state on the
// Session (it is forgotten with the session and at a restart).
type memRetryStore struct{}

func (memRetryStore) Begin(s *Session, txn int64) error { return s.retry.begin(s, txn) }

func (memRetryStore) Lookup(s *Session, txn int64, id int32) (StmtResult, bool) {
	return s.retry.lookup(txn, id)
}

func (memRetryStore) Record(s *Session, txn int64, id int32, res StmtResult) {
	s.retry.record(txn, id, res)
}

func (memRetryStore) Stage(storage.Txn, *Session, int64, []StmtRecord) (func(), error) {
	return nil, nil
}

// kvRetryStore is the durable RetryStore. Records live in the
// docstore.PfxRetry key range (engine/docstore/keys.go):
//
//	0x14 <lsid.id:16> <txnNumber:8> <stmtId:4>  →  BSON {t, n, m[, u][, r]}
//
// t is the write's wall-clock time (Unix ms), n and m the statement's n and
// nModified, u the _id it upserted, r a findAndModify's whole reply. A
// session holds the records of one txnNumber at most: the first commit
// under a newer one deletes the older ones. Memory holds every stored
// record (loaded at Open), keyed by session id and independent of the
// session cache, so that a session dropped from the cache or a restart
// still answers its retries and refuses older txnNumbers; sweep drops the
// records of sessions that expired.
type kvRetryStore struct {
	kv      storage.KV
	now     func() time.Time
	timeout func() time.Duration // the session timeout
	mu      sync.Mutex
	m       map[[16]byte]*retryState
	// committedTxns are the sessions' committed multi-document
	// transactions read by load (their record's stmtId is txnCommitStmt).
	committedTxns map[[16]byte]int64
}

func newKVRetryStore(kv storage.KV, now func() time.Time, timeout func() time.Duration) *kvRetryStore {
	return &kvRetryStore{kv: kv, now: now, timeout: timeout, m: map[[16]byte]*retryState{}, committedTxns: map[[16]byte]int64{}}
}

// stateLocked returns the session's state, created empty. k.mu is held:
// it guards every retryState of the store (a session's commands are
// serialized by its checkout, but a transaction's commit records through
// another lock, and the sweep runs beside them).
func (k *kvRetryStore) stateLocked(id bson.Binary) *retryState {
	key := sessionKey(id)
	st := k.m[key]
	if st == nil {
		st = &retryState{}
		k.m[key] = st
	}
	return st
}

func (k *kvRetryStore) Begin(s *Session, txn int64) error {
	now := k.now().UnixMilli()
	timeout := k.timeout().Milliseconds()
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.stateLocked(s.ID)
	if st.started && now-st.lastUse >= timeout {
		// The session expired: its retryable writes are forgotten (the
		// stored records go with the next write or the sweep).
		st.started, st.stmts = false, nil
	}
	st.lastUse = now
	return st.begin(s, txn)
}

func (k *kvRetryStore) Lookup(s *Session, txn int64, id int32) (StmtResult, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stateLocked(s.ID).lookup(txn, id)
}

func (k *kvRetryStore) Record(s *Session, txn int64, id int32, res StmtResult) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stateLocked(s.ID).record(txn, id, res)
}

func (k *kvRetryStore) Stage(tx storage.Txn, s *Session, txn int64, recs []StmtRecord) (func(), error) {
	if len(recs) == 0 {
		return nil, nil
	}
	k.mu.Lock()
	st := k.stateLocked(s.ID)
	replace := st.storedValid && st.storedTxn != txn
	var old []int32
	var oldTxn int64
	if replace {
		old, oldTxn = append(old, st.stored...), st.storedTxn
	}
	k.mu.Unlock()
	for _, id := range old {
		if err := tx.Delete(retryKey(s.ID, oldTxn, id)); err != nil {
			return nil, err
		}
	}
	at := k.now().UnixMilli()
	for _, r := range recs {
		v, err := encodeStmtResult(r.Res, at)
		if err != nil {
			return nil, err
		}
		if err := tx.Set(retryKey(s.ID, txn, r.StmtID), v); err != nil {
			return nil, err
		}
	}
	return func() {
		k.mu.Lock()
		if !st.storedValid || st.storedTxn != txn {
			st.storedValid, st.storedTxn, st.stored = true, txn, nil
		}
		for _, r := range recs {
			st.stored = append(st.stored, r.StmtID)
		}
		st.storedAt, st.lastUse = at, max(st.lastUse, at)
		if !st.started || st.txnNumber < txn {
			// A committed transaction's number: older retryable writes
			// are too old.
			st.started, st.txnNumber, st.stmts = true, txn, map[int32]StmtResult{}
		}
		for _, r := range recs {
			if r.StmtID != txnCommitStmt {
				st.record(txn, r.StmtID, r.Res)
			}
		}
		k.mu.Unlock()
	}, nil
}

// txnCommitStmt is the statement id of the record that says a
// multi-document transaction committed under its txnNumber (statement ids
// of retryable writes are never negative).
const txnCommitStmt = math.MinInt32

// stageTxnCommit stages, into the storage transaction of the
// multi-document transaction that commitTransaction is about to commit,
// the record that it committed (as mongod's config.transactions entry
// with state committed), replacing the session's older records. The
// returned function runs once the commit succeeded. A transaction that
// wrote nothing stores nothing.
func (e *Engine) stageTxnCommit(r *Request) (func(), error) {
	k, ok := e.retry.(*kvRetryStore)
	dt, isDoc := r.txn.(*docTxn)
	if !ok || !isDoc || dt.Len() == 0 {
		return nil, nil
	}
	id, has, err := lsidOf(r.Cmd)
	if err != nil || !has {
		return nil, err
	}
	number := r.sessTxn.number
	done, err := k.Stage(dt, &Session{ID: id}, number, []StmtRecord{{StmtID: txnCommitStmt}})
	if err != nil || done == nil {
		return nil, err
	}
	return func() {
		if r.sessTxn.phase == txnCommitted {
			done()
		}
	}, nil
}

// load reads the stored records back (Open).
func (k *kvRetryStore) load() (int, error) {
	it, err := k.kv.NewIter([]byte{docstore.PfxRetry}, []byte{docstore.PfxRetry + 1})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()
		if len(key) != 1+16+8+4 {
			continue
		}
		id := bson.Binary{Subtype: 4, Data: append([]byte(nil), key[1:17]...)}
		txn := int64(binary.BigEndian.Uint64(key[17:25]))
		stmt := int32(binary.BigEndian.Uint32(key[25:29]) ^ (1 << 31))
		res, at, err := decodeStmtResult(it.Value())
		if err != nil {
			return n, fmt.Errorf("retryable-write record of session %x: %w", id.Data, err)
		}
		st := k.m[sessionKey(id)]
		if st == nil {
			st = &retryState{}
			k.m[sessionKey(id)] = st
		}
		if !st.started || txn > st.txnNumber {
			st.started, st.txnNumber, st.stmts = true, txn, map[int32]StmtResult{}
			st.storedValid, st.storedTxn, st.stored = true, txn, nil
		}
		if txn == st.txnNumber {
			if stmt == txnCommitStmt {
				k.committedTxns[sessionKey(id)] = txn
			} else {
				st.stmts[stmt] = res
			}
			st.stored = append(st.stored, stmt)
			st.storedAt = max(st.storedAt, at)
			st.lastUse = st.storedAt
		}
		n++
	}
	return n, it.Error()
}

// sweep deletes the records of sessions unused (lastUse) for longer than
// the session timeout and that are no longer live (mongod's
// transaction reaper drops config.transactions entries of expired
// sessions), bounding the table. It returns how many sessions it dropped.
func (k *kvRetryStore) sweep(timeout time.Duration, live func(id bson.Binary) bool) (int, error) {
	cutoff := k.now().Add(-timeout).UnixMilli()
	type victim struct {
		key   [16]byte
		txn   int64
		at    int64 // lastUse
		stmts []int32
	}
	var vs []victim
	k.mu.Lock()
	for key, st := range k.m {
		if st.lastUse < cutoff && !live(bson.Binary{Subtype: 4, Data: key[:]}) {
			vs = append(vs, victim{key: key, txn: st.storedTxn, at: st.lastUse, stmts: append([]int32(nil), st.stored...)})
		}
	}
	k.mu.Unlock()
	if len(vs) == 0 {
		return 0, nil
	}
	b := k.kv.NewBatch()
	defer b.Close()
	for _, v := range vs {
		id := bson.Binary{Subtype: 4, Data: v.key[:]}
		for _, s := range v.stmts {
			if err := b.Delete(retryKey(id, v.txn, s)); err != nil {
				return 0, err
			}
		}
	}
	if err := b.Commit(false); err != nil {
		return 0, err
	}
	n := 0
	k.mu.Lock()
	for _, v := range vs {
		// A session that wrote again meanwhile keeps its state (its
		// newer records were not in the batch).
		if st := k.m[v.key]; st != nil && st.lastUse == v.at {
			delete(k.m, v.key)
			n++
		}
	}
	k.mu.Unlock()
	return n, nil
}

// retryKey is a retryable-write record's key.
func retryKey(id bson.Binary, txn int64, stmt int32) []byte {
	k := make([]byte, 0, 1+16+8+4)
	k = append(k, docstore.PfxRetry)
	k = append(k, id.Data...)
	k = binary.BigEndian.AppendUint64(k, uint64(txn))
	return binary.BigEndian.AppendUint32(k, uint32(stmt)^(1<<31))
}

func encodeStmtResult(r StmtResult, at int64) ([]byte, error) {
	d := bson.D{{Key: "t", Value: at}, {Key: "n", Value: r.N}, {Key: "m", Value: r.NModified}}
	if r.Upserted != nil {
		d = append(d, bson.E{Key: "u", Value: r.Upserted})
	}
	if r.Reply != nil {
		d = append(d, bson.E{Key: "r", Value: r.Reply})
	}
	return bson.Marshal(d)
}

func decodeStmtResult(b []byte) (StmtResult, int64, error) {
	var d bson.D
	if err := bson.Unmarshal(b, &d); err != nil {
		return StmtResult{}, 0, err
	}
	var r StmtResult
	var at int64
	for _, f := range d {
		switch f.Key {
		case "t":
			at, _ = f.Value.(int64)
		case "n":
			r.N, _ = f.Value.(int64)
		case "m":
			r.NModified, _ = f.Value.(int64)
		case "u":
			r.Upserted = f.Value
		case "r":
			r.Reply, _ = f.Value.(bson.D)
		}
	}
	return r, at, nil
}

// retryWrite is a retryable write's statement context on the Request of
// the (sub-)command that executes it: the write path notes what each
// storage transaction did (retryNote*), and the commit (stageRetry) stages
// the statements' records into that transaction. Requests without a
// txnNumber carry none and pay a nil check.
type retryWrite struct {
	store     RetryStore
	session   *Session
	txnNumber int64
	cmd       string            // insert, update, delete or findAndModify
	stmtOf    func(i int) int32 // the stmtId of the sub-command's i-th statement

	// What the current storage transaction wrote (reset per attempt).
	inserted []int // insert: indexes of the documents written
	wrote    bool  // update, delete, findAndModify: the statement's document
	modified bool
	upserted any
	before   bson.D // with _ts
	after    bson.D
}

func (w *retryWrite) reset() {
	w.inserted, w.wrote, w.modified, w.upserted, w.before, w.after = w.inserted[:0], false, false, nil, nil, nil
}

// retryNoteInsert notes that the current transaction writes the i-th
// document of the request's insert.
func (r *Request) retryNoteInsert(i int) {
	if r != nil && r.retry != nil {
		r.retry.inserted = append(r.retry.inserted, i)
	}
}

// retryNoteWrite notes the current transaction's write of the statement's
// document (before and after images with their _ts; nil when none).
func (r *Request) retryNoteWrite(modified bool, upserted any, before bson.D, beforeTS int64, after bson.D, afterTS int64) {
	if r == nil || r.retry == nil {
		return
	}
	w := r.retry
	w.wrote, w.modified, w.upserted, w.before, w.after = true, modified, upserted, nil, nil
	if before != nil {
		w.before = withTS(before, beforeTS)
	}
	if after != nil {
		w.after = withTS(after, afterTS)
	}
}

// stageRetry stages into tx the records of the statements tx executes
// (runTxn and the upsert's commit call it just before committing). The
// returned function runs after the commit.
func (r *Request) stageRetry(tx storage.Txn) (func(), error) {
	w := r.retry
	var recs []StmtRecord
	switch w.cmd {
	case "insert":
		for _, i := range w.inserted {
			recs = append(recs, StmtRecord{StmtID: w.stmtOf(i), Res: StmtResult{N: 1}})
		}
	case "update":
		if w.wrote {
			res := StmtResult{N: 1, Upserted: w.upserted}
			if w.modified {
				res.NModified = 1
			}
			recs = append(recs, StmtRecord{StmtID: w.stmtOf(0), Res: res})
		}
	case "delete":
		if w.wrote {
			recs = append(recs, StmtRecord{StmtID: w.stmtOf(0), Res: StmtResult{N: 1}})
		}
	case "findAndModify":
		if w.wrote {
			reply, err := famRetryReply(r, w)
			if err != nil {
				return nil, err
			}
			recs = append(recs, StmtRecord{StmtID: w.stmtOf(0), Res: StmtResult{Reply: reply}})
		}
	}
	return w.store.Stage(tx, w.session, w.txnNumber, recs)
}

// famRetryReply is the reply cmdFindAndModify gives for the write w
// noted: lastErrorObject and the value, the document before or after
// (new) with the command's projection.
func famRetryReply(r *Request, w *retryWrite) (bson.D, error) {
	img := w.before
	if w.after != nil && (boolArg(r, "new") || w.before == nil) {
		img = w.after
	}
	if w.upserted != nil && !boolArg(r, "new") {
		img = nil
	}
	var v any
	if img != nil {
		fields, err := docArg(r, "fields")
		if err != nil {
			return nil, err
		}
		out := stripTS(img)
		if len(fields) > 0 {
			proj, err := query.CompileProjection(fields)
			if err != nil {
				return nil, err
			}
			if out, err = proj.Apply(img, nil); err != nil {
				return nil, err
			}
			if !proj.Includes("_ts") {
				out = stripTS(out)
			}
		}
		v = out
	}
	var leo bson.D
	switch {
	case boolArg(r, "remove"):
		leo = bson.D{{Key: "n", Value: int32(1)}}
	case w.upserted != nil:
		leo = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: false}, {Key: "upserted", Value: w.upserted}}
	default:
		leo = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: true}}
	}
	return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: v}}, nil
}

// lsidString renders a session id as mongod's LogicalSessionId in messages.
func lsidString(id bson.Binary) string {
	h := fmt.Sprintf("%x", id.Data)
	if len(h) == 32 {
		h = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	return fmt.Sprintf("%s - %X -  - ", h, noAuthDigest.Data)
}

// sessionFields are the operation-session fields the command layer
// consumes before a handler sees the command.
var sessionFields = map[string]bool{"txnNumber": true, "autocommit": true, "startTransaction": true, "stmtId": true, "stmtIds": true}

// retryableCommands are the commands a txnNumber makes retryable writes.
var retryableCommands = map[string]string{"insert": "documents", "update": "updates", "delete": "deletes", "findAndModify": ""}

// sessionCommand is what beginSessionCommand learned of a command.
type sessionCommand struct {
	session   *Session
	txnNumber int64
	stmtID    int32   // stmtId (0 when not given)
	stmtIDs   []int32 // stmtIds, when given
}

// beginSessionCommand reads a command's session fields (lsid, txnNumber,
// autocommit, startTransaction, stmtId, stmtIds) and $clusterTime, refuses
// what mongod refuses, and strips the fields the handlers do not take. It
// returns the retryable-write context, or nil.
func (e *Engine) beginSessionCommand(c *Command, r *Request) (*sessionCommand, error) {
	if e.repl != nil {
		if err := e.gossipClusterTime(r); err != nil {
			return nil, err
		}
	}
	tv, hasTxn := r.Arg("txnNumber")
	av, hasAuto := r.Arg("autocommit")
	_, hasStart := r.Arg("startTransaction")
	if !hasTxn && !hasAuto && !hasStart {
		return nil, nil
	}
	id, hasLsid, err := lsidOf(r.Cmd)
	if err != nil {
		return nil, err
	}
	var txn int64
	if hasTxn {
		n, ok := tv.(int64)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '%s', expected type 'long'", bsonx.TypeName(tv))
		}
		txn = n
		// initializeOperationSessionInfo's order.
		if !hasLsid {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Transaction number requires a session ID to also be specified")
		}
		if e.repl == nil {
			return nil, mongoerr.New(mongoerr.IllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
		}
		if txn < 0 {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Transaction number cannot be negative")
		}
	}
	if hasAuto {
		if b, ok := av.(bool); !ok || b {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Specifying autocommit=true is not allowed.")
		}
		if !hasTxn {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "'autocommit' field requires a transaction number to also be specified")
		}
		return nil, mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Multi-document transactions are not supported by mayfly yet: %s cannot run with autocommit: false", c.Name)
	}
	if hasStart {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "'startTransaction' field requires 'autocommit' field to also be specified")
	}
	field, retryable := retryableCommands[c.Name]
	if !retryable {
		return nil, mongoerr.New(50768, "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and %s is not a retryable write command.", c.Name)
	}
	sc := &sessionCommand{session: e.sessions.Touch(id), txnNumber: txn}
	if v, ok := r.Arg("stmtId"); ok {
		n, ok := v.(int32)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.stmtId' is the wrong type '%s', expected type 'int'", c.Name, bsonx.TypeName(v))
		}
		sc.stmtID = n
	}
	if v, ok := r.Arg("stmtIds"); ok && field != "" {
		a, ok := v.(bson.A)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.stmtIds' is the wrong type '%s', expected type 'array'", c.Name, bsonx.TypeName(v))
		}
		for _, x := range a {
			n, ok := x.(int32)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.stmtIds' is the wrong type '%s', expected type 'int'", c.Name, bsonx.TypeName(x))
			}
			sc.stmtIDs = append(sc.stmtIDs, n)
		}
	}
	return sc, nil
}

// stripSessionFields removes the fields beginSessionCommand consumed.
func stripSessionFields(r *Request) {
	found := false
	for _, f := range r.Cmd[1:] {
		found = found || sessionFields[f.Key]
	}
	if !found {
		return
	}
	out := make(bson.D, 0, len(r.Cmd))
	for i, f := range r.Cmd {
		if i > 0 && sessionFields[f.Key] {
			continue
		}
		out = append(out, f)
	}
	r.Cmd = out
}

// gossipClusterTime advances the operation clock to a client's
// $clusterTime, as a replica-set member does with every command. mongod
// takes unsigned cluster times only without authentication (with it, the
// signature must verify against its keys); mayfly has no keys, so with
// --auth it keeps its own clock.
func (e *Engine) gossipClusterTime(r *Request) error {
	v, ok := r.Arg("$clusterTime")
	if !ok || e.auth.enabled {
		return nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field '$clusterTime' is the wrong type '%s', expected type 'object'", bsonx.TypeName(v))
	}
	ct, ok := bsonx.Get(d, "clusterTime")
	if !ok {
		return mongoerr.New(mongoerr.NoSuchKey, "No such key 'clusterTime'")
	}
	ts, ok := ct.(bson.Timestamp)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "clusterTime is the wrong type '%s', expected type 'timestamp'", bsonx.TypeName(ct))
	}
	return e.opTime.Advance(ts)
}

// runCommand runs a command's handler, as a retryable write when the
// command is one, and times a successful write (replica-set mode).
func (e *Engine) runCommand(c *Command, r *Request, sc *sessionCommand) (bson.D, error) {
	var committed func()
	if c.Name == "commitTransaction" && r.sessTxn != nil && r.txn != nil {
		var err error
		if committed, err = e.stageTxnCommit(r); err != nil {
			return nil, err
		}
	}
	body, err := e.runCommandIn(c, r, sc)
	if err == nil && committed != nil {
		committed()
	}
	if err == nil && e.repl != nil {
		switch c.Name {
		case "insert", "update", "delete":
			// A replica-set member's write replies carry the write's
			// optime and the primary's electionId (WriteCommandReplyBase).
			ts := r.opTime
			if ts == (bson.Timestamp{}) {
				ts = e.opTime.Last()
			}
			body = append(body, bson.E{Key: "electionId", Value: e.repl.electionID}, bson.E{Key: "opTime", Value: opTimeDoc(ts)})
		}
	}
	return body, err
}

func (e *Engine) runCommandIn(c *Command, r *Request, sc *sessionCommand) (bson.D, error) {
	if sc == nil {
		body, err := c.Run(e, r)
		if err == nil && e.repl != nil && c.Write {
			r.opTime = e.opTime.Next()
		}
		return body, err
	}
	release := sc.session.CheckOut()
	defer release()
	store := e.retry
	if err := store.Begin(sc.session, sc.txnNumber); err != nil {
		return nil, err
	}
	if c.Name == "findAndModify" {
		return e.retryFindAndModify(c, r, sc, store)
	}
	return e.retryBatch(c, r, sc, store)
}

func (e *Engine) retryFindAndModify(c *Command, r *Request, sc *sessionCommand, store RetryStore) (bson.D, error) {
	if res, ok := store.Lookup(sc.session, sc.txnNumber, sc.stmtID); ok {
		body := append(bson.D{}, res.Reply...)
		return append(body, bson.E{Key: "retriedStmtId", Value: sc.stmtID}), nil
	}
	r.retry = &retryWrite{store: store, session: sc.session, txnNumber: sc.txnNumber, cmd: c.Name, stmtOf: func(int) int32 { return sc.stmtID }}
	body, err := c.Run(e, r)
	r.retry = nil
	if err != nil {
		return nil, err
	}
	r.opTime = e.opTime.Next()
	store.Record(sc.session, sc.txnNumber, sc.stmtID, StmtResult{Reply: body})
	return body, nil
}

// retryBatch runs an insert, update or delete as a retryable write:
// statements already executed under this txnNumber are answered from the
// store; the others run (inserts in batches, updates and deletes one
// statement at a time, so that each statement's counts are known) and are
// recorded. The reply is the one the whole batch would have given, with
// retriedStmtIds listing the statements answered from the store.
func (e *Engine) retryBatch(c *Command, r *Request, sc *sessionCommand, store RetryStore) (bson.D, error) {
	field := retryableCommands[c.Name]
	ops, ok := bsonx.Get(r.Cmd, field)
	arr, isArr := ops.(bson.A)
	if !ok || !isArr || len(arr) == 0 {
		return c.Run(e, r) // the handler reports the malformed command
	}
	if sc.stmtIDs != nil && len(sc.stmtIDs) != len(arr) {
		return nil, mongoerr.New(mongoerr.InvalidLength, "Number of statement ids must match the number of batch entries. Got %d statement ids but %d operations. Statement ids: %v. Write command: %s", len(sc.stmtIDs), len(arr), sc.stmtIDs, c.Name)
	}
	stmtID := func(i int) int32 {
		if sc.stmtIDs != nil {
			return sc.stmtIDs[i]
		}
		return sc.stmtID + int32(i)
	}
	ordered := orderedArg(r)
	var (
		n, nMod   int64
		upserted  []bson.D
		werrs     bson.A
		retried   bson.A
		wrote     bool
		stop      bool
		upsertKey = c.Name == "update"
	)
	// run executes statements [lo, hi) as one sub-command and records
	// them; it reports whether an ordered batch must stop.
	run := func(lo, hi int) error {
		sub := *r
		if lo != 0 || hi != len(arr) {
			// Part of the batch: the statements as a command of their own
			// (the whole batch keeps the client's encoding, Raw).
			sub.Cmd = make(bson.D, len(r.Cmd))
			copy(sub.Cmd, r.Cmd)
			for i := range sub.Cmd {
				if sub.Cmd[i].Key == field {
					sub.Cmd[i].Value = arr[lo:hi]
				}
			}
			sub.Raw = nil
		}
		sub.retry = &retryWrite{store: store, session: sc.session, txnNumber: sc.txnNumber, cmd: c.Name, stmtOf: func(i int) int32 { return stmtID(lo + i) }}
		body, err := c.Run(e, &sub)
		r.queries = sub.queries // for the slow-query log
		if err != nil {
			return err
		}
		wrote = true
		failed := map[int]bool{}
		firstErr := -1
		if we, ok := bsonx.Get(body, "writeErrors"); ok {
			for _, x := range we.(bson.A) {
				d := x.(bson.D)
				iv, _ := bsonx.Get(d, "index")
				idx, _ := bsonx.ToInt64(iv)
				failed[int(idx)] = true
				if firstErr < 0 || int(idx) < firstErr {
					firstErr = int(idx)
				}
				nd := make(bson.D, len(d))
				copy(nd, d)
				for k := range nd {
					if nd[k].Key == "index" {
						nd[k].Value = int32(lo + int(idx))
					}
				}
				werrs = append(werrs, nd)
			}
		}
		bn, _ := bsonx.Get(body, "n")
		bnn, _ := bsonx.ToInt64(bn)
		n += bnn
		bm, _ := bsonx.Get(body, "nModified")
		bmm, _ := bsonx.ToInt64(bm)
		nMod += bmm
		var ups any
		if uv, ok := bsonx.Get(body, "upserted"); ok {
			for _, x := range uv.(bson.A) {
				d := x.(bson.D)
				iv, _ := bsonx.Get(d, "index")
				idx, _ := bsonx.ToInt64(iv)
				id, _ := bsonx.Get(d, "_id")
				upserted = append(upserted, bson.D{{Key: "index", Value: int32(lo + int(idx))}, {Key: "_id", Value: id}})
				ups = id
			}
		}
		for i := lo; i < hi; i++ {
			k := i - lo
			if failed[k] || ordered && firstErr >= 0 && k > firstErr {
				continue
			}
			res := StmtResult{N: 1}
			if c.Name != "insert" { // one statement per sub-command
				res = StmtResult{N: bnn, NModified: bmm, Upserted: ups}
			}
			store.Record(sc.session, sc.txnNumber, stmtID(i), res)
		}
		stop = ordered && firstErr >= 0
		return nil
	}
	pending := -1 // start of the run of inserts not yet executed
	flush := func(hi int) error {
		if pending < 0 {
			return nil
		}
		lo := pending
		pending = -1
		return run(lo, hi)
	}
	for i := 0; i < len(arr) && !stop; i++ {
		if res, ok := store.Lookup(sc.session, sc.txnNumber, stmtID(i)); ok {
			if err := flush(i); err != nil {
				return nil, err
			}
			if stop {
				break
			}
			retried = append(retried, stmtID(i))
			n += res.N
			nMod += res.NModified
			if res.Upserted != nil {
				upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: res.Upserted}})
			}
			continue
		}
		if msg := notRetryable(c.Name, arr[i]); msg != "" {
			if err := flush(i); err != nil {
				return nil, err
			}
			if stop {
				break
			}
			werrs = append(werrs, mongoerr.New(mongoerr.InvalidOptions, "%s", msg).WriteError(i))
			stop = ordered
			continue
		}
		if c.Name == "insert" {
			if pending < 0 {
				pending = i
			}
			continue
		}
		if err := run(i, i+1); err != nil {
			return nil, err
		}
	}
	if !stop {
		if err := flush(len(arr)); err != nil {
			return nil, err
		}
	}
	if wrote {
		r.opTime = e.opTime.Next()
	}
	sort.SliceStable(werrs, func(i, j int) bool {
		a, _ := bsonx.Get(werrs[i].(bson.D), "index")
		b, _ := bsonx.Get(werrs[j].(bson.D), "index")
		return a.(int32) < b.(int32)
	})
	extra := bson.D{}
	if upsertKey {
		if len(upserted) > 0 {
			sort.SliceStable(upserted, func(i, j int) bool { return upserted[i][0].Value.(int32) < upserted[j][0].Value.(int32) })
			ua := make(bson.A, len(upserted))
			for i, u := range upserted {
				ua[i] = u
			}
			extra = append(extra, bson.E{Key: "upserted", Value: ua})
		}
		extra = append(extra, bson.E{Key: "nModified", Value: int32OrInt64(nMod)})
	}
	body := writeReply(n, extra, werrs)
	if len(retried) > 0 {
		body = append(body, bson.E{Key: "retriedStmtIds", Value: retried})
	}
	return body, nil
}

// notRetryable returns mongod's message for a statement a retryable write
// may not hold (a multi update, a limit-0 delete), or "".
func notRetryable(cmd string, stmt any) string {
	d, ok := stmt.(bson.D)
	if !ok {
		return ""
	}
	switch cmd {
	case "update":
		if v, ok := bsonx.Get(d, "multi"); ok && truthy(v) {
			return "Cannot use (or request) retryable writes with multi=true"
		}
	case "delete":
		if v, ok := bsonx.Get(d, "limit"); ok {
			if n, isNum := bsonx.ToInt64(v); isNum && n == 0 {
				return "Cannot use (or request) retryable writes with limit=0"
			}
		}
	}
	return ""
}
