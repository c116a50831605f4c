package expr

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Numeric kinds in promotion order: the result of arithmetic on two numbers
// is of the wider kind, and integer results that overflow widen further
// (int32 → int64 → double), as mongod does.
const (
	kInt32 = iota
	kInt64
	kDouble
	kDecimal
)

func numKind(v any) int {
	switch v.(type) {
	case int32:
		return kInt32
	case int64, int:
		return kInt64
	case float64:
		return kDouble
	case bson.Decimal128:
		return kDecimal
	}
	return -1
}

// narrowInt returns an int64 result as int32 when the widest input kind was
// int32 and the value fits.
func narrowInt(r int64, kind int) any {
	if kind == kInt32 && r >= math.MinInt32 && r <= math.MaxInt32 {
		return int32(r)
	}
	return r
}

func toF(v any) float64 { f, _ := bsonx.ToFloat(v); return f }

// Add adds two numbers with mongod's type promotion.
func Add(a, b any) any {
	k := max(numKind(a), numKind(b))
	switch k {
	case kInt32, kInt64:
		x, _ := bsonx.ToInt64(a)
		y, _ := bsonx.ToInt64(b)
		r := x + y
		if (x >= 0) == (y >= 0) && (r >= 0) != (x >= 0) {
			return float64(x) + float64(y)
		}
		return narrowInt(r, k)
	case kDouble:
		return toF(a) + toF(b)
	}
	return decArith('+', a, b)
}

// Subtract subtracts two numbers with type promotion.
func Subtract(a, b any) any {
	k := max(numKind(a), numKind(b))
	switch k {
	case kInt32, kInt64:
		x, _ := bsonx.ToInt64(a)
		y, _ := bsonx.ToInt64(b)
		r := x - y
		if (x >= 0) != (y >= 0) && (r >= 0) != (x >= 0) {
			return float64(x) - float64(y)
		}
		return narrowInt(r, k)
	case kDouble:
		return toF(a) - toF(b)
	}
	return decArith('-', a, b)
}

// Multiply multiplies two numbers with type promotion.
func Multiply(a, b any) any {
	k := max(numKind(a), numKind(b))
	switch k {
	case kInt32, kInt64:
		x, _ := bsonx.ToInt64(a)
		y, _ := bsonx.ToInt64(b)
		hi, lo := mul64(x, y)
		if !hi {
			return float64(x) * float64(y)
		}
		return narrowInt(lo, k)
	case kDouble:
		return toF(a) * toF(b)
	}
	return decArith('*', a, b)
}

// mul64 returns (ok, x*y) where ok is false on overflow.
func mul64(x, y int64) (bool, int64) {
	if x == 0 || y == 0 {
		return true, 0
	}
	r := x * y
	if r/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
		return false, 0
	}
	return true, r
}

func isZero(v any) bool {
	switch n := v.(type) {
	case bson.Decimal128:
		return decIsZero(n)
	}
	f, _ := bsonx.ToFloat(v)
	return f == 0
}

func typeNames(vals ...any) string {
	s := ""
	for i, v := range vals {
		if i > 0 {
			s += " and "
		}
		s += bsonx.TypeName(v)
	}
	return s
}

