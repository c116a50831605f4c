package compat

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestIndexes_CreateListDrop(t *testing.T) {
	e := newEnv(t)
	r := e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: -1}, {Key: "c", Value: 1}}}, {Key: "name", Value: "b_-1_c_1"}, {Key: "unique", Value: true}},
	}}})
	// The collection did not exist: mongod creates it and says so.
	valEq(t, r, "createdCollectionAutomatically", true)
	eq(t, "numIndexesBefore", intOf(t, val(t, r, "numIndexesBefore"), "numIndexesBefore"), int64(1))
	eq(t, "numIndexesAfter", intOf(t, val(t, r, "numIndexesAfter"), "numIndexesAfter"), int64(3))

	ixs := e.indexes("c")
	if len(ixs) != 3 {
		t.Fatalf("listIndexes: %v", ixs)
	}
	docEq(t, ixs[0], bson.D{{Key: "v", Value: 2}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}})
	docEq(t, ixs[1], bson.D{{Key: "v", Value: 2}, {Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}})
	valEq(t, ixs[2], "unique", true)
	valEq(t, ixs[2], "key", bson.D{{Key: "b", Value: -1}, {Key: "c", Value: 1}})

	// Creating the same index again is a no-op.
	r = e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	eq(t, "numIndexesAfter same", intOf(t, val(t, r, "numIndexesAfter"), "numIndexesAfter"), int64(3))
	// Same name, other key: IndexKeySpecsConflict; same key, other options: IndexOptionsConflict.
	err := e.runErr(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "z", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	wantCode(t, err, 86, "IndexKeySpecsConflict")
	err = e.runErr(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "other"}}}}})
	wantCode(t, err, 85, "IndexOptionsConflict")

	noErr(t, e.coll("c").Indexes().DropOne(e.ctx, "a_1"), "dropIndex by name")
	noErr(t, e.coll("c").Indexes().DropWithKey(e.ctx, bson.D{{Key: "b", Value: -1}, {Key: "c", Value: 1}}), "dropIndex by key")
	eq(t, "indexes left", len(e.indexes("c")), 1)
	err = e.coll("c").Indexes().DropOne(e.ctx, "nope_1")
	wantCode(t, err, 27, "IndexNotFound")
	err = e.runErr(bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "_id_"}})
	wantCode(t, err, 72, "InvalidOptions")
}

func TestIndexes_ListIndexesMissingCollectionIsNamespaceNotFound(t *testing.T) {
	e := newEnv(t)
	// (The Go driver's Indexes().List hides this error; mongosh's getIndexes does not.)
	err := e.runErr(bson.D{{Key: "listIndexes", Value: "missing"}, {Key: "cursor", Value: bson.D{}}})
	wantCode(t, err, 26, "NamespaceNotFound")
}

func TestIndexes_UniqueViolation11000WithKeyPatternAndKeyValue(t *testing.T) {
	e := newEnv(t)
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}, {Key: "org", Value: 1}}, Options: options.Index().SetUnique(true)})
	noErr(t, err, "unique index")
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a@x"}, {Key: "org", Value: 7}})
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a@x"}, {Key: "org", Value: 7}})
	wantCode(t, err, 11000, "")
	we := err.(mongo.WriteException).WriteErrors[0]
	valEq(t, we.Raw, "keyPattern", bson.D{{Key: "email", Value: 1}, {Key: "org", Value: 1}})
	valEq(t, we.Raw, "keyValue", bson.D{{Key: "email", Value: "a@x"}, {Key: "org", Value: 7}})
	eq(t, "errmsg", we.Message, `E11000 duplicate key error collection: `+e.db.Name()+`.c index: email_1_org_1 dup key: { email: "a@x", org: 7 }`)

	// Updates that collide are refused too, and leave the document alone.
	e.insert("c", bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "b@x"}, {Key: "org", Value: 7}})
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a@x"}}}})
	wantCode(t, err, 11000, "")
	docsEq(t, e.find("c", bson.D{{Key: "_id", Value: 3}}), bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "b@x"}, {Key: "org", Value: 7}})

	// Missing fields index as null: only one document may lack them.
	_, err = e.coll("n").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	noErr(t, err, "unique index k")
	e.insert("n", bson.D{{Key: "_id", Value: 1}})
	_, err = e.coll("n").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	wantCode(t, err, 11000, "")
	valEq(t, err.(mongo.WriteException).WriteErrors[0].Raw, "keyValue", bson.D{{Key: "k", Value: nil}})
}

func TestIndexes_UniqueOnExistingDuplicatesFails(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 1}})
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	wantCode(t, err, 11000, "DuplicateKey")
	eq(t, "indexes", len(e.indexes("c")), 1)
}

func TestIndexes_SparseAndPartialUnique(t *testing.T) {
	e := newEnv(t)
	_, err := e.coll("c").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)})
	noErr(t, err, "sparse unique")
	e.insert("c", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 1}})
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: 1}})
	wantCode(t, err, 11000, "")

	_, err = e.coll("p").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}},
		Options: options.Index().SetUnique(true).SetPartialFilterExpression(bson.D{{Key: "active", Value: true}})})
	noErr(t, err, "partial unique")
	e.insert("p", bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}, {Key: "active", Value: false}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 1}, {Key: "active", Value: true}})
	_, err = e.coll("p").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 1}, {Key: "active", Value: true}})
	wantCode(t, err, 11000, "")
	ix := e.index("p", "k_1")
	valEq(t, ix, "partialFilterExpression", bson.D{{Key: "active", Value: true}})
}

func TestIndexes_HintUnknownIndexIsBadValue(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	_, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetHint("nope_1"))
	wantCode(t, err, 2, "BadValue")
}
