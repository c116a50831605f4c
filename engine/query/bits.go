package query

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

const (
	bitsAllSet = iota
	bitsAnySet
	bitsAllClear
	bitsAnyClear
)

// bitsPred implements the four bitwise query operators. The mask is kept as
// a list of bit positions, the form all three argument spellings (number,
// BinData, array of positions) reduce to.
type bitsPred struct {
	op        int
	positions []int
}

// parseBits reads a bitwise operator's argument: a non-negative integral
// number, a BinData (little-endian bitmask), or an array of non-negative
// integral bit positions.
func parseBits(name string, op int, v any) (*bitsPred, error) {
	p := &bitsPred{op: op}
	switch x := v.(type) {
	case bson.A:
		for _, e := range x {
			if !bsonx.IsNumber(e) {
				return nil, mongoerr.New(mongoerr.BadValue, "bit positions must be an integer but got: %v", e)
			}
			n, ok := bsonx.ToInt64(e)
			if !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "bit positions must be an integer but got: %v", e)
			}
			if n < 0 {
				return nil, mongoerr.New(mongoerr.BadValue, "bit positions must be >= 0 but got: %d", n)
			}
			if n > math.MaxInt32 {
				return nil, mongoerr.New(mongoerr.BadValue, "bit positions cannot be represented as a 32-bit signed integer: %d", n)
			}
			p.positions = append(p.positions, int(n))
		}
	case bson.Binary:
		for i, b := range x.Data {
			for bit := 0; bit < 8; bit++ {
				if b&(1<<bit) != 0 {
					p.positions = append(p.positions, i*8+bit)
				}
			}
		}
	default:
		if !bsonx.IsNumber(v) {
			return nil, mongoerr.New(mongoerr.BadValue, "%s takes an Array, a number, or a BinData but received: %s", name, describe(v))
		}
		n, ok := bsonx.ToInt64(v)
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "Expected an integer: %s: %s", name, describe(v))
		}
		if n < 0 {
			return nil, mongoerr.New(mongoerr.BadValue, "Expected a positive number in: %s: %s", name, describe(v))
		}
		for bit := 0; bit < 63; bit++ {
			if n&(1<<bit) != 0 {
				p.positions = append(p.positions, bit)
			}
		}
	}
	return p, nil
}

func (p *bitsPred) test(v any) bool {
	var (
		num    int64
		bin    []byte
		isBin  bool
		intArg bool
	)
	switch x := v.(type) {
	case int32:
		num, intArg = int64(x), true
	case int:
		num, intArg = int64(x), true
	case int64:
		num, intArg = x, true
	case float64:
		// Only doubles holding an exact int64 value take part.
		if math.IsNaN(x) || x != math.Trunc(x) || x >= 9223372036854775808.0 || x < -9223372036854775808.0 {
			return false
		}
		num, intArg = int64(x), true
	case bson.Decimal128:
		n, ok := bsonx.ToInt64(x)
		if !ok {
			return false
		}
		num, intArg = n, true
	case bson.Binary:
		bin, isBin = x.Data, true
	}
	if !intArg && !isBin {
		return false
	}
	bitSet := func(pos int) bool {
		if isBin {
			if pos/8 >= len(bin) {
				return false
			}
			return bin[pos/8]&(1<<(pos%8)) != 0
		}
		if pos >= 64 {
			return num < 0 // two's complement sign extension
		}
		return uint64(num)&(1<<uint(pos)) != 0
	}
	switch p.op {
	case bitsAllSet:
		for _, pos := range p.positions {
			if !bitSet(pos) {
				return false
			}
		}
		return true
	case bitsAnySet:
		for _, pos := range p.positions {
			if bitSet(pos) {
				return true
			}
		}
		return false
	case bitsAllClear:
		for _, pos := range p.positions {
			if bitSet(pos) {
				return false
			}
		}
		return true
	default: // bitsAnyClear
		for _, pos := range p.positions {
			if !bitSet(pos) {
				return true
			}
		}
		return false
	}
}
