package keycodec

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func dec(t testing.TB, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(s, err)
	}
	return d
}

// gen produces random BSON values drawn from small domains so that ties,
// shared prefixes and cross-type numeric equalities are frequent.
type gen struct {
	r    *rand.Rand
	nums []any
}

func newGen(t testing.TB, seed int64) *gen {
	g := &gen{r: rand.New(rand.NewSource(seed))}
	g.nums = []any{
		int32(0), int64(0), 0.0, math.Copysign(0, -1), dec(t, "0"), dec(t, "-0"), dec(t, "0E-6176"), dec(t, "0E+6111"),
		int32(1), int64(1), 1.0, dec(t, "1"), dec(t, "1.0"), dec(t, "1.000000000000000000000000000000000"), dec(t, "100E-2"), dec(t, "0.1E1"),
		int32(-1), int64(-1), -1.0, dec(t, "-1.00"),
		int32(math.MaxInt32), int32(math.MinInt32), int64(math.MaxInt32) + 1, int64(math.MinInt32) - 1,
		int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64 - 1), int64(math.MinInt64 + 1),
		float64(1 << 63), -float64(1 << 63), math.Nextafter(float64(1<<63), 0), math.Nextafter(float64(1<<63), math.Inf(1)),
		dec(t, "9223372036854775807"), dec(t, "9223372036854775808"), dec(t, "-9223372036854775808"), dec(t, "-9223372036854775809"),
		float64(1 << 53), float64(1<<53) + 2, int64(1<<53 + 1), int64(1 << 53), dec(t, "9007199254740993"),
		math.NaN(), -math.NaN(), dec(t, "NaN"), dec(t, "-NaN"),
		math.Inf(1), math.Inf(-1), dec(t, "Infinity"), dec(t, "-Infinity"),
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		2.2250738585072014e-308, 0.1, -0.1, 0.5, dec(t, "0.5"), dec(t, "0.50"), 0.25, dec(t, "0.1"), dec(t, "-0.1"),
		dec(t, "0.1000000000000000055511151231257827"), dec(t, "0.1000000000000000055511151231257828"),
		1.5, dec(t, "1.5"), 2.5, -2.5, dec(t, "-2.50"), 1e300, 1e-300, 123456.789, dec(t, "123456.789"),
		dec(t, "9.999999999999999999999999999999999E+6144"), dec(t, "-9.999999999999999999999999999999999E+6144"),
		dec(t, "1E-6176"), dec(t, "-1E-6176"), dec(t, "1E+6144"), dec(t, "1E-400"), dec(t, "1E+400"),
		dec(t, "1E+308"), 1e308, dec(t, "1.797693134862315708145274237317044E+308"),
		int(42), int64(42), 42.0, dec(t, "4.2E1"), dec(t, "420E-1"),
		1e19, dec(t, "1E19"), 1e20, dec(t, "100000000000000000000"), 1e21, float64(1 << 64),
	}
	// Non-canonical decimal bit patterns (read as zero) and random bits.
	g.nums = append(g.nums, bson.NewDecimal128(3<<61, 12345), bson.NewDecimal128(1<<63|3<<61, 1))
	return g
}

func (g *gen) num() any {
	r := g.r
	switch r.Intn(8) {
	case 0, 1, 2:
		return g.nums[r.Intn(len(g.nums))]
	case 3:
		return int32(r.Intn(21) - 10)
	case 4:
		return int64(r.Uint64())
	case 5:
		switch r.Intn(3) {
		case 0:
			return float64(r.Intn(41)-20) / 4
		case 1:
			return math.Float64frombits(r.Uint64())
		}
		return r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
	case 6:
		// Decimals with random coefficient and exponent, often equal to
		// small integers or quarter fractions.
		coef := r.Int63n(2000) - 1000
		exp := r.Intn(7) - 3
		if r.Intn(4) == 0 {
			coef = r.Int63()
			exp = r.Intn(12000) - 6100
		}
		d, ok := bson.ParseDecimal128FromBigInt(bigInt(coef), exp)
		if !ok {
			return int32(0)
		}
		return d
	}
	return bson.NewDecimal128(r.Uint64(), r.Uint64())
}

func (g *gen) str() string {
	const alphabet = "ab\x00\x01\xff"
	n := g.r.Intn(4)
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.Intn(len(alphabet))]
	}
	return string(b)
}

