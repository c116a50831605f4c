package compat

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// errRaw is the whole error reply of a failed command.
func errRaw(t *testing.T, err error) bson.Raw {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Raw == nil {
		t.Fatalf("not a command error with a reply: %v", err)
	}
	return ce.Raw
}

// ---- issue 12, item 5: legacy index options and create's autoIndexId ----

func createIndexCmd(coll string, specs ...bson.D) bson.D {
	a := bson.A{}
	for _, s := range specs {
		a = append(a, s)
	}
	return bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: a}}
}

// mongod 7.0 accepts background and dropDups (index_key_validate.h
// allowedFieldNames), keeps them in the catalog spec and ignores them;
// listIndexes shows each entry through ListIndexesReplyItem, so fields come
// in that struct's order and safeBool values as booleans; ns is dropped.
func TestIssue12AdminLegacyIndexOptionsAccepted(t *testing.T) {
	e := newEnv(t)
	e.run(createIndexCmd("c",
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "background", Value: true}},
		bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "b_1"}, {Key: "dropDups", Value: 1},
			{Key: "unique", Value: 1}, {Key: "ns", Value: e.db.Name() + ".c"}, {Key: "background", Value: false}},
		bson.D{{Key: "key", Value: bson.D{{Key: "c", Value: 1}}}, {Key: "sparse", Value: true}, {Key: "hidden", Value: true},
			{Key: "name", Value: "c_1"}, {Key: "v", Value: 2.0}},
	))
	ixs := e.indexes("c")
	if len(ixs) != 4 {
		t.Fatalf("listIndexes: %v", ixs)
	}
	docEq(t, ixs[1], bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "a", Value: int32(1)}}}, {Key: "name", Value: "a_1"}, {Key: "background", Value: true}})
	docEq(t, ixs[2], bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "b", Value: int32(1)}}}, {Key: "name", Value: "b_1"},
		{Key: "background", Value: false}, {Key: "unique", Value: true}, {Key: "dropDups", Value: true}})
	docEq(t, ixs[3], bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "c", Value: int32(1)}}}, {Key: "name", Value: "c_1"},
		{Key: "hidden", Value: true}, {Key: "sparse", Value: true}})

	// dropDups is ignored: the unique index still refuses duplicates.
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "b", Value: 1}})
	_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}, {Key: "b", Value: 1}})
	wantCode(t, err, 11000, "DuplicateKey")

	// background and dropDups are not part of an index's identity: the same
	// index without them (or with other values) already exists.
	r := e.run(createIndexCmd("c", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}))
	valEq(t, r, "note", "all indexes already exist")
	r = e.run(createIndexCmd("c", bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "b_1"}, {Key: "unique", Value: true}}))
	valEq(t, r, "note", "all indexes already exist")
}

func TestIssue12AdminLegacyIndexOptionsRefused(t *testing.T) {
	e := newEnv(t)
	key := bson.E{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}
	name := bson.E{Key: "name", Value: "a_1"}
	// safe is not an index option in mongod 7.0: InvalidIndexSpecificationOption.
	err := e.runErr(createIndexCmd("c", bson.D{key, name, {Key: "safe", Value: true}}))
	wantCode(t, err, 197, "InvalidIndexSpecificationOption")
	if !strings.Contains(errMsg(err), "The field 'safe' is not valid for an index specification") {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	err = e.runErr(createIndexCmd("c", bson.D{key, name, {Key: "bogus", Value: 1}}))
	wantCode(t, err, 197, "InvalidIndexSpecificationOption")
	// Boolean options must be booleans or numbers; hidden must be a boolean.
	err = e.runErr(createIndexCmd("c", bson.D{key, name, {Key: "background", Value: "yes"}}))
	wantCode(t, err, 14, "TypeMismatch")
	err = e.runErr(createIndexCmd("c", bson.D{key, name, {Key: "dropDups", Value: "yes"}}))
	wantCode(t, err, 14, "TypeMismatch")
	err = e.runErr(createIndexCmd("c", bson.D{key, name, {Key: "hidden", Value: 1}}))
	wantCode(t, err, 14, "TypeMismatch")
	err = e.runErr(createIndexCmd("c", bson.D{key, name, {Key: "v", Value: 3}}))
	wantCode(t, err, 67, "CannotCreateIndex")
	// The _id index takes no options (validateIdIndexSpec).
	err = e.runErr(createIndexCmd("c", bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}, {Key: "background", Value: true}}))
	wantCode(t, err, 197, "InvalidIndexSpecificationOption")
	// Unknown createIndexes fields are refused (the command is strict).
	err = e.runErr(append(createIndexCmd("c", bson.D{key, name}), bson.E{Key: "background", Value: true}))
	wantCode(t, err, 40415, "Location40415")
	// A standalone has no commitQuorum (create_indexes.cpp).
	err = e.runErr(append(createIndexCmd("c", bson.D{key, name}), bson.E{Key: "commitQuorum", Value: "majority"}))
	wantCode(t, err, 2, "BadValue")
	// ignoreUnknownIndexOptions drops what validation would refuse.
	e.run(append(createIndexCmd("c", bson.D{key, name, {Key: "safe", Value: true}, {Key: "bogus", Value: 1}}), bson.E{Key: "ignoreUnknownIndexOptions", Value: true}))
	ixs := e.indexes("c")
	if len(ixs) != 2 {
		t.Fatalf("listIndexes: %v", ixs)
	}
	docEq(t, ixs[1], bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "a", Value: int32(1)}}}, {Key: "name", Value: "a_1"}})
}

