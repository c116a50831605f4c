package expr

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

var typeAliases = map[string]string{
	"double": "double", "string": "string", "object": "object", "array": "array", "binData": "binData",
	"objectId": "objectId", "bool": "bool", "date": "date", "null": "null", "regex": "regex",
	"int": "int", "timestamp": "timestamp", "long": "long", "decimal": "decimal",
	"javascript": "javascript", "minKey": "minKey", "maxKey": "maxKey", "undefined": "undefined",
	"symbol": "symbol", "dbPointer": "dbPointer", "javascriptWithScope": "javascriptWithScope",
}

var typeByNumber = map[int64]string{1: "double", 2: "string", 3: "object", 4: "array", 5: "binData", 7: "objectId",
	8: "bool", 9: "date", 10: "null", 11: "regex", 16: "int", 17: "timestamp", 18: "long", 19: "decimal", -1: "minKey", 127: "maxKey"}

type convertExpr struct {
	name                       string
	input, to, onError, onNull Expr
	fixedTo                    string
}

func (c *convertExpr) Eval(env *Env) (any, error) {
	in, err := c.input.Eval(env)
	if err != nil {
		return nil, err
	}
	if IsNullish(in) {
		if c.onNull != nil {
			return c.onNull.Eval(env)
		}
		return nil, nil
	}
	target := c.fixedTo
	if target == "" {
		tv, err := c.to.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(tv) {
			return nil, nil
		}
		if target, err = targetType(tv); err != nil {
			return nil, err
		}
	}
	if IsNullish(in) {
		if c.onNull != nil {
			return c.onNull.Eval(env)
		}
		return nil, nil
	}
	out, err := Convert(in, target)
	if err != nil {
		if c.onError != nil {
			return c.onError.Eval(env)
		}
		return nil, err
	}
	return out, nil
}

