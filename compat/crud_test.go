package compat

import (
	"os"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestCRUD_InsertOneFindOneRoundTrip(t *testing.T) {
	e := newEnv(t)
	res, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: bson.D{{Key: "c", Value: 2.5}}}})
	noErr(t, err, "insertOne")
	eq(t, "insertedID", res.InsertedID, any(int32(1)))
	raw, err := e.coll("c").FindOne(e.ctx, bson.D{{Key: "_id", Value: 1}}).Raw()
	noErr(t, err, "findOne")
	docEq(t, raw, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "x"}, {Key: "b", Value: bson.D{{Key: "c", Value: 2.5}}}})
}

func TestCRUD_InsertGeneratesObjectID(t *testing.T) {
	e := newEnv(t)
	res, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "a", Value: 1}})
	noErr(t, err, "insertOne")
	oid, ok := res.InsertedID.(bson.ObjectID)
	if !ok {
		t.Fatalf("insertedID %T, want ObjectID", res.InsertedID)
	}
	docsEq(t, e.find("c", nil), bson.D{{Key: "_id", Value: oid}, {Key: "a", Value: 1}})
}

func TestCRUD_IdMovedToFront(t *testing.T) {
	e := newEnv(t)
	// The driver leaves a given _id where it is; mongod stores it first.
	_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: "k"}, {Key: "z", Value: 2}})
	noErr(t, err, "insertOne")
	docsEq(t, e.find("c", nil), bson.D{{Key: "_id", Value: "k"}, {Key: "a", Value: 1}, {Key: "z", Value: 2}})
}

func TestCRUD_DuplicateIdIs11000WithKeyPatternAndKeyValue(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 7}})
	_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 7}, {Key: "x", Value: 1}})
	wantCode(t, err, 11000, "")
	we := err.(mongo.WriteException).WriteErrors[0]
	valEq(t, we.Raw, "keyPattern", bson.D{{Key: "_id", Value: 1}})
	valEq(t, we.Raw, "keyValue", bson.D{{Key: "_id", Value: 7}})
	want := "E11000 duplicate key error collection: " + e.db.Name() + ".c index: _id_ dup key: { _id: 7 }"
	eq(t, "errmsg", we.Message, want)
	eq(t, "documents", e.count("c", nil), int64(1))
}

func TestCRUD_InsertManyCountsAndOrder(t *testing.T) {
	e := newEnv(t)
	docs := []any{}
	for i := 1; i <= 250; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "sq", Value: i * i}})
	}
	res, err := e.coll("c").InsertMany(e.ctx, docs)
	noErr(t, err, "insertMany")
	eq(t, "insertedIDs", len(res.InsertedIDs), 250)
	eq(t, "countDocuments", e.count("c", nil), int64(250))
	n, err := e.coll("c").EstimatedDocumentCount(e.ctx)
	noErr(t, err, "estimatedDocumentCount")
	eq(t, "estimatedDocumentCount", n, int64(250))
	eq(t, "count $gt", e.count("c", bson.D{{Key: "sq", Value: bson.D{{Key: "$gt", Value: 10000}}}}), int64(150))
}

func TestCRUD_DeleteOneAndMany(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "a"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "b"}}, bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: "a"}})
	r, err := e.coll("c").DeleteOne(e.ctx, bson.D{{Key: "k", Value: "a"}})
	noErr(t, err, "deleteOne")
	eq(t, "deleteOne deletedCount", r.DeletedCount, int64(1))
	r, err = e.coll("c").DeleteMany(e.ctx, bson.D{{Key: "k", Value: "a"}})
	noErr(t, err, "deleteMany")
	eq(t, "deleteMany deletedCount", r.DeletedCount, int64(2))
	r, err = e.coll("c").DeleteMany(e.ctx, bson.D{{Key: "k", Value: "zzz"}})
	noErr(t, err, "deleteMany none")
	eq(t, "deleteMany none", r.DeletedCount, int64(0))
	strsEq(t, "left", e.ids("c"), idList(3))
}

func TestCRUD_ReplaceOneKeepsId(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: 2}})
	r, err := e.coll("c").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "c", Value: "new"}})
	noErr(t, err, "replaceOne")
	eq(t, "matched", r.MatchedCount, int64(1))
	eq(t, "modified", r.ModifiedCount, int64(1))
	docsEq(t, e.find("c", nil), bson.D{{Key: "_id", Value: 1}, {Key: "c", Value: "new"}})
	// Identical replacement, _id included: matched but not modified (without
	// _id mongod counts it modified: TestIssue12WritesIdenticalReplacement).
	r, err = e.coll("c").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}, {Key: "c", Value: "new"}})
	noErr(t, err, "replaceOne same")
	eq(t, "matched", r.MatchedCount, int64(1))
	eq(t, "modified", r.ModifiedCount, int64(0))
}