// create's autoIndexId (create.idl safeBool; cmd_create.cpp adds a
// deprecation note; DatabaseImpl::createCollection refuses false with 50001
// on a replicated namespace, which is every one outside local).
func TestIssue12AdminCreateAutoIndexId(t *testing.T) {
	e := newEnv(t)
	r := e.run(bson.D{{Key: "create", Value: "c"}, {Key: "autoIndexId", Value: true}})
	valEq(t, r, "note", "The autoIndexId option is deprecated and will be removed in a future release")
	specs, err := e.db.ListCollectionSpecifications(e.ctx, bson.D{{Key: "name", Value: "c"}})
	noErr(t, err, "listCollections")
	if len(specs) != 1 {
		t.Fatalf("listCollections: %v", specs)
	}
	docEq(t, specs[0].Options, bson.D{{Key: "autoIndexId", Value: true}})
	eq(t, "indexes", len(e.indexes("c")), 1)
	// The same create again is a no-op.
	e.run(bson.D{{Key: "create", Value: "c"}, {Key: "autoIndexId", Value: 1}})

	err = e.runErr(bson.D{{Key: "create", Value: "d"}, {Key: "autoIndexId", Value: false}})
	wantCode(t, err, 50001, "Location50001")
	eq(t, "message", errMsg(err), "autoIndexId:false is not allowed for collection "+e.db.Name()+".d because it can be replicated")
	err = e.runErr(bson.D{{Key: "create", Value: "d"}, {Key: "autoIndexId", Value: "no"}})
	wantCode(t, err, 14, "TypeMismatch")
	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	noErr(t, err, "listCollectionNames")
	strsEq(t, "collections", names, []string{"c"})
}

// ---- issue 12, item 6: admin.system.version and the profiler ----

func TestIssue12AdminSystemVersionReadable(t *testing.T) {
	needsAdmin(t, "find on admin.system.version (a system collection)")
	needsNoAuth(t, "find and insert on <db>.system.version, remove on admin.system.version")
	e := newEnv(t)
	cur, err := e.cli.Database("admin").Collection("system.version").Find(e.ctx, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}})
	noErr(t, err, "find admin.system.version")
	var docs []bson.Raw
	noErr(t, cur.All(e.ctx, &docs), "iterate")
	r := e.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}})
	want := val(t, r, "featureCompatibilityVersion.version").StringValue()
	docsEq(t, docs, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}, {Key: "version", Value: want}})
	eq(t, "version", want, "7.0")
	// Only admin has it: elsewhere system.version cannot be created, and a
	// read of it finds nothing (reads do not apply userAllowedCreateNS).
	eq(t, "system.version outside admin", len(e.find("system.version", nil)), 0)
	wantCode(t, e.runErr(bson.D{{Key: "insert", Value: "system.version"}, {Key: "documents", Value: bson.A{bson.D{}}}}), 73, "InvalidNamespace")
	// The document, its collection and the admin database stay (OpObserverImpl).
	_, err = e.cli.Database("admin").Collection("system.version").DeleteOne(e.ctx, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}})
	wantCode(t, err, 40670, "Location40670")
	wantCode(t, e.cli.Database("admin").Collection("system.version").Drop(e.ctx), 50715, "Location50715")
	wantCode(t, e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "dropDatabase", Value: 1}}).Err(), 50714, "Location50714")
	n, err := e.cli.Database("admin").Collection("system.version").CountDocuments(e.ctx, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}})
	noErr(t, err, "count")
	eq(t, "FCV document kept", n, int64(1))
}

