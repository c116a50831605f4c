package engine

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestUpdateDescription(t *testing.T) {
	D := func(kv ...any) bson.D {
		d := bson.D{}
		for i := 0; i < len(kv); i += 2 {
			d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
		}
		return d
	}
	type A = bson.A
	empty := D()
	cases := []struct {
		name          string
		before, after bson.D
		updated       bson.D
		removed       A
		truncated     A
	}{
		{"no change", D("_id", 1, "a", 1), D("_id", 1, "a", 1), empty, A{}, A{}},
		{"set top field", D("_id", 1, "a", 1), D("_id", 1, "a", 2), D("a", 2), A{}, A{}},
		{"type change counts", D("_id", 1, "a", int32(1)), D("_id", 1, "a", int64(1)), D("a", int64(1)), A{}, A{}},
		{"new field", D("_id", 1), D("_id", 1, "b", "x"), D("b", "x"), A{}, A{}},
		{"removed field", D("_id", 1, "a", 1, "b", 2), D("_id", 1, "b", 2), empty, A{"a"}, A{}},
		{"nested field", D("_id", 1, "s", D("x", 1, "y", 2)), D("_id", 1, "s", D("x", 1, "y", 3, "z", 4)),
			D("s.y", 3, "s.z", 4), A{}, A{}},
		{"nested removed", D("_id", 1, "s", D("x", 1, "y", 2)), D("_id", 1, "s", D("x", 1)), empty, A{"s.y"}, A{}},
		{"document replaced by scalar", D("_id", 1, "s", D("x", 1)), D("_id", 1, "s", 5), D("s", 5), A{}, A{}},
		{"array push", D("_id", 1, "a", A{1, 2}), D("_id", 1, "a", A{1, 2, 3}), D("a.2", 3), A{}, A{}},
		{"array element set", D("_id", 1, "a", A{1, 2}), D("_id", 1, "a", A{1, 9}), D("a.1", 9), A{}, A{}},
		{"array truncated", D("_id", 1, "a", A{1, 2, 3}), D("_id", 1, "a", A{1}), empty, A{},
			A{D("field", "a", "newSize", int32(1))}},
		{"array pop front", D("_id", 1, "a", A{1, 2, 3}), D("_id", 1, "a", A{2, 3}), D("a.0", 2, "a.1", 3), A{},
			A{D("field", "a", "newSize", int32(2))}},
		{"document in array", D("_id", 1, "a", A{D("x", 1)}), D("_id", 1, "a", A{D("x", 2)}), D("a.0.x", 2), A{}, A{}},
		{"scalar to array", D("_id", 1, "a", 1), D("_id", 1, "a", A{1}), D("a", A{1}), A{}, A{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := updateDescription(tc.before, tc.after)
			want := D("updatedFields", tc.updated, "removedFields", tc.removed, "truncatedArrays", tc.truncated)
			if !sameValue(got, want) {
				t.Fatalf("updateDescription:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestChangeHistoryVisibility(t *testing.T) {
	clock := NewOpClock(nil)
	h := newChangeHistory(0)
	a := h.begin(clock)
	b := h.begin(clock)
	if v, _ := h.visible(clock); v != tsBefore(a) {
		t.Fatalf("visible with %v and %v in flight = %v, want just before %v", a, b, v, a)
	}
	_, wake := h.visible(clock)
	h.end(b)
	select {
	case <-wake:
	default:
		t.Fatal("end did not wake a waiter")
	}
	if v, _ := h.visible(clock); v != tsBefore(a) {
		t.Fatalf("visible with %v in flight = %v", a, v)
	}
	h.end(a)
	if v, _ := h.visible(clock); v != b {
		t.Fatalf("visible with nothing in flight = %v, want %v", v, b)
	}
	if tsBefore(bson.Timestamp{T: 5, I: 0}) != (bson.Timestamp{T: 4, I: 1<<32 - 1}) {
		t.Fatal("tsBefore across a second")
	}
}
