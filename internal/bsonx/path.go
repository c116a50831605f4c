package bsonx

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

type missing struct{}

// Missing stands for an absent field where a value is needed (aggregation
// expressions, sort keys). It ranks as null but is distinct from nil.
var Missing any = missing{}

// IsMissing reports whether v is the Missing sentinel.
func IsMissing(v any) bool { _, ok := v.(missing); return ok }

// Get returns the value of a top-level field.
func Get(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Set replaces a top-level field in place or appends it.
func Set(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: key, Value: v})
}

// Delete removes a top-level field.
func Delete(d bson.D, key string) bson.D {
	for i := range d {
		if d[i].Key == key {
			return append(d[:i:i], d[i+1:]...)
		}
	}
	return d
}

// Clone deep-copies a value so that mutating the copy never touches the
// original (documents and arrays are copied; scalars are immutable; binary
// data is shared, since nothing mutates it in place).
func Clone(v any) any {
	switch x := v.(type) {
	case bson.D:
		out := make(bson.D, len(x))
		for i, e := range x {
			out[i] = bson.E{Key: e.Key, Value: Clone(e.Value)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = Clone(e)
		}
		return out
	}
	return v
}

// CloneD deep-copies a document.
func CloneD(d bson.D) bson.D {
	if d == nil {
		return nil
	}
	return Clone(d).(bson.D)
}

// Encode marshals a document.
func Encode(d bson.D) (bson.Raw, error) {
	b, err := bson.Marshal(d)
	return bson.Raw(b), err
}

// TypeName returns MongoDB's $type alias for the value's BSON type.
func TypeName(v any) string {
	switch v.(type) {
	case float64:
		return "double"
	case string:
		return "string"
	case bson.D, bson.M, bson.Raw:
		return "object"
	case bson.A:
		return "array"
	case bson.Binary:
		return "binData"
	case bson.Undefined:
		return "undefined"
	case bson.ObjectID:
		return "objectId"
	case bool:
		return "bool"
	case bson.DateTime:
		return "date"
	case nil, bson.Null:
		return "null"
	case bson.Regex:
		return "regex"
	case bson.DBPointer:
		return "dbPointer"
	case bson.JavaScript:
		return "javascript"
	case bson.Symbol:
		return "symbol"
	case bson.CodeWithScope:
		return "javascriptWithScope"
	case int32:
		return "int"
	case bson.Timestamp:
		return "timestamp"
	case int64, int:
		return "long"
	case bson.Decimal128:
		return "decimal"
	case bson.MinKey:
		return "minKey"
	case bson.MaxKey:
		return "maxKey"
	case missing:
		return "missing"
	}
	return "unknown"
}

// TypeNumber returns the BSON type byte of the value (as $type numbers).
func TypeNumber(v any) int {
	switch v.(type) {
	case float64:
		return 1
	case string:
		return 2
	case bson.D, bson.M, bson.Raw:
		return 3
	case bson.A:
		return 4
	case bson.Binary:
		return 5
	case bson.Undefined:
		return 6
	case bson.ObjectID:
		return 7
	case bool:
		return 8
	case bson.DateTime:
		return 9
	case nil, bson.Null:
		return 10
	case bson.Regex:
		return 11
	case bson.DBPointer:
		return 12
	case bson.JavaScript:
		return 13
	case bson.Symbol:
		return 14
	case bson.CodeWithScope:
		return 15
	case int32:
		return 16
	case bson.Timestamp:
		return 17
	case int64, int:
		return 18
	case bson.Decimal128:
		return 19
	case bson.MinKey:
		return -1
	case bson.MaxKey:
		return 127
	}
	return 0
}
