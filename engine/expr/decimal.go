package expr

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

// Decimal128 arithmetic. The driver's bson.Decimal128 is only a container,
// so arithmetic is done on (coefficient, exponent) pairs with big.Int and
// rounded back to 34 significant digits, half to even, as IEEE 754-2008
// decimal128 (and so mongod) does. Infinities and NaN go through float64,
// whose special-value semantics match.

type dec struct {
	coef *big.Int // signed
	exp  int
}

var (
	big10   = big.NewInt(10)
	maxCoef = new(big.Int).Exp(big10, big.NewInt(34), nil)
)

func pow10(n int) *big.Int {
	return new(big.Int).Exp(big10, big.NewInt(int64(n)), nil)
}

// decSpecial reports whether v is a NaN or infinite decimal.
func decSpecial(v bson.Decimal128) bool { return v.IsNaN() || v.IsInf() != 0 }

// toDec converts a finite number to dec. Doubles convert with 15 significant
// digits, as mongod's Decimal128(double) does.
func toDec(v any) (dec, bool) {
	switch n := v.(type) {
	case int32:
		return dec{big.NewInt(int64(n)), 0}, true
	case int64:
		return dec{big.NewInt(n), 0}, true
	case int:
		return dec{big.NewInt(int64(n)), 0}, true
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return dec{}, false
		}
		if n == 0 {
			return dec{new(big.Int), 0}, true
		}
		s := strconv.FormatFloat(n, 'e', 14, 64) // d.dddddddddddddde±xx
		mant, expS, _ := strings.Cut(s, "e")
		e, _ := strconv.Atoi(expS)
		mant = strings.Replace(mant, ".", "", 1)
		c, _ := new(big.Int).SetString(mant, 10)
		return dec{c, e - 14}, true
	case bson.Decimal128:
		if decSpecial(n) {
			return dec{}, false
		}
		c, e, err := n.BigInt()
		if err != nil {
			return dec{}, false
		}
		return dec{c, e}, true
	}
	return dec{}, false
}

// floatToDecimal converts a double to Decimal128 (15 significant digits).
func floatToDecimal(f float64) bson.Decimal128 {
	switch {
	case math.IsNaN(f):
		d, _ := bson.ParseDecimal128("NaN")
		return d
	case math.IsInf(f, 1):
		d, _ := bson.ParseDecimal128("Infinity")
		return d
	case math.IsInf(f, -1):
		d, _ := bson.ParseDecimal128("-Infinity")
		return d
	}
	d, _ := toDec(f)
	return d.decimal()
}

// toDecimal converts any number to Decimal128.
func toDecimal(v any) bson.Decimal128 {
	switch n := v.(type) {
	case bson.Decimal128:
		return n
	case float64:
		return floatToDecimal(n)
	}
	d, _ := toDec(v)
	return d.decimal()
}

// round rounds the coefficient to at most 34 digits, half to even.
func (d dec) round() dec {
	abs := new(big.Int).Abs(d.coef)
	if abs.Cmp(maxCoef) < 0 {
		return d
	}
	digits := len(abs.String())
	drop := digits - 34
	c := divRoundEven(d.coef, pow10(drop))
	e := d.exp + drop
	if new(big.Int).Abs(c).Cmp(maxCoef) >= 0 {
		c = divRoundEven(c, big10)
		e++
	}
	return dec{c, e}
}