func TestCRUD_Distinct(t *testing.T) {
	e := newEnv(t)
	e.insert("c",
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.A{1, 2}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: "x"}},
		bson.D{{Key: "_id", Value: 4}},
		bson.D{{Key: "_id", Value: 5}, {Key: "a", Value: 2}, {Key: "f", Value: true}})
	res := e.coll("c").Distinct(e.ctx, "a", bson.D{})
	arr, err := res.Raw()
	noErr(t, err, "distinct")
	vals, _ := arr.Values()
	got := []string{}
	for _, v := range vals {
		got = append(got, v.String())
	}
	sort.Strings(got)
	strsEq(t, "distinct a", got, []string{`"x"`, `{"$numberInt":"1"}`, `{"$numberInt":"2"}`})
	arr, err = e.coll("c").Distinct(e.ctx, "a", bson.D{{Key: "f", Value: true}}).Raw()
	noErr(t, err, "distinct with query")
	vals, _ = arr.Values()
	eq(t, "distinct with query", len(vals), 1)
}

func TestCRUD_ImplicitCreateAndListCollections(t *testing.T) {
	e := newEnv(t)
	e.insert("implicit", bson.D{{Key: "_id", Value: 1}})
	noErr(t, e.db.CreateCollection(e.ctx, "explicit"), "createCollection")
	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	noErr(t, err, "listCollectionNames")
	sort.Strings(names)
	strsEq(t, "collections", names, []string{"explicit", "implicit"})

	specs, err := e.db.ListCollectionSpecifications(e.ctx, bson.D{{Key: "name", Value: "explicit"}})
	noErr(t, err, "listCollections")
	if len(specs) != 1 {
		t.Fatalf("listCollections filter: %d specs", len(specs))
	}
	s := specs[0]
	eq(t, "type", s.Type, "collection")
	eq(t, "readOnly", s.ReadOnly, false)
	if s.UUID == nil || s.UUID.Subtype != 4 || len(s.UUID.Data) != 16 {
		t.Fatalf("info.uuid %v, want a UUID (binary subtype 4)", s.UUID)
	}
	if s.IDIndex.Name != "_id_" {
		t.Fatalf("idIndex %+v, want _id_", s.IDIndex)
	}
}

func TestCRUD_CreateExistingCollection(t *testing.T) {
	e := newEnv(t)
	e.run(bson.D{{Key: "create", Value: "c"}})
	// Since MongoDB 7.0 (SERVER-60064) creating an existing collection with
	// identical options succeeds and does nothing.
	e.run(bson.D{{Key: "create", Value: "c"}})
	// Different options: NamespaceExists. (mayfly has no capped collections;
	// its defaultTimeToLive is an option mongod does not know.)
	other := bson.E{Key: "defaultTimeToLive", Value: 5}
	if os.Getenv("COMPAT_REFERENCE") == "mongod" {
		other = bson.E{Key: "validator", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: true}}}}}
	}
	err := e.runErr(bson.D{{Key: "create", Value: "c"}, other})
	wantCode(t, err, 48, "NamespaceExists")
}

func TestCRUD_DropCollectionAndDatabase(t *testing.T) {
	needsAdmin(t, "dropDatabase (dbAdmin)")
	e := newEnv(t)
	e.insert("a", bson.D{{Key: "_id", Value: 1}})
	e.insert("b", bson.D{{Key: "_id", Value: 1}})
	r := e.run(bson.D{{Key: "drop", Value: "a"}})
	valEq(t, r, "ok", 1.0)
	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	noErr(t, err, "listCollectionNames")
	strsEq(t, "after drop", names, []string{"b"})
	eq(t, "dropped collection is empty", e.count("a", nil), int64(0))

	noErr(t, e.db.Drop(e.ctx), "dropDatabase")
	dbs, err := e.cli.ListDatabaseNames(e.ctx, bson.D{{Key: "name", Value: e.db.Name()}})
	noErr(t, err, "listDatabases")
	if len(dbs) != 0 {
		t.Fatalf("dropped database still listed: %v", dbs)
	}
}

func TestCRUD_FindWithLimitSkipSort(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 10; i++ {
		e.insert("c", bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i % 3}})
	}
	docs := e.find("c", bson.D{}, options.Find().SetSort(bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: -1}}).SetSkip(2).SetLimit(3))
	got := []string{}
	for _, d := range docs {
		got = append(got, d.Lookup("_id").String())
	}
	// g=0: 9,6,3 ; g=1: 10,7,4,1 ; skip 2 → 3,10,7
	strsEq(t, "ids", got, idList(3, 10, 7))
}
