package compat

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// ---- item 10: query parts are validated even when the collection is missing ----

func TestIssue12QueryValidatedOnMissingCollection(t *testing.T) {
	e := newEnv(t)
	e.insert("present", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	bogus := bson.D{{Key: "a", Value: bson.D{{Key: "$bogus", Value: 1}}}}
	// Each command is run on an existing and on a missing collection: both
	// must fail the same way (a command error).
	cmds := []struct {
		name string
		cmd  func(coll string) bson.D
		code int32
	}{
		{"find filter", func(c string) bson.D {
			return bson.D{{Key: "find", Value: c}, {Key: "filter", Value: bogus}}
		}, 2},
		{"find projection", func(c string) bson.D {
			return bson.D{{Key: "find", Value: c}, {Key: "projection", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0}}}}
		}, 31254},
		{"find sort", func(c string) bson.D {
			return bson.D{{Key: "find", Value: c}, {Key: "sort", Value: bson.D{{Key: "a", Value: "up"}}}}
		}, 0},
		{"count", func(c string) bson.D {
			return bson.D{{Key: "count", Value: c}, {Key: "query", Value: bogus}}
		}, 2},
		{"distinct", func(c string) bson.D {
			return bson.D{{Key: "distinct", Value: c}, {Key: "key", Value: "a"}, {Key: "query", Value: bogus}}
		}, 2},
		{"aggregate $match", func(c string) bson.D {
			return bson.D{{Key: "aggregate", Value: c}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bogus}}}}, {Key: "cursor", Value: bson.D{}}}
		}, 2},
		{"findAndModify query", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bogus}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}}}
		}, 2},
		{"findAndModify remove", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bogus}, {Key: "remove", Value: true}}
		}, 2},
		{"findAndModify sort", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bson.D{}}, {Key: "sort", Value: bson.D{{Key: "a", Value: "up"}}}, {Key: "remove", Value: true}}
		}, 0},
		{"explain find", func(c string) bson.D {
			return bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: c}, {Key: "filter", Value: bogus}}}}
		}, 2},
		{"explain delete", func(c string) bson.D {
			return bson.D{{Key: "explain", Value: bson.D{{Key: "delete", Value: c}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bogus}, {Key: "limit", Value: 0}}}}}}}
		}, 2},
		{"findAndModify update operator", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bson.D{}}, {Key: "update", Value: bson.D{{Key: "$bogus", Value: bson.D{{Key: "b", Value: 1}}}}}}
		}, 9},
	}
	for _, c := range cmds {
		errHere := e.runErr(c.cmd("present"))
		code, _, ok := errCode(errHere)
		if !ok {
			t.Fatalf("%s on an existing collection: want an error, got %v", c.name, errHere)
		}
		if c.code != 0 && code != c.code {
			t.Fatalf("%s on an existing collection: code %d (%v), want %d", c.name, code, errHere, c.code)
		}
		errMissing := e.runErr(c.cmd("missing"))
		wantCode(t, errMissing, code, "")
		if errMsg(errMissing) != errMsg(errHere) {
			t.Fatalf("%s: message on a missing collection %q, on an existing one %q", c.name, errMsg(errMissing), errMsg(errHere))
		}
	}
	// Writes: the statement fails with a write error, as on an existing
	// collection, and the missing collection is not created (mongod creates
	// it for an upsert before parsing the statement, so upserts are left
	// out: write_ops_exec.cpp performSingleUpdateOp).
	writes := []struct {
		name string
		run  func(coll string) error
		code int32
	}{
		{"delete filter", func(c string) error {
			_, err := e.coll(c).DeleteMany(e.ctx, bogus)
			return err
		}, 2},
		{"update filter", func(c string) error {
			_, err := e.coll(c).UpdateMany(e.ctx, bogus, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
			return err
		}, 2},
		{"update operator", func(c string) error {
			_, err := e.coll(c).UpdateMany(e.ctx, bson.D{}, bson.D{{Key: "$bogus", Value: bson.D{{Key: "b", Value: 1}}}})
			return err
		}, 9},
		{"replace filter", func(c string) error {
			_, err := e.coll(c).ReplaceOne(e.ctx, bogus, bson.D{{Key: "b", Value: 1}})
			return err
		}, 2},
	}
	for _, w := range writes {
		errHere := w.run("present")
		code, _, ok := errCode(errHere)
		if !ok || code != w.code {
			t.Fatalf("%s on an existing collection: got %v, want code %d", w.name, errHere, w.code)
		}
		errMissing := w.run("missing")
		wantCode(t, errMissing, w.code, "")
		if errMsg(errMissing) != errMsg(errHere) {
			t.Fatalf("%s: message on a missing collection %q, on an existing one %q", w.name, errMsg(errMissing), errMsg(errHere))
		}
	}
	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	noErr(t, err, "listCollections")
	strsEq(t, "collections", names, []string{"present"})
}