func TestIssue12AdminProfileCommand(t *testing.T) {
	needsAdmin(t, "profile (dbAdmin)")
	e := newEnv(t)
	// Level -1 (or any level outside 0..2) reads the settings.
	r := e.run(bson.D{{Key: "profile", Value: -1}})
	docEq(t, r, bson.D{{Key: "was", Value: int32(0)}, {Key: "slowms", Value: int32(100)}, {Key: "sampleRate", Value: 1.0}, {Key: "ok", Value: 1.0}})
	e.run(bson.D{{Key: "profile", Value: 7}})
	// Bad arguments fail as in mongod.
	wantCode(t, e.runErr(bson.D{{Key: "profile", Value: "2"}}), 14, "TypeMismatch")
	wantCode(t, e.runErr(bson.D{{Key: "profile", Value: 0}, {Key: "sampleRate", Value: 1.5}}), 2, "BadValue")
	wantCode(t, e.runErr(bson.D{{Key: "profile", Value: 0}, {Key: "sampleRate", Value: int32(1)}}), 14, "TypeMismatch")
	wantCode(t, e.runErr(bson.D{{Key: "profile", Value: 0}, {Key: "filter", Value: "all"}}), 2, "BadValue")

	// Level 2 profiles every operation; the reply gives the previous level.
	r = e.run(bson.D{{Key: "profile", Value: 2}})
	valEq(t, r, "was", int32(0))
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	e.find("c", bson.D{{Key: "a", Value: 1}})
	_, err := e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 2}}}})
	noErr(t, err, "update")
	e.aggregate("c", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}})
	_, err = e.coll("c").DeleteOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "delete")
	r = e.run(bson.D{{Key: "profile", Value: 0}})
	valEq(t, r, "was", int32(2))

	entries := e.find("system.profile", bson.D{{Key: "ns", Value: e.db.Name() + ".c"}})
	var ops []string
	for _, d := range entries {
		for _, f := range []string{"op", "ns", "command", "millis", "ts", "client", "user"} {
			if !has(d, f) {
				t.Fatalf("profile entry lacks %s: %s", f, d)
			}
		}
		ops = append(ops, val(t, d, "op").StringValue())
	}
	strsEq(t, "profiled ops", ops, []string{"insert", "query", "update", "command", "remove"})
	valEq(t, entries[1], "command.find", "c")
	valEq(t, entries[1], "command.filter", bson.D{{Key: "a", Value: int32(1)}})
	valEq(t, entries[1], "nreturned", int32(1))
	valEq(t, entries[2], "command.q", bson.D{{Key: "_id", Value: int32(1)}})
	valEq(t, entries[2], "nModified", int32(1))
	valEq(t, entries[3], "command.aggregate", "c")
	valEq(t, entries[4], "ndeleted", int32(1))
	// Reading system.profile is never profiled, and level 0 adds nothing.
	n := len(e.find("system.profile", nil))
	e.find("c", nil)
	eq(t, "entries after level 0", len(e.find("system.profile", nil)), n)

	// Level 1 with a filter profiles only what it matches.
	r = e.run(bson.D{{Key: "profile", Value: 1}, {Key: "filter", Value: bson.D{{Key: "op", Value: "insert"}}}})
	valEq(t, r, "note", "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.")
	e.insert("d", bson.D{{Key: "_id", Value: 1}})
	e.find("d", nil)
	r = e.run(bson.D{{Key: "profile", Value: 0}, {Key: "filter", Value: "unset"}})
	valEq(t, r, "was", int32(1))
	valEq(t, r, "filter", bson.D{{Key: "op", Value: "insert"}})
	eq(t, "filtered entries", len(e.find("system.profile", bson.D{{Key: "ns", Value: e.db.Name() + ".d"}})), 1)

	// Level 1 without a filter takes operations of at least slowms.
	r = e.run(bson.D{{Key: "profile", Value: 1}, {Key: "slowms", Value: 0}})
	valEq(t, r, "slowms", int32(100))
	e.find("d", nil)
	r = e.run(bson.D{{Key: "profile", Value: 0}, {Key: "slowms", Value: 100}})
	valEq(t, r, "slowms", int32(0))
	eq(t, "slowms entries", len(e.find("system.profile", bson.D{{Key: "ns", Value: e.db.Name() + ".d"}})), 2)
}

