package expr

import (
	"math"
	"math/rand"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
)

func linearSetOf(vals ...bson.A) bson.A {
	out := bson.A{}
	for _, a := range vals {
		for _, v := range a {
			if !contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// TestIssue21SetOpsMatchLinear: the sort-based set helpers give exactly
// the results of the linear ones (same representatives, same order), with
// values equal across numeric types, NaN, strings, documents and arrays.
func TestIssue21SetOpsMatchLinear(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	val := func() any {
		n := rng.Intn(12)
		switch rng.Intn(8) {
		case 0:
			return int32(n)
		case 1:
			return int64(n)
		case 2:
			return float64(n)
		case 3:
			return math.NaN()
		case 4:
			return string(rune('a' + n))
		case 5:
			return bson.D{{Key: "x", Value: int32(n % 3)}}
		case 6:
			return bson.A{int32(n % 3)}
		default:
			return nil
		}
	}
	arr := func() bson.A {
		a := make(bson.A, rng.Intn(120))
		for i := range a {
			a[i] = val()
		}
		return a
	}
	same := func(a, b bson.A) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if bsonx.Compare(a[i], b[i]) != 0 || bsonx.TypeName(a[i]) != bsonx.TypeName(b[i]) {
				return false
			}
		}
		return true
	}
	for iter := 0; iter < 2000; iter++ {
		a, b := arr(), arr()
		if got, want := setOf(a, b), linearSetOf(a, b); !same(got, want) {
			t.Fatalf("setOf(%v, %v) = %v, want %v", a, b, got, want)
		}
		l := newLookupSet(b)
		for _, v := range a {
			if l.has(v) != contains(b, v) {
				t.Fatalf("has(%v) in %v: %v", v, b, l.has(v))
			}
		}
	}
}