func init() {
	naryOp(0, -1, evalAdd, "$add")
	naryOp(2, 2, func(name string, v []any) (any, error) {
		a, b := v[0], v[1]
		ad, aIsDate := a.(bson.DateTime)
		bd, bIsDate := b.(bson.DateTime)
		switch {
		case bsonx.IsNumber(a) && bsonx.IsNumber(b):
			return Subtract(a, b), nil
		case IsNullish(a) || IsNullish(b):
			return nil, nil
		case aIsDate && bIsDate:
			return int64(ad) - int64(bd), nil
		case aIsDate && bsonx.IsNumber(b):
			return bson.DateTime(int64(ad) - roundMillis(b)), nil
		case aIsDate:
			return nil, mongoerr.New(mongoerr.TypeMismatch, "can't $subtract %s from Date", bsonx.TypeName(b))
		}
		return nil, mongoerr.New(mongoerr.TypeMismatch, "can't $subtract %s from %s", bsonx.TypeName(b), bsonx.TypeName(a))
	}, "$subtract")
	naryOp(0, -1, func(name string, v []any) (any, error) {
		var acc any = int32(1)
		for _, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
			if !bsonx.IsNumber(x) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$multiply only supports numeric types, not %s", bsonx.TypeName(x))
			}
			acc = Multiply(acc, x)
		}
		return acc, nil
	}, "$multiply")
	naryOp(2, 2, func(name string, v []any) (any, error) {
		a, b := v[0], v[1]
		if !bsonx.IsNumber(a) || !bsonx.IsNumber(b) {
			if IsNullish(a) || IsNullish(b) {
				return nil, nil
			}
			return nil, mongoerr.New(mongoerr.TypeMismatch, "$divide only supports numeric types, not %s", typeNames(a, b))
		}
		if isZero(b) {
			return nil, mongoerr.New(2, "can't $divide by zero")
		}
		if numKind(a) == kDecimal || numKind(b) == kDecimal {
			return decArith('/', a, b), nil
		}
		return toF(a) / toF(b), nil
	}, "$divide")
	naryOp(2, 2, func(name string, v []any) (any, error) {
		a, b := v[0], v[1]
		if !bsonx.IsNumber(a) || !bsonx.IsNumber(b) {
			if IsNullish(a) || IsNullish(b) {
				return nil, nil
			}
			return nil, mongoerr.New(16611, "$mod only supports numeric types, not %s", typeNames(a, b))
		}
		if isZero(b) {
			if numKind(a) == kDecimal || numKind(b) == kDecimal {
				return nil, mongoerr.New(5733415, "can't $mod by zero")
			}
			return nil, mongoerr.New(16610, "can't $mod by zero")
		}
		k := max(numKind(a), numKind(b))
		switch k {
		case kInt32, kInt64:
			x, _ := bsonx.ToInt64(a)
			y, _ := bsonx.ToInt64(b)
			if y == -1 {
				return narrowInt(0, k), nil
			}
			return narrowInt(x%y, k), nil
		case kDouble:
			return math.Mod(toF(a), toF(b)), nil
		}
		return decArith('%', a, b), nil
	}, "$mod")

	unaryNum := func(name string, fn func(v any) (any, error)) {
		naryOp(1, 1, func(_ string, v []any) (any, error) {
			if IsNullish(v[0]) {
				return nil, nil
			}
			if !bsonx.IsNumber(v[0]) {
				return nil, mongoerr.New(28765, "%s only supports numeric types, not %s", name, bsonx.TypeName(v[0]))
			}
			return fn(v[0])
		}, name)
	}
	floatOrDec := func(f func(float64) float64) func(any) any {
		return func(v any) any {
			if d, ok := v.(bson.Decimal128); ok {
				return floatToDecimal(f(toF(d)))
			}
			return f(toF(v))
		}
	}
	unaryNum("$abs", func(v any) (any, error) {
		switch n := v.(type) {
		case int32:
			if n < 0 {
				return narrowInt(-int64(n), kInt32), nil
			}
			return n, nil
		case int64:
			if n == math.MinInt64 {
				return nil, mongoerr.New(28680, "can't take $abs of long long min")
			}
			if n < 0 {
				return -n, nil
			}
			return n, nil
		case float64:
			return math.Abs(n), nil
		case bson.Decimal128:
			if d, ok := toDec(n); ok && d.coef.Sign() < 0 {
				d.coef.Neg(d.coef)
				return d.decimal(), nil
			}
			if n.IsInf() < 0 {
				return floatToDecimal(math.Inf(1)), nil
			}
			return n, nil
		}
		return v, nil
	})
	for _, fl := range []struct {
		name string
		f    func(float64) float64
		even bool
	}{{"$ceil", math.Ceil, false}, {"$floor", math.Floor, false}} {
		fl := fl
		unaryNum(fl.name, func(v any) (any, error) {
			switch n := v.(type) {
			case float64:
				return fl.f(n), nil
			case bson.Decimal128:
				d, ok := toDec(n)
				if !ok || d.exp >= 0 {
					return n, nil
				}
				div := pow10(-d.exp)
				q, r := new(bigInt).QuoRem(d.coef, div, new(bigInt))
				if r.Sign() != 0 {
					if fl.name == "$ceil" && r.Sign() > 0 {
						q.Add(q, bigOne)
					} else if fl.name == "$floor" && r.Sign() < 0 {
						q.Sub(q, bigOne)
					}
				}
				return dec{q, 0}.decimal(), nil
			}
			return v, nil
		})
	}
	unaryNum("$exp", func(v any) (any, error) { return floatOrDec(math.Exp)(v), nil })
	unaryNum("$sqrt", func(v any) (any, error) {
		if bsonx.CompareNumbers(v, int32(0)) < 0 {
			return nil, mongoerr.New(28714, "$sqrt's argument must be greater than or equal to 0")
		}
		return floatOrDec(math.Sqrt)(v), nil
	})
	unaryNum("$ln", func(v any) (any, error) {
		if bsonx.CompareNumbers(v, int32(0)) <= 0 && !bsonx.IsNaN(v) {
			return nil, mongoerr.New(28766, "$ln's argument must be a positive number, but is %s", numString(v))
		}
		return floatOrDec(math.Log)(v), nil
	})
	unaryNum("$log10", func(v any) (any, error) {
		if bsonx.CompareNumbers(v, int32(0)) <= 0 && !bsonx.IsNaN(v) {
			return nil, mongoerr.New(28761, "$log10's argument must be a positive number, but is %s", numString(v))
		}
		return floatOrDec(math.Log10)(v), nil
	})
	naryOp(2, 2, func(name string, v []any) (any, error) {
		a, b := v[0], v[1]
		if IsNullish(a) || IsNullish(b) {
			return nil, nil
		}
		if !bsonx.IsNumber(a) {
			return nil, mongoerr.New(28756, "$log's argument must be numeric, not %s", bsonx.TypeName(a))
		}
		if !bsonx.IsNumber(b) {
			return nil, mongoerr.New(28757, "$log's base must be numeric, not %s", bsonx.TypeName(b))
		}
		if bsonx.CompareNumbers(a, int32(0)) <= 0 {
			return nil, mongoerr.New(28758, "$log's argument must be a positive number, but is %s", numString(a))
		}
		if bsonx.CompareNumbers(b, int32(0)) <= 0 || bsonx.CompareNumbers(b, int32(1)) == 0 {
			return nil, mongoerr.New(28759, "$log's base must be a positive number not equal to 1, but is %s", numString(b))
		}
		r := math.Log(toF(a)) / math.Log(toF(b))
		if numKind(a) == kDecimal || numKind(b) == kDecimal {
			return floatToDecimal(r), nil
		}
		return r, nil
	}, "$log")
	naryOp(2, 2, evalPow, "$pow")
	register(compileRound(true), "$round")
	register(compileRound(false), "$trunc")
}