// ---- issue 12, item 7: collMod on an index ----

func collModIndex(coll string, index bson.D, more ...bson.E) bson.D {
	return append(bson.D{{Key: "collMod", Value: coll}, {Key: "index", Value: index}}, more...)
}

func TestIssue12AdminCollModUnique(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	e := newEnv(t)
	e.run(createIndexCmd("c", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}))
	kp := bson.E{Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}}}
	// One step is refused: prepareUnique first (coll_mod.cpp).
	err := e.runErr(collModIndex("c", bson.D{kp, {Key: "unique", Value: true}}))
	wantCode(t, err, 72, "InvalidOptions")
	eq(t, "message", errMsg(err), "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.")
	wantCode(t, e.runErr(collModIndex("c", bson.D{kp, {Key: "unique", Value: false}})), 2, "BadValue")
	wantCode(t, e.runErr(collModIndex("c", bson.D{kp, {Key: "unique", Value: "100"}})), 14, "TypeMismatch")
	wantCode(t, e.runErr(collModIndex("missing", bson.D{kp, {Key: "unique", Value: true}})), 26, "NamespaceNotFound")

	// Existing duplicates do not stop prepareUnique.
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 100}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 100}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 7}}, bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 7}}, bson.D{{Key: "_id", Value: 5}, {Key: "a", Value: 8}})
	r := e.run(collModIndex("c", bson.D{kp, {Key: "prepareUnique", Value: true}}))
	docEq(t, r, bson.D{{Key: "prepareUnique_old", Value: false}, {Key: "prepareUnique_new", Value: true}, {Key: "ok", Value: 1.0}})
	docEq(t, e.indexes("c")[1], bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "a", Value: int32(1)}}}, {Key: "name", Value: "a_1"}, {Key: "prepareUnique", Value: true}})
	// prepareUnique cannot be combined with another modification.
	err = e.runErr(collModIndex("c", bson.D{kp, {Key: "prepareUnique", Value: false}, {Key: "hidden", Value: true}}))
	wantCode(t, err, 72, "InvalidOptions")

	// Now new duplicates are refused, on insert and on update.
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 6}, {Key: "a", Value: 8}})
	wantCode(t, err, 11000, "DuplicateKey")
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 5}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 100}}}})
	wantCode(t, err, 11000, "DuplicateKey")
	// A document that already shares its key may still change other fields.
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
	noErr(t, err, "update of a pre-existing duplicate")

	// Conversion fails while duplicates exist: 359 with the violations.
	err = e.runErr(collModIndex("c", bson.D{kp, {Key: "unique", Value: true}}))
	wantCode(t, err, 359, "CannotConvertIndexToUnique")
	raw := errRaw(t, err)
	valEq(t, raw, "violations", bson.A{
		bson.D{{Key: "ids", Value: bson.A{int32(3), int32(4)}}},
		bson.D{{Key: "ids", Value: bson.A{int32(1), int32(2)}}},
	})
	eq(t, "message", errMsg(err), "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.")
	// dryRun checks without converting.
	wantCode(t, e.runErr(collModIndex("c", bson.D{kp, {Key: "unique", Value: true}}, bson.E{Key: "dryRun", Value: true})), 359, "CannotConvertIndexToUnique")
	wantCode(t, e.runErr(collModIndex("c", bson.D{kp, {Key: "hidden", Value: true}}, bson.E{Key: "dryRun", Value: true})), 72, "InvalidOptions")

	_, err = e.coll("c").DeleteMany(e.ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{2, 4}}}}})
	noErr(t, err, "delete duplicates")
	r = e.run(collModIndex("c", bson.D{kp, {Key: "unique", Value: true}}, bson.E{Key: "dryRun", Value: true}))
	docEq(t, r, bson.D{{Key: "ok", Value: 1.0}})
	r = e.run(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}))
	docEq(t, r, bson.D{{Key: "unique_new", Value: true}, {Key: "ok", Value: 1.0}})
	docEq(t, e.indexes("c")[1], bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "a", Value: int32(1)}}}, {Key: "name", Value: "a_1"}, {Key: "unique", Value: true}})
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 100}, {Key: "a", Value: 100}})
	wantCode(t, err, 11000, "DuplicateKey")
	// Again: a no-op. forceNonUnique turns it back.
	docEq(t, e.run(collModIndex("c", bson.D{kp, {Key: "unique", Value: true}})), bson.D{{Key: "ok", Value: 1.0}})
	docEq(t, e.run(collModIndex("c", bson.D{kp, {Key: "forceNonUnique", Value: true}})), bson.D{{Key: "forceNonUnique_new", Value: true}, {Key: "ok", Value: 1.0}})
	e.insert("c", bson.D{{Key: "_id", Value: 100}, {Key: "a", Value: 100}})
}

