package bsonx

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Decode converts a raw document into bson.D with nested bson.D / bson.A
// and the same Go types bson.Unmarshal produces, walking the driver's raw
// element accessors instead of its reflection-based decoder: this runs for
// every command and every document a query filters, and is several times
// faster. The result may share byte slices (binary data) with raw.
func Decode(raw bson.Raw) (bson.D, error) {
	elems, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	out := make(bson.D, len(elems))
	for i, e := range elems {
		v, err := fromRaw(e.Value())
		if err != nil {
			return nil, err
		}
		out[i] = bson.E{Key: e.Key(), Value: v}
	}
	return out, nil
}

func decodeArray(raw bson.RawArray) (bson.A, error) {
	vals, err := raw.Values()
	if err != nil {
		return nil, err
	}
	out := make(bson.A, len(vals))
	for i, rv := range vals {
		v, err := fromRaw(rv)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// FromRaw converts one raw value (see Decode).
func FromRaw(rv bson.RawValue) (any, error) { return fromRaw(rv) }

func fromRaw(rv bson.RawValue) (any, error) {
	switch rv.Type {
	case bson.TypeDouble:
		return rv.Double(), nil
	case bson.TypeString:
		return rv.StringValue(), nil
	case bson.TypeEmbeddedDocument:
		return Decode(rv.Document())
	case bson.TypeArray:
		return decodeArray(rv.Array())
	case bson.TypeBinary:
		st, data := rv.Binary()
		return bson.Binary{Subtype: st, Data: data}, nil
	case bson.TypeUndefined:
		return bson.Undefined{}, nil
	case bson.TypeObjectID:
		return rv.ObjectID(), nil
	case bson.TypeBoolean:
		return rv.Boolean(), nil
	case bson.TypeDateTime:
		return bson.DateTime(rv.DateTime()), nil
	case bson.TypeNull:
		return nil, nil
	case bson.TypeRegex:
		p, o := rv.Regex()
		return bson.Regex{Pattern: p, Options: o}, nil
	case bson.TypeDBPointer:
		ns, oid := rv.DBPointer()
		return bson.DBPointer{DB: ns, Pointer: oid}, nil
	case bson.TypeJavaScript:
		return bson.JavaScript(rv.JavaScript()), nil
	case bson.TypeSymbol:
		return bson.Symbol(rv.Symbol()), nil
	case bson.TypeCodeWithScope:
		code, scope := rv.CodeWithScope()
		d, err := Decode(scope)
		if err != nil {
			return nil, err
		}
		return bson.CodeWithScope{Code: bson.JavaScript(code), Scope: d}, nil
	case bson.TypeInt32:
		return rv.Int32(), nil
	case bson.TypeTimestamp:
		t, i := rv.Timestamp()
		return bson.Timestamp{T: t, I: i}, nil
	case bson.TypeInt64:
		return rv.Int64(), nil
	case bson.TypeDecimal128:
		return rv.Decimal128(), nil
	case bson.TypeMinKey:
		return bson.MinKey{}, nil
	case bson.TypeMaxKey:
		return bson.MaxKey{}, nil
	}
	// Unknown type byte: let the driver's decoder report it.
	var d bson.D
	err := bson.Unmarshal(rv.Value, &d)
	return nil, err
}