func numString(v any) string { return ExtJSON(v) }

func roundMillis(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(math.Round(n))
	case bson.Decimal128:
		return int64(math.Round(toF(n)))
	}
	i, _ := bsonx.ToInt64(v)
	return i
}

func evalAdd(name string, v []any) (any, error) {
	var acc any = int32(0)
	var date *bson.DateTime
	// Operands are checked left to right: a null operand yields null
	// before any later operand is type-checked, as in mongod.
	for _, x := range v {
		switch n := x.(type) {
		case bson.DateTime:
			if date != nil {
				return nil, mongoerr.New(16612, "only one date allowed in an $add expression")
			}
			d := n
			date = &d
			continue
		}
		if IsNullish(x) {
			return nil, nil
		}
		if !bsonx.IsNumber(x) {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "$add only supports numeric or date types, not %s", bsonx.TypeName(x))
		}
		acc = Add(acc, x)
	}
	if date != nil {
		if bsonx.IsNaN(acc) {
			return nil, mongoerr.New(2, "Can't add NaN to a date")
		}
		return bson.DateTime(int64(*date) + roundMillis(acc)), nil
	}
	return acc, nil
}

func evalPow(name string, v []any) (any, error) {
	a, b := v[0], v[1]
	if IsNullish(a) || IsNullish(b) {
		return nil, nil
	}
	if !bsonx.IsNumber(a) {
		return nil, mongoerr.New(28762, "$pow's base must be numeric, not %s", bsonx.TypeName(a))
	}
	if !bsonx.IsNumber(b) {
		return nil, mongoerr.New(28763, "$pow's exponent must be numeric, not %s", bsonx.TypeName(b))
	}
	if isZero(a) && bsonx.CompareNumbers(b, int32(0)) < 0 {
		return nil, mongoerr.New(28764, "$pow cannot take a base of 0 and a negative exponent")
	}
	k := max(numKind(a), numKind(b))
	if k == kDecimal {
		return floatToDecimal(math.Pow(toF(a), toF(b))), nil
	}
	if k == kDouble {
		return math.Pow(toF(a), toF(b)), nil
	}
	base, _ := bsonx.ToInt64(a)
	exp, _ := bsonx.ToInt64(b)
	if exp < 0 {
		switch base {
		case 1:
			return narrowInt(1, k), nil
		case -1:
			if exp%2 == 0 {
				return narrowInt(1, k), nil
			}
			return narrowInt(-1, k), nil
		}
		return math.Pow(float64(base), float64(exp)), nil
	}
	switch base {
	case 0, 1:
		if exp == 0 {
			return narrowInt(1, k), nil
		}
		return narrowInt(base, k), nil
	case -1:
		if exp%2 == 0 {
			return narrowInt(1, k), nil
		}
		return narrowInt(-1, k), nil
	}
	r := int64(1)
	for i := int64(0); i < exp; i++ {
		ok, n := mul64(r, base)
		if !ok {
			return math.Pow(float64(base), float64(exp)), nil
		}
		r = n
		if r == 0 || r == 1 && base == 1 {
			break
		}
	}
	return narrowInt(r, k), nil
}

