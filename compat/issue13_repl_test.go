package compat

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Issue 13: mayfly as the primary of a one-member replica set (--replSet).

// TestIssue13ReplDiscoveryAndCRUD: a driver given ?replicaSet= discovers
// the set and runs CRUD through it (its writes are retryable writes, with
// lsid and txnNumber); a driver expecting another set name selects no
// server.
func TestIssue13ReplDiscoveryAndCRUD(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("crud")
	_, err := c.InsertMany(e.ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}}})
	noErr(t, err, "insertMany")
	ur, err := c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 10}}}})
	noErr(t, err, "updateOne")
	eq(t, "matched", ur.MatchedCount, int64(1))
	raw, err := c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: true}}}}, options.FindOneAndUpdate().SetReturnDocument(options.After)).Raw()
	noErr(t, err, "findOneAndUpdate")
	docEq(t, raw, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}, {Key: "y", Value: true}})
	_, err = c.DeleteOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "deleteOne")
	docsEq(t, e.find("crud", nil), bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 11}})
	// The driver sees a replica set with a primary.
	sess, err := e.cli.StartSession()
	noErr(t, err, "startSession")
	sess.EndSession(e.ctx)

	wrong, err := mongo.Connect(options.Client().ApplyURI(e.tg.srv.URI() + "?replicaSet=other").SetServerSelectionTimeout(1500 * time.Millisecond))
	noErr(t, err, "connect")
	defer wrong.Disconnect(e.ctx)
	err = wrong.Ping(e.ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "server selection") {
		t.Fatalf("a client for replica set 'other' must not select the server: %v", err)
	}
}

// TestIssue13ReplHelloFields: hello and isMaster describe the primary of
// a one-member set, with the address clients use as me/primary/hosts.
func TestIssue13ReplHelloFields(t *testing.T) {
	e := newReplEnv(t)
	addr := e.tg.srv.Addr()
	h := e.admin(bson.D{{Key: "hello", Value: 1}})
	valEq(t, h, "setName", replSetName)
	valEq(t, h, "setVersion", int32(1))
	valEq(t, h, "isWritablePrimary", true)
	valEq(t, h, "secondary", false)
	valEq(t, h, "primary", addr)
	valEq(t, h, "me", addr)
	valEq(t, h, "hosts", bson.A{addr})
	valEq(t, h, "logicalSessionTimeoutMinutes", int32(30))
	valEq(t, h, "maxWireVersion", int32(21))
	valEq(t, h, "electionId", bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1})
	eq(t, "topologyVersion.processId type", val(t, h, "topologyVersion.processId").Type, bson.TypeObjectID)
	valEq(t, h, "topologyVersion.counter", int64(0))
	valEq(t, h, "lastWrite.opTime.t", int64(1))
	eq(t, "lastWrite.opTime.ts type", val(t, h, "lastWrite.opTime.ts").Type, bson.TypeTimestamp)
	eq(t, "lastWrite.lastWriteDate type", val(t, h, "lastWrite.lastWriteDate").Type, bson.TypeDateTime)
	eq(t, "lastWrite.majorityOpTime.ts type", val(t, h, "lastWrite.majorityOpTime.ts").Type, bson.TypeTimestamp)
	eq(t, "lastWrite.majorityWriteDate type", val(t, h, "lastWrite.majorityWriteDate").Type, bson.TypeDateTime)
	if has(h, "ismaster") {
		t.Errorf("hello answers isWritablePrimary, not ismaster: %s", h)
	}
	im := e.admin(bson.D{{Key: "isMaster", Value: 1}})
	valEq(t, im, "ismaster", true)
	valEq(t, im, "secondary", false)
	valEq(t, im, "setName", replSetName)
	if has(im, "isWritablePrimary") {
		t.Errorf("isMaster answers ismaster, not isWritablePrimary: %s", im)
	}
	// lastWrite follows the writes.
	before := val(t, h, "lastWrite.opTime.ts")
	e.insert("w", bson.D{{Key: "_id", Value: 1}})
	after := val(t, e.admin(bson.D{{Key: "hello", Value: 1}}), "lastWrite.opTime.ts")
	if !tsLess(before, after) {
		t.Errorf("lastWrite.opTime did not move with a write: %v then %v", before, after)
	}
}

