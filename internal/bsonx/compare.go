// Package bsonx holds the pure helpers every layer needs over BSON values as
// the driver's bson package decodes them (bson.D for documents, bson.A for
// arrays, Go scalars and bson.* types for the rest): MongoDB's canonical type
// order, the total comparison order, numeric conversion and path lookup.
//
// Everything that orders or compares values (query matching, sort, index key
// encoding, update operators, aggregation) goes through Compare so that the
// server has exactly one notion of BSON order.
package bsonx

import (
	"bytes"
	"math"
	"math/big"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Canonical type ranks, as mongod's canonicalizeBSONType assigns them. Values
// of different ranks compare by rank; numbers of every BSON type share one
// rank and compare by value, as do strings and symbols.
const (
	RankMinKey    = -1
	RankUndefined = 0
	RankNull      = 5
	RankNumber    = 10
	RankString    = 15
	RankObject    = 20
	RankArray     = 25
	RankBinary    = 30
	RankObjectID  = 35
	RankBool      = 40
	RankDate      = 45
	RankTimestamp = 47
	RankRegex     = 50
	RankDBPointer = 55
	RankCode      = 60
	RankCodeScope = 65
	RankMaxKey    = 127
)

// Rank returns the canonical type rank of v. A missing value (Missing) ranks
// as null, which is how MongoDB orders missing fields in sorts and indexes.
func Rank(v any) int {
	switch v.(type) {
	case bson.MinKey:
		return RankMinKey
	case bson.Undefined:
		return RankUndefined
	case nil, bson.Null, missing:
		return RankNull
	case int32, int64, float64, bson.Decimal128, int:
		return RankNumber
	case string, bson.Symbol:
		return RankString
	case bson.D, bson.M, bson.Raw:
		return RankObject
	case bson.A:
		return RankArray
	case bson.Binary:
		return RankBinary
	case bson.ObjectID:
		return RankObjectID
	case bool:
		return RankBool
	case bson.DateTime:
		return RankDate
	case bson.Timestamp:
		return RankTimestamp
	case bson.Regex:
		return RankRegex
	case bson.DBPointer:
		return RankDBPointer
	case bson.JavaScript:
		return RankCode
	case bson.CodeWithScope:
		return RankCodeScope
	case bson.MaxKey:
		return RankMaxKey
	}
	return RankMaxKey + 1
}

// Compare orders two BSON values as MongoDB does with the simple collation:
// first by canonical type rank, then by value within the rank. It returns
// -1, 0 or +1.
func Compare(a, b any) int {
	ra, rb := Rank(a), Rank(b)
	if ra != rb {
		return cmpInt(int64(ra), int64(rb))
	}
	switch ra {
	case RankMinKey, RankMaxKey, RankNull, RankUndefined:
		return 0
	case RankNumber:
		return CompareNumbers(a, b)
	case RankString:
		return strings.Compare(stringOf(a), stringOf(b))
	case RankObject:
		return compareDocs(ToD(a), ToD(b))
	case RankArray:
		return compareArrays(a.(bson.A), b.(bson.A))
	case RankBinary:
		x, y := a.(bson.Binary), b.(bson.Binary)
		if len(x.Data) != len(y.Data) {
			return cmpInt(int64(len(x.Data)), int64(len(y.Data)))
		}
		if x.Subtype != y.Subtype {
			return cmpInt(int64(x.Subtype), int64(y.Subtype))
		}
		return bytes.Compare(x.Data, y.Data)
	case RankObjectID:
		x, y := a.(bson.ObjectID), b.(bson.ObjectID)
		return bytes.Compare(x[:], y[:])
	case RankBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case RankDate:
		return cmpInt(int64(a.(bson.DateTime)), int64(b.(bson.DateTime)))
	case RankTimestamp:
		x, y := a.(bson.Timestamp), b.(bson.Timestamp)
		if x.T != y.T {
			return cmpUint(uint64(x.T), uint64(y.T))
		}
		return cmpUint(uint64(x.I), uint64(y.I))
	case RankRegex:
		x, y := a.(bson.Regex), b.(bson.Regex)
		if c := strings.Compare(x.Pattern, y.Pattern); c != 0 {
			return c
		}
		return strings.Compare(x.Options, y.Options)
	case RankDBPointer:
		x, y := a.(bson.DBPointer), b.(bson.DBPointer)
		if len(x.DB) != len(y.DB) {
			return cmpInt(int64(len(x.DB)), int64(len(y.DB)))
		}
		if c := strings.Compare(x.DB, y.DB); c != 0 {
			return c
		}
		return bytes.Compare(x.Pointer[:], y.Pointer[:])
	case RankCode:
		return strings.Compare(string(a.(bson.JavaScript)), string(b.(bson.JavaScript)))
	case RankCodeScope:
		x, y := a.(bson.CodeWithScope), b.(bson.CodeWithScope)
		if c := strings.Compare(string(x.Code), string(y.Code)); c != 0 {
			return c
		}
		return Compare(x.Scope, y.Scope)
	}
	return 0
}

// Equal reports whether a and b are equal in BSON order (numbers by value,
// documents field by field including names and order).
func Equal(a, b any) bool { return Compare(a, b) == 0 }

func stringOf(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case bson.Symbol:
		return string(s)
	}
	return ""
}

