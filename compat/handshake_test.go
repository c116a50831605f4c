package compat

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

func TestHandshake_HelloReply(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"hello", "isMaster", "ismaster"} {
		r := e.admin(bson.D{{Key: name, Value: 1}})
		valEq(t, r, "maxBsonObjectSize", int32(16777216))
		valEq(t, r, "maxMessageSizeBytes", int32(48000000))
		valEq(t, r, "maxWriteBatchSize", int32(100000))
		valEq(t, r, "logicalSessionTimeoutMinutes", int32(30))
		valEq(t, r, "minWireVersion", int32(0))
		valEq(t, r, "readOnly", false)
		if v := val(t, r, "maxWireVersion"); v.Type != bson.TypeInt32 || v.Int32() < 9 {
			t.Fatalf("%s: maxWireVersion %s, want an int32 >= 9", name, v)
		}
		if v := val(t, r, "localTime"); v.Type != bson.TypeDateTime {
			t.Fatalf("%s: localTime is %s, want a date", name, v.Type)
		}
		if name == "hello" {
			valEq(t, r, "isWritablePrimary", true)
		} else {
			valEq(t, r, "ismaster", true)
		}
		// A standalone: nothing that makes drivers think replica set or mongos.
		for _, f := range []string{"setName", "msg", "hosts", "compression"} {
			if has(r, f) {
				t.Fatalf("%s reply has %q, a standalone must not: %s", name, f, r)
			}
		}
		if v := val(t, r, "ok"); v.Type != bson.TypeDouble || v.Double() != 1 {
			t.Fatalf("%s: ok is %s, want 1.0", name, v)
		}
	}
}

func TestHandshake_PingAndBuildInfo(t *testing.T) {
	e := newEnv(t)
	docEq(t, e.admin(bson.D{{Key: "ping", Value: 1}}), bson.D{{Key: "ok", Value: 1.0}})
	bi := e.admin(bson.D{{Key: "buildInfo", Value: 1}})
	v := val(t, bi, "version")
	if s, ok := v.StringValueOK(); !ok || !strings.Contains(s, ".") {
		t.Fatalf("buildInfo.version %s, want a version string", v)
	}
	if has(bi, "ferretdb") {
		t.Fatalf("buildInfo carries a ferretdb key: %s", bi)
	}
	if va := val(t, bi, "versionArray"); va.Type != bson.TypeArray {
		t.Fatalf("versionArray is %s, want an array", va.Type)
	}
	// db.version() in mongosh reads the same version through the lower-case alias.
	bi2 := e.admin(bson.D{{Key: "buildinfo", Value: 1}})
	eq(t, "buildinfo alias version", val(t, bi2, "version").String(), v.String())
}

func TestHandshake_UnknownCommandIsCommandNotFound(t *testing.T) {
	e := newEnv(t)
	err := e.runErr(bson.D{{Key: "noSuchCommandAtAll", Value: 1}})
	wantCode(t, err, 59, "CommandNotFound")
	// atlasVersion must fail too (success would make mongosh think it is Atlas).
	wantCode(t, e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "atlasVersion", Value: 1}}).Err(), 59, "CommandNotFound")
	// The connection survives the error.
	docEq(t, e.admin(bson.D{{Key: "ping", Value: 1}}), bson.D{{Key: "ok", Value: 1.0}})
}

func TestHandshake_EnvelopeFieldsIgnored(t *testing.T) {
	e := newEnv(t)
	r := e.admin(bson.D{
		{Key: "ping", Value: 1},
		{Key: "comment", Value: "hello from compat"},
		{Key: "maxTimeMS", Value: 5000},
		{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primaryPreferred"}}},
	})
	valEq(t, r, "ok", 1.0)
}

func TestHandshake_SessionsWork(t *testing.T) {
	e := newEnv(t)
	sess, err := e.cli.StartSession()
	noErr(t, err, "StartSession (needs logicalSessionTimeoutMinutes in hello)")
	defer sess.EndSession(e.ctx)
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert")
	n, err := e.coll("c").CountDocuments(e.ctx, bson.D{})
	noErr(t, err, "count")
	eq(t, "count", n, int64(1))
}

func TestHandshake_FeatureCompatibilityVersion(t *testing.T) {
	needsAdmin(t, "getParameter (clusterMonitor)")
	e := newEnv(t)
	r := e.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}})
	v := val(t, r, "featureCompatibilityVersion.version")
	bi := e.admin(bson.D{{Key: "buildInfo", Value: 1}})
	ver := val(t, bi, "version").StringValue()
	if !strings.HasPrefix(ver, v.StringValue()+".") {
		t.Fatalf("FCV %s does not agree with buildInfo.version %s", v, ver)
	}
}

func TestHandshake_ListDatabasesShowsTheTestDatabase(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	names, err := e.cli.ListDatabaseNames(e.ctx, bson.D{})
	noErr(t, err, "listDatabases")
	found := false
	for _, n := range names {
		found = found || n == e.db.Name()
	}
	if !found {
		t.Fatalf("listDatabases %v lacks %s", names, e.db.Name())
	}
	r := e.admin(bson.D{{Key: "listDatabases", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: e.db.Name()}}}})
	dbs, _ := val(t, r, "databases").Array().Values()
	if len(dbs) != 1 {
		t.Fatalf("listDatabases filter by name: %s", r)
	}
	d := dbs[0].Document()
	valEq(t, d, "name", e.db.Name())
	valEq(t, d, "empty", false)
	if num(t, d, "sizeOnDisk") <= 0 {
		t.Fatalf("sizeOnDisk of a non-empty database: %s", d)
	}
}

func TestHandshake_StableAPIClientHandshakesOverOpMsg(t *testing.T) {
	e := newEnv(t)
	// With a server API version the driver's first message is an OP_MSG
	// hello carrying apiVersion instead of the legacy OP_QUERY isMaster.
	uri := externalURI
	if uri == "" {
		uri = e.tg.srv.URI()
	}
	cli, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1)))
	noErr(t, err, "connect with serverApi 1")
	defer cli.Disconnect(e.ctx)
	c := cli.Database(e.db.Name()).Collection("api")
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert with apiVersion 1")
	raw, err := c.FindOne(e.ctx, bson.D{}).Raw()
	noErr(t, err, "find with apiVersion 1")
	docEq(t, raw, bson.D{{Key: "_id", Value: 1}})
}

func TestHandshake_UnacknowledgedWritesGetNoReply(t *testing.T) {
	e := newEnv(t)
	// w:0 writes go out with OP_MSG moreToCome: the server must not answer
	// them, and the connection must stay usable.
	c := e.coll("w0").Clone(options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	for i := 1; i <= 20; i++ {
		_, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}})
		noErr(t, err, "w:0 insert")
	}
	waitFor(t, 10*time.Second, "20 unacknowledged inserts to land", func() bool { return e.count("w0", nil) == 20 })
	docEq(t, e.admin(bson.D{{Key: "ping", Value: 1}}), bson.D{{Key: "ok", Value: 1.0}})
}