// TestIssue13ReplAwaitableHello: given the topologyVersion it knows and
// maxAwaitTimeMS, hello waits (the streaming monitor's request); a stale
// topologyVersion answers at once.
func TestIssue13ReplAwaitableHello(t *testing.T) {
	e := newReplEnv(t)
	tv := val(t, e.admin(bson.D{{Key: "hello", Value: 1}}), "topologyVersion").Document()
	start := time.Now()
	e.admin(bson.D{{Key: "hello", Value: 1}, {Key: "topologyVersion", Value: tv}, {Key: "maxAwaitTimeMS", Value: int64(300)}})
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("awaitable hello with the current topologyVersion answered after %v, want ~300ms", d)
	}
	// The driver's monitor streams awaitable hellos: an idle client costs
	// a request every few seconds, not a busy loop.
	before := e.tg.srv.Stats().NumRequests
	time.Sleep(1500 * time.Millisecond)
	if n := e.tg.srv.Stats().NumRequests - before; n > 10 {
		t.Errorf("an idle replica-set client sent %d requests in 1.5 s", n)
	}
	stale := bson.D{{Key: "processId", Value: bson.NewObjectID()}, {Key: "counter", Value: int64(0)}}
	start = time.Now()
	e.admin(bson.D{{Key: "hello", Value: 1}, {Key: "topologyVersion", Value: stale}, {Key: "maxAwaitTimeMS", Value: int64(5000)}})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("awaitable hello with a stale topologyVersion waited %v", d)
	}
}

func tsLess(a, b bson.RawValue) bool {
	at, ai := a.Timestamp()
	bt, bi := b.Timestamp()
	return at < bt || at == bt && ai < bi
}

// TestIssue13ReplClusterTime: every reply carries operationTime and a
// $clusterTime with mongod's dummy signature; writes move the operation
// time strictly forward; afterClusterTime is accepted up to the current
// cluster time.
func TestIssue13ReplClusterTime(t *testing.T) {
	e := newReplEnv(t)
	ping := e.admin(bson.D{{Key: "ping", Value: 1}})
	eq(t, "operationTime type", val(t, ping, "operationTime").Type, bson.TypeTimestamp)
	eq(t, "clusterTime type", val(t, ping, "$clusterTime.clusterTime").Type, bson.TypeTimestamp)
	valEq(t, ping, "$clusterTime.signature.hash", bson.Binary{Subtype: 0, Data: make([]byte, 20)})
	valEq(t, ping, "$clusterTime.signature.keyId", int64(0))
	var last bson.RawValue
	for i := 0; i < 3; i++ {
		r := e.run(bson.D{{Key: "insert", Value: "ct"}, {Key: "documents", Value: bson.A{bson.D{{Key: "i", Value: i}}}}})
		op := val(t, r, "operationTime")
		valEq(t, r, "opTime.t", int64(1)) // a replica-set write reply's optime and electionId
		eq(t, "write reply opTime.ts", val(t, r, "opTime.ts").String(), op.String())
		valEq(t, r, "electionId", bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1})
		if i > 0 && !tsLess(last, op) {
			t.Fatalf("write %d: operationTime %v not after the previous write's %v", i, op, last)
		}
		if ct := val(t, r, "$clusterTime.clusterTime"); tsLess(ct, op) {
			t.Fatalf("clusterTime %v behind operationTime %v", ct, op)
		}
		last = op
	}
	// The fake clock's seconds: optimes follow the server's clock.
	if sec, _ := last.Timestamp(); int64(sec) != e.now().Unix() {
		t.Errorf("operationTime seconds %d, want the server clock's %d", sec, e.now().Unix())
	}
	// Errors carry them too.
	raw, _ := e.db.RunCommand(e.ctx, bson.D{{Key: "noSuchCommand", Value: 1}}).Raw()
	if !has(raw, "operationTime") || !has(raw, "$clusterTime") {
		t.Errorf("an error reply without operationTime/$clusterTime: %s", raw)
	}
	// afterClusterTime: up to the current time, accepted; beyond it, refused.
	lt, li := last.Timestamp()
	r := e.run(bson.D{{Key: "find", Value: "ct"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}, {Key: "afterClusterTime", Value: bson.Timestamp{T: lt, I: li}}}}})
	docs, _ := val(t, r, "cursor.firstBatch").Array().Values()
	eq(t, "documents read after the cluster time", len(docs), 3)
	err := e.runErr(bson.D{{Key: "find", Value: "ct"}, {Key: "readConcern", Value: bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{T: lt + 1000, I: 1}}}}})
	wantCode(t, err, 72, "InvalidOptions")
	if !strings.Contains(errMsg(err), "value must not be greater than the current clusterTime") {
		t.Errorf("message: %q", errMsg(err))
	}
	// A causally consistent session reads its own writes.
	sess, err := e.cli.StartSession(options.Session().SetCausalConsistency(true))
	noErr(t, err, "startSession")
	defer sess.EndSession(e.ctx)
	err = mongo.WithSession(e.ctx, sess, func(ctx context.Context) error {
		if _, err := e.coll("cc").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			return err
		}
		return e.coll("cc").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Err()
	})
	noErr(t, err, "causally consistent write then read")
}

