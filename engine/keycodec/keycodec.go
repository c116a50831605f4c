// Package keycodec is the one order-preserving byte encoding of BSON values
// used for _id keys and every index key: bytes.Compare on two encodings has
// the sign of bsonx.Compare on the values, so a Pebble range scan over
// encoded keys is an index range scan in MongoDB's order.
//
// Three properties make the encoding composable:
//
//   - Order: bytes.Compare(AppendValue(nil, a), AppendValue(nil, b)) ==
//     bsonx.Compare(a, b) for every pair of values, across types.
//   - Canonical: values that compare equal encode to identical bytes
//     (int32 1, int64 1, 1.0 and Decimal128 "1.00" are one key; a string and
//     a symbol with the same bytes are one key), so unique indexes and _id
//     treat them as duplicates, as mongod does.
//   - Prefix-free: no encoding is a proper prefix of another. Together with
//     canonicity this makes concatenations (compound keys) order
//     lexicographically by their components, and lets AppendValueDesc simply
//     invert every byte: two distinct values differ at a byte inside both
//     encodings, where inversion reverses the order.
//
// Layout: one type byte whose order follows bsonx's canonical ranks, then a
// body specific to the type (see the append* functions). Numbers of every
// BSON type share one exact decimal form — sign, decimal exponent, base-100
// mantissa digits — which represents every int64, float64 and Decimal128
// exactly, so cross-type numeric comparisons are exact. The price is that a
// fractional double such as 0.1 carries its full binary expansion (55
// significant digits, ~30 bytes); integers stay short.
//
// Because equal numbers of different types share bytes, DecodeValue cannot
// recover the original numeric type: it returns the canonical type documented
// there. The engine never needs the exact type from a key — documents hold the
// real values.
package keycodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

// Type bytes, in bsonx rank order. 0x00 is reserved as the terminator of
// documents and arrays, so every type byte must be greater than it.
const (
	tagMinKey    = 0x0A
	tagUndefined = 0x0F
	tagNull      = 0x14
	tagNumber    = 0x1E
	tagString    = 0x28
	tagObject    = 0x32
	tagArray     = 0x3C
	tagBinary    = 0x46
	tagObjectID  = 0x50
	tagBool      = 0x5A
	tagDate      = 0x64
	tagTimestamp = 0x6E
	tagRegex     = 0x78
	tagDBPointer = 0x82
	tagCode      = 0x8C
	tagCodeScope = 0x96
	tagMaxKey    = 0xF0
	// tagUnknown covers Go values bsonx does not rank (Rank > MaxKey). They
	// all compare equal there, so they share one bodiless encoding.
	tagUnknown = 0xFA
)

// Number sub-tags, in numeric order (NaN lowest, as in bsonx).
const (
	numNaN    = 0x01
	numNegInf = 0x02
	numNeg    = 0x03
	numZero   = 0x04
	numPos    = 0x05
	numPosInf = 0x06
)

// endMarker terminates documents and arrays; it sorts below every type byte,
// which makes a shorter document (or array) that is a prefix of a longer one
// sort first.
const endMarker = 0x00

// expBias keeps the decimal exponent (-6175..6145 for Decimal128, much less
// for doubles) positive in two big-endian bytes.
const expBias = 0x8000

func tagOf(v any) byte {
	switch bsonx.Rank(v) {
	case bsonx.RankMinKey:
		return tagMinKey
	case bsonx.RankUndefined:
		return tagUndefined
	case bsonx.RankNull:
		return tagNull
	case bsonx.RankNumber:
		return tagNumber
	case bsonx.RankString:
		return tagString
	case bsonx.RankObject:
		return tagObject
	case bsonx.RankArray:
		return tagArray
	case bsonx.RankBinary:
		return tagBinary
	case bsonx.RankObjectID:
		return tagObjectID
	case bsonx.RankBool:
		return tagBool
	case bsonx.RankDate:
		return tagDate
	case bsonx.RankTimestamp:
		return tagTimestamp
	case bsonx.RankRegex:
		return tagRegex
	case bsonx.RankDBPointer:
		return tagDBPointer
	case bsonx.RankCode:
		return tagCode
	case bsonx.RankCodeScope:
		return tagCodeScope
	case bsonx.RankMaxKey:
		return tagMaxKey
	}
	return tagUnknown
}

