package compat

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Issue 12 items 15 and 16: operations and sessions stages and commands
// as a standalone mongod 7.0 has them.

// $changeStream on a standalone: mongod refuses it while parsing the stage
// (DocumentSourceChangeStream::assertIsLegalSpecification) with 40573 —
// collection, database and cluster streams alike, wherever the stage is.
func TestIssue12OpsChangeStreamStandalone(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	const msg = "The $changeStream stage is only supported on replica sets"
	check := func(what string, err error) {
		t.Helper()
		wantCode(t, err, 40573, "Location40573")
		if errMsg(err) != msg {
			t.Fatalf("%s: errmsg %q, want %q", what, errMsg(err), msg)
		}
	}
	_, err := e.coll("c").Watch(e.ctx, bson.A{})
	check("collection.watch", err)
	_, err = e.db.Watch(e.ctx, bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}})
	check("db.watch", err)
	_, err = e.cli.Watch(e.ctx, bson.A{})
	check("client.watch", err)
	agg := func(coll any, p bson.A) error {
		return e.runErr(bson.D{{Key: "aggregate", Value: coll}, {Key: "pipeline", Value: p}, {Key: "cursor", Value: bson.D{}}})
	}
	check("aggregate with options", agg("c", bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "fullDocument", Value: "updateLookup"}, {Key: "showExpandedEvents", Value: true}}}}}))
	check("not the first stage", agg("c", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$changeStream", Value: bson.D{}}}}))
	check("a missing collection", agg("nope", bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}))
	check("inside $lookup", agg("c", bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "as", Value: "x"}}}}}))

	err = agg("c", bson.A{bson.D{{Key: "$changeStream", Value: 5}}})
	wantCode(t, err, 6188500, "Location6188500")
	if !strings.Contains(errMsg(err), "$changeStream must take a nested object but found: $changeStream: 5") {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	err = agg("c", bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "bogus", Value: 1}}}}})
	wantCode(t, err, 40415, "Location40415")
}

// opsAgg runs an aggregate command and returns its first batch.
func opsAgg(e *env, db string, coll any, pipeline bson.A, extra ...bson.E) ([]bson.Raw, error) {
	cmd := bson.D{{Key: "aggregate", Value: coll}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}}
	raw, err := e.cli.Database(db).RunCommand(e.ctx, append(cmd, extra...)).Raw()
	if err != nil {
		return nil, err
	}
	vals, err := raw.Lookup("cursor", "firstBatch").Array().Values()
	if err != nil {
		return nil, err
	}
	out := make([]bson.Raw, len(vals))
	for i, v := range vals {
		out[i] = v.Document()
	}
	return out, nil
}

