package engine

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
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

// changeKeys counts the stored change history records.
func changeKeys(t *testing.T, e *Engine) int { return prefixKeys(t, e, docstore.PfxChange) }

// TestChangeHistoryDurableAndTrimmed: the history is written with the
// changes, survives a restart (a stream resumes from a token taken before
// it), and the retention trim removes what is older than its bound, after
// which resuming there answers ChangeStreamHistoryLost.
func TestChangeHistoryDurableAndTrimmed(t *testing.T) {
	dir := t.TempDir()
	clk := ttl.NewFakeClock(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	e, stop := openReplOnDir(t, dir, clk)
	stream := func(e *Engine, spec bson.D) bson.Raw {
		r := srvTestOK(t, e, "db", bson.D{{Key: "aggregate", Value: "c"},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: spec}}}}, {Key: "cursor", Value: bson.D{}}})
		return r.Lookup("cursor").Document()
	}
	token := stream(e, bson.D{}).Lookup("postBatchResumeToken").Document()
	before := changeKeys(t, e) // the startup's own writes (the FCV document)
	srvTestOK(t, e, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}}})
	srvTestOK(t, e, "db", bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}}}}})
	if n := changeKeys(t, e); n != before+3 {
		t.Fatalf("history records = %d, want %d", n, before+3)
	}
	stop()
	e, stop = openReplOnDir(t, dir, clk)
	defer stop()
	batch, _ := stream(e, bson.D{{Key: "resumeAfter", Value: token}}).Lookup("firstBatch").Array().Values()
	var ops []string
	for _, v := range batch {
		ops = append(ops, v.Document().Lookup("operationType").StringValue())
	}
	if fmt.Sprint(ops) != "[insert insert delete]" {
		t.Fatalf("events after a restart: %v", ops)
	}
	clk.Advance(23 * time.Hour)
	e.trimChanges()
	if n := changeKeys(t, e); n != before+3 {
		t.Fatalf("history records within the retention = %d, want %d", n, before+3)
	}
	clk.Advance(2 * time.Hour)
	e.trimChanges()
	if n := changeKeys(t, e); n != 0 {
		t.Fatalf("history records after the retention = %d, want 0", n)
	}
	srvTestErr(t, e, "db", bson.D{{Key: "aggregate", Value: "c"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "resumeAfter", Value: token}}}}}}, {Key: "cursor", Value: bson.D{}}},
		mongoerr.ChangeStreamHistoryLost, "may no longer be in the oplog")
}

// TestChangeStreamPrivileges: a collection stream needs changeStream and
// find on the collection, a database stream on the database, a
// whole-deployment stream on every normal resource (mongod's
// anyNormalResource), so read access to admin alone does not open it.
func TestChangeStreamPrivileges(t *testing.T) {
	agg := func(db string, target any, spec bson.D) *Request {
		return &Request{DB: db, Name: "aggregate", Cmd: bson.D{{Key: "aggregate", Value: target},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: spec}}}}, {Key: "cursor", Value: bson.D{}}}}
	}
	for _, tc := range []struct {
		r    *Request
		want resource
	}{
		{agg("app", "c", bson.D{}), nsRes("app", "c")},
		{agg("app", int32(1), bson.D{}), nsRes("app", "")},
		{agg("admin", int32(1), bson.D{{Key: "allChangesForCluster", Value: true}}), anyNormalRes()},
	} {
		ps, err := needAggregate(nil, tc.r)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 || fmt.Sprint(ps[0]) != fmt.Sprint(priv(tc.want, "changeStream", "find")) {
			t.Fatalf("%v: privileges %v, want changeStream and find on %v", tc.r.Cmd, ps, tc.want)
		}
	}
}