// AppendValue appends the ascending, self-delimiting encoding of v to dst.
// v is a value as the driver's bson package decodes it (bson.D, bson.A, Go
// scalars, bson.* types); bson.M and bson.Raw are accepted as documents,
// bsonx.Missing encodes as null (MongoDB indexes a missing field as null).
func AppendValue(dst []byte, v any) []byte {
	tag := tagOf(v)
	return appendBody(append(dst, tag), tag, v)
}

// appendBody appends the encoding of v after its type byte.
func appendBody(dst []byte, tag byte, v any) []byte {
	switch tag {
	case tagNumber:
		return appendNumber(dst, v)
	case tagString:
		switch s := v.(type) {
		case string:
			return appendString(dst, s)
		case bson.Symbol:
			return appendString(dst, string(s))
		}
	case tagObject:
		return appendDoc(dst, bsonx.ToD(v))
	case tagArray:
		for _, e := range v.(bson.A) {
			dst = AppendValue(dst, e)
		}
		return append(dst, endMarker)
	case tagBinary:
		b := v.(bson.Binary)
		// bsonx orders binaries by length first, then subtype, then bytes.
		dst = appendUvarint(dst, uint64(len(b.Data)))
		dst = append(dst, b.Subtype)
		return append(dst, b.Data...)
	case tagObjectID:
		id := v.(bson.ObjectID)
		return append(dst, id[:]...)
	case tagBool:
		if v.(bool) {
			return append(dst, 1)
		}
		return append(dst, 0)
	case tagDate:
		return binary.BigEndian.AppendUint64(dst, uint64(int64(v.(bson.DateTime)))^(1<<63))
	case tagTimestamp:
		ts := v.(bson.Timestamp)
		dst = binary.BigEndian.AppendUint32(dst, ts.T)
		return binary.BigEndian.AppendUint32(dst, ts.I)
	case tagRegex:
		re := v.(bson.Regex)
		dst = appendString(dst, re.Pattern)
		return appendString(dst, re.Options)
	case tagDBPointer:
		p := v.(bson.DBPointer)
		// bsonx orders DBPointers by namespace length first.
		dst = appendUvarint(dst, uint64(len(p.DB)))
		dst = append(dst, p.DB...)
		return append(dst, p.Pointer[:]...)
	case tagCode:
		return appendString(dst, string(v.(bson.JavaScript)))
	case tagCodeScope:
		c := v.(bson.CodeWithScope)
		dst = appendString(dst, string(c.Code))
		return AppendValue(dst, c.Scope)
	}
	// MinKey, MaxKey, null, undefined, unknown: the type byte is the value.
	return dst
}

// AppendValueDesc appends the descending encoding of v: the ascending
// encoding with every byte inverted. It is still self-delimiting, and for
// distinct values the order is exactly reversed because the ascending
// encoding is prefix-free.
func AppendValueDesc(dst []byte, v any) []byte {
	n := len(dst)
	dst = AppendValue(dst, v)
	for i := n; i < len(dst); i++ {
		dst[i] = ^dst[i]
	}
	return dst
}

// appendDoc encodes a document element by element as (type byte of the
// value, field name, value body), the order in which bsonx compares
// elements, then endMarker.
func appendDoc(dst []byte, d bson.D) []byte {
	for _, e := range d {
		tag := tagOf(e.Value)
		dst = append(dst, tag)
		dst = appendString(dst, e.Key)
		dst = appendBody(dst, tag, e.Value)
	}
	return append(dst, endMarker)
}

// appendString writes s with 0x00 escaped as 0x00 0xFF and terminated by
// 0x00 0x01: the terminator sorts below every content byte and every
// escaped NUL, so a string sorts before its extensions, and bytes compare as
// in strings.Compare.
func appendString(dst []byte, s string) []byte {
	for {
		i := indexNUL(s)
		if i < 0 {
			dst = append(dst, s...)
			break
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xFF)
		s = s[i+1:]
	}
	return append(dst, 0x00, 0x01)
}

func indexNUL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