// $currentOp on admin with {aggregate: 1} reports the running operations
// (its own included) in mongod's shape; the currentOp command wraps it as
// {inprog: [...]} with its filter; idle connections appear on request.
func TestIssue12OpsCurrentOp(t *testing.T) {
	needsAdmin(t, "$currentOp (inprog, clusterMonitor)")
	e := newEnv(t)
	self := bson.E{Key: "comment", Value: "issue12-self"}
	got, err := opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: bson.D{}}},
		bson.D{{Key: "$match", Value: bson.D{{Key: "command.comment", Value: "issue12-self"}}}}}, self)
	noErr(t, err, "$currentOp")
	if len(got) != 1 {
		t.Fatalf("$currentOp: want exactly its own operation, got %v", got)
	}
	op := got[0]
	valEq(t, op, "type", "op")
	valEq(t, op, "active", true)
	valEq(t, op, "op", "command")
	valEq(t, op, "ns", "admin.$cmd.aggregate")
	valEq(t, op, "command.aggregate", int32(1))
	valEq(t, op, "command.$db", "admin")
	valEq(t, op, "waitingForLock", false)
	valEq(t, op, "numYields", int32(0))
	for path, typ := range map[string]bson.Type{"opid": bson.TypeInt32, "secs_running": bson.TypeInt64, "microsecs_running": bson.TypeInt64,
		"connectionId": bson.TypeInt32, "client": bson.TypeString, "desc": bson.TypeString, "host": bson.TypeString,
		"currentOpTime": bson.TypeString, "lsid.id": bson.TypeBinary, "lsid.uid": bson.TypeBinary, "clientMetadata": bson.TypeEmbeddedDocument} {
		if v := val(t, op, path); v.Type != typ {
			t.Fatalf("%s is %s, want %s: %s", path, v.Type, typ, op)
		}
	}
	if desc := val(t, op, "desc").StringValue(); desc != fmt.Sprintf("conn%d", val(t, op, "connectionId").AsInt64()) {
		t.Fatalf("desc %q for connectionId %s", desc, val(t, op, "connectionId"))
	}
	if !strings.Contains(val(t, op, "client").StringValue(), "127.0.0.1:") && externalURI == "" {
		t.Fatalf("client: %s", op)
	}

	// The currentOp command: its fields other than $all/$ownOps filter.
	raw := e.admin(bson.D{{Key: "currentOp", Value: 1}, {Key: "active", Value: true}, {Key: "command.currentOp", Value: 1}})
	inprog := val(t, raw, "inprog").Array()
	vals, _ := inprog.Values()
	if len(vals) != 1 {
		t.Fatalf("currentOp {active: true, command.currentOp: 1}: want its own op, got %s", raw)
	}
	valEq(t, vals[0].Document(), "ns", "admin.$cmd")
	raw = e.admin(bson.D{{Key: "currentOp", Value: true}, {Key: "op", Value: "no-such-op"}})
	valEq(t, raw, "inprog", bson.A{})
	wantCode(t, e.runErr(bson.D{{Key: "currentOp", Value: 1}}), 13, "Unauthorized")

	// An idle connection (with its appName) is listed only with
	// idleConnections / $all, and leaves the list when it closes.
	uri := externalURI
	if uri == "" {
		uri = e.tg.srv.URI()
	}
	idle, err := mongo.Connect(options.Client().ApplyURI(uri).SetAppName("issue12-idle").SetMaxPoolSize(1))
	noErr(t, err, "second client")
	hello, err := idle.Database("admin").RunCommand(e.ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	noErr(t, err, "hello on the second client")
	idleID := val(t, hello, "connectionId").AsInt64()
	byApp := bson.D{{Key: "$match", Value: bson.D{{Key: "appName", Value: "issue12-idle"}, {Key: "connectionId", Value: idleID}}}}
	got, err = opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: bson.D{{Key: "idleConnections", Value: true}}}}, byApp})
	noErr(t, err, "$currentOp idleConnections")
	if len(got) != 1 {
		t.Fatalf("idle connection %d not listed: %v", idleID, got)
	}
	valEq(t, got[0], "active", false)
	valEq(t, got[0], "clientMetadata.application.name", "issue12-idle")
	if has(got[0], "opid") || has(got[0], "command") {
		t.Fatalf("an idle connection has no operation: %s", got[0])
	}
	got, err = opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: bson.D{}}}, byApp})
	noErr(t, err, "$currentOp")
	eq(t, "idle connections without idleConnections", len(got), 0)
	raw = e.admin(bson.D{{Key: "currentOp", Value: 1}, {Key: "$all", Value: true}, {Key: "appName", Value: "issue12-idle"}, {Key: "connectionId", Value: idleID}})
	vals, _ = val(t, raw, "inprog").Array().Values()
	eq(t, "currentOp $all: idle connections", len(vals), 1)
	noErr(t, idle.Disconnect(e.ctx), "disconnect")
	waitFor(t, 10*time.Second, "the closed connection to leave $currentOp", func() bool {
		got, err := opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: bson.D{{Key: "idleConnections", Value: true}}}}, byApp})
		return err == nil && len(got) == 0
	})

	// Parse errors, as mongod's lite parse and createFromBson give them.
	cur := func(spec any) bson.A { return bson.A{bson.D{{Key: "$currentOp", Value: spec}}} }
	_, err = opsAgg(e, "admin", 1, cur(1))
	wantCode(t, err, 14, "TypeMismatch")
	_, err = opsAgg(e, "admin", 1, cur(bson.D{{Key: "allUsers", Value: 1}}))
	wantCode(t, err, 14, "TypeMismatch")
	_, err = opsAgg(e, "admin", 1, cur(bson.D{{Key: "idleConnections", Value: 1}}))
	wantCode(t, err, 9, "FailedToParse")
	_, err = opsAgg(e, "admin", 1, cur(bson.D{{Key: "bogus", Value: true}}))
	wantCode(t, err, 9, "FailedToParse")
	if !strings.Contains(errMsg(err), "Unrecognized option 'bogus' in $currentOp stage.") {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	_, err = opsAgg(e, e.db.Name(), 1, cur(bson.D{}))
	wantCode(t, err, 73, "InvalidNamespace")
	if errMsg(err) != "$currentOp must be run against the 'admin' database with {aggregate: 1}" {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	_, err = opsAgg(e, "admin", "c", cur(bson.D{}))
	wantCode(t, err, 73, "InvalidNamespace")
	_, err = opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$currentOp", Value: bson.D{}}}})
	wantCode(t, err, 40602, "Location40602")
}

// killOp interrupts a running operation, found through $currentOp: it
// fails with 11601 Interrupted.
func TestIssue12OpsKillOp(t *testing.T) {
	needsAdmin(t, "$currentOp and killOp of any user's operation (inprog, killop: clusterMonitor/clusterManager)")
	e := newEnv(t)
	var docs []any
	for i := 0; i < 3000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}})
	}
	_, err := e.coll("c").InsertMany(e.ctx, docs)
	noErr(t, err, "insert")
	// 3000 × 3000 joined documents: seconds of work, killed long before.
	slow := bson.A{
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gte", Value: bson.A{"$x", 0}}}}}}}}}, {Key: "as", Value: "all"}}}},
		bson.D{{Key: "$count", Value: "n"}},
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.coll("c").Aggregate(e.ctx, slow, options.Aggregate().SetComment("issue12-killme"))
		done <- err
	}()
	var opid bson.RawValue
	waitFor(t, 20*time.Second, "the slow aggregate in $currentOp", func() bool {
		got, err := opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: bson.D{}}},
			bson.D{{Key: "$match", Value: bson.D{{Key: "command.comment", Value: "issue12-killme"}}}}})
		if err != nil || len(got) != 1 {
			return false
		}
		valEq(t, got[0], "ns", e.db.Name()+".c")
		valEq(t, got[0], "op", "command")
		opid = val(t, got[0], "opid")
		return true
	})
	raw := e.admin(bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
	valEq(t, raw, "info", "attempting to kill op")
	select {
	case err := <-done:
		wantCode(t, err, 11601, "Interrupted")
		if errMsg(err) != "operation was interrupted" {
			t.Fatalf("errmsg %q", errMsg(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the killed aggregate did not stop")
	}
	// An unknown opid is not an error; a missing or non-numeric op is.
	e.admin(bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: 123456789}})
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "killOp", Value: 1}}).Err()
	wantCode(t, err, 4, "NoSuchKey")
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: "x"}}).Err()
	wantCode(t, err, 14, "TypeMismatch")
	if errMsg(err) != `Expected field "op" to have numeric type, but found string` {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: 1.5}}).Err()
	wantCode(t, err, 2, "BadValue")
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: int64(1) << 33}}).Err()
	wantCode(t, err, 26823, "Location26823")
	wantCode(t, e.runErr(bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: 1}}), 13, "Unauthorized")
}