// ToD converts any document representation to bson.D (nil when v is not a
// document). bson.M loses its order, so it is only accepted for convenience.
func ToD(v any) bson.D {
	switch d := v.(type) {
	case bson.D:
		return d
	case bson.Raw:
		var out bson.D
		if err := bson.Unmarshal(d, &out); err != nil {
			return nil
		}
		return out
	case bson.M:
		out := make(bson.D, 0, len(d))
		for k, v := range d {
			out = append(out, bson.E{Key: k, Value: v})
		}
		return out
	}
	return nil
}

func compareDocs(x, y bson.D) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := cmpInt(int64(Rank(x[i].Value)), int64(Rank(y[i].Value))); c != 0 {
			return c
		}
		if c := strings.Compare(x[i].Key, y[i].Key); c != 0 {
			return c
		}
		if c := Compare(x[i].Value, y[i].Value); c != 0 {
			return c
		}
	}
	return cmpInt(int64(len(x)), int64(len(y)))
}

func compareArrays(x, y bson.A) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := Compare(x[i], y[i]); c != 0 {
			return c
		}
	}
	return cmpInt(int64(len(x)), int64(len(y)))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompareNumbers compares two numeric values of any BSON numeric type by
// value, exactly (no rounding through float64 for large integers or
// decimals). NaN sorts before every other number and equals NaN.
func CompareNumbers(a, b any) int {
	an, bn := IsNaN(a), IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	case bn:
		return 1
	}
	_, ad := a.(bson.Decimal128)
	_, bd := b.(bson.Decimal128)
	if ad || bd {
		return compareRat(a, b)
	}
	ai, aInt := asInt64(a)
	bi, bInt := asInt64(b)
	switch {
	case aInt && bInt:
		return cmpInt(ai, bi)
	case aInt:
		return -compareFloatInt(b.(float64), ai)
	case bInt:
		return compareFloatInt(a.(float64), bi)
	}
	af, bf := a.(float64), b.(float64)
	switch {
	case af < bf:
		return -1
	case af > bf:
		return 1
	}
	return 0
}

func asInt64(v any) (int64, bool) {
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

// compareFloatInt compares a (non-NaN) float64 with an int64 exactly.
func compareFloatInt(f float64, i int64) int {
	if f >= 9223372036854775808.0 {
		return 1
	}
	if f < -9223372036854775808.0 {
		return -1
	}
	t := math.Trunc(f)
	ti := int64(t)
	if ti != i {
		return cmpInt(ti, i)
	}
	switch {
	case f > t:
		return 1
	case f < t:
		return -1
	}
	return 0
}

// compareRat handles comparisons involving Decimal128, including infinities.
func compareRat(a, b any) int {
	ainf, binf := infSign(a), infSign(b)
	if ainf != 0 || binf != 0 {
		return cmpInt(int64(ainf), int64(binf))
	}
	ar, br := ToRat(a), ToRat(b)
	if ar == nil || br == nil {
		return 0
	}
	return ar.Cmp(br)
}

func infSign(v any) int {
	switch n := v.(type) {
	case float64:
		if math.IsInf(n, 1) {
			return 1
		}
		if math.IsInf(n, -1) {
			return -1
		}
	case bson.Decimal128:
		return n.IsInf()
	}
	return 0
}

// ToRat converts a finite number to an exact rational (nil for NaN/Inf or
// non-numbers).
func ToRat(v any) *big.Rat {
	switch n := v.(type) {
	case int32:
		return new(big.Rat).SetInt64(int64(n))
	case int64:
		return new(big.Rat).SetInt64(n)
	case int:
		return new(big.Rat).SetInt64(int64(n))
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return nil
		}
		return new(big.Rat).SetFloat64(n)
	case bson.Decimal128:
		if n.IsNaN() || n.IsInf() != 0 {
			return nil
		}
		bi, exp, err := n.BigInt()
		if err != nil {
			return nil
		}
		r := new(big.Rat).SetInt(bi)
		if exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)))
		} else if exp < 0 {
			r.Quo(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-exp)), nil)))
		}
		return r
	}
	return nil
}

// IsNumber reports whether v is a BSON number (int32, int64, double, decimal).
func IsNumber(v any) bool { return Rank(v) == RankNumber }

// IsNaN reports whether v is a double or decimal NaN.
func IsNaN(v any) bool {
	switch n := v.(type) {
	case float64:
		return math.IsNaN(n)
	case bson.Decimal128:
		return n.IsNaN()
	}
	return false
}

// ToFloat converts a number to float64 (decimals and large int64 round).
func ToFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case bson.Decimal128:
		if n.IsNaN() {
			return math.NaN(), true
		}
		if s := n.IsInf(); s != 0 {
			return math.Inf(s), true
		}
		r := ToRat(n)
		if r == nil {
			return 0, false
		}
		f, _ := r.Float64()
		return f, true
	}
	return 0, false
}

// ToInt64 converts a number that holds an integral value to int64. ok is
// false for non-numbers, fractions, NaN and values out of int64's range.
func ToInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.IsNaN(n) || n >= 9223372036854775808.0 || n < -9223372036854775808.0 {
			return 0, false
		}
		return int64(n), true
	case bson.Decimal128:
		r := ToRat(n)
		if r == nil || !r.IsInt() || !r.Num().IsInt64() {
			return 0, false
		}
		return r.Num().Int64(), true
	}
	return 0, false
}