// appendUvarint writes x so that byte order is numeric order: values below
// 0xF8 take one byte; larger ones a 0xF7+k prefix then k big-endian bytes,
// with k minimal, so more bytes always means a larger value.
func appendUvarint(dst []byte, x uint64) []byte {
	if x < 0xF8 {
		return append(dst, byte(x))
	}
	k := (bits.Len64(x) + 7) / 8
	dst = append(dst, byte(0xF7+k))
	for i := k - 1; i >= 0; i-- {
		dst = append(dst, byte(x>>(8*i)))
	}
	return dst
}

// ---- numbers ----

// appendNumber writes the numeric body: a sub-tag (NaN < -Inf < negative <
// zero < positive < +Inf) and, for finite non-zero values written as
// ±0.d1d2…dn × 10^E with d1 ≠ 0 and dn ≠ 0, the exponent E then the digits
// in base-100 pairs (pair+1, so 1..100) ended by 0x00. Negative values
// invert the exponent and digit bytes so larger magnitudes sort first.
// Stripping trailing zeros makes equal values encode identically whatever
// their type or decimal scale.
func appendNumber(dst []byte, v any) []byte {
	var buf [40]byte
	switch n := v.(type) {
	case int32:
		return appendInt(dst, int64(n), &buf)
	case int64:
		return appendInt(dst, n, &buf)
	case int:
		return appendInt(dst, int64(n), &buf)
	case float64:
		return appendFloat(dst, n, &buf)
	case bson.Decimal128:
		return appendDecimal(dst, n, &buf)
	}
	return append(dst, numNaN)
}

func appendInt(dst []byte, i int64, buf *[40]byte) []byte {
	if i == 0 {
		return append(dst, numZero)
	}
	neg := i < 0
	u := uint64(i)
	if neg {
		u = -u
	}
	digits := strconv.AppendUint(buf[:0], u, 10)
	return appendDecimalDigits(dst, neg, digits, len(digits))
}

func appendFloat(dst []byte, f float64, buf *[40]byte) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, numNaN)
	case math.IsInf(f, 1):
		return append(dst, numPosInf)
	case math.IsInf(f, -1):
		return append(dst, numNegInf)
	case f == 0:
		return append(dst, numZero) // -0.0 == 0
	}
	if f == math.Trunc(f) && f > -9.2e18 && f < 9.2e18 {
		return appendInt(dst, int64(f), buf)
	}
	neg := f < 0
	mant, exp := math.Frexp(math.Abs(f)) // f = mant × 2^exp, mant in [0.5, 1)
	m := uint64(mant * (1 << 53))
	exp -= 53
	tz := bits.TrailingZeros64(m)
	m >>= tz
	exp += tz
	// |f| = m × 2^exp with m odd. For exp < 0 its exact decimal expansion is
	// m × 5^-exp × 10^exp, which ends in 5 (no trailing zeros); for exp > 0
	// it is the integer m << exp.
	if exp < 0 && -exp <= 27 {
		// Fast path: 5^27 < 2^64, so m × 5^k fits in 128 bits.
		hi, lo := bits.Mul64(m, pow5[-exp])
		digits := appendUint128(buf[:0], hi, lo)
		return appendDecimalDigits(dst, neg, digits, len(digits)+exp)
	}
	if exp > 0 && bits.Len64(m)+exp <= 128 {
		var hi, lo uint64
		if exp >= 64 {
			hi = m << (exp - 64)
		} else {
			hi, lo = m>>(64-exp), m<<exp
		}
		digits := appendUint128(buf[:0], hi, lo)
		return appendDecimalDigits(dst, neg, digits, len(digits))
	}
	d := new(big.Int).SetUint64(m)
	scale := 0
	if exp < 0 {
		d.Mul(d, new(big.Int).Exp(big.NewInt(5), big.NewInt(int64(-exp)), nil))
		scale = -exp
	} else {
		d.Lsh(d, uint(exp))
	}
	digits := d.Append(buf[:0], 10)
	return appendDecimalDigits(dst, neg, digits, len(digits)-scale)
}