// $listLocalSessions lists the sessions this server has seen ({_id: {id,
// uid}, lastUse}); without authentication every session belongs to the
// user ("", "").
func TestIssue12OpsListLocalSessions(t *testing.T) {
	needsNoAuth(t, "sessions of the unauthenticated user (uid of \"\"); allUsers and other users' sessions need clusterMonitor's listSessions")
	e := newEnv(t)
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	defer sess.EndSession(e.ctx)
	err = mongo.WithSession(e.ctx, sess, func(ctx context.Context) error {
		return e.db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	})
	noErr(t, err, "ping in the session")
	sid := sess.ID().Lookup("id")
	uid := sha256.Sum256(nil)
	mine := bson.D{{Key: "$match", Value: bson.D{{Key: "_id.id", Value: sid}}}}
	for _, spec := range []bson.D{{}, {{Key: "allUsers", Value: true}}, {{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: ""}, {Key: "db", Value: ""}}}}}} {
		got, err := opsAgg(e, e.db.Name(), 1, bson.A{bson.D{{Key: "$listLocalSessions", Value: spec}}, mine})
		noErr(t, err, "$listLocalSessions")
		if len(got) != 1 {
			t.Fatalf("$listLocalSessions %v: session %s not listed once: %v", spec, sid, got)
		}
		valEq(t, got[0], "_id.uid", bson.Binary{Subtype: 0, Data: uid[:]})
		if v := val(t, got[0], "lastUse"); v.Type != bson.TypeDateTime {
			t.Fatalf("lastUse: %s", got[0])
		}
		if keys, _ := got[0].Elements(); len(keys) != 2 {
			t.Fatalf("record fields: %s", got[0])
		}
	}
	got, err := opsAgg(e, e.db.Name(), 1, bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "admin"}}}}}}}})
	noErr(t, err, "$listLocalSessions for another user")
	eq(t, "sessions of user bob", len(got), 0)

	lls := func(spec any) bson.A { return bson.A{bson.D{{Key: "$listLocalSessions", Value: spec}}} }
	_, err = opsAgg(e, e.db.Name(), "c", lls(bson.D{}))
	wantCode(t, err, 73, "InvalidNamespace")
	if errMsg(err) != "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection" {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	_, err = opsAgg(e, e.db.Name(), 1, lls(1))
	wantCode(t, err, 14, "TypeMismatch")
	_, err = opsAgg(e, e.db.Name(), 1, lls(bson.D{{Key: "bogus", Value: 1}}))
	wantCode(t, err, 40415, "Location40415")
	_, err = opsAgg(e, e.db.Name(), 1, lls(bson.D{{Key: "allUsers", Value: true}, {Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "a"}, {Key: "db", Value: "b"}}}}}))
	wantCode(t, err, 12, "UnsupportedFormat")
	_, err = opsAgg(e, e.db.Name(), 1, bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}})
	wantCode(t, err, 40602, "Location40602")
}