// compileRound builds $round (even=true, half to even) or $trunc.
func compileRound(even bool) compileFunc {
	return func(name string, args any, s *scope) (Expr, error) {
		list, err := compileList(name, args, s, 1, 2)
		if err != nil {
			return nil, err
		}
		return &nary{args: list, fn: func(v []any) (any, error) {
			x := v[0]
			if IsNullish(x) {
				return nil, nil
			}
			if !bsonx.IsNumber(x) {
				return nil, mongoerr.New(51081, "%s only supports numeric types, not %s", name, bsonx.TypeName(x))
			}
			place := int64(0)
			if len(v) == 2 {
				if IsNullish(v[1]) {
					return nil, nil
				}
				p, ok := bsonx.ToInt64(v[1])
				if !ok || !bsonx.IsNumber(v[1]) {
					return nil, mongoerr.New(51082, "precision argument to  %s must be a integral value", name)
				}
				if p < -20 || p > 100 {
					return nil, mongoerr.New(51083, "cannot apply %s with precision value %d value must be in [-20, 100]", name, p)
				}
				place = p
			}
			return roundNumber(x, int(place), even), nil
		}}, nil
	}
}

func roundNumber(x any, place int, even bool) any {
	switch n := x.(type) {
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return n
		}
		// mongod rounds doubles through a 34-digit decimal conversion
		// (so 2.675, really 2.67499999..., rounds to 2.67).
		d := decimalRound(floatToDecimal34(n), place, even)
		return toF(d)
	case bson.Decimal128:
		return decimalRound(n, place, even)
	}
	i, _ := bsonx.ToInt64(x)
	if place >= 0 {
		return x
	}
	if place < -18 {
		return narrowInt(0, numKind(x))
	}
	p := int64(1)
	for j := 0; j < -place; j++ {
		p *= 10
	}
	q := i / p
	r := i % p
	if even && r != 0 {
		half := p / 2
		ar := r
		if ar < 0 {
			ar = -ar
		}
		if ar > half || (ar == half && q%2 != 0) {
			if i < 0 {
				q--
			} else {
				q++
			}
		}
	}
	ok, res := mul64(q, p)
	if !ok {
		return float64(q) * float64(p)
	}
	return narrowInt(res, numKind(x))
}