func appendDecimal(dst []byte, d bson.Decimal128, buf *[40]byte) []byte {
	if d.IsNaN() {
		return append(dst, numNaN)
	}
	if s := d.IsInf(); s != 0 {
		if s > 0 {
			return append(dst, numPosInf)
		}
		return append(dst, numNegInf)
	}
	high, low := d.GetBytes()
	neg := high>>63 == 1
	var exp int
	if high>>61&3 == 3 {
		// Non-canonical significand: the BSON spec (and the driver's BigInt,
		// which bsonx.ToRat uses) read it as zero.
		high, low = 0, 0
	} else {
		exp = int(high>>49&(1<<14-1)) - 6176
		high &= 1<<49 - 1
	}
	if high == 0 && low == 0 {
		return append(dst, numZero)
	}
	digits := appendUint128(buf[:0], high, low)
	return appendDecimalDigits(dst, neg, digits, len(digits)+exp)
}

// pow5[k] = 5^k for the float fast path.
var pow5 = func() (p [28]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 5
	}
	return p
}()

// appendUint128 appends the decimal digits of hi:lo without allocating.
func appendUint128(dst []byte, hi, lo uint64) []byte {
	const e19 = 10000000000000000000
	var chunks [3]uint64
	n := 0
	for hi != 0 {
		var r uint64
		hi, r = bits.Div64(0, hi, e19)
		lo, r = bits.Div64(r, lo, e19)
		chunks[n] = r
		n++
	}
	dst = strconv.AppendUint(dst, lo, 10)
	for i := n - 1; i >= 0; i-- {
		var pad [19]byte
		s := strconv.AppendUint(pad[:0], chunks[i], 10)
		for j := len(s); j < 19; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, s...)
	}
	return dst
}

// appendDecimalDigits writes a non-zero value ±0.digits × 10^e. digits are
// ASCII with a non-zero first digit; trailing zeros are stripped here.
func appendDecimalDigits(dst []byte, neg bool, digits []byte, e int) []byte {
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	var inv byte
	if neg {
		dst = append(dst, numNeg)
		inv = 0xFF
	} else {
		dst = append(dst, numPos)
	}
	x := uint16(e + expBias)
	dst = append(dst, byte(x>>8)^inv, byte(x)^inv)
	for i := 0; i < len(digits); i += 2 {
		p := (digits[i] - '0') * 10
		if i+1 < len(digits) {
			p += digits[i+1] - '0'
		}
		dst = append(dst, (p+1)^inv)
	}
	return append(dst, endMarker^inv)
}

// PrefixEnd returns the smallest key greater than every key that starts
// with prefix, for use as an exclusive upper bound. It returns nil (no upper
// bound) when no such key exists (prefix is empty or all 0xFF).
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xFF {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end
		}
	}
	return nil
}

// ---- decoding ----

// ErrCorrupt is returned (wrapped) by DecodeValue for bytes that are not a
// valid encoding.
var ErrCorrupt = errors.New("keycodec: corrupt key")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// DecodeValue decodes one ascending encoding from the front of b and returns
// the rest. Decoding is exact except where the encoding is canonical by
// design:
//
//   - Numbers come back as the first of int32, int64, float64, Decimal128
//     that holds the value exactly (so 1.0 decodes as int32 1, -0.0 as
//     int32 0, 2.5 as float64, Decimal128 "0.1" as Decimal128 "0.1"); NaN
//     and ±Inf decode as float64.
//   - Symbols decode as strings; bson.M, bson.Raw and bsonx.Missing decode
//     as bson.D and nil respectively, CodeWithScope scopes as bson.D.
//   - Values of types bsonx does not rank decode as nil with no error.
//
// Descending encodings must be inverted back before decoding.
func DecodeValue(b []byte) (v any, rest []byte, err error) {
	return decodeValue(b, 0)
}

// maxDepth bounds recursion on hostile input; BSON itself nests at most 100.
const maxDepth = 200

func decodeValue(b []byte, depth int) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, corrupt("empty")
	}
	return decodeBody(b[0], b[1:], depth)
}

