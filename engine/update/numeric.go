package update

import (
	"math"
	"math/big"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Arithmetic for $inc and $mul follows mongod's SafeNum: the result takes
// the "widest" operand type (decimal > double > long > int); int32 results
// that overflow widen to int64, while int64 overflow is an error rather than
// a silent loss of precision.

type numKind int

const (
	kInt numKind = iota
	kLong
	kDouble
	kDecimal
)

func kindOf(v any) (numKind, bool) {
	switch v.(type) {
	case int32:
		return kInt, true
	case int64, int:
		return kLong, true
	case float64:
		return kDouble, true
	case bson.Decimal128:
		return kDecimal, true
	}
	return 0, false
}

// arith computes a+b (mul=false) or a*b. ok is false on int64 overflow.
func arith(a, b any, mul bool) (any, bool) {
	ka, _ := kindOf(a)
	kb, _ := kindOf(b)
	k := max(ka, kb)
	switch k {
	case kInt:
		x, y := int64(a.(int32)), int64(b.(int32))
		var r int64
		if mul {
			r = x * y
		} else {
			r = x + y
		}
		if r >= math.MinInt32 && r <= math.MaxInt32 {
			return int32(r), true
		}
		return r, true
	case kLong:
		x, _ := asInt(a)
		y, _ := asInt(b)
		if mul {
			if x == 0 || y == 0 {
				return int64(0), true
			}
			r := x * y
			if r/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
				return nil, false
			}
			return r, true
		}
		r := x + y
		if (x > 0 && y > 0 && r < 0) || (x < 0 && y < 0 && r >= 0) {
			return nil, false
		}
		return r, true
	case kDouble:
		x, y := toF(a), toF(b)
		if mul {
			return x * y, true
		}
		return x + y, true
	}
	return decArith(toDec(a), toDec(b), mul), true
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

func toF(v any) float64 {
	switch n := v.(type) {
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// toDec converts a number to Decimal128 as mongod does: doubles are rounded
// to 15 significant digits, which is why 1.5 becomes 1.50000000000000.
func toDec(v any) bson.Decimal128 {
	var s string
	switch n := v.(type) {
	case bson.Decimal128:
		return n
	case int32:
		s = strconv.FormatInt(int64(n), 10)
	case int64:
		s = strconv.FormatInt(n, 10)
	case int:
		s = strconv.Itoa(n)
	case float64:
		switch {
		case math.IsNaN(n):
			s = "NaN"
		case math.IsInf(n, 1):
			s = "Infinity"
		case math.IsInf(n, -1):
			s = "-Infinity"
		default:
			s = strconv.FormatFloat(n, 'e', 14, 64)
		}
	}
	d, _ := bson.ParseDecimal128(s)
	return d
}

var decNaN, _ = bson.ParseDecimal128("NaN")

// decArith adds or multiplies two decimals exactly on (coefficient,
// exponent) pairs, rounding to 34 digits only when the result needs it.
func decArith(a, b bson.Decimal128, mul bool) bson.Decimal128 {
	if a.IsNaN() || b.IsNaN() {
		return decNaN
	}
	ia, ib := a.IsInf(), b.IsInf()
	if ia != 0 || ib != 0 {
		var s int
		switch {
		case mul:
			sa, sb := ia, ib
			if sa == 0 {
				if a.IsZero() {
					return decNaN
				}
				sa = decSign(a)
			}
			if sb == 0 {
				if b.IsZero() {
					return decNaN
				}
				sb = decSign(b)
			}
			s = sa * sb
		case ia != 0 && ib != 0 && ia != ib:
			return decNaN
		case ia != 0:
			s = ia
		default:
			s = ib
		}
		if s > 0 {
			d, _ := bson.ParseDecimal128("Infinity")
			return d
		}
		d, _ := bson.ParseDecimal128("-Infinity")
		return d
	}
	ca, ea, _ := a.BigInt()
	cb, eb, _ := b.BigInt()
	var c *big.Int
	var e int
	if mul {
		c = new(big.Int).Mul(ca, cb)
		e = ea + eb
	} else {
		if ea > eb {
			ca = new(big.Int).Mul(ca, pow10(ea-eb))
			ea = eb
		} else if eb > ea {
			cb = new(big.Int).Mul(cb, pow10(eb-ea))
		}
		c = new(big.Int).Add(ca, cb)
		e = min(ea, eb)
	}
	limit := pow10(34)
	for new(big.Int).Abs(c).Cmp(limit) >= 0 {
		q, r := new(big.Int).QuoRem(c, big.NewInt(10), new(big.Int))
		r.Abs(r)
		if r.Int64() > 5 || (r.Int64() == 5 && q.Bit(0) == 1) {
			if c.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		c = q
		e++
	}
	if d, ok := bson.ParseDecimal128FromBigInt(c, e); ok {
		return d
	}
	return decNaN
}

func decSign(d bson.Decimal128) int {
	h, _ := d.GetBytes()
	if h>>63 == 1 {
		return -1
	}
	return 1
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// zeroOf returns 0 in v's numeric type ($mul on a missing field): mongod
// multiplies the argument by int32 0, so -2.5 gives -0.0 and a decimal keeps
// its exponent.
func zeroOf(v any) any {
	r, _ := arith(v, int32(0), true)
	return r
}

// identical is BSON binary equality of values: same types, same values, same
// field names and order. It decides no-ops ("setting a field to its current
// value"), so 1 and 1.0 differ and so do 0.0 and -0.0.
func identical(a, b any) bool {
	if n, ok := a.(int); ok {
		a = normInt(n)
	}
	if n, ok := b.(int); ok {
		b = normInt(n)
	}
	switch x := a.(type) {
	case bson.D:
		y, ok := b.(bson.D)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !identical(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case bson.A:
		y, ok := b.(bson.A)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !identical(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case bson.Binary:
		y, ok := b.(bson.Binary)
		return ok && x.Subtype == y.Subtype && string(x.Data) == string(y.Data)
	case bson.CodeWithScope:
		y, ok := b.(bson.CodeWithScope)
		return ok && x.Code == y.Code && identical(x.Scope, y.Scope)
	case nil:
		return b == nil
	}
	if isUncomparable(a) || isUncomparable(b) {
		return false
	}
	return a == b
}

func isUncomparable(v any) bool {
	switch v.(type) {
	case bson.D, bson.A, bson.Binary, bson.CodeWithScope, bson.M, bson.Raw:
		return true
	}
	return false
}