// ---- item 11: readConcern ----

func TestIssue12QueryReadConcern(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	find := func(rc any) bson.D {
		return bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: rc}}
	}
	lvl := func(l string) bson.D { return bson.D{{Key: "level", Value: l}} }
	// Accepted on a standalone.
	for _, l := range []string{"local", "majority", "available"} {
		for _, cmd := range []bson.D{
			find(lvl(l)),
			{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}, {Key: "readConcern", Value: lvl(l)}},
			{{Key: "count", Value: "c"}, {Key: "readConcern", Value: lvl(l)}},
			{{Key: "distinct", Value: "c"}, {Key: "key", Value: "_id"}, {Key: "readConcern", Value: lvl(l)}},
		} {
			e.run(cmd)
		}
	}
	e.run(find(bson.D{}))
	e.run(bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}}}, {Key: "readConcern", Value: lvl("majority")}})
	// Through the driver's own readConcern option.
	coll := e.db.Collection("c", options.Collection().SetReadConcern(readconcern.Majority()))
	n, err := coll.CountDocuments(e.ctx, bson.D{})
	noErr(t, err, "countDocuments with readConcern majority")
	eq(t, "count", n, int64(1))
	cases := []struct {
		name string
		cmd  bson.D
		code int32
		msg  string
	}{
		{"unknown level", find(lvl("bogus")), 9, "readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'"},
		{"level not a string", find(bson.D{{Key: "level", Value: 1}}), 14, `"level" had the wrong type. Expected string, found int`},
		{"not an object", bson.D{{Key: "ping", Value: 1}, {Key: "readConcern", Value: "majority"}}, 9, "readConcern field should be an object"},
		{"not an object on find", find("majority"), 14, "BSON field 'find.readConcern' is the wrong type 'string', expected type 'object'"},
		{"unknown field", find(bson.D{{Key: "level", Value: "local"}, {Key: "x", Value: 1}}), 72, "Unrecognized option in readConcern: x"},
		{"afterClusterTime with available", find(bson.D{{Key: "level", Value: "available"}, {Key: "afterClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}), 72, "afterClusterTime field can be set only if level is equal to majority, local, or snapshot"},
		{"atClusterTime without snapshot", find(bson.D{{Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}), 72, "atClusterTime field can be set only if level is equal to snapshot"},
		{"afterClusterTime on a standalone", find(bson.D{{Key: "level", Value: "majority"}, {Key: "afterClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}), 20, "Cannot specify afterClusterTime readConcern without replication enabled"},
		{"linearizable on a standalone", find(lvl("linearizable")), 123, "node needs to be a replica set member to use read concern"},
		{"snapshot on a standalone", find(lvl("snapshot")), 123, "node needs to be a replica set member to use readConcern: snapshot"},
		{"snapshot aggregate", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}, {Key: "readConcern", Value: lvl("snapshot")}}, 123, "node needs to be a replica set member to use readConcern: snapshot"},
		{"snapshot count", bson.D{{Key: "count", Value: "c"}, {Key: "readConcern", Value: lvl("snapshot")}}, 72, `Command count does not support { readConcern: { level: "snapshot", provenance: "clientSupplied" } } :: caused by :: read concern snapshot not supported`},
		{"snapshot insert outside a transaction", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}, {Key: "readConcern", Value: lvl("snapshot")}}, 72, `Command insert does not support { readConcern: { level: "snapshot", provenance: "clientSupplied" } } :: caused by :: read concern not supported`},
		{"majority on a write", bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}, {Key: "readConcern", Value: lvl("majority")}}, 72, `Command delete does not support { readConcern: { level: "majority", provenance: "clientSupplied" } } :: caused by :: read concern not supported`},
		{"majority on explain of a write", bson.D{{Key: "explain", Value: bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}}}, {Key: "readConcern", Value: lvl("majority")}}, 72, `Command explain does not support { readConcern: { level: "majority", provenance: "clientSupplied" } } :: caused by :: read concern not supported`},
		{"majority on ping", bson.D{{Key: "ping", Value: 1}, {Key: "readConcern", Value: lvl("majority")}}, 72, `Command ping does not support { readConcern: { level: "majority", provenance: "clientSupplied" } } :: caused by :: read concern not supported`},
	}
	for _, c := range cases {
		err := e.runErr(c.cmd)
		wantCode(t, err, c.code, "")
		if errMsg(err) != c.msg {
			t.Fatalf("%s: message %q, want %q", c.name, errMsg(err), c.msg)
		}
	}
	// A write with readConcern local is fine, and nothing was written by the
	// refused ones.
	e.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 3}}}}, {Key: "readConcern", Value: lvl("local")}})
	strsEq(t, "ids", e.ids("c"), idList(1, 3))
	// Through the driver: a snapshot session read fails the same way.
	_, err = e.db.Collection("c", options.Collection().SetReadConcern(readconcern.Snapshot())).Find(e.ctx, bson.D{})
	wantCode(t, err, 123, "NotAReplicaSet")
}