func targetType(tv any) (string, error) {
	switch t := tv.(type) {
	case string:
		if n, ok := typeAliases[t]; ok {
			return n, nil
		}
		return "", mongoerr.New(mongoerr.BadValue, "Unknown type name: %s", t)
	case bson.D:
		if tt, ok := bsonx.Get(t, "type"); ok {
			return targetType(tt)
		}
	}
	if n, ok := intArg(tv); ok {
		if s, ok := typeByNumber[n]; ok {
			return s, nil
		}
		return "", mongoerr.New(mongoerr.BadValue, "Invalid type number: %d", n)
	}
	return "", mongoerr.New(mongoerr.FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", bsonx.TypeName(tv))
}

func convFail(in any, to string) error {
	return mongoerr.New(mongoerr.ConversionFailure, "Unsupported conversion from %s to %s in $convert with no onError value", bsonx.TypeName(in), to)
}

// Convert converts a (non-null) value to the named type as $convert does.
func Convert(in any, to string) (any, error) {
	switch to {
	case "double":
		switch x := in.(type) {
		case float64:
			return x, nil
		case int32, int64:
			return toF(x), nil
		case bson.Decimal128:
			f := toF(x)
			if math.IsInf(f, 0) && x.IsInf() == 0 {
				return nil, mongoerr.New(241, "Conversion would overflow target type in $convert with no onError value: %s", x.String())
			}
			return f, nil
		case bool:
			return b2f(x), nil
		case bson.DateTime:
			return float64(x), nil
		case string:
			s := strings.TrimSpace(x)
			if s != x || s == "" {
				break
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				if strings.EqualFold(s, "nan") {
					return math.NaN(), nil
				}
				if s == "Infinity" || s == "inf" || s == "-Infinity" || s == "-inf" {
					return strconv.ParseFloat(strings.Replace(s, "Infinity", "inf", 1), 64)
				}
				return nil, mongoerr.New(241, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
			}
			return f, nil
		}
	case "int", "long":
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if to == "long" {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		var r int64
		switch x := in.(type) {
		case int32:
			r = int64(x)
		case int64:
			r = x
		case float64, bson.Decimal128:
			if bsonx.IsNaN(x) {
				return nil, mongoerr.New(241, "Attempt to convert NaN value to integer type in $convert with no onError value")
			}
			rat := bsonx.ToRat(x)
			if rat == nil {
				return nil, mongoerr.New(241, "Attempt to convert infinity value to integer type in $convert with no onError value")
			}
			q := new(big.Int).Quo(rat.Num(), rat.Denom())
			if !q.IsInt64() || q.Int64() < lo || q.Int64() > hi {
				return nil, mongoerr.New(241, "Conversion would overflow target type in $convert with no onError value: %s", numString(x))
			}
			r = q.Int64()
		case bool:
			if x {
				r = 1
			}
		case bson.DateTime:
			if to == "int" {
				return nil, convFail(in, to)
			}
			r = int64(x)
		case string:
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil || n < lo || n > hi {
				if err == nil || strings.Contains(err.Error(), "range") {
					return nil, mongoerr.New(241, "Failed to parse number '%s' in $convert with no onError value: Overflow", x)
				}
				return nil, mongoerr.New(241, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
			}
			r = n
		default:
			return nil, convFail(in, to)
		}
		if to == "int" {
			if r < lo || r > hi {
				return nil, mongoerr.New(241, "Conversion would overflow target type in $convert with no onError value: %d", r)
			}
			return int32(r), nil
		}
		return r, nil
	case "decimal":
		switch x := in.(type) {
		case int32, int64, float64, bson.Decimal128:
			return toDecimal(x), nil
		case bool:
			if x {
				return toDecimal(int32(1)), nil
			}
			return toDecimal(int32(0)), nil
		case bson.DateTime:
			return toDecimal(int64(x)), nil
		case string:
			d, err := bson.ParseDecimal128(x)
			if err != nil {
				return nil, mongoerr.New(241, "Failed to parse number '%s' in $convert with no onError value: Failed to parse string to decimal", x)
			}
			return d, nil
		}
	case "string":
		switch x := in.(type) {
		case bool:
			if x {
				return "true", nil
			}
			return "false", nil
		case bson.ObjectID:
			return x.Hex(), nil
		case bson.DateTime:
			return formatDate("%Y-%m-%dT%H:%M:%S.%LZ", x, utcZone)
		case string, int32, int64, float64, bson.Decimal128:
			return coerceToString("$convert", x)
		}
	case "bool":
		switch x := in.(type) {
		case bool:
			return x, nil
		case int32, int64, float64, bson.Decimal128:
			return Truthy(x), nil
		case string, bson.ObjectID, bson.DateTime, bson.D, bson.A, bson.Binary, bson.Regex, bson.Timestamp, bson.JavaScript, bson.MinKey, bson.MaxKey:
			return true, nil
		}
	case "date":
		switch x := in.(type) {
		case bson.DateTime:
			return x, nil
		case int64:
			return bson.DateTime(x), nil
		case float64, bson.Decimal128:
			if bsonx.IsNaN(x) || bsonx.ToRat(x) == nil {
				return nil, mongoerr.New(241, "Attempt to convert NaN or infinity value to date in $convert with no onError value")
			}
			i, ok := Convert(x, "long")
			if ok != nil {
				return nil, mongoerr.New(241, "Conversion would overflow target type in $convert with no onError value")
			}
			return bson.DateTime(i.(int64)), nil
		case string:
			d, err := parseDateString(x, "", utcZone)
			if err != nil {
				return nil, mongoerr.New(241, "Error parsing date string '%s'", x)
			}
			return d, nil
		case bson.ObjectID, bson.Timestamp:
			d, _ := toDateTime(x)
			return d, nil
		}
	case "objectId":
		switch x := in.(type) {
		case bson.ObjectID:
			return x, nil
		case string:
			id, err := bson.ObjectIDFromHex(x)
			if err != nil {
				return nil, mongoerr.New(241, "Failed to parse objectId '%s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %d", x, len(x))
			}
			return id, nil
		}
	default:
		if bsonx.TypeName(in) == to {
			return in, nil
		}
	}
	return nil, convFail(in, to)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func init() {
	naryOp(1, 1, func(_ string, v []any) (any, error) { return bsonx.TypeName(v[0]), nil }, "$type")
	naryOp(1, 1, func(_ string, v []any) (any, error) { return bsonx.IsNumber(v[0]), nil }, "$isNumber")
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$convert expects an object of named arguments but found: %s", bsonx.TypeName(args))
		}
		if k := firstUnknown(d, "input", "to", "onError", "onNull", "format", "base"); k != "" {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$convert found an unknown argument: %s", k)
		}
		m, _ := namedArgs(name, args, nil, "input", "to", "onError", "onNull", "format", "base")
		if _, ok := m["input"]; !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Missing 'input' parameter to $convert")
		}
		if _, ok := m["to"]; !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Missing 'to' parameter to $convert")
		}
		c, err := compileAll(m, s, "input", "to", "onError", "onNull")
		if err != nil {
			return nil, err
		}
		ce := &convertExpr{name: name, input: c["input"], to: c["to"], onError: c["onError"], onNull: c["onNull"]}
		if tv, ok := Constant(ce.to); ok && !IsNullish(tv) {
			t, err := targetType(tv)
			if err != nil {
				return nil, err
			}
			ce.fixedTo = t
		}
		return ce, nil
	}, "$convert")
	for name, to := range map[string]string{"$toInt": "int", "$toLong": "long", "$toDouble": "double", "$toDecimal": "decimal",
		"$toString": "string", "$toBool": "bool", "$toDate": "date", "$toObjectId": "objectId"} {
		to := to
		register(func(name string, args any, s *scope) (Expr, error) {
			list, err := compileList(name, args, s, 1, 1)
			if err != nil {
				return nil, err
			}
			return &convertExpr{name: name, input: list[0], fixedTo: to}, nil
		}, name)
	}
}

