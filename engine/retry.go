package engine

import (
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Retryable writes and txnNumber, as mongod's command layer runs them
// (service_entry_point_common.cpp, write_ops_exec.cpp): a standalone
// refuses txnNumber; a replica-set member takes lsid + txnNumber on
// insert, update, delete and findAndModify, remembers for each session the
// result of every statement executed under its highest txnNumber, and
// answers a retry of that txnNumber from memory for the statements already
// executed, running only the others. An older txnNumber is refused
// (TransactionTooOld). Multi-document transactions (autocommit: false) are
// not implemented yet and are refused.

// StmtResult is what a retry of an executed statement answers.
type StmtResult struct {
	// N and NModified are the statement's counts; Upserted the _id it
	// upserted (nil: none).
	N, NModified int64
	Upserted     any
	// Reply is a findAndModify's whole reply.
	Reply bson.D
}

// RetryStore keeps the executed statements of retryable writes. The
// in-memory store keeps them on the Session; a persistent one will write
// them in the same storage transaction as the write, as mongod writes
// config.transactions with the oplog entry. Callers hold the session
// checked out.
type RetryStore interface {
	// Begin starts (or continues) txnNumber on the session: an older one
	// than the session's highest is TransactionTooOld; a newer one forgets
	// the statements of the previous.
	Begin(s *Session, txnNumber int64) error
	// Lookup returns the result of a statement executed under txnNumber.
	Lookup(s *Session, txnNumber int64, stmtID int32) (StmtResult, bool)
	// Record remembers an executed statement.
	Record(s *Session, txnNumber int64, stmtID int32, res StmtResult)
}

// retryState is a session's retryable-write state for the in-memory store.
type retryState struct {
	txnNumber int64 // highest seen; valid when started
	started   bool
	stmts     map[int32]StmtResult
}

// memRetryStore is the in-memory RetryStore.
type memRetryStore struct{}

func (memRetryStore) Begin(s *Session, txn int64) error {
	st := &s.retry
	switch {
	case st.started && txn < st.txnNumber:
		return mongoerr.New(mongoerr.TransactionTooOld, "Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			txn, lsidString(s.ID), st.txnNumber)
	case !st.started || txn > st.txnNumber:
		st.started, st.txnNumber, st.stmts = true, txn, map[int32]StmtResult{}
	}
	return nil
}

func (memRetryStore) Lookup(s *Session, txn int64, id int32) (StmtResult, bool) {
	if !s.retry.started || s.retry.txnNumber != txn {
		return StmtResult{}, false
	}
	r, ok := s.retry.stmts[id]
	return r, ok
}

func (memRetryStore) Record(s *Session, txn int64, id int32, res StmtResult) {
	if s.retry.started && s.retry.txnNumber == txn {
		s.retry.stmts[id] = res
	}
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
	body, err := e.runCommandIn(c, r, sc)
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
	body, err := c.Run(e, r)
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
