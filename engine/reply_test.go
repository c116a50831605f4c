package engine

import (
	"bytes"
	"math"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// marshalReply must produce exactly bson.Marshal's bytes.
func TestMarshalReplyMatchesBSONMarshal(t *testing.T) {
	raw, _ := bson.Marshal(bson.D{{Key: "_id", Value: "user1"}, {Key: "f", Value: bson.A{1, "x", bson.D{{Key: "y", Value: nil}}}}})
	dec, _ := bson.ParseDecimal128("1.50")
	cases := []bson.D{
		{},
		{{Key: "ok", Value: 1.0}},
		{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{bson.Raw(raw), bson.Raw(raw)}}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "db.c"}}}, {Key: "ok", Value: 1.0}},
		{{Key: "n", Value: 3}, {Key: "big", Value: 1 << 40}, {Key: "i32", Value: int32(-7)}, {Key: "i64", Value: int64(math.MaxInt64)},
			{Key: "f", Value: math.Inf(-1)}, {Key: "s", Value: "héllo"}, {Key: "b", Value: true}, {Key: "nil", Value: nil},
			{Key: "oid", Value: bson.NewObjectID()}, {Key: "dt", Value: bson.DateTime(1700000000000)}, {Key: "t", Value: time.Unix(5, 0).UTC()},
			{Key: "dec", Value: dec}, {Key: "bin", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}},
			{Key: "re", Value: bson.Regex{Pattern: "^a", Options: "i"}}, {Key: "ts", Value: bson.Timestamp{T: 1, I: 2}},
			{Key: "m", Value: bson.M{"only": "key"}}, {Key: "sl", Value: []any{1, "a"}}, {Key: "sd", Value: []bson.D{{{Key: "x", Value: 1}}}},
			{Key: "ss", Value: []string{"a", "b"}}, {Key: "bytes", Value: []byte{1, 2}}, {Key: "minKey", Value: bson.MinKey{}},
			{Key: "emptyA", Value: bson.A{}}, {Key: "emptyD", Value: bson.D{}}, {Key: "rawInA", Value: bson.A{bson.Raw(raw), bson.A{bson.Raw(raw)}}}},
	}
	for _, d := range cases {
		want, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalReply(d)
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%v:\n got %x\nwant %x", d, got, want)
		}
	}
	if _, err := marshalReply(bson.D{{Key: "a\x00b", Value: 1}}); err == nil {
		t.Error("a NUL in a key must fail, as bson.Marshal does")
	}
	if _, err := marshalReply(bson.D{{Key: "d", Value: bson.Raw{1, 2}}}); err == nil {
		t.Error("a malformed raw document must fail")
	}
}