// divRoundEven divides with round-half-to-even.
func divRoundEven(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	c := r2.Cmp(new(big.Int).Abs(b))
	neg := (a.Sign() < 0) != (b.Sign() < 0)
	if c > 0 || (c == 0 && q.Bit(0) == 1) {
		if neg {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

func (d dec) decimal() bson.Decimal128 {
	d = d.round()
	c, e := d.coef, d.exp
	// Clamp the exponent into decimal128's range.
	for e > 6111 && new(big.Int).Abs(c).Cmp(maxCoef) < 0 && c.Sign() != 0 {
		c = new(big.Int).Mul(c, big10)
		e--
	}
	if c.Sign() == 0 {
		if e > 6111 {
			e = 6111
		}
		if e < -6176 {
			e = -6176
		}
	}
	for e < -6176 {
		c = divRoundEven(c, big10)
		e++
	}
	r, ok := bson.ParseDecimal128FromBigInt(c, e)
	if !ok {
		if c.Sign() < 0 {
			r, _ = bson.ParseDecimal128("-Infinity")
		} else {
			r, _ = bson.ParseDecimal128("Infinity")
		}
	}
	return r
}

func align(a, b dec) (*big.Int, *big.Int, int) {
	switch {
	case a.exp == b.exp:
		return a.coef, b.coef, a.exp
	case a.exp > b.exp:
		return new(big.Int).Mul(a.coef, pow10(a.exp-b.exp)), b.coef, b.exp
	}
	return a.coef, new(big.Int).Mul(b.coef, pow10(b.exp-a.exp)), a.exp
}

// decArith applies op ('+', '-', '*', '/', '%') to two numbers, at least one
// of which is decimal. Division by zero is the caller's concern.
func decArith(op byte, x, y any) bson.Decimal128 {
	a, aok := toDec(x)
	b, bok := toDec(y)
	if !aok || !bok {
		fx, _ := bsonx.ToFloat(x)
		fy, _ := bsonx.ToFloat(y)
		var r float64
		switch op {
		case '+':
			r = fx + fy
		case '-':
			r = fx - fy
		case '*':
			r = fx * fy
		case '/':
			r = fx / fy
		case '%':
			r = math.Mod(fx, fy)
		}
		return floatToDecimal(r)
	}
	switch op {
	case '+', '-':
		ac, bc, e := align(a, b)
		if op == '+' {
			return dec{new(big.Int).Add(ac, bc), e}.decimal()
		}
		return dec{new(big.Int).Sub(ac, bc), e}.decimal()
	case '*':
		return dec{new(big.Int).Mul(a.coef, b.coef), a.exp + b.exp}.decimal()
	case '%':
		ac, bc, e := align(a, b)
		return dec{new(big.Int).Rem(ac, bc), e}.decimal()
	}
	// division
	ideal := a.exp - b.exp
	if a.coef.Sign() == 0 {
		return dec{new(big.Int), ideal}.decimal()
	}
	k := 36 + len(new(big.Int).Abs(b.coef).String()) - len(new(big.Int).Abs(a.coef).String())
	if k < 0 {
		k = 0
	}
	num := new(big.Int).Mul(a.coef, pow10(k))
	q, r := new(big.Int).QuoRem(num, b.coef, new(big.Int))
	e := ideal - k
	if r.Sign() == 0 {
		// exact: strip trailing zeros toward the ideal exponent
		for e < ideal {
			qq, rr := new(big.Int).QuoRem(q, big10, new(big.Int))
			if rr.Sign() != 0 {
				break
			}
			q = qq
			e++
		}
		return dec{q, e}.decimal()
	}
	// inexact: keep more digits then round to 34 (sticky via extra digits)
	k += 4
	num = new(big.Int).Mul(a.coef, pow10(k))
	q, r = new(big.Int).QuoRem(num, b.coef, new(big.Int))
	if r.Sign() != 0 {
		// sticky digit so half-even rounding never sees an exact tie
		q.Mul(q, big10)
		if q.Sign() < 0 || (q.Sign() == 0 && (a.coef.Sign() < 0) != (b.coef.Sign() < 0)) {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
		k++
	}
	return dec{q, ideal - k}.decimal()
}

// decimalRound rounds a decimal to `place` decimal places (negative places
// round to tens, hundreds...), half to even when even is true, else truncating.
func decimalRound(v bson.Decimal128, place int, even bool) bson.Decimal128 {
	d, ok := toDec(v)
	if !ok {
		return v
	}
	if d.exp >= -place {
		return v
	}
	div := pow10(-place - d.exp)
	var c *big.Int
	if even {
		c = divRoundEven(d.coef, div)
	} else {
		c = new(big.Int).Quo(d.coef, div)
	}
	if place < 0 {
		return dec{new(big.Int).Mul(c, pow10(-place)), 0}.decimal()
	}
	return dec{c, -place}.decimal()
}

func decimalFromString(s string) (bson.Decimal128, bool) {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		return bson.Decimal128{}, false
	}
	return d, true
}

type bigInt = big.Int

var bigOne = big.NewInt(1)

// decIsZero reports a zero decimal of any exponent (the driver's IsZero only
// recognizes the all-zero bit pattern).
func decIsZero(v bson.Decimal128) bool {
	d, ok := toDec(v)
	return ok && d.coef.Sign() == 0
}

// floatToDecimal34 converts a finite double to decimal with 34 significant
// digits (mongod's kRoundTo34Digits), used where rounding must see the
// double's exact binary value.
func floatToDecimal34(f float64) bson.Decimal128 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return floatToDecimal(f)
	}
	if f == 0 {
		return dec{new(big.Int), 0}.decimal()
	}
	s := strconv.FormatFloat(f, 'e', 33, 64)
	mant, expS, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(expS)
	mant = strings.Replace(mant, ".", "", 1)
	c, _ := new(big.Int).SetString(mant, 10)
	return dec{c, e - 33}.decimal()
}