// ---- item 12: Stable API ----

// apiClient connects to the server under test declaring a Stable API.
func apiClient(e *env, api *options.ServerAPIOptions) *mongo.Client {
	e.t.Helper()
	uri := externalURI
	if uri == "" {
		uri = e.tg.srv.URI()
	}
	cli, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerAPIOptions(api).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		e.t.Fatalf("connect with a server API: %v", err)
	}
	e.t.Cleanup(func() { _ = cli.Disconnect(context.Background()) })
	return cli
}

func TestIssue12QueryStableAPI(t *testing.T) {
	needsAdmin(t, "serverStatus (clusterMonitor)")
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}})
	strict := apiClient(e, options.ServerAPI(options.ServerAPIVersion1).SetStrict(true).SetDeprecationErrors(true))
	db := strict.Database(e.db.Name())
	c := db.Collection("c")
	// Commands in API version 1 work (the handshake's hello among them).
	noErr(t, db.RunCommand(e.ctx, bson.D{{Key: "ping", Value: 1}}).Err(), "ping")
	_, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 3}})
	noErr(t, err, "insert")
	n, err := c.CountDocuments(e.ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 2}}}})
	noErr(t, err, "countDocuments")
	eq(t, "countDocuments", n, int64(2))
	n, err = c.EstimatedDocumentCount(e.ctx)
	noErr(t, err, "estimatedDocumentCount (count)")
	eq(t, "estimatedDocumentCount", n, int64(3))
	_, err = db.ListCollectionNames(e.ctx, bson.D{})
	noErr(t, err, "listCollections")
	cur, err := c.Find(e.ctx, bson.D{}, options.Find().SetBatchSize(1))
	noErr(t, err, "find")
	var all []bson.Raw
	noErr(t, cur.All(e.ctx, &all), "getMore")
	eq(t, "found", len(all), 3)
	noErr(t, strict.Database("admin").RunCommand(e.ctx, bson.D{{Key: "hello", Value: 1}}).Err(), "hello")
	// Commands outside it are refused.
	msg := func(cmd string) string {
		return "Provided apiStrict:true, but the command " + cmd + " is not in API Version 1. Information on supported commands and migrations in API Version 1 can be found at https://dochub.mongodb.org/core/manual-versioned-api"
	}
	err = c.Distinct(e.ctx, "a", bson.D{}).Err()
	wantCode(t, err, 323, "APIStrictError")
	eq(t, "distinct message", errMsg(err), msg("distinct"))
	for _, cmd := range []string{"buildInfo", "serverStatus", "isMaster", "listCommands", "dbStats"} {
		err = strict.Database("admin").RunCommand(e.ctx, bson.D{{Key: cmd, Value: 1}}).Err()
		wantCode(t, err, 323, "APIStrictError")
		eq(t, cmd+" message", errMsg(err), msg(cmd))
	}
	// A command that does not exist is still CommandNotFound.
	wantCode(t, db.RunCommand(e.ctx, bson.D{{Key: "noSuchCommand", Value: 1}}).Err(), 59, "CommandNotFound")
	// Stages outside API version 1, at the top or nested, are refused.
	for _, p := range []bson.A{
		{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}},
		{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$facet", Value: bson.D{{Key: "x", Value: bson.A{bson.D{{Key: "$indexStats", Value: bson.D{}}}}}}}}},
		{bson.D{{Key: "$unionWith", Value: bson.D{{Key: "coll", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$planCacheStats", Value: bson.D{}}}}}}}}},
	} {
		_, err = c.Aggregate(e.ctx, p)
		wantCode(t, err, 323, "APIStrictError")
	}
	_, err = c.Aggregate(e.ctx, bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}})
	eq(t, "stage message", errMsg(err), "$listLocalSessions is not allowed with 'apiStrict: true' in API Version 1")
	_, err = c.Aggregate(e.ctx, bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	wantCode(t, err, 323, "APIStrictError")
	// Fields the IDL marks unstable are refused too.
	_, err = c.Find(e.ctx, bson.D{}, options.Find().SetNoCursorTimeout(true))
	wantCode(t, err, 323, "APIStrictError")
	eq(t, "unstable field message", errMsg(err), "BSON field 'find.noCursorTimeout' is not allowed with apiStrict:true.")
	err = db.RunCommand(e.ctx, bson.D{{Key: "find", Value: "c"}, {Key: "returnKey", Value: true}}).Err()
	wantCode(t, err, 323, "APIStrictError")
	err = db.RunCommand(e.ctx, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "explain", Value: true}}).Err()
	wantCode(t, err, 323, "APIStrictError")
	eq(t, "aggregate explain message", errMsg(err), "BSON field 'aggregate.explain' is not allowed with apiStrict:true.")
	// The same without apiStrict runs.
	loose := apiClient(e, options.ServerAPI(options.ServerAPIVersion1))
	vals := loose.Database(e.db.Name()).Collection("c").Distinct(e.ctx, "a", bson.D{})
	noErr(t, vals.Err(), "distinct without apiStrict")
	noErr(t, loose.Database("admin").RunCommand(e.ctx, bson.D{{Key: "buildInfo", Value: 1}}).Err(), "buildInfo without apiStrict")

	// Parameter validation, sent by hand.
	cases := []struct {
		cmd  bson.D
		code int32
		msg  string
	}{
		{bson.D{{Key: "ping", Value: 1}, {Key: "apiStrict", Value: true}}, 4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion"},
		{bson.D{{Key: "ping", Value: 1}, {Key: "apiDeprecationErrors", Value: false}}, 4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion"},
		{bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "3"}}, 322, `API version must be "1"`},
		{bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "2"}}, 322, "Cannot accept API version 2"},
		{bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: int32(1)}}, 14, "BSON field 'APIParametersFromClient.apiVersion' is the wrong type 'int', expected type 'string'"},
		{bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: int32(1)}}, 14, "BSON field 'APIParametersFromClient.apiStrict' is the wrong type 'int', expected type 'bool'"},
	}
	for _, cs := range cases {
		err := e.runErr(cs.cmd)
		wantCode(t, err, cs.code, "")
		eq(t, ejson(cs.cmd)+" message", errMsg(err), cs.msg)
	}
	e.run(bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiDeprecationErrors", Value: true}})
	e.run(bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: false}})
	// null is no value, as in mongod's IDL parser.
	e.run(bson.D{{Key: "ping", Value: 1}, {Key: "apiStrict", Value: nil}})
	// listCommands says which commands are in API version 1.
	lc := e.admin(bson.D{{Key: "listCommands", Value: 1}})
	valEq(t, lc, "commands.find.apiVersions", bson.A{"1"})
	valEq(t, lc, "commands.buildInfo.apiVersions", bson.A{})
}

