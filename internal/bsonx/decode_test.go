package bsonx

import (
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Decode must produce exactly what bson.Unmarshal into bson.D produces, for
// every BSON type, nested.
func TestDecodeMatchesUnmarshal(t *testing.T) {
	oid := bson.NewObjectID()
	doc := bson.D{
		{Key: "d", Value: 1.5}, {Key: "s", Value: "str"}, {Key: "o", Value: bson.D{{Key: "x", Value: int32(1)}}},
		{Key: "a", Value: bson.A{int32(1), "x", bson.A{}, bson.D{}}}, {Key: "b", Value: bson.Binary{Subtype: 4, Data: []byte{1, 2}}},
		{Key: "u", Value: bson.Undefined{}}, {Key: "oid", Value: oid}, {Key: "t", Value: true}, {Key: "dt", Value: bson.DateTime(123)},
		{Key: "n", Value: nil}, {Key: "re", Value: bson.Regex{Pattern: "a.*", Options: "i"}},
		{Key: "ptr", Value: bson.DBPointer{DB: "db.c", Pointer: oid}}, {Key: "js", Value: bson.JavaScript("f()")},
		{Key: "sym", Value: bson.Symbol("sym")}, {Key: "cws", Value: bson.CodeWithScope{Code: "g()", Scope: bson.D{{Key: "v", Value: int32(2)}}}},
		{Key: "i32", Value: int32(-7)}, {Key: "ts", Value: bson.Timestamp{T: 9, I: 3}}, {Key: "i64", Value: int64(1) << 40},
		{Key: "dec", Value: bson.NewDecimal128(1, 2)}, {Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var want bson.D
	if err := bson.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode differs from Unmarshal:\n got %#v\nwant %#v", got, want)
	}
	back, _ := bson.Marshal(got)
	if string(back) != string(raw) {
		t.Fatal("round trip changed bytes")
	}
	if _, err := Decode(raw[:len(raw)-3]); err == nil {
		t.Fatal("truncated document accepted")
	}
}

func BenchmarkDecode(b *testing.B) {
	raw, _ := bson.Marshal(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: int32(5)}}},
		{Key: "limit", Value: int32(1)}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}, {Key: "$db", Value: "test"}})
	b.Run("bsonx", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Decode(raw)
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var d bson.D
			bson.Unmarshal(raw, &d)
		}
	})
}