func (g *gen) oid() bson.ObjectID {
	var id bson.ObjectID
	id[g.r.Intn(12)] = byte(g.r.Intn(3))
	id[11] = byte(g.r.Intn(2)) * 0xFF
	return id
}

func (g *gen) value(depth int) any {
	r := g.r
	k := r.Intn(24)
	if depth > 2 && (k == 6 || k == 7 || k == 22) {
		k = 0
	}
	switch k {
	case 0, 1, 2, 3:
		return g.num()
	case 4:
		return g.str()
	case 5:
		return bson.Symbol(g.str())
	case 6:
		n := r.Intn(4)
		d := bson.D{}
		for i := 0; i < n; i++ {
			keys := []string{"", "a", "b", "a\x00", "ab"}
			d = append(d, bson.E{Key: keys[r.Intn(len(keys))], Value: g.value(depth + 1)})
		}
		if r.Intn(8) == 0 {
			raw, err := bson.Marshal(d)
			if err == nil {
				return bson.Raw(raw)
			}
		}
		return d
	case 7:
		n := r.Intn(4)
		a := bson.A{}
		for i := 0; i < n; i++ {
			a = append(a, g.value(depth+1))
		}
		return a
	case 8:
		data := make([]byte, r.Intn(4))
		for i := range data {
			data[i] = byte(r.Intn(3)) * 0x7F
		}
		if r.Intn(20) == 0 {
			data = make([]byte, 300+r.Intn(2))
		}
		return bson.Binary{Subtype: byte(r.Intn(3)), Data: data}
	case 9:
		return g.oid()
	case 10:
		return r.Intn(2) == 0
	case 11:
		ds := []int64{math.MinInt64, -1, 0, 1, 1700000000000, math.MaxInt64}
		return bson.DateTime(ds[r.Intn(len(ds))])
	case 12:
		vs := []uint32{0, 1, 1 << 31, math.MaxUint32}
		return bson.Timestamp{T: vs[r.Intn(4)], I: vs[r.Intn(4)]}
	case 13:
		return bson.Regex{Pattern: g.str(), Options: g.str()}
	case 14:
		return bson.DBPointer{DB: g.str(), Pointer: g.oid()}
	case 15:
		return bson.JavaScript(g.str())
	case 16:
		return bson.CodeWithScope{Code: bson.JavaScript(g.str()), Scope: bson.D{{Key: g.str(), Value: g.num()}}}
	case 17:
		return bson.MinKey{}
	case 18:
		return bson.MaxKey{}
	case 19:
		if r.Intn(2) == 0 {
			return bson.Null{}
		}
		return nil
	case 20:
		return bson.Undefined{}
	case 21:
		return bsonx.Missing
	case 22:
		return bson.M{g.str(): g.num()}
	}
	return g.num()
}

func TestOrderMatchesCompare(t *testing.T) {
	g := newGen(t, 1)
	const n = 3000
	vals := make([]any, n)
	asc := make([][]byte, n)
	desc := make([][]byte, n)
	for i := range vals {
		vals[i] = g.value(0)
		asc[i] = AppendValue(nil, vals[i])
		desc[i] = AppendValueDesc(nil, vals[i])
	}
	// Every value against its neighbours and a random sample: n*40 pairs.
	for i := 0; i < n; i++ {
		for j := 0; j < 40; j++ {
			k := g.r.Intn(n)
			if j < 3 {
				k = (i + j) % n
			}
			checkPair(t, vals[i], vals[k], asc[i], asc[k], desc[i], desc[k])
		}
	}
	// Sorting by bytes sorts by Compare.
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return bytes.Compare(asc[idx[a]], asc[idx[b]]) < 0 })
	for i := 1; i < n; i++ {
		if bsonx.Compare(vals[idx[i-1]], vals[idx[i]]) > 0 {
			t.Fatalf("byte order puts %#v before %#v", vals[idx[i-1]], vals[idx[i]])
		}
	}
}

func checkPair(t *testing.T, a, b any, ea, eb, da, db []byte) {
	t.Helper()
	want := bsonx.Compare(a, b)
	if got := sign(bytes.Compare(ea, eb)); got != want {
		t.Fatalf("asc: Compare(%#v, %#v) = %d, bytes %d\n%x\n%x", a, b, want, got, ea, eb)
	}
	if got := sign(bytes.Compare(da, db)); got != -want {
		t.Fatalf("desc: Compare(%#v, %#v) = %d, bytes %d", a, b, want, got)
	}
}

