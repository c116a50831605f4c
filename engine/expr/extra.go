package expr

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Less common operators: trigonometry, bitwise, sizes and timestamps.

func init() {
	trig := map[string]func(float64) float64{
		"$sin": math.Sin, "$cos": math.Cos, "$tan": math.Tan, "$asin": math.Asin, "$acos": math.Acos, "$atan": math.Atan,
		"$sinh": math.Sinh, "$cosh": math.Cosh, "$tanh": math.Tanh, "$asinh": math.Asinh, "$acosh": math.Acosh, "$atanh": math.Atanh,
		"$degreesToRadians": func(x float64) float64 { return x * math.Pi / 180 },
		"$radiansToDegrees": func(x float64) float64 { return x * 180 / math.Pi },
	}
	bounds := map[string][2]float64{"$asin": {-1, 1}, "$acos": {-1, 1}, "$atanh": {-1, 1}, "$acosh": {1, math.Inf(1)}}
	for name, fn := range trig {
		fn := fn
		naryOp(1, 1, func(name string, v []any) (any, error) {
			if IsNullish(v[0]) {
				return nil, nil
			}
			if !bsonx.IsNumber(v[0]) {
				return nil, mongoerr.New(28765, "%s only supports numeric types, not %s", name, bsonx.TypeName(v[0]))
			}
			x := toF(v[0])
			if b, ok := bounds[name]; ok && !math.IsNaN(x) && (x < b[0] || x > b[1]) {
				return nil, mongoerr.New(50989, "cannot apply %s to %s, value must be in [%v,%v]", name, ExtJSON(v[0]), b[0], b[1])
			}
			if (name == "$sin" || name == "$cos" || name == "$tan") && math.IsInf(x, 0) {
				return nil, mongoerr.New(50989, "cannot apply %s to %s, value must be in (-inf,inf)", name, ExtJSON(v[0]))
			}
			if _, ok := v[0].(bson.Decimal128); ok {
				return floatToDecimal(fn(x)), nil
			}
			return fn(x), nil
		}, name)
	}
	naryOp(2, 2, func(name string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		if !bsonx.IsNumber(v[0]) {
			return nil, mongoerr.New(51044, "$atan2 only supports numeric types, not %s", bsonx.TypeName(v[0]))
		}
		if IsNullish(v[1]) {
			return nil, nil
		}
		if !bsonx.IsNumber(v[1]) {
			return nil, mongoerr.New(51045, "$atan2 only supports numeric types, not %s", bsonx.TypeName(v[1]))
		}
		r := math.Atan2(toF(v[0]), toF(v[1]))
		if numKind(v[0]) == kDecimal || numKind(v[1]) == kDecimal {
			return floatToDecimal(r), nil
		}
		return r, nil
	}, "$atan2")
	naryOp(0, -1, func(name string, v []any) (any, error) {
		var acc int64
		switch name {
		case "$bitAnd":
			acc = -1
		}
		kind := kInt32
		for _, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
			k := numKind(x)
			if k != kInt32 && k != kInt64 {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "%s only supports int and long operands.", name)
			}
			kind = max(kind, k)
			i, _ := bsonx.ToInt64(x)
			switch name {
			case "$bitAnd":
				acc &= i
			case "$bitOr":
				acc |= i
			case "$bitXor":
				acc ^= i
			}
		}
		if kind == kInt32 {
			return int32(acc), nil
		}
		return acc, nil
	}, "$bitAnd", "$bitOr", "$bitXor")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		switch x := v[0].(type) {
		case int32:
			return ^x, nil
		case int64:
			return ^x, nil
		}
		if IsNullish(v[0]) {
			return nil, nil
		}
		return nil, mongoerr.New(mongoerr.TypeMismatch, "$bitNot only supports int and long, not: %s.", bsonx.TypeName(v[0]))
	}, "$bitNot")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		d, ok := v[0].(bson.D)
		if !ok {
			return nil, mongoerr.New(31393, "$bsonSize requires a document input, found: %s", bsonx.TypeName(v[0]))
		}
		b, err := bson.Marshal(d)
		if err != nil {
			return nil, mongoerr.New(mongoerr.BadValue, "$bsonSize: %v", err)
		}
		return int32(len(b)), nil
	}, "$bsonSize")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		switch x := v[0].(type) {
		case string:
			return int32(len(x)), nil
		case bson.Binary:
			return int32(len(x.Data)), nil
		}
		if IsNullish(v[0]) {
			return nil, nil
		}
		return nil, mongoerr.New(51276, "$binarySize requires a string or BinData argument, found: %s", bsonx.TypeName(v[0]))
	}, "$binarySize")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		ts, ok := v[0].(bson.Timestamp)
		if !ok {
			code := int32(5687301)
			if name == "$tsIncrement" {
				code = 5687302
			}
			return nil, mongoerr.New(code, " Argument to %s must be a timestamp, but is %s", name, bsonx.TypeName(v[0]))
		}
		if name == "$tsSecond" {
			return int64(ts.T), nil
		}
		return int64(ts.I), nil
	}, "$tsSecond", "$tsIncrement")
}
