package compat

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/server"
)

// Issue 13: logical sessions (both modes) and retryable writes (replica
// set).

// listed reports whether $listLocalSessions shows the session.
func (e *env) listed(id bson.Binary) bool {
	e.t.Helper()
	got, err := opsAgg(e, e.db.Name(), 1, bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}, bson.D{{Key: "$match", Value: bson.D{{Key: "_id.id", Value: id}}}}})
	noErr(e.t, err, "$listLocalSessions")
	return len(got) == 1
}

func (e *env) startSession() bson.Binary {
	e.t.Helper()
	r := e.admin(bson.D{{Key: "startSession", Value: 1}})
	valEq(e.t, r, "timeoutMinutes", int32(30))
	v := val(e.t, r, "id.id")
	st, data := v.Binary()
	if st != 4 || len(data) != 16 {
		e.t.Fatalf("startSession id: %s", r)
	}
	return bson.Binary{Subtype: 4, Data: data}
}

func sessIDs(ids ...bson.Binary) bson.A {
	a := bson.A{}
	for _, id := range ids {
		a = append(a, bson.D{{Key: "id", Value: id}})
	}
	return a
}

// TestIssue13SessionCommands: startSession, refreshSessions, endSessions
// and killSessions as mongod answers them, and lsid on any command.
func TestIssue13SessionCommands(t *testing.T) {
	// Sessions are watched through $listLocalSessions, which under --auth
	// needs listSessions on the cluster (mayfly's sessions record no user
	// yet, so "one's own sessions" cannot be told apart).
	needsAdmin(t, "listSessions ($listLocalSessions)")
	e := newEnv(t)
	a, b := e.startSession(), e.startSession()
	if !e.listed(a) || !e.listed(b) {
		t.Fatal("started sessions are not listed")
	}
	e.admin(bson.D{{Key: "refreshSessions", Value: sessIDs(a, b)}})
	e.admin(bson.D{{Key: "killSessions", Value: sessIDs(a)}})
	if e.listed(a) || !e.listed(b) {
		t.Fatalf("after killSessions of a: a listed %v, b listed %v", e.listed(a), e.listed(b))
	}
	e.admin(bson.D{{Key: "endSessions", Value: sessIDs(b)}})
	// Any command may name a session: it is created and refreshed.
	sess, err := e.cli.StartSession()
	noErr(t, err, "driver session")
	defer sess.EndSession(e.ctx)
	err = mongo.WithSession(e.ctx, sess, func(ctx context.Context) error {
		return e.db.RunCommand(ctx, bson.D{{Key: "count", Value: "none"}}).Err()
	})
	noErr(t, err, "count in a session")
	st, data := sess.ID().Lookup("id").Binary()
	if !e.listed(bson.Binary{Subtype: st, Data: data}) {
		t.Fatal("a session named by lsid is not listed")
	}
	err = e.run2("admin", bson.D{{Key: "killSessions", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}})
	wantCode(t, err, 40414, "Location40414")
	err = e.run2("admin", bson.D{{Key: "endSessions", Value: 1}})
	wantCode(t, err, 14, "TypeMismatch")
}

// TestIssue13KillAllSessions: killAllSessions [] and killAllSessionsByPattern
// [] drop every session (a private server: they would drop the other
// tests' sessions too).
func TestIssue13KillAllSessions(t *testing.T) {
	e := newParamEnv(t)
	a := e.startSession()
	e.admin(bson.D{{Key: "killAllSessions", Value: bson.A{}}})
	if e.listed(a) {
		t.Fatal("killAllSessions [] left a session")
	}
	b := e.startSession()
	e.admin(bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{}}})
	if e.listed(b) {
		t.Fatal("killAllSessionsByPattern [] left a session")
	}
	p, q := e.startSession(), e.startSession()
	e.admin(bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "lsid", Value: bson.D{{Key: "id", Value: p}, {Key: "uid", Value: bson.Binary{Data: make([]byte, 32)}}}}}}}})
	if e.listed(p) || !e.listed(q) {
		t.Fatalf("killAllSessionsByPattern {lsid: p}: p listed %v, q listed %v", e.listed(p), e.listed(q))
	}
	c := e.startSession()
	e.admin(bson.D{{Key: "killAllSessions", Value: bson.A{bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "admin"}}}}})
	if !e.listed(c) {
		t.Fatal("killAllSessions of user bob killed an unauthenticated session")
	}
	err := e.run2("admin", bson.D{{Key: "killAllSessions", Value: bson.A{bson.D{{Key: "user", Value: "bob"}}}}})
	wantCode(t, err, 40414, "Location40414")
}