// Summer accumulates a $sum with mongod's result typing: int32 while every
// input is int32 and the total fits, int64 while inputs are integers and the
// total fits, double once a double appears or int64 overflows, decimal once
// a decimal appears. As in mongod, integers are summed exactly, doubles with
// Kahan compensation and decimals exactly, each apart; the parts are
// combined in the result's type.
type Summer struct {
	kind    int
	i       int64
	bigI    *big.Int // exact integer total once int64 overflowed
	f, comp float64
	hasF    bool
	d       dec
	hasDec  bool
	decSpec []float64 // NaN/Inf decimals, summed as doubles
	N       int64     // count of numeric inputs
}

// Add adds v when it is a number; other values are ignored.
func (s *Summer) Add(v any) {
	k := numKind(v)
	if k < 0 {
		return
	}
	s.N++
	s.kind = max(s.kind, k)
	switch k {
	case kInt32, kInt64:
		x, _ := bsonx.ToInt64(v)
		if s.bigI != nil {
			s.bigI.Add(s.bigI, big.NewInt(x))
			return
		}
		r := s.i + x
		if (s.i >= 0) == (x >= 0) && (r >= 0) != (x >= 0) {
			s.bigI = new(big.Int).Add(big.NewInt(s.i), big.NewInt(x))
			return
		}
		s.i = r
	case kDouble:
		s.hasF = true
		y := v.(float64) - s.comp
		t := s.f + y
		s.comp = (t - s.f) - y
		s.f = t
	case kDecimal:
		dv, ok := toDec(v)
		if !ok {
			s.decSpec = append(s.decSpec, toF(v))
			return
		}
		if !s.hasDec {
			s.d = dec{new(big.Int), 0}
			s.hasDec = true
		}
		a, b, e := align(s.d, dv)
		s.d = dec{new(big.Int).Add(a, b), e}
	}
}

func (s *Summer) intFloat() float64 {
	if s.bigI != nil {
		f, _ := new(big.Float).SetInt(s.bigI).Float64()
		return f
	}
	return float64(s.i)
}

// Result returns the total (int32 0 when nothing was added).
func (s *Summer) Result() any {
	switch {
	case s.kind == kDecimal:
		if len(s.decSpec) > 0 {
			f := s.intFloat() + s.f
			for _, x := range s.decSpec {
				f += x
			}
			return floatToDecimal(f)
		}
		total := s.d
		if !s.hasDec {
			total = dec{new(big.Int), 0}
		}
		ic := big.NewInt(s.i)
		if s.bigI != nil {
			ic = s.bigI
		}
		a, b, e := align(total, dec{ic, 0})
		total = dec{new(big.Int).Add(a, b), e}
		if s.hasF {
			fd, ok := toDec(s.f)
			if !ok {
				return floatToDecimal(s.f)
			}
			a, b, e := align(total, fd)
			total = dec{new(big.Int).Add(a, b), e}
		}
		return total.decimal()
	case s.kind == kDouble || s.bigI != nil:
		return s.intFloat() + s.f
	}
	return narrowInt(s.i, s.kind)
}

// Avg returns the mean of the numbers added (null when there were none):
// a double, or a decimal when any input was decimal.
func (s *Summer) Avg() any {
	if s.N == 0 {
		return nil
	}
	if s.kind == kDecimal {
		return decArith('/', s.Result(), s.N)
	}
	return (s.intFloat() + s.f) / float64(s.N)
}

// StdDev is Welford's running variance over numeric inputs.
type StdDev struct {
	n        int64
	mean, m2 float64
}

// Add includes v when it is a number.
func (s *StdDev) Add(v any) {
	if !bsonx.IsNumber(v) {
		return
	}
	x := toF(v)
	s.n++
	d := x - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (x - s.mean)
}

// Result returns the population (pop=true) or sample standard deviation,
// null when undefined.
func (s *StdDev) Result(pop bool) any {
	if pop {
		if s.n == 0 {
			return nil
		}
		return math.Sqrt(s.m2 / float64(s.n))
	}
	if s.n < 2 {
		return nil
	}
	return math.Sqrt(s.m2 / float64(s.n-1))
}

func init() {
	for _, n := range []string{"$sum", "$avg", "$min", "$max", "$stdDevPop", "$stdDevSamp"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			list, err := compileList(name, args, s, 0, -1)
			if err != nil {
				return nil, err
			}
			single := len(list) == 1
			return &nary{args: list, fn: func(v []any) (any, error) {
				if single {
					if a, ok := v[0].(bson.A); ok {
						v = a
					}
				}
				switch name {
				case "$sum", "$avg":
					var sm Summer
					for _, x := range v {
						sm.Add(x)
					}
					if name == "$sum" {
						return sm.Result(), nil
					}
					return sm.Avg(), nil
				case "$stdDevPop", "$stdDevSamp":
					var sd StdDev
					for _, x := range v {
						sd.Add(x)
					}
					return sd.Result(name == "$stdDevPop"), nil
				}
				var best any = nil
				found := false
				for _, x := range v {
					if IsNullish(x) {
						continue
					}
					c := 0
					if found {
						c = bsonx.Compare(x, best)
					}
					if !found || (name == "$min" && c < 0) || (name == "$max" && c > 0) {
						best, found = x, true
					}
				}
				return best, nil
			}}, nil
		}, n)
	}
}