// TestIssue13ReplSetCommands: rs.status(), rs.conf(), rs.initiate() and
// friends as a one-member set's primary answers them.
func TestIssue13ReplSetCommands(t *testing.T) {
	e := newReplEnv(t)
	addr := e.tg.srv.Addr()
	st := e.admin(bson.D{{Key: "replSetGetStatus", Value: 1}})
	valEq(t, st, "set", replSetName)
	valEq(t, st, "myState", int32(1))
	valEq(t, st, "term", int64(1))
	valEq(t, st, "members.0.name", addr)
	valEq(t, st, "members.0.stateStr", "PRIMARY")
	valEq(t, st, "members.0.self", true)
	valEq(t, st, "members.0.health", 1.0)
	eq(t, "optimes.appliedOpTime.ts type", val(t, st, "optimes.appliedOpTime.ts").Type, bson.TypeTimestamp)

	cfg := e.admin(bson.D{{Key: "replSetGetConfig", Value: 1}})
	valEq(t, cfg, "config._id", replSetName)
	valEq(t, cfg, "config.version", int32(1))
	valEq(t, cfg, "config.members.0.host", addr)
	valEq(t, cfg, "config.members.0._id", int32(0))
	valEq(t, cfg, "config.protocolVersion", int64(1))

	ss := e.admin(bson.D{{Key: "serverStatus", Value: 1}})
	valEq(t, ss, "repl.setName", replSetName)
	valEq(t, ss, "repl.isWritablePrimary", true)
	valEq(t, ss, "repl.me", addr)

	err := e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{}}}).Err()
	wantCode(t, err, 23, "AlreadyInitialized")
	eq(t, "replSetInitiate message", errMsg(err), "already initialized")
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "replSetStepDown", Value: 60}}).Err()
	wantCode(t, err, 262, "ExceededTimeLimit")
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "replSetFreeze", Value: 10}}).Err()
	wantCode(t, err, 95, "NotSecondary")
	err = e.run2("test", bson.D{{Key: "replSetGetStatus", Value: 1}})
	wantCode(t, err, 13, "Unauthorized") // admin only

	// A reconfig that keeps the one member moves the version (and hello's
	// setVersion); adding a member is refused.
	conf := val(t, cfg, "config").Document()
	newConf := bson.D{}
	noErr(t, bson.Unmarshal(conf, &newConf), "decode config")
	for i := range newConf {
		if newConf[i].Key == "version" {
			newConf[i].Value = int32(2)
		}
	}
	e.admin(bson.D{{Key: "replSetReconfig", Value: newConf}})
	valEq(t, e.admin(bson.D{{Key: "hello", Value: 1}}), "setVersion", int32(2))
	valEq(t, e.admin(bson.D{{Key: "replSetGetConfig", Value: 1}}), "config.version", int32(2))
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "replSetReconfig", Value: newConf}}).Err()
	wantCode(t, err, 103, "NewReplicaSetConfigurationIncompatible")
	for i := range newConf {
		switch newConf[i].Key {
		case "version":
			newConf[i].Value = int32(3)
		case "members":
			newConf[i].Value = bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: addr}}, bson.D{{Key: "_id", Value: 1}, {Key: "host", Value: "other:27017"}}}
		}
	}
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "replSetReconfig", Value: newConf}}).Err()
	wantCode(t, err, 103, "NewReplicaSetConfigurationIncompatible")
}