// TestIssue13SessionExpiry: a session unused for
// localLogicalSessionTimeoutMinutes (default 30, a startup parameter)
// expires; the server's clock decides.
func TestIssue13SessionExpiry(t *testing.T) {
	e := newParamEnv(t)
	a := e.startSession()
	e.advance(29 * time.Minute)
	e.admin(bson.D{{Key: "refreshSessions", Value: sessIDs(a)}})
	e.advance(29 * time.Minute)
	if !e.listed(a) {
		t.Fatal("a session refreshed 29 minutes ago expired")
	}
	e.advance(2 * time.Minute)
	if e.listed(a) {
		t.Fatal("a session unused for 31 minutes is still listed")
	}
}

// TestIssue13SessionExpiryForgetsRetryableWrites: with
// localLogicalSessionTimeoutMinutes 5 set at startup, a session (and the
// memory of its retryable writes) expires after 5 minutes unused.
func TestIssue13SessionExpiryForgetsRetryableWrites(t *testing.T) {
	r := newReplEnv(t, func(c *server.Config) {
		c.Setup = func(eng *engine.Engine) error {
			return eng.SetParameterAtStartup("localLogicalSessionTimeoutMinutes", "5")
		}
	})
	valEq(t, r.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: "localLogicalSessionTimeoutMinutes", Value: 1}}), "localLogicalSessionTimeoutMinutes", int32(5))
	sr := r.admin(bson.D{{Key: "startSession", Value: 1}})
	valEq(t, sr, "timeoutMinutes", int32(5))
	// A retryable write's memory goes with its session: once expired, the
	// same txnNumber is a new write.
	sess := newRawSession(r)
	ins := bson.D{{Key: "insert", Value: "exp"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}}
	sess.run(ins, 1)
	rep := sess.run(ins, 1)
	if !has(rep, "retriedStmtIds") || r.count("exp", nil) != 1 {
		t.Fatalf("a retry within the timeout was executed again: %s", rep)
	}
	r.advance(6 * time.Minute)
	rep = sess.run(ins, 1)
	if has(rep, "retriedStmtIds") || r.count("exp", nil) != 2 {
		t.Fatalf("after the session expired the write must run again: %s, %d documents", rep, r.count("exp", nil))
	}
	err := r.run2("admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "localLogicalSessionTimeoutMinutes", Value: 10}})
	wantCode(t, err, 20, "IllegalOperation")
}

// rawSession sends commands with a driver session's lsid and an explicit
// txnNumber, as a driver's retry does.
type rawSession struct {
	e    *env
	sess *mongo.Session
}

func newRawSession(e *env) *rawSession {
	e.t.Helper()
	s, err := e.cli.StartSession()
	noErr(e.t, err, "startSession")
	e.t.Cleanup(func() { s.EndSession(context.Background()) })
	return &rawSession{e: e, sess: s}
}

func (s *rawSession) runErr(cmd bson.D, txn int64) (bson.Raw, error) {
	var raw bson.Raw
	err := mongo.WithSession(s.e.ctx, s.sess, func(ctx context.Context) error {
		var err error
		raw, err = s.e.db.RunCommand(ctx, append(append(bson.D{}, cmd...), bson.E{Key: "txnNumber", Value: txn})).Raw()
		return err
	})
	return raw, err
}

func (s *rawSession) run(cmd bson.D, txn int64) bson.Raw {
	s.e.t.Helper()
	raw, err := s.runErr(cmd, txn)
	noErr(s.e.t, err, "command "+ejson(cmd))
	return raw
}

