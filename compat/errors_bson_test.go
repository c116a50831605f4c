package compat

import (
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestErrors_CommonMistakes(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	cases := []struct {
		name     string
		cmd      bson.D
		code     int32
		codeName string
	}{
		{"unknown command", bson.D{{Key: "frobnicate", Value: 1}}, 59, "CommandNotFound"},
		{"collMod of a missing collection", bson.D{{Key: "collMod", Value: "missing"}}, 26, "NamespaceNotFound"},
		{"collStats of a missing collection", bson.D{{Key: "collStats", Value: "missing"}}, 26, "NamespaceNotFound"},
		{"listIndexes of a missing collection", bson.D{{Key: "listIndexes", Value: "missing"}}, 26, "NamespaceNotFound"},
		{"invalid collection name", bson.D{{Key: "create", Value: "bad$name"}}, 73, "InvalidNamespace"},
		{"unknown field in find", bson.D{{Key: "find", Value: "c"}, {Key: "bogusField", Value: 1}}, 40415, "Location40415"},
		{"filter of the wrong type", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: 5}}, 14, "TypeMismatch"},
		{"unknown index plugin", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: "bogus"}}}, {Key: "name", Value: "a_bogus"}}}}}, 67, "CannotCreateIndex"},
		{"getMore of an unknown cursor", bson.D{{Key: "getMore", Value: int64(424242)}, {Key: "collection", Value: "c"}}, 43, "CursorNotFound"},
		{"unknown query operator", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$bogus", Value: 1}}}}}}, 2, "BadValue"},
		{"unknown pipeline stage", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$bogus", Value: 1}}}}, {Key: "cursor", Value: bson.D{}}}, 40324, "Location40324"},
		{"aggregate without cursor", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}}, 9, "FailedToParse"},
	}
	for _, c := range cases {
		if authPass && c.cmd[0].Key == "collMod" {
			continue // needs collMod (dbAdmin): mongod answers 13 first
		}
		err := e.runErr(c.cmd)
		if err == nil {
			t.Errorf("%s: %s succeeded, want code %d", c.name, ejson(c.cmd), c.code)
			continue
		}
		code, name, _ := errCode(err)
		if code != c.code || name != c.codeName {
			t.Errorf("%s: got %d %s (%v), want %d %s", c.name, code, name, err, c.code, c.codeName)
		}
	}
}

func TestErrors_DropMissingCollectionSucceedsSince70(t *testing.T) {
	e := newEnv(t)
	// MongoDB 7.0 (SERVER-43894): dropping a missing collection is a no-op
	// with ok:1 (before 7.0: NamespaceNotFound, 26). mayfly reports 7.0.
	r := e.run(bson.D{{Key: "drop", Value: "never_existed"}})
	valEq(t, r, "ok", 1.0)
	noErr(t, e.coll("never_existed").Drop(e.ctx), "driver Drop of a missing collection")
}

func TestErrors_InvalidIdField(t *testing.T) {
	e := newEnv(t)
	_, err := e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: bson.A{1, 2}}})
	wantCode(t, err, 53, "")
	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: bson.Regex{Pattern: "x"}}})
	wantCode(t, err, 53, "")
	eq(t, "documents", e.count("c", nil), int64(0))
}

// Documents near the 16 MiB limit: mongod's jstests/core/max_doc_size.js.
func TestLargeDocuments_16MiBLimit(t *testing.T) {
	e := newEnv(t)
	const maxBSON = 16 * 1024 * 1024
	const overhead = 4 + (1 + 4 + 12) + (1 + 2 + 4 + 1) + 1 // {_id: ObjectId, x: ""}
	maxStr := strings.Repeat("a", maxBSON-overhead)
	id := bson.NewObjectID()
	doc := bson.D{{Key: "_id", Value: id}, {Key: "x", Value: maxStr}}
	b, _ := bson.Marshal(doc)
	eq(t, "test document size", len(b), maxBSON)
	_, err := e.coll("c").InsertOne(e.ctx, doc)
	noErr(t, err, "insert a document of exactly 16 MiB")
	raw, err := e.coll("c").FindOne(e.ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	noErr(t, err, "read it back")
	eq(t, "size read back", len(raw), maxBSON)
	eq(t, "string read back", len(val(t, raw, "x").StringValue()), len(maxStr))

	_, err = e.coll("c").InsertOne(e.ctx, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "x", Value: maxStr + "a"}})
	wantCode(t, err, 10334, "")
	// An update that would grow a document past the limit.
	small := bson.NewObjectID()
	e.insert("c", bson.D{{Key: "_id", Value: small}})
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: small}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: maxStr + "a"}}}})
	wantCode(t, err, 10334, "")
	eq(t, "documents", e.count("c", nil), int64(2))
}

