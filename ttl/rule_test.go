package ttl

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func raw(t *testing.T, d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeadlineMatrix(t *testing.T) {
	const ts = 1000
	off := &Policy{}
	minus1 := &Policy{HasDefault: true, DefaultTTL: -1}
	ten := &Policy{HasDefault: true, DefaultTTL: 10}
	cases := []struct {
		name string
		p    *Policy
		own  int64
		want int64
	}{
		{"off/missing", off, NoOwnTTL, Never},
		{"off/-1", off, -1, Never},
		{"off/5", off, 5, Never},
		{"-1/missing", minus1, NoOwnTTL, Never},
		{"-1/-1", minus1, -1, Never},
		{"-1/5", minus1, 5, (ts + 5) * 1000},
		{"10/missing", ten, NoOwnTTL, (ts + 10) * 1000},
		{"10/-1", ten, -1, Never},
		{"10/5", ten, 5, (ts + 5) * 1000},
		{"nil policy", nil, 5, Never},
	}
	for _, c := range cases {
		if got := c.p.Deadline(ts, c.own, nil); got != c.want {
			t.Errorf("%s: deadline %d, want %d", c.name, got, c.want)
		}
	}
}

func TestExpiredBoundary(t *testing.T) {
	// expired when _ts + ttl <= now (whole seconds): at exactly the deadline.
	d := (&Policy{HasDefault: true, DefaultTTL: 10}).Deadline(100, NoOwnTTL, nil)
	if Expired(d, 109_999) || !Expired(d, 110_000) || !Expired(d, 110_001) {
		t.Fatalf("boundary wrong for deadline %d", d)
	}
	if Expired(Never, math.MaxInt64-1) {
		t.Fatal("Never expired")
	}
}

func TestTTLIndexRules(t *testing.T) {
	early := bson.DateTime(5_000)
	late := bson.DateTime(9_000)
	p := &Policy{Indexes: []IndexRule{{Field: "at", ExpireAfterSeconds: 2}}}
	if got := p.Deadline(0, NoOwnTTL, raw(t, bson.D{{Key: "at", Value: bson.A{late, "x", early}}})); got != 7_000 {
		t.Fatalf("earliest date of an array: %d", got)
	}
	if got := p.Deadline(0, NoOwnTTL, raw(t, bson.D{{Key: "at", Value: "2020-01-01"}})); got != Never {
		t.Fatalf("non-dates never expire: %d", got)
	}
	nested := &Policy{Indexes: []IndexRule{{Field: "a.b", ExpireAfterSeconds: 0}}}
	if got := nested.Deadline(0, NoOwnTTL, raw(t, bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: late}}}})); got != 9_000 {
		t.Fatalf("dotted path: %d", got)
	}
	if got := nested.Deadline(0, NoOwnTTL, raw(t, bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "b", Value: late}}, bson.D{{Key: "b", Value: early}}, "x"}}})); got != 5_000 {
		t.Fatalf("dotted path through an array of sub-documents: %d", got)
	}
	partial := &Policy{Indexes: []IndexRule{{Field: "at", ExpireAfterSeconds: 0, Applies: func(bson.Raw) bool { return false }}}}
	if got := partial.Deadline(0, NoOwnTTL, raw(t, bson.D{{Key: "at", Value: early}})); got != Never {
		t.Fatalf("partial filter ignored: %d", got)
	}
	// Several rules: the earliest wins; ttl -1 opts out of DefaultTTL only.
	both := &Policy{HasDefault: true, DefaultTTL: 100, Indexes: []IndexRule{{Field: "at", ExpireAfterSeconds: 1}}}
	doc := raw(t, bson.D{{Key: "at", Value: early}})
	if got := both.Deadline(0, -1, doc); got != 6_000 {
		t.Fatalf("ttl -1 must not opt out of a TTL index: %d", got)
	}
	if got := both.Deadline(0, 3, doc); got != 3_000 {
		t.Fatalf("earliest deadline wins: %d", got)
	}
}

func TestDocTTLValidity(t *testing.T) {
	valid := []any{int32(-1), int32(1), int64(MaxTTL), 5.0, bson.NewDecimal128(0x3040000000000000, 7)}
	invalid := []any{nil, int32(0), 1.5, int32(-2), int64(MaxTTL) + 1, "10", true, bson.A{1}}
	for _, v := range valid {
		if _, ok := DocTTL(v); !ok {
			t.Errorf("%v (%T) should be valid", v, v)
		}
	}
	for _, v := range invalid {
		if _, ok := DocTTL(v); ok {
			t.Errorf("%v (%T) should be invalid", v, v)
		}
		if err := ValidateDocTTL(bson.D{{Key: "ttl", Value: v}}); err == nil {
			t.Errorf("ValidateDocTTL(%v) accepted", v)
		}
	}
	if OwnTTL(bson.D{{Key: "ttl", Value: "x"}}) != NoOwnTTL || OwnTTL(bson.D{{Key: "ttl", Value: int64(42)}}) != 42 {
		t.Fatal("OwnTTL")
	}
	if _, _, err := ParseDefaultTTL(nil, true); err != nil {
		t.Fatal("null turns TTL off")
	}
	if _, _, err := ParseDefaultTTL(nil, false); err == nil {
		t.Fatal("null refused where TTL must be set")
	}
	if _, err := ParseExpireAfterSeconds(int32(-1)); err == nil {
		t.Fatal("negative expireAfterSeconds accepted")
	}
}