// ---- item 13: let on find, update, delete, findAndModify ----

func TestIssue12QueryLet(t *testing.T) {
	e := newEnv(t)
	seed := func() {
		_, err := e.coll("c").DeleteMany(e.ctx, bson.D{})
		noErr(t, err, "clear")
		e.insert("c",
			bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}},
			bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}},
			bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 3}})
	}
	seed()
	eqA := func(v string) bson.D {
		return bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$a", v}}}}}
	}
	findIDs := func(cmd bson.D) []string {
		t.Helper()
		raw := e.run(cmd)
		docs, err := raw.Lookup("cursor", "firstBatch").Array().Values()
		noErr(t, err, "firstBatch")
		out := []string{}
		for _, d := range docs {
			out = append(out, d.Document().Lookup("_id").String())
		}
		return out
	}
	// find: $expr at the top, nested under $or, and a let value computed
	// from an expression and from an earlier variable.
	strsEq(t, "find let", findIDs(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: eqA("$$target")},
		{Key: "let", Value: bson.D{{Key: "target", Value: 2}}}}), idList(2))
	strsEq(t, "find let nested", findIDs(bson.D{{Key: "find", Value: "c"},
		{Key: "filter", Value: bson.D{{Key: "$or", Value: bson.A{eqA("$$target"), bson.D{{Key: "a", Value: 3}}}}}},
		{Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "let", Value: bson.D{{Key: "base", Value: 0}, {Key: "target", Value: bson.D{{Key: "$add", Value: bson.A{"$$base", 1}}}}}}}), idList(1, 3))
	// A variable rebound by $let inside the filter is the inner one.
	strsEq(t, "find let shadowed", findIDs(bson.D{{Key: "find", Value: "c"},
		{Key: "filter", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{
			bson.D{{Key: "$let", Value: bson.D{{Key: "vars", Value: bson.D{{Key: "x", Value: "$a"}}}, {Key: "in", Value: "$$x"}}}}, 3}}}}}},
		{Key: "let", Value: bson.D{{Key: "x", Value: 1}}}}), idList(3))
	// A plain equality on a string that looks like a variable is a literal.
	strsEq(t, "find literal", findIDs(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: "$$target"}}},
		{Key: "let", Value: bson.D{{Key: "target", Value: 2}}}}), []string{})
	// Projections see the variables.
	raw := e.run(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "projection", Value: bson.D{{Key: "v", Value: "$$target"}, {Key: "w", Value: "$$obj.k"}}},
		{Key: "let", Value: bson.D{{Key: "target", Value: "x"}, {Key: "obj", Value: bson.D{{Key: "k", Value: 5}}}}}})
	docEq(t, raw.Lookup("cursor", "firstBatch", "0").Document(), bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "x"}, {Key: "w", Value: 5}})
	// Through the driver's Find option.
	cur, err := e.coll("c").Find(e.ctx, eqA("$$t"), options.Find().SetLet(bson.D{{Key: "t", Value: 3}}))
	noErr(t, err, "find with SetLet")
	var got []bson.Raw
	noErr(t, cur.All(e.ctx, &got), "find with SetLet")
	eq(t, "SetLet matches", len(got), 1)

	// update: filter and pipeline use let; c gives per-statement constants.
	res := e.run(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: eqA("$$target")}, {Key: "u", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: "$$val"}, {Key: "k", Value: "$$k"}}}}}}, {Key: "c", Value: bson.D{{Key: "k", Value: "const"}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 9}}}, {Key: "u", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: "$$val"}}}}}}, {Key: "upsert", Value: true}},
	}}, {Key: "let", Value: bson.D{{Key: "target", Value: 2}, {Key: "val", Value: "set by let"}}}})
	valEq(t, res, "n", int32(2))
	docsEq(t, e.find("c", bson.D{{Key: "b", Value: bson.D{{Key: "$exists", Value: true}}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})),
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}, {Key: "b", Value: "set by let"}, {Key: "k", Value: "const"}},
		bson.D{{Key: "_id", Value: 9}, {Key: "b", Value: "set by let"}})
	// Driver: UpdateOne with SetLet.
	_, err = e.coll("c").UpdateOne(e.ctx, eqA("$$t"), bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: "$$t"}}}}}, options.UpdateOne().SetLet(bson.D{{Key: "t", Value: 3}}))
	noErr(t, err, "updateOne with SetLet")
	eq(t, "z set", e.count("c", bson.D{{Key: "z", Value: 3}}), int64(1))
	// c with an update document: a write error, as mongod.
	wr := e.runWrite(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}, {Key: "c", Value: bson.D{{Key: "z", Value: 2}}}}}}})
	valEq(t, wr, "writeErrors.0.code", int32(51198))
	valEq(t, wr, "writeErrors.0.errmsg", "Constant values may only be specified for pipeline updates")
	// let is command-level only: a statement's let is an unknown field.
	err = e.runErr(bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}, {Key: "let", Value: bson.D{{Key: "x", Value: 1}}}}}}})
	wantCode(t, err, 40415, "Location40415")

	// delete with let.
	seed()
	res = e.run(bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: eqA("$$target")}, {Key: "limit", Value: 0}}}},
		{Key: "let", Value: bson.D{{Key: "target", Value: 1}}}})
	valEq(t, res, "n", int32(1))
	strsEq(t, "after delete", e.ids("c"), idList(2, 3))
	_, err = e.coll("c").DeleteOne(e.ctx, eqA("$$t"), options.DeleteOne().SetLet(bson.D{{Key: "t", Value: 2}}))
	noErr(t, err, "deleteOne with SetLet")
	strsEq(t, "after deleteOne", e.ids("c"), idList(3))

	// findAndModify: query, pipeline update and fields.
	seed()
	res = e.run(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: eqA("$$target")},
		{Key: "update", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: "$$val"}}}}}},
		{Key: "fields", Value: bson.D{{Key: "b", Value: 1}, {Key: "tag", Value: "$$val"}}}, {Key: "new", Value: true},
		{Key: "let", Value: bson.D{{Key: "target", Value: 3}, {Key: "val", Value: "v"}}}})
	docEq(t, res.Lookup("value").Document(), bson.D{{Key: "_id", Value: 3}, {Key: "b", Value: "v"}, {Key: "tag", Value: "v"}})
	sr := e.coll("c").FindOneAndDelete(e.ctx, eqA("$$t"), options.FindOneAndDelete().SetLet(bson.D{{Key: "t", Value: 1}}))
	noErr(t, sr.Err(), "findOneAndDelete with SetLet")
	strsEq(t, "after findOneAndDelete", e.ids("c"), idList(2, 3))

	// Invalid let: mongod's variable-name errors, and a non-document let.
	bad := []struct {
		let  any
		code int32
		msg  string
	}{
		{bson.D{{Key: "Bad", Value: 1}}, 16867, "'Bad' starts with an invalid character for a user variable name"},
		{bson.D{{Key: "a-b", Value: 1}}, 16868, "'a-b' contains an invalid character for a variable name: '-'"},
		{bson.D{{Key: "", Value: 1}}, 16866, "empty variable names are not allowed"},
		{bson.D{{Key: "x", Value: "$$y"}}, 17276, "Use of undefined variable: y"},
		{bson.D{{Key: "x", Value: bson.D{{Key: "$add", Value: bson.A{"$a", 1}}}}}, 4890500, "Command let Expression tried to access a field, but this is not allowed because command let expressions run before the query examines any documents."},
		{int32(1), 14, "BSON field 'find.let' is the wrong type 'int', expected type 'object'"},
	}
	for _, b := range bad {
		err := e.runErr(bson.D{{Key: "find", Value: "c"}, {Key: "let", Value: b.let}})
		wantCode(t, err, b.code, "")
		eq(t, "let error message", errMsg(err), b.msg)
	}
	for _, cmd := range []bson.D{
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}}}}}, {Key: "let", Value: bson.D{{Key: "Bad", Value: 1}}}},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}, {Key: "let", Value: bson.D{{Key: "Bad", Value: 1}}}},
		{{Key: "findAndModify", Value: "c"}, {Key: "remove", Value: true}, {Key: "let", Value: bson.D{{Key: "Bad", Value: 1}}}},
	} {
		wantCode(t, e.runErr(cmd), 16867, "")
	}
	strsEq(t, "nothing changed by refused commands", e.ids("c"), idList(2, 3))
}