func TestIssue12AdminCollModHiddenTTLAndUnknown(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	e := newEnv(t)
	e.run(createIndexCmd("c",
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "t", Value: 1}}}, {Key: "name", Value: "t_1"}, {Key: "expireAfterSeconds", Value: 3600}},
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 1}}}, {Key: "name", Value: "x_1_y_1"}}))
	r := e.run(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}, {Key: "hidden", Value: true}}))
	docEq(t, r, bson.D{{Key: "hidden_old", Value: false}, {Key: "hidden_new", Value: true}, {Key: "ok", Value: 1.0}})
	// The same value again changes nothing and reports nothing.
	docEq(t, e.run(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}, {Key: "hidden", Value: true}})), bson.D{{Key: "ok", Value: 1.0}})
	valEq(t, e.indexes("c")[1], "hidden", true)
	r = e.run(collModIndex("c", bson.D{{Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "hidden", Value: false}}))
	docEq(t, r, bson.D{{Key: "hidden_old", Value: true}, {Key: "hidden_new", Value: false}, {Key: "ok", Value: 1.0}})
	if has(e.indexes("c")[1], "hidden") {
		t.Fatalf("unhidden index still shows hidden: %s", e.indexes("c")[1])
	}
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "_id_"}, {Key: "hidden", Value: true}})), 2, "BadValue")

	// expireAfterSeconds: old and new as 64-bit integers (coll_mod_index.cpp).
	r = e.run(collModIndex("c", bson.D{{Key: "name", Value: "t_1"}, {Key: "expireAfterSeconds", Value: 60}}))
	docEq(t, r, bson.D{{Key: "expireAfterSeconds_old", Value: int64(3600)}, {Key: "expireAfterSeconds_new", Value: int64(60)}, {Key: "ok", Value: 1.0}})
	valEq(t, e.indexes("c")[2], "expireAfterSeconds", int32(60))
	// A plain single-field index becomes a TTL index; a compound one cannot.
	r = e.run(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}, {Key: "expireAfterSeconds", Value: 10}}))
	docEq(t, r, bson.D{{Key: "expireAfterSeconds_new", Value: int64(10)}, {Key: "ok", Value: 1.0}})
	valEq(t, e.indexes("c")[1], "expireAfterSeconds", int32(10))
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "x_1_y_1"}, {Key: "expireAfterSeconds", Value: 10}})), 72, "InvalidOptions")
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "t_1"}, {Key: "expireAfterSeconds", Value: -1}})), 72, "InvalidOptions")
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "_id_"}, {Key: "expireAfterSeconds", Value: 10}})), 72, "InvalidOptions")

	// Nothing is silently ignored.
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}, {Key: "hiden", Value: true}})), 40415, "Location40415")
	wantCode(t, e.runErr(bson.D{{Key: "collMod", Value: "c"}, {Key: "bogus", Value: 1}}), 40415, "Location40415")
	wantCode(t, e.runErr(bson.D{{Key: "collMod", Value: "c"}, {Key: "validator", Value: bson.D{}}}), 238, "NotImplemented")
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}})), 72, "InvalidOptions")
	wantCode(t, e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "a_1"}, {Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "hidden", Value: true}})), 72, "InvalidOptions")
	err := e.runErr(collModIndex("c", bson.D{{Key: "name", Value: "nope"}, {Key: "hidden", Value: true}}))
	wantCode(t, err, 27, "IndexNotFound")
	eq(t, "message", errMsg(err), "cannot find index nope for ns "+e.db.Name()+".c")
}

// ---- issue 12, item 8: listCollections and listIndexes cursors ----

func cursorOf(t *testing.T, r bson.Raw, batch string) (int64, []bson.Raw) {
	t.Helper()
	id := val(t, r, "cursor.id").Int64()
	var docs []bson.Raw
	vals, err := val(t, r, "cursor."+batch).Array().Values()
	noErr(t, err, "batch")
	for _, v := range vals {
		docs = append(docs, v.Document())
	}
	return id, docs
}