func (e *env) run2(db string, cmd bson.D) error {
	return e.cli.Database(db).RunCommand(e.ctx, cmd).Err()
}

// TestIssue13StandaloneRefusesReplication: a standalone answers the
// replSet* commands and txnNumber as mongod without --replSet does.
func TestIssue13StandaloneRefusesReplication(t *testing.T) {
	e := newEnv(t)
	needsAdmin(t, "clusterMonitor (replSetGetStatus)")
	for _, cmd := range []string{"replSetGetStatus", "replSetGetConfig"} {
		err := e.run2("admin", bson.D{{Key: cmd, Value: 1}})
		wantCode(t, err, 76, "NoReplicationEnabled")
		eq(t, cmd+" message", errMsg(err), "not running with --replSet")
	}
	sess, err := e.cli.StartSession()
	noErr(t, err, "startSession")
	defer sess.EndSession(e.ctx)
	err = mongo.WithSession(e.ctx, sess, func(ctx context.Context) error {
		return e.db.RunCommand(ctx, bson.D{{Key: "insert", Value: "t"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}, {Key: "txnNumber", Value: int64(1)}}).Err()
	})
	wantCode(t, err, 20, "IllegalOperation")
	eq(t, "txnNumber message", errMsg(err), "Transaction numbers are only allowed on a replica set member or mongos")
	eq(t, "documents written", e.count("t", nil), int64(0))
	if raw := e.admin(bson.D{{Key: "ping", Value: 1}}); has(raw, "operationTime") || has(raw, "$clusterTime") {
		t.Errorf("a standalone's reply carries cluster time: %s", raw)
	}
	if h := e.admin(bson.D{{Key: "hello", Value: 1}}); has(h, "setName") || has(h, "topologyVersion") {
		t.Errorf("a standalone's hello names a set: %s", h)
	}
	if ss := e.admin(bson.D{{Key: "serverStatus", Value: 1}}); has(ss, "repl") {
		t.Errorf("a standalone's serverStatus has a repl section")
	}
}

// TestIssue13ReplWriteConcern: on a one-member set w: "majority" and w: 1
// are met; w: 2 cannot be (writeConcernError 100 after the write, which is
// applied), nor an unknown mode (79).
func TestIssue13ReplWriteConcern(t *testing.T) {
	e := newReplEnv(t)
	ins := func(id int, wc bson.D) bson.Raw {
		return e.runWrite(bson.D{{Key: "insert", Value: "wc"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}, {Key: "writeConcern", Value: wc}})
	}
	r := ins(1, bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: true}})
	if has(r, "writeConcernError") {
		t.Fatalf("w: majority on a one-member set: %s", r)
	}
	r = ins(2, bson.D{{Key: "w", Value: 2}, {Key: "wtimeout", Value: 100}})
	valEq(t, r, "writeConcernError.code", int32(100))
	valEq(t, r, "writeConcernError.codeName", "UnsatisfiableWriteConcern")
	valEq(t, r, "writeConcernError.errmsg", "Not enough data-bearing nodes")
	valEq(t, r, "writeConcernError.errInfo.writeConcern.w", int32(2))
	valEq(t, r, "n", int32(1))
	r = ins(3, bson.D{{Key: "w", Value: "dc"}})
	valEq(t, r, "writeConcernError.code", int32(79))
	eq(t, "documents written", e.count("wc", nil), int64(3))
	_, err := e.coll("wc").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 4}}, options.InsertOne())
	noErr(t, err, "default write concern")
}