// ---- item 14: $elemMatch over DBRef fields ----

func TestIssue12QueryElemMatchDBRef(t *testing.T) {
	e := newEnv(t)
	u1, u2, u3 := bson.NewObjectID(), bson.NewObjectID(), bson.NewObjectID()
	ref := func(id bson.ObjectID) bson.D {
		return bson.D{{Key: "$ref", Value: "users"}, {Key: "$id", Value: id}}
	}
	e.insert("g",
		bson.D{{Key: "_id", Value: 1}, {Key: "members", Value: bson.A{ref(u1), ref(u2)}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "members", Value: bson.A{ref(u3)}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "owner", Value: bson.D{{Key: "$ref", Value: "users"}, {Key: "$id", Value: u1}, {Key: "$db", Value: "other"}}}},
	)
	elem := func(d bson.D) bson.D { return bson.D{{Key: "members", Value: bson.D{{Key: "$elemMatch", Value: d}}}} }
	cases := []struct {
		name   string
		filter bson.D
		want   []int
	}{
		{"$elemMatch {$id}", elem(bson.D{{Key: "$id", Value: u1}}), []int{1}},
		{"$elemMatch {$ref, $id}", elem(bson.D{{Key: "$ref", Value: "users"}, {Key: "$id", Value: u3}}), []int{2}},
		{"$elemMatch {$ref}", elem(bson.D{{Key: "$ref", Value: "users"}}), []int{1, 2}},
		{"$elemMatch {$db} absent", elem(bson.D{{Key: "$db", Value: "other"}}), nil},
		// In $elemMatch a DBRef field is compared as a value: an operator
		// document under $ref is a literal, so nothing matches.
		{"$elemMatch {$id} with an operator under $ref", elem(bson.D{{Key: "$id", Value: u2}, {Key: "$ref", Value: bson.D{{Key: "$ne", Value: "x"}}}}), nil},
		{"dotted $id", bson.D{{Key: "members.$id", Value: u2}}, []int{1}},
		{"dotted $id on a document", bson.D{{Key: "owner.$id", Value: u1}}, []int{3}},
		{"dotted $db", bson.D{{Key: "owner.$db", Value: "other"}}, []int{3}},
		{"whole DBRef equality", bson.D{{Key: "owner", Value: bson.D{{Key: "$ref", Value: "users"}, {Key: "$id", Value: u1}, {Key: "$db", Value: "other"}}}}, []int{3}},
		{"DBRef in $in", bson.D{{Key: "members", Value: bson.D{{Key: "$in", Value: bson.A{ref(u3)}}}}}, []int{2}},
	}
	for _, c := range cases {
		docs := e.find("g", c.filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		got := []string{}
		for _, d := range docs {
			got = append(got, d.Lookup("_id").String())
		}
		strsEq(t, c.name+" "+ejson(c.filter), got, idList(c.want...))
	}
	// count and positional updates through $elemMatch on $id.
	eq(t, "count", e.count("g", elem(bson.D{{Key: "$id", Value: u2}})), int64(1))
	_, err := e.coll("g").UpdateOne(e.ctx, elem(bson.D{{Key: "$id", Value: u2}}), bson.D{{Key: "$set", Value: bson.D{{Key: "members.$.seen", Value: true}}}})
	noErr(t, err, "positional update")
	got := e.find("g", bson.D{{Key: "_id", Value: 1}})
	docEq(t, got[0], bson.D{{Key: "_id", Value: 1}, {Key: "members", Value: bson.A{ref(u1), append(ref(u2), bson.E{Key: "seen", Value: true})}}})
	// Outside $elemMatch, a lone $id under a field is an unknown operator,
	// as in mongod (only a complete DBRef, $ref and $id, is a literal).
	_, err = e.coll("g").Find(e.ctx, bson.D{{Key: "owner", Value: bson.D{{Key: "$id", Value: u1}}}})
	wantCode(t, err, 2, "BadValue")
	eq(t, "message", errMsg(err), "unknown operator: $id")
}