func TestCompoundKeys(t *testing.T) {
	g := newGen(t, 2)
	for i := 0; i < 20000; i++ {
		a1, a2, b1, b2 := g.value(1), g.value(1), g.value(1), g.value(1)
		if g.r.Intn(3) == 0 {
			b1 = a1 // force the second component to decide
		}
		c1, c2 := bsonx.Compare(a1, b1), bsonx.Compare(a2, b2)
		want := c1
		if want == 0 {
			want = c2
		}
		ka := AppendValue(AppendValue(nil, a1), a2)
		kb := AppendValue(AppendValue(nil, b1), b2)
		if got := sign(bytes.Compare(ka, kb)); got != want {
			t.Fatalf("compound (%#v,%#v) vs (%#v,%#v): want %d got %d", a1, a2, b1, b2, want, got)
		}
		// Index {x: 1, y: -1}.
		want = c1
		if want == 0 {
			want = -c2
		}
		ka = AppendValueDesc(AppendValue(nil, a1), a2)
		kb = AppendValueDesc(AppendValue(nil, b1), b2)
		if got := sign(bytes.Compare(ka, kb)); got != want {
			t.Fatalf("compound asc/desc (%#v,%#v) vs (%#v,%#v): want %d got %d", a1, a2, b1, b2, want, got)
		}
		// Index {x: -1, y: 1}.
		want = -c1
		if want == 0 {
			want = c2
		}
		ka = AppendValue(AppendValueDesc(nil, a1), a2)
		kb = AppendValue(AppendValueDesc(nil, b1), b2)
		if got := sign(bytes.Compare(ka, kb)); got != want {
			t.Fatalf("compound desc/asc (%#v,%#v) vs (%#v,%#v): want %d got %d", a1, a2, b1, b2, want, got)
		}
	}
}