// TestIssue13RetryableWritesDeduplicated: the same insert, update, delete
// or findAndModify sent twice with one lsid and txnNumber is applied once;
// the retry answers the first result, naming the retried statements.
func TestIssue13RetryableWritesDeduplicated(t *testing.T) {
	e := newReplEnv(t)
	s := newRawSession(e)
	ins := bson.D{{Key: "insert", Value: "rw"}, {Key: "documents", Value: bson.A{bson.D{{Key: "k", Value: "a"}, {Key: "n", Value: 0}}, bson.D{{Key: "k", Value: "b"}, {Key: "n", Value: 0}}}}}
	first := s.run(ins, 1)
	valEq(t, first, "n", int32(2))
	if has(first, "retriedStmtIds") {
		t.Fatalf("a first execution names retried statements: %s", first)
	}
	again := s.run(ins, 1)
	valEq(t, again, "n", int32(2))
	valEq(t, again, "retriedStmtIds", bson.A{int32(0), int32(1)})
	eq(t, "documents after the retried insert", e.count("rw", nil), int64(2))

	upd := bson.D{{Key: "update", Value: "rw"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "a"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "z"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}},
	}}}
	first = s.run(upd, 2)
	again = s.run(upd, 2)
	for _, r := range []bson.Raw{first, again} {
		valEq(t, r, "n", int32(2))
		valEq(t, r, "nModified", int32(1))
		valEq(t, r, "upserted.0.index", int32(1))
	}
	if first.Lookup("upserted", "0", "_id").String() != again.Lookup("upserted", "0", "_id").String() {
		t.Errorf("the retry names another upserted _id: %s vs %s", first, again)
	}
	valEq(t, again, "retriedStmtIds", bson.A{int32(0), int32(1)})
	docsEq(t, e.find("rw", bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{"a", "z"}}}}}),
		bson.D{{Key: "_id", Value: val(t, e.find("rw", bson.D{{Key: "k", Value: "a"}})[0], "_id")}, {Key: "k", Value: "a"}, {Key: "n", Value: 1}},
		bson.D{{Key: "_id", Value: val(t, again, "upserted.0._id")}, {Key: "k", Value: "z"}, {Key: "n", Value: 1}})

	fam := bson.D{{Key: "findAndModify", Value: "rw"}, {Key: "query", Value: bson.D{{Key: "k", Value: "b"}}}, {Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 5}}}}}, {Key: "new", Value: true}, {Key: "fields", Value: bson.D{{Key: "_id", Value: 0}}}}
	first = s.run(fam, 3)
	again = s.run(fam, 3)
	docEq(t, first.Lookup("value").Document(), bson.D{{Key: "k", Value: "b"}, {Key: "n", Value: 5}})
	docEq(t, again.Lookup("value").Document(), bson.D{{Key: "k", Value: "b"}, {Key: "n", Value: 5}})
	valEq(t, again, "retriedStmtId", int32(0))
	eq(t, "n of b after the retried findAndModify", num(t, e.find("rw", bson.D{{Key: "k", Value: "b"}})[0], "n"), 5.0)

	del := bson.D{{Key: "delete", Value: "rw"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 1}}}}}
	first = s.run(del, 4)
	again = s.run(del, 4)
	valEq(t, first, "n", int32(1))
	valEq(t, again, "n", int32(1))
	valEq(t, again, "retriedStmtIds", bson.A{int32(0)})
	eq(t, "documents after the retried delete", e.count("rw", nil), int64(2))

	// A retry that adds statements: the executed one is answered, the new
	// one runs.
	one := bson.D{{Key: "insert", Value: "part"}, {Key: "documents", Value: bson.A{bson.D{{Key: "i", Value: 0}}}}}
	two := bson.D{{Key: "insert", Value: "part"}, {Key: "documents", Value: bson.A{bson.D{{Key: "i", Value: 0}}, bson.D{{Key: "i", Value: 1}}}}}
	s.run(one, 5)
	r := s.run(two, 5)
	valEq(t, r, "n", int32(2))
	valEq(t, r, "retriedStmtIds", bson.A{int32(0)})
	eq(t, "documents of the partial retry", e.count("part", nil), int64(2))

	// A new txnNumber is a new write.
	r = s.run(one, 6)
	if has(r, "retriedStmtIds") || e.count("part", nil) != 3 {
		t.Fatalf("a new txnNumber was answered from memory: %s", r)
	}
	// Statement errors are not remembered: the retry runs them again.
	dup := bson.D{{Key: "insert", Value: "dup"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}}, {Key: "ordered", Value: false}}
	r, _ = s.runErr(dup, 7)
	valEq(t, r, "n", int32(2))
	valEq(t, r, "writeErrors.0.index", int32(1))
	r, _ = s.runErr(dup, 7)
	valEq(t, r, "n", int32(2))
	valEq(t, r, "writeErrors.0.index", int32(1))
	valEq(t, r, "writeErrors.0.code", int32(11000))
	valEq(t, r, "retriedStmtIds", bson.A{int32(0), int32(2)})
}