// Every BSON type round-trips exactly, types included.
func TestBSONTypes_RoundTripExactly(t *testing.T) {
	e := newEnv(t)
	dec, _ := bson.ParseDecimal128("1.10")
	decNeg, _ := bson.ParseDecimal128("-0")
	decBig, _ := bson.ParseDecimal128("9.999999999999999999999999999999999E+6144")
	decNaN, _ := bson.ParseDecimal128("NaN")
	oid, _ := bson.ObjectIDFromHex("5f1e2d3c4b5a69788796a5b4")
	doc := bson.D{
		{Key: "_id", Value: 1},
		{Key: "double", Value: 1.5},
		{Key: "doubleWhole", Value: 2.0},
		{Key: "negZero", Value: math.Copysign(0, -1)},
		{Key: "inf", Value: math.Inf(1)},
		{Key: "nan", Value: math.NaN()},
		{Key: "string", Value: "héllo ✓"},
		{Key: "emptyString", Value: ""},
		{Key: "doc", Value: bson.D{{Key: "z", Value: 1}, {Key: "a", Value: bson.D{}}}},
		{Key: "array", Value: bson.A{1, "two", bson.A{}, bson.D{{Key: "k", Value: nil}}}},
		{Key: "bin0", Value: bson.Binary{Subtype: 0x00, Data: []byte{0, 1, 2, 255}}},
		{Key: "bin1", Value: bson.Binary{Subtype: 0x01, Data: []byte("fn")}},
		{Key: "bin2", Value: bson.Binary{Subtype: 0x02, Data: []byte{9, 8, 7}}},
		{Key: "bin3", Value: bson.Binary{Subtype: 0x03, Data: make([]byte, 16)}},
		{Key: "bin4", Value: bson.Binary{Subtype: 0x04, Data: []byte{0x12, 0x34, 0x56, 0x78, 0x12, 0x34, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67}}},
		{Key: "bin5", Value: bson.Binary{Subtype: 0x05, Data: make([]byte, 16)}},
		{Key: "bin6", Value: bson.Binary{Subtype: 0x06, Data: []byte{1}}},
		{Key: "bin7", Value: bson.Binary{Subtype: 0x07, Data: []byte{1, 2}}},
		{Key: "bin8", Value: bson.Binary{Subtype: 0x08, Data: []byte("secret")}},
		{Key: "bin80", Value: bson.Binary{Subtype: 0x80, Data: []byte("user")}},
		{Key: "undefined", Value: bson.Undefined{}},
		{Key: "oid", Value: oid},
		{Key: "true", Value: true},
		{Key: "false", Value: false},
		{Key: "date", Value: bson.DateTime(1700000000123)},
		{Key: "dateNeg", Value: bson.DateTime(-86400000 * 365)},
		{Key: "null", Value: nil},
		{Key: "regex", Value: bson.Regex{Pattern: "^a.c$", Options: "imsx"}},
		{Key: "dbpointer", Value: bson.DBPointer{DB: "db.coll", Pointer: oid}},
		{Key: "js", Value: bson.JavaScript("function() { return 1; }")},
		{Key: "symbol", Value: bson.Symbol("sym")},
		{Key: "jsScope", Value: bson.CodeWithScope{Code: "x + 1", Scope: bson.D{{Key: "x", Value: 1}}}},
		{Key: "int32", Value: int32(-7)},
		{Key: "int32max", Value: int32(math.MaxInt32)},
		{Key: "timestamp", Value: bson.Timestamp{T: 1700000000, I: 7}},
		{Key: "int64", Value: int64(7)},
		{Key: "int64min", Value: int64(math.MinInt64)},
		{Key: "decimal", Value: dec},
		{Key: "decimalNegZero", Value: decNeg},
		{Key: "decimalBig", Value: decBig},
		{Key: "decimalNaN", Value: decNaN},
		{Key: "minKey", Value: bson.MinKey{}},
		{Key: "maxKey", Value: bson.MaxKey{}},
		{Key: "dotted.name?", Value: "field names are opaque"},
	}
	_, err := e.coll("t").InsertOne(e.ctx, doc)
	noErr(t, err, "insert every type")
	raw, err := e.coll("t").FindOne(e.ctx, bson.D{{Key: "_id", Value: 1}}).Raw()
	noErr(t, err, "findOne")
	docEq(t, raw, doc)

	// Byte for byte, too.
	want, _ := bson.Marshal(doc)
	if string(raw) != string(want) {
		t.Fatalf("stored bytes differ from inserted bytes")
	}

	// An update of another field leaves every type alone.
	_, err = e.coll("t").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "string", Value: "changed"}}}})
	noErr(t, err, "update")
	raw, _ = e.coll("t").FindOne(e.ctx, bson.D{{Key: "_id", Value: 1}}).Raw()
	for i := range doc {
		if doc[i].Key == "string" {
			doc[i].Value = "changed"
		}
	}
	docEq(t, raw, doc)

	// Equality queries find each value with its exact type.
	for _, f := range []string{"decimal", "int64", "int32", "date", "dateNeg", "bin4", "bin2", "oid", "timestamp", "minKey", "maxKey", "dbpointer", "js", "jsScope", "nan", "negZero"} {
		var v any
		for _, el := range doc {
			if el.Key == f {
				v = el.Value
			}
		}
		n, err := e.coll("t").CountDocuments(e.ctx, bson.D{{Key: f, Value: v}})
		noErr(t, err, "count by "+f)
		if n != 1 {
			t.Errorf("equality query on %s (%s) matched %d documents, want 1", f, ejson(v), n)
		}
	}
	// $type by name.
	for f, typ := range map[string]string{"decimal": "decimal", "int32": "int", "int64": "long", "double": "double", "undefined": "undefined", "symbol": "symbol", "js": "javascript", "jsScope": "javascriptWithScope", "dbpointer": "dbPointer", "timestamp": "timestamp", "minKey": "minKey", "maxKey": "maxKey", "bin4": "binData", "regex": "regex"} {
		n, err := e.coll("t").CountDocuments(e.ctx, bson.D{{Key: f, Value: bson.D{{Key: "$type", Value: typ}}}})
		noErr(t, err, "$type "+typ)
		if n != 1 {
			t.Errorf("{%s: {$type: %q}} matched %d, want 1", f, typ, n)
		}
	}
}

func TestBSONTypes_Int32StaysInt32(t *testing.T) {
	e := newEnv(t)
	e.insert("t", bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(5)}, {Key: "b", Value: int64(5)}, {Key: "c", Value: 5.0}})
	_, err := e.coll("t").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: int64(1)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(1)}, {Key: "c", Value: int32(1)}}}})
	noErr(t, err, "$inc")
	docsEq(t, e.find("t", nil), bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(6)}, {Key: "b", Value: int64(6)}, {Key: "c", Value: 6.0}})
	// Aggregation arithmetic keeps types too.
	got := e.aggregate("t", bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "s", Value: bson.D{{Key: "$add", Value: bson.A{"$a", int32(1)}}}}, {Key: "l", Value: bson.D{{Key: "$add", Value: bson.A{"$a", "$b"}}}}}}}})
	docsEq(t, got, bson.D{{Key: "s", Value: int32(7)}, {Key: "l", Value: int64(12)}})
	// Query by a number of another type finds it.
	n, err := e.coll("t").CountDocuments(e.ctx, bson.D{{Key: "a", Value: 6.0}})
	noErr(t, err, "count")
	eq(t, "cross-type numeric equality", n, int64(1))
}