func TestEqualValuesEncodeIdentically(t *testing.T) {
	groups := [][]any{
		{int32(1), int64(1), 1.0, int(1), dec(t, "1"), dec(t, "1.0"), dec(t, "0.001E3"), dec(t, "1000000E-6")},
		{int32(0), 0.0, math.Copysign(0, -1), dec(t, "0"), dec(t, "-0.000"), dec(t, "0E+100")},
		{math.NaN(), dec(t, "NaN"), dec(t, "-NaN")},
		{math.Inf(1), dec(t, "Inf")},
		{math.Inf(-1), dec(t, "-Inf")},
		{int64(math.MinInt64), -float64(1 << 63), dec(t, "-9223372036854775808")},
		{0.5, dec(t, "0.50000")},
		{1e20, dec(t, "1E20"), dec(t, "100000000000000000000.0")},
		{"abc", bson.Symbol("abc")},
		{nil, bson.Null{}, bsonx.Missing},
		{bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "a", Value: 1.0}}, bson.M{"a": int64(1)}},
		{bson.A{int32(2), "x"}, bson.A{dec(t, "2.0"), bson.Symbol("x")}},
	}
	for _, grp := range groups {
		want := AppendValue(nil, grp[0])
		for _, v := range grp[1:] {
			if got := AppendValue(nil, v); !bytes.Equal(got, want) {
				t.Errorf("%#v encodes as %x, %#v as %x", grp[0], want, v, got)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		in, want any
	}{
		{int32(7), int32(7)},
		{int64(7), int32(7)},
		{7.0, int32(7)},
		{int64(1) << 40, int64(1) << 40},
		{int64(math.MinInt64), int64(math.MinInt64)},
		{int64(math.MaxInt64), int64(math.MaxInt64)},
		{2.5, 2.5},
		{0.1, 0.1},
		{math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64},
		{-math.MaxFloat64, -math.MaxFloat64},
		{1e300, 1e300},
		{math.Inf(-1), math.Inf(-1)},
		{dec(t, "0.1"), dec(t, "1E-1")},
		{dec(t, "-1.2345678901234567890123456789E+5000"), dec(t, "-1.2345678901234567890123456789E+5000")},
		{dec(t, "1E-6176"), dec(t, "1E-6176")},
		{dec(t, "9223372036854775808"), float64(1 << 63)},
		{dec(t, "9223372036854775809"), dec(t, "9223372036854775809")},
		{"a\x00b", "a\x00b"},
		{bson.Symbol("s"), "s"},
		{bson.D{{Key: "x\x00", Value: bson.A{int32(1), bson.D{}}}, {Key: "", Value: nil}}, bson.D{{Key: "x\x00", Value: bson.A{int32(1), bson.D{}}}, {Key: "", Value: nil}}},
		{bson.Binary{Subtype: 4, Data: make([]byte, 1000)}, bson.Binary{Subtype: 4, Data: make([]byte, 1000)}},
		{bson.DateTime(-5), bson.DateTime(-5)},
		{bson.Timestamp{T: 3, I: 4}, bson.Timestamp{T: 3, I: 4}},
		{bson.Regex{Pattern: "^a", Options: "i"}, bson.Regex{Pattern: "^a", Options: "i"}},
		{bson.DBPointer{DB: "db.c", Pointer: bson.ObjectID{1}}, bson.DBPointer{DB: "db.c", Pointer: bson.ObjectID{1}}},
		{bson.JavaScript("f()"), bson.JavaScript("f()")},
		{bson.CodeWithScope{Code: "f", Scope: bson.D{{Key: "a", Value: true}}}, bson.CodeWithScope{Code: "f", Scope: bson.D{{Key: "a", Value: true}}}},
		{bson.MinKey{}, bson.MinKey{}},
		{bson.MaxKey{}, bson.MaxKey{}},
		{bson.Undefined{}, bson.Undefined{}},
		{bson.Null{}, nil},
	}
	for _, c := range cases {
		enc := AppendValue(nil, c.in)
		got, rest, err := DecodeValue(append(enc, 0xAB))
		if err != nil {
			t.Fatalf("%#v: %v", c.in, err)
		}
		if len(rest) != 1 || rest[0] != 0xAB {
			t.Fatalf("%#v: rest %x", c.in, rest)
		}
		if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", c.want, c.want) {
			t.Errorf("%#v decoded as %T %v, want %T %v", c.in, got, got, c.want, c.want)
		}
	}
	// Random values round-trip up to Compare equality with identical bytes.
	g := newGen(t, 3)
	for i := 0; i < 5000; i++ {
		v := g.value(0)
		enc := AppendValue(nil, v)
		got, rest, err := DecodeValue(enc)
		if err != nil || len(rest) != 0 {
			t.Fatalf("%#v (%x): %v rest %x", v, enc, err, rest)
		}
		if bsonx.Compare(got, v) != 0 || !bytes.Equal(AppendValue(nil, got), enc) {
			t.Fatalf("%#v round-tripped to %#v", v, got)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte{1, 2, 3}, []byte{1, 2, 4}},
		{[]byte{1, 0xFF, 0xFF}, []byte{2}},
		{[]byte{0xFF}, nil},
		{nil, nil},
	} {
		if got := PrefixEnd(c.in); !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
	// Every encoding starting with an encoded prefix sorts below PrefixEnd.
	p := AppendValue(nil, "users")
	end := PrefixEnd(p)
	for _, v := range []any{bson.MaxKey{}, "zzz", bson.A{bson.MaxKey{}}} {
		k := AppendValue(append([]byte{}, p...), v)
		if bytes.Compare(k, end) >= 0 || bytes.Compare(k, p) < 0 {
			t.Errorf("key %x outside [%x, %x)", k, p, end)
		}
	}
	if in := PrefixEnd([]byte{1, 2}); in[1] != 3 {
		t.Fatal("PrefixEnd must not alias its input")
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0x00}, {tagNumber}, {tagNumber, 0x09}, {tagNumber, numPos, 0x80}, {tagNumber, numPos, 0x80, 0x01, 0xF0, 0},
		{tagString, 'a'}, {tagString, 0, 2}, {tagObject}, {tagArray, tagNull}, {tagBinary, 5, 0, 1},
		{tagObjectID, 1}, {tagBool, 2}, {tagDate, 1}, {tagBinary, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0xFF},
	} {
		if _, _, err := DecodeValue(b); err == nil {
			t.Errorf("DecodeValue(%x) accepted garbage", b)
		}
	}
}