// TestIssue13RetryableWritesRefusals: an older txnNumber is
// TransactionTooOld; txnNumber on a command that is no retryable write,
// multi updates, and transactions (autocommit: false) are refused.
func TestIssue13RetryableWritesRefusals(t *testing.T) {
	e := newReplEnv(t)
	s := newRawSession(e)
	ins := bson.D{{Key: "insert", Value: "old"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}}
	s.run(ins, 10)
	_, err := s.runErr(ins, 9)
	wantCode(t, err, 225, "TransactionTooOld")
	eq(t, "documents", e.count("old", nil), int64(1))

	_, err = s.runErr(bson.D{{Key: "find", Value: "old"}}, 11)
	wantCode(t, err, 50768, "Location50768")

	r, err := s.runErr(bson.D{{Key: "update", Value: "old"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}}, {Key: "multi", Value: true}}}}}, 12)
	if err != nil && r == nil {
		t.Fatalf("multi update: %v", err)
	}
	valEq(t, r, "writeErrors.0.code", int32(72))

	// autocommit: false starts a multi-document transaction (transactions.go).
	_, err = s.runErr(append(ins, bson.E{Key: "autocommit", Value: false}, bson.E{Key: "startTransaction", Value: true}), 13)
	noErr(t, err, "start a transaction")
	_, err = s.runErr(bson.D{{Key: "insert", Value: "old"}, {Key: "documents", Value: bson.A{bson.D{}}}}, int64(-1))
	wantCode(t, err, 72, "InvalidOptions")
	eq(t, "negative txnNumber", errMsg(err), "Transaction number cannot be negative")
	err = e.runErr(bson.D{{Key: "insert", Value: "old"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "txnNumber", Value: int32(1)}})
	wantCode(t, err, 14, "TypeMismatch")
}

// TestIssue13KillSessionsClosesCursors: killSessions closes the cursors
// the session opened; other sessions' cursors stay.
func TestIssue13KillSessionsClosesCursors(t *testing.T) {
	e := newEnv(t)
	docs := []any{}
	for i := 0; i < 10; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	e.insert("cur", docs...)
	open := func() (*mongo.Session, int64) {
		s, err := e.cli.StartSession()
		noErr(t, err, "startSession")
		var id int64
		err = mongo.WithSession(e.ctx, s, func(ctx context.Context) error {
			raw, err := e.db.RunCommand(ctx, bson.D{{Key: "find", Value: "cur"}, {Key: "batchSize", Value: 2}}).Raw()
			if err == nil {
				id = raw.Lookup("cursor", "id").Int64()
			}
			return err
		})
		noErr(t, err, "find in a session")
		return s, id
	}
	a, ca := open()
	defer a.EndSession(e.ctx)
	b, cb := open()
	defer b.EndSession(e.ctx)
	e.admin(bson.D{{Key: "killSessions", Value: bson.A{a.ID()}}})
	getMore := func(s *mongo.Session, id int64) error {
		return mongo.WithSession(e.ctx, s, func(ctx context.Context) error {
			return e.db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "cur"}, {Key: "batchSize", Value: 2}}).Err()
		})
	}
	wantCode(t, getMore(a, ca), 43, "CursorNotFound")
	noErr(t, getMore(b, cb), "getMore of another session's cursor")
}