func TestIssue12AdminListCollectionsCursor(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		e.run(bson.D{{Key: "create", Value: n}})
	}
	list := func(batch any) bson.D {
		return bson.D{{Key: "listCollections", Value: 1}, {Key: "nameOnly", Value: true}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: batch}}}}
	}
	getMore := func(id int64, coll string, n int) bson.D {
		return bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}, {Key: "batchSize", Value: n}}
	}
	var names []string
	r := e.run(list(2))
	eq(t, "ns", val(t, r, "cursor.ns").StringValue(), e.db.Name()+".$cmd.listCollections")
	id, docs := cursorOf(t, r, "firstBatch")
	eq(t, "first batch", len(docs), 2)
	if id == 0 {
		t.Fatalf("listCollections with more to come returned cursor id 0: %s", r)
	}
	for id != 0 {
		for _, d := range docs {
			names = append(names, val(t, d, "name").StringValue())
		}
		r = e.run(getMore(id, "$cmd.listCollections", 2))
		id, docs = cursorOf(t, r, "nextBatch")
	}
	for _, d := range docs {
		names = append(names, val(t, d, "name").StringValue())
	}
	strsEq(t, "names through getMore", names, []string{"a", "b", "c", "d", "e"})
	// The last getMore closed the cursor with the last batch.
	eq(t, "last batch", len(docs), 1)

	// All in the first batch: no cursor.
	id, docs = cursorOf(t, e.run(list(5)), "firstBatch")
	eq(t, "exact batch id", id, int64(0))
	eq(t, "exact batch", len(docs), 5)
	// batchSize 0: an empty first batch and a live cursor, which killCursors ends.
	id, docs = cursorOf(t, e.run(list(0)), "firstBatch")
	eq(t, "empty first batch", len(docs), 0)
	r = e.run(bson.D{{Key: "killCursors", Value: "$cmd.listCollections"}, {Key: "cursors", Value: bson.A{id}}})
	valEq(t, r, "cursorsKilled", bson.A{id})
	wantCode(t, e.runErr(getMore(id, "$cmd.listCollections", 2)), 43, "CursorNotFound")
	// The driver's own iteration with a batch size sees them all.
	cur, err := e.db.ListCollections(e.ctx, bson.D{}, options.ListCollections().SetBatchSize(2))
	noErr(t, err, "ListCollections")
	var all []bson.Raw
	noErr(t, cur.All(e.ctx, &all), "iterate")
	eq(t, "driver iteration", len(all), 5)

	wantCode(t, e.runErr(list(-1)), 51024, "Location51024")
	wantCode(t, e.runErr(list("2")), 14, "TypeMismatch")
	wantCode(t, e.runErr(bson.D{{Key: "listCollections", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "batch", Value: 1}}}}), 40415, "Location40415")
}

func TestIssue12AdminListIndexesCursor(t *testing.T) {
	e := newEnv(t)
	e.run(createIndexCmd("c",
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "b_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "c", Value: 1}}}, {Key: "name", Value: "c_1"}}))
	r := e.run(bson.D{{Key: "listIndexes", Value: "c"}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1}}}})
	eq(t, "ns", val(t, r, "cursor.ns").StringValue(), e.db.Name()+".c")
	id, docs := cursorOf(t, r, "firstBatch")
	if id == 0 || len(docs) != 1 {
		t.Fatalf("listIndexes batchSize 1: %s", r)
	}
	names := []string{val(t, docs[0], "name").StringValue()}
	r = e.run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 2}})
	id2, docs := cursorOf(t, r, "nextBatch")
	eq(t, "same cursor", id2, id)
	for _, d := range docs {
		names = append(names, val(t, d, "name").StringValue())
	}
	r = e.run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
	id2, docs = cursorOf(t, r, "nextBatch")
	eq(t, "exhausted", id2, int64(0))
	for _, d := range docs {
		names = append(names, val(t, d, "name").StringValue())
	}
	strsEq(t, "index names", names, []string{"_id_", "a_1", "b_1", "c_1"})
	// killCursors on a listIndexes cursor.
	id, _ = cursorOf(t, e.run(bson.D{{Key: "listIndexes", Value: "c"}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 0}}}}), "firstBatch")
	r = e.run(bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}})
	valEq(t, r, "cursorsKilled", bson.A{id})
	// The driver, with a batch size, iterates through getMore.
	cur, err := e.coll("c").Indexes().List(e.ctx, options.ListIndexes().SetBatchSize(1))
	noErr(t, err, "Indexes().List")
	var all []bson.Raw
	noErr(t, cur.All(e.ctx, &all), "iterate")
	eq(t, "driver iteration", len(all), 4)
}
