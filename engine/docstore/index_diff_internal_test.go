package docstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// naiveDiffKeys is the update path's former key diff (linear search per
// key), kept as the reference diffKeys must agree with.
func naiveDiffKeys(oldKeys, newKeys [][]byte, oldLive bool) (del, add [][]byte) {
	has := func(keys [][]byte, k []byte) bool {
		for _, x := range keys {
			if bytes.Equal(x, k) {
				return true
			}
		}
		return false
	}
	for _, k := range oldKeys {
		if !oldLive || !has(newKeys, k) {
			del = append(del, k)
		}
	}
	for _, k := range newKeys {
		if oldLive && has(oldKeys, k) {
			continue
		}
		add = append(add, k)
	}
	return del, add
}

func sameKeyList(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestIssue21DiffKeysMatchesNaive: the linear key diff gives exactly the
// puts and deletes (same keys, same order) of the former quadratic one, for
// the keys real documents produce: arrays with duplicate elements, nested
// arrays, empty arrays, missing fields, multikey compound indexes (array on
// either field, ascending and descending), before and after random edits,
// with the old version live or expired; and for raw key lists with
// duplicates.
func TestIssue21DiffKeysMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	indexes := []*Index{
		{Key: bson.D{{Key: "a", Value: 1}}},
		{Key: bson.D{{Key: "a", Value: -1}}},
		{Key: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}},
		{Key: bson.D{{Key: "b", Value: 1}, {Key: "a", Value: 1}}},
		{Key: bson.D{{Key: "a.x", Value: 1}, {Key: "b", Value: 1}}},
	}
	randVal := func() any {
		switch rng.Intn(6) {
		case 0:
			return int32(rng.Intn(5)) // small range: many duplicates
		case 1:
			return fmt.Sprint("s", rng.Intn(4))
		case 2:
			return bson.D{{Key: "x", Value: int32(rng.Intn(3))}}
		case 3:
			return bson.A{int32(rng.Intn(3))}
		case 4:
			return nil
		default:
			return float64(rng.Intn(5)) // equal to the int32 values as keys
		}
	}
	randArr := func(n int) bson.A {
		a := make(bson.A, n)
		for i := range a {
			a[i] = randVal()
		}
		return a
	}
	randDoc := func() bson.D {
		d := bson.D{{Key: "_id", Value: 1}}
		switch rng.Intn(4) {
		case 0: // array on a, scalar b
			d = append(d, bson.E{Key: "a", Value: randArr(rng.Intn(60))}, bson.E{Key: "b", Value: int32(rng.Intn(3))})
		case 1: // scalar a, array b
			d = append(d, bson.E{Key: "a", Value: randVal()}, bson.E{Key: "b", Value: randArr(rng.Intn(60))})
		case 2: // a missing
			d = append(d, bson.E{Key: "b", Value: int32(rng.Intn(3))})
		default:
			d = append(d, bson.E{Key: "a", Value: randArr(rng.Intn(3))})
		}
		return d
	}
	edit := func(d bson.D) bson.D {
		out := bson.D{}
		for _, e := range d {
			if a, ok := e.Value.(bson.A); ok {
				na := append(bson.A{}, a...)
				for j := rng.Intn(5); j > 0; j-- {
					switch rng.Intn(3) {
					case 0:
						na = append(na, randVal())
					case 1:
						if len(na) > 0 {
							na = na[1:]
						}
					default:
						if len(na) > 0 {
							na[rng.Intn(len(na))] = randVal()
						}
					}
				}
				e.Value = na
			}
			out = append(out, e)
		}
		return out
	}
	checked := 0
	for iter := 0; iter < 3000; iter++ {
		oldDoc := randDoc()
		newDoc := edit(oldDoc)
		if rng.Intn(5) == 0 {
			newDoc = randDoc()
		}
		for _, ix := range indexes {
			oldKeys, _, err1 := IndexKeys(ix, oldDoc)
			newKeys, _, err2 := IndexKeys(ix, newDoc)
			if err1 != nil || err2 != nil {
				continue // parallel arrays
			}
			for _, live := range []bool{true, false} {
				d1, a1 := diffKeys(oldKeys, newKeys, live)
				d2, a2 := naiveDiffKeys(oldKeys, newKeys, live)
				if !sameKeyList(d1, d2) || !sameKeyList(a1, a2) {
					t.Fatalf("index %v, old %v, new %v, live %v: diffKeys del %d add %d, naive del %d add %d",
						ix.Key, oldDoc, newDoc, live, len(d1), len(a1), len(d2), len(a2))
				}
				checked++
			}
		}
	}
	// raw key lists, duplicates included, both sides of the size cut-off
	for iter := 0; iter < 2000; iter++ {
		mk := func() [][]byte {
			n := rng.Intn(3 * diffKeysLinearMax)
			ks := make([][]byte, n)
			for i := range ks {
				ks[i] = []byte{byte(rng.Intn(20))}
			}
			return ks
		}
		o, n := mk(), mk()
		d1, a1 := diffKeys(o, n, true)
		d2, a2 := naiveDiffKeys(o, n, true)
		if !sameKeyList(d1, d2) || !sameKeyList(a1, a2) {
			t.Fatalf("old %v new %v: got del %v add %v, want del %v add %v", o, n, d1, a1, d2, a2)
		}
		checked++
	}
	if checked < 10000 {
		t.Fatalf("only %d comparisons made", checked)
	}
}
