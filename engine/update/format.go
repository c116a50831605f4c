package update

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The error messages of mongod embed values rendered by BSONElement::toString
// ("a: 1", "{ b: [ 1, 2 ] }"); clients and test suites match on that text, so
// this file reproduces the format closely enough for the values updates meet.

// fmtElem renders a field as "name: value".
func fmtElem(key string, v any) string { return key + ": " + fmtValue(v) }

// fmtDoc renders a document as "{ a: 1, b: 2 }" ("{}" when empty).
func fmtDoc(d bson.D) string {
	if len(d) == 0 {
		return "{}"
	}
	var b strings.Builder
	b.WriteString("{ ")
	for i, e := range d {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(fmtElem(e.Key, e.Value))
	}
	b.WriteString(" }")
	return b.String()
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case nil, bson.Null:
		return "null"
	case bson.Undefined:
		return "undefined"
	case bson.MinKey:
		return "MinKey"
	case bson.MaxKey:
		return "MaxKey"
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		switch {
		case math.IsNaN(x):
			return "nan"
		case math.IsInf(x, 1):
			return "inf"
		case math.IsInf(x, -1):
			return "-inf"
		}
		s := strconv.FormatFloat(x, 'g', 16, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case bson.Decimal128:
		return "NumberDecimal(\"" + x.String() + "\")"
	case string:
		return strconv.Quote(x)
	case bson.Symbol:
		return strconv.Quote(string(x))
	case bool:
		if x {
			return "true"
		}
		return "false"
	case bson.ObjectID:
		return "ObjectId('" + x.Hex() + "')"
	case bson.DateTime:
		return "new Date(" + strconv.FormatInt(int64(x), 10) + ")"
	case bson.Timestamp:
		return "Timestamp(" + strconv.FormatUint(uint64(x.T), 10) + ", " + strconv.FormatUint(uint64(x.I), 10) + ")"
	case bson.Regex:
		return "/" + x.Pattern + "/" + x.Options
	case bson.Binary:
		return "BinData(" + strconv.Itoa(int(x.Subtype)) + ", " + strings.ToUpper(hex.EncodeToString(x.Data)) + ")"
	case bson.JavaScript:
		return string(x)
	case bson.D:
		return fmtDoc(x)
	case bson.A:
		if len(x) == 0 {
			return "[]"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmtValue(e)
		}
		return "[ " + strings.Join(parts, ", ") + " ]"
	case *obj, *arr:
		return fmtValue(fromM(x))
	}
	return "?"
}