// $listSessions lists config.system.sessions, which the session cache's
// refresh keeps (created with its lsidTTLIndex; ended sessions removed);
// it must run first, on that collection.
func TestIssue12OpsListSessions(t *testing.T) {
	needsAdmin(t, "$listSessions over config.system.sessions (clusterMonitor's listSessions)")
	e := newClockEnv(t) // a private server: config.system.sessions is created
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	err = mongo.WithSession(e.ctx, sess, func(ctx context.Context) error {
		return e.db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	})
	noErr(t, err, "ping in the session")
	sid := sess.ID().Lookup("id")
	uid := sha256.Sum256(nil)
	mine := bson.D{{Key: "$match", Value: bson.D{{Key: "_id.id", Value: sid}}}}
	ls := func(spec any) bson.A { return bson.A{bson.D{{Key: "$listSessions", Value: spec}}} }
	for _, spec := range []bson.D{{}, {{Key: "allUsers", Value: true}}} {
		got, err := opsAgg(e, "config", "system.sessions", append(ls(spec), mine))
		noErr(t, err, "$listSessions")
		if len(got) != 1 {
			t.Fatalf("$listSessions %v: session %s not listed once: %v", spec, sid, got)
		}
		valEq(t, got[0], "_id", bson.D{{Key: "id", Value: sid}, {Key: "uid", Value: bson.Binary{Subtype: 0, Data: uid[:]}}})
		if v := val(t, got[0], "lastUse"); v.Type != bson.TypeDateTime {
			t.Fatalf("lastUse: %s", got[0])
		}
	}
	got, err := opsAgg(e, "config", "system.sessions", ls(bson.D{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "admin"}}}}}))
	noErr(t, err, "$listSessions for bob")
	eq(t, "sessions of user bob", len(got), 0)
	specs, err := e.cli.Database("config").Collection("system.sessions").Indexes().ListSpecifications(e.ctx)
	noErr(t, err, "listIndexes config.system.sessions")
	found := false
	for _, s := range specs {
		if s.Name == "lsidTTLIndex" {
			found = true
			if s.ExpireAfterSeconds == nil || *s.ExpireAfterSeconds != 1800 || canon(t, s.KeysDocument) != canon(t, bson.D{{Key: "lastUse", Value: int32(1)}}) {
				t.Fatalf("lsidTTLIndex: %+v", s)
			}
		}
	}
	if !found {
		t.Fatalf("no lsidTTLIndex: %+v", specs)
	}

	sess.EndSession(e.ctx) // the driver pools it; end it on the server
	e.admin(bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: sid}}}}})
	got, err = opsAgg(e, "config", "system.sessions", append(ls(bson.D{}), mine))
	noErr(t, err, "$listSessions after endSessions")
	eq(t, "ended session listed", len(got), 0)

	_, err = opsAgg(e, "config", "other", ls(bson.D{}))
	wantCode(t, err, 73, "InvalidNamespace")
	if errMsg(err) != "$listSessions may only be run against config.system.sessions" {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	_, err = opsAgg(e, "config", 1, ls(bson.D{}))
	wantCode(t, err, 73, "InvalidNamespace")
	_, err = opsAgg(e, "config", "system.sessions", ls(bson.D{{Key: "allUsers", Value: true}, {Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "a"}, {Key: "db", Value: "b"}}}}}))
	wantCode(t, err, 12, "UnsupportedFormat")
	_, err = opsAgg(e, "config", "system.sessions", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$listSessions", Value: bson.D{}}}})
	if authenticated {
		// Not first, $listSessions no longer stands in for the collection:
		// the aggregate needs find on config.system.sessions, which no
		// built-in role grants (root included), checked before the pipeline.
		wantCode(t, err, 13, "Unauthorized")
	} else {
		wantCode(t, err, 40602, "Location40602")
	}
}