// FuzzOrder builds two values from fuzz bytes and checks the encoding's
// order and the decoder's round trip; it also feeds the raw bytes to
// DecodeValue, which must never panic.
func FuzzOrder(f *testing.F) {
	f.Add(int64(1), int64(2), []byte{})
	f.Add(int64(7), int64(7), []byte{tagNumber, numPos, 0x80, 0x01, 0x02, 0})
	f.Add(int64(-3), int64(99), AppendValue(nil, bson.D{{Key: "a", Value: bson.A{1.5, "x"}}}))
	f.Fuzz(func(t *testing.T, s1, s2 int64, raw []byte) {
		if v, rest, err := DecodeValue(raw); err == nil {
			enc := AppendValue(nil, v)
			again, _, err := DecodeValue(enc)
			if err != nil || bsonx.Compare(again, v) != 0 {
				t.Fatalf("re-decoding %#v failed: %v", v, err)
			}
			_ = rest
		}
		g1, g2 := newGen(t, s1), newGen(t, s2)
		a, b := g1.value(0), g2.value(0)
		ea, eb := AppendValue(nil, a), AppendValue(nil, b)
		checkPair(t, a, b, ea, eb, AppendValueDesc(nil, a), AppendValueDesc(nil, b))
	})
}

func BenchmarkAppendValue(b *testing.B) {
	oid := bson.NewObjectID()
	for _, c := range []struct {
		name string
		v    any
	}{
		{"ObjectID", oid},
		{"int32", int32(123456)},
		{"int64", int64(1700000000123)},
		{"float", 3.25},
		{"string", "user-42@example.com"},
		{"decimal", bson.NewDecimal128(0x3040000000000000, 123456789)},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf = AppendValue(buf[:0], c.v)
			}
		})
	}
}

func bigInt(i int64) *big.Int { return big.NewInt(i) }

// numberRat reads the exact value back out of a number encoding, without
// going through DecodeValue's type choice.
func numberRat(t *testing.T, enc []byte) *big.Rat {
	t.Helper()
	if enc[0] != tagNumber {
		t.Fatalf("not a number: %x", enc)
	}
	switch enc[1] {
	case numZero:
		return new(big.Rat)
	case numPos, numNeg:
	default:
		t.Fatalf("not finite: %x", enc)
	}
	var inv byte
	if enc[1] == numNeg {
		inv = 0xFF
	}
	e := int(uint16(enc[2]^inv)<<8|uint16(enc[3]^inv)) - expBias
	digits := ""
	for _, c := range enc[4:] {
		c ^= inv
		if c == 0 {
			break
		}
		digits += fmt.Sprintf("%02d", c-1)
	}
	r, ok := new(big.Rat).SetString("0." + digits)
	if !ok {
		t.Fatal(digits)
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e))), nil))
	if e >= 0 {
		r.Mul(r, scale)
	} else {
		r.Quo(r, scale)
	}
	if inv != 0 {
		r.Neg(r)
	}
	return r
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestNumbersAreExact checks that the digits written for every kind of
// float (fast 128-bit paths and the big.Int path) and decimal are the exact
// value, not merely correctly ordered.
func TestNumbersAreExact(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	check := func(v any) {
		want := bsonx.ToRat(v)
		if want == nil {
			return
		}
		if got := numberRat(t, AppendValue(nil, v)); got.Cmp(want) != 0 {
			t.Fatalf("%#v encodes as %s, want %s", v, got.FloatString(30), want.FloatString(30))
		}
	}
	for i := 0; i < 5000; i++ {
		f := math.Float64frombits(r.Uint64())
		check(f)
		check(math.Ldexp(float64(r.Int63n(1<<53)), r.Intn(200)-100))
		check(float64(r.Intn(1<<20)) / float64(uint64(1)<<r.Intn(40)))
		check(bson.NewDecimal128(r.Uint64(), r.Uint64()))
		check(r.Int63() - r.Int63())
	}
	for _, f := range []float64{0.1, 3.25, 1e-320, math.MaxFloat64, 9.3e18, 1 << 64, 1 << 75, math.Ldexp(1, 127), math.Ldexp(1, 128), math.Ldexp(3, -27), math.Ldexp(3, -28)} {
		check(f)
		check(-f)
	}
}