// decodeBody decodes the body of a value whose type byte was tag.
func decodeBody(tag byte, b []byte, depth int) (any, []byte, error) {
	if depth > maxDepth {
		return nil, nil, corrupt("nesting too deep")
	}
	switch tag {
	case tagMinKey:
		return bson.MinKey{}, b, nil
	case tagMaxKey:
		return bson.MaxKey{}, b, nil
	case tagUndefined:
		return bson.Undefined{}, b, nil
	case tagNull:
		return nil, b, nil
	case tagUnknown:
		return nil, b, nil
	case tagNumber:
		return decodeNumber(b)
	case tagString:
		s, rest, err := decodeString(b)
		return s, rest, err
	case tagObject:
		return decodeDoc(b, depth)
	case tagArray:
		arr := bson.A{}
		for {
			if len(b) == 0 {
				return nil, nil, corrupt("unterminated array")
			}
			if b[0] == endMarker {
				return arr, b[1:], nil
			}
			var e any
			var err error
			if e, b, err = decodeValue(b, depth+1); err != nil {
				return nil, nil, err
			}
			arr = append(arr, e)
		}
	case tagBinary:
		n, rest, err := decodeUvarint(b)
		if err != nil {
			return nil, nil, err
		}
		if uint64(len(rest)) < n+1 {
			return nil, nil, corrupt("short binary")
		}
		data := append([]byte{}, rest[1:1+n]...)
		return bson.Binary{Subtype: rest[0], Data: data}, rest[1+n:], nil
	case tagObjectID:
		if len(b) < 12 {
			return nil, nil, corrupt("short ObjectId")
		}
		var id bson.ObjectID
		copy(id[:], b)
		return id, b[12:], nil
	case tagBool:
		if len(b) < 1 || b[0] > 1 {
			return nil, nil, corrupt("bad bool")
		}
		return b[0] == 1, b[1:], nil
	case tagDate:
		if len(b) < 8 {
			return nil, nil, corrupt("short date")
		}
		return bson.DateTime(int64(binary.BigEndian.Uint64(b) ^ (1 << 63))), b[8:], nil
	case tagTimestamp:
		if len(b) < 8 {
			return nil, nil, corrupt("short timestamp")
		}
		return bson.Timestamp{T: binary.BigEndian.Uint32(b), I: binary.BigEndian.Uint32(b[4:])}, b[8:], nil
	case tagRegex:
		p, rest, err := decodeString(b)
		if err != nil {
			return nil, nil, err
		}
		o, rest, err := decodeString(rest)
		if err != nil {
			return nil, nil, err
		}
		return bson.Regex{Pattern: p, Options: o}, rest, nil
	case tagDBPointer:
		n, rest, err := decodeUvarint(b)
		if err != nil {
			return nil, nil, err
		}
		if uint64(len(rest)) < n+12 {
			return nil, nil, corrupt("short DBPointer")
		}
		p := bson.DBPointer{DB: string(rest[:n])}
		copy(p.Pointer[:], rest[n:])
		return p, rest[n+12:], nil
	case tagCode:
		s, rest, err := decodeString(b)
		return bson.JavaScript(s), rest, err
	case tagCodeScope:
		code, rest, err := decodeString(b)
		if err != nil {
			return nil, nil, err
		}
		scope, rest, err := decodeValue(rest, depth+1)
		if err != nil {
			return nil, nil, err
		}
		return bson.CodeWithScope{Code: bson.JavaScript(code), Scope: scope}, rest, nil
	}
	return nil, nil, corrupt("unknown type byte 0x%02x", tag)
}

func decodeDoc(b []byte, depth int) (any, []byte, error) {
	d := bson.D{}
	for {
		if len(b) == 0 {
			return nil, nil, corrupt("unterminated document")
		}
		if b[0] == endMarker {
			return d, b[1:], nil
		}
		tag := b[0]
		name, rest, err := decodeString(b[1:])
		if err != nil {
			return nil, nil, err
		}
		v, rest, err := decodeBody(tag, rest, depth+1)
		if err != nil {
			return nil, nil, err
		}
		d = append(d, bson.E{Key: name, Value: v})
		b = rest
	}
}

func decodeString(b []byte) (string, []byte, error) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case 0x01:
			if out == nil {
				return string(b[:i]), b[i+2:], nil
			}
			out = append(out, b[:i]...)
			return string(out), b[i+2:], nil
		case 0xFF:
			out = append(out, b[:i]...)
			out = append(out, 0)
			b = b[i+2:]
			i = -1
		default:
			return "", nil, corrupt("bad string escape 0x00 0x%02x", b[i+1])
		}
	}
	return "", nil, corrupt("unterminated string")
}