// $currentOp {idleCursors: true} adds an {type: "idleCursor"} entry per
// open cursor no operation is using, as mongod's GenericCursor.
func TestIssue12OpsCurrentOpIdleCursors(t *testing.T) {
	needsAdmin(t, "$currentOp (inprog, clusterMonitor)")
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.insert("c", bson.D{{Key: "_id", Value: i}})
	}
	cur, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetBatchSize(2).SetComment("issue12-cursor"))
	noErr(t, err, "find")
	mine := bson.D{{Key: "$match", Value: bson.D{{Key: "type", Value: "idleCursor"}, {Key: "cursor.originatingCommand.comment", Value: "issue12-cursor"}}}}
	idle := func(spec bson.D) []bson.Raw {
		got, err := opsAgg(e, "admin", 1, bson.A{bson.D{{Key: "$currentOp", Value: spec}}, mine})
		noErr(t, err, "$currentOp idleCursors")
		return got
	}
	got := idle(bson.D{{Key: "idleCursors", Value: true}})
	if len(got) != 1 {
		t.Fatalf("idle cursor not listed: %v", got)
	}
	valEq(t, got[0], "ns", e.db.Name()+".c")
	valEq(t, got[0], "cursor.cursorId", cur.ID())
	valEq(t, got[0], "cursor.nDocsReturned", int64(2))
	valEq(t, got[0], "cursor.nBatchesReturned", int64(1))
	valEq(t, got[0], "cursor.noCursorTimeout", false)
	valEq(t, got[0], "cursor.originatingCommand.find", "c")
	for _, f := range []string{"cursor.createdDate", "cursor.lastAccessDate"} {
		if val(t, got[0], f).Type != bson.TypeDateTime {
			t.Fatalf("%s: %s", f, got[0])
		}
	}
	eq(t, "idle cursors without idleCursors", len(idle(bson.D{})), 0)
	for i := 0; i < 3; i++ {
		if !cur.Next(e.ctx) {
			t.Fatal("cursor ended early")
		}
	}
	got = idle(bson.D{{Key: "idleCursors", Value: true}})
	if len(got) != 1 {
		t.Fatalf("idle cursor after a getMore: %v", got)
	}
	valEq(t, got[0], "cursor.nDocsReturned", int64(4))
	valEq(t, got[0], "cursor.nBatchesReturned", int64(2))
	noErr(t, cur.Close(e.ctx), "close")
	eq(t, "idle cursors after killCursors", len(idle(bson.D{{Key: "idleCursors", Value: true}})), 0)
}