func decodeUvarint(b []byte) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, corrupt("short length")
	}
	if b[0] < 0xF8 {
		return uint64(b[0]), b[1:], nil
	}
	k := int(b[0] - 0xF7)
	if k > 8 || len(b) < 1+k {
		return 0, nil, corrupt("bad length")
	}
	var x uint64
	for _, c := range b[1 : 1+k] {
		x = x<<8 | uint64(c)
	}
	return x, b[1+k:], nil
}

func decodeNumber(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, corrupt("short number")
	}
	sub, b := b[0], b[1:]
	switch sub {
	case numNaN:
		return math.NaN(), b, nil
	case numNegInf:
		return math.Inf(-1), b, nil
	case numPosInf:
		return math.Inf(1), b, nil
	case numZero:
		return int32(0), b, nil
	case numNeg, numPos:
	default:
		return nil, nil, corrupt("bad number sub-tag 0x%02x", sub)
	}
	start := b
	neg := sub == numNeg
	var inv byte
	if neg {
		inv = 0xFF
	}
	if len(b) < 2 {
		return nil, nil, corrupt("short exponent")
	}
	e := int(uint16(b[0]^inv)<<8|uint16(b[1]^inv)) - expBias
	b = b[2:]
	var digits []byte
	for {
		if len(b) == 0 {
			return nil, nil, corrupt("unterminated number")
		}
		c := b[0] ^ inv
		b = b[1:]
		if c == 0 {
			break
		}
		if c > 100 {
			return nil, nil, corrupt("bad digit pair")
		}
		digits = append(digits, '0'+(c-1)/10, '0'+(c-1)%10)
	}
	encoded := start[:len(start)-len(b)]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 || digits[0] == '0' {
		return nil, nil, corrupt("non-canonical number")
	}
	v, err := canonicalNumber(neg, digits, e, append([]byte{sub}, encoded...))
	return v, b, err
}

// canonicalNumber picks the narrowest type that holds ±0.digits × 10^e
// exactly. enc is the number body, used to check float64 exactness by
// re-encoding.
func canonicalNumber(neg bool, digits []byte, e int, enc []byte) (any, error) {
	if e >= len(digits) && e <= 19 {
		var u uint64
		ok := true
		for i := 0; i < e; i++ {
			d := uint64(0)
			if i < len(digits) {
				d = uint64(digits[i] - '0')
			}
			hi, lo := bits.Mul64(u, 10)
			lo, c := bits.Add64(lo, d, 0)
			if hi != 0 || c != 0 {
				ok = false
				break
			}
			u = lo
		}
		if ok && (u <= math.MaxInt64 || (neg && u == 1<<63)) {
			i := int64(u)
			if neg {
				i = -i
			}
			if i >= math.MinInt32 && i <= math.MaxInt32 {
				return int32(i), nil
			}
			return i, nil
		}
	}
	sign := ""
	if neg {
		sign = "-"
	}
	s := sign + "0." + string(digits) + "e" + strconv.Itoa(e)
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
		var buf [40]byte
		if bytes.Equal(appendFloat(nil, f, &buf), enc) {
			return f, nil
		}
	}
	if d, ok := makeDecimal(neg, digits, e-len(digits)); ok {
		return d, nil
	}
	return nil, corrupt("number %s has no exact BSON representation", s)
}

// makeDecimal builds the Decimal128 ±digits × 10^q from its bit fields. It
// accepts coefficients up to 2^113 (wider than the 34 digits the driver's
// parser allows) because such non-canonical decimals exist in BSON data and
// compare by their full value.
func makeDecimal(neg bool, digits []byte, q int) (bson.Decimal128, bool) {
	const minExp, maxExp = -6176, 6111
	coef, ok := new(big.Int).SetString(string(digits), 10)
	if !ok || q < minExp || q-maxExp > 35 {
		return bson.Decimal128{}, false
	}
	if q > maxExp {
		coef.Mul(coef, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(q-maxExp)), nil))
		q = maxExp
	}
	if coef.BitLen() > 113 {
		return bson.Decimal128{}, false
	}
	lo := new(big.Int).And(coef, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	hi := new(big.Int).Rsh(coef, 64).Uint64()
	hi |= uint64(q-minExp) << 49
	if neg {
		hi |= 1 << 63
	}
	return bson.NewDecimal128(hi, lo), true
}
