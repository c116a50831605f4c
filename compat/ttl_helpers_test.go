package compat

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Helpers for the time-to-live tests (shared/reference/ttl-spec.md).

const sec = time.Second

// forever is "long enough that anything with a finite TTL used by these
// tests would have expired": years on a fake clock, 4 s on a real one (the
// TTLs used in the tests are 1–3 s).
func (e *env) forever() time.Duration {
	if e.inProcess() {
		return 24 * 365 * time.Hour
	}
	return 4 * sec
}

// create makes a collection with extra options; defaultTimeToLive is
// passed through as given (nil means the field is sent as null).
func (e *env) create(name string, opts ...bson.E) {
	e.t.Helper()
	cmd := bson.D{{Key: "create", Value: name}}
	cmd = append(cmd, opts...)
	e.run(cmd)
}

func dttl(v any) bson.E { return bson.E{Key: "defaultTimeToLive", Value: v} }

// visible reports whether a document with this _id can be found.
func (e *env) visible(coll string, id any) bool {
	e.t.Helper()
	n, err := e.coll(coll).CountDocuments(e.ctx, bson.D{{Key: "_id", Value: id}})
	noErr(e.t, err, "countDocuments by _id")
	docs := e.find(coll, bson.D{{Key: "_id", Value: id}})
	if int64(len(docs)) != n {
		e.t.Fatalf("find saw %d documents with _id %v but countDocuments %d", len(docs), id, n)
	}
	return n == 1
}

func (e *env) wantVisible(coll string, id any, want bool, when string) {
	e.t.Helper()
	if got := e.visible(coll, id); got != want {
		state := map[bool]string{true: "visible", false: "gone (expired)"}
		e.t.Fatalf("%s: document %v in %s is %s, want %s%s", when, id, coll, state[got], state[want], e.timing())
	}
}

// wantIDs asserts the sorted _ids visible in a collection.
func (e *env) wantIDs(coll string, when string, ids ...int) {
	e.t.Helper()
	got := e.ids(coll)
	want := idList(ids...)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		e.t.Fatalf("%s: visible _ids in %s are %v, want %v%s", when, coll, got, want, e.timing())
	}
}

// collSpec returns the listCollections entry of a collection (nil if absent).
func (e *env) collSpec(coll string) bson.Raw {
	e.t.Helper()
	cur, err := e.db.ListCollections(e.ctx, bson.D{{Key: "name", Value: coll}})
	noErr(e.t, err, "listCollections")
	var out []bson.Raw
	noErr(e.t, cur.All(e.ctx, &out), "listCollections iterate")
	if len(out) == 0 {
		return nil
	}
	return out[0]
}

// indexes returns listIndexes of a collection.
func (e *env) indexes(coll string) []bson.Raw {
	e.t.Helper()
	cur, err := e.coll(coll).Indexes().List(e.ctx)
	noErr(e.t, err, "listIndexes")
	var out []bson.Raw
	noErr(e.t, cur.All(e.ctx, &out), "listIndexes iterate")
	return out
}

// index returns the index with that name, or nil.
func (e *env) index(coll, name string) bson.Raw {
	e.t.Helper()
	for _, ix := range e.indexes(coll) {
		if n, ok := ix.Lookup("name").StringValueOK(); ok && n == name {
			return ix
		}
	}
	return nil
}

// intOf reads an integral number (int32 or int64) and fails on any other type.
func intOf(t *testing.T, v bson.RawValue, what string) int64 {
	t.Helper()
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32())
	case bson.TypeInt64:
		return v.Int64()
	}
	t.Fatalf("%s is %s (%s), want an integer", what, v.Type, v)
	return 0
}

// wantDefaultTTL asserts that every view of a collection's DefaultTTL agrees
// (spec §3.3, §3.5): listCollections options.defaultTimeToLive, the _ts_1
// index of listIndexes, and collStats. want nil means TTL off.
func (e *env) wantDefaultTTL(coll string, want any) {
	e.t.Helper()
	spec := e.collSpec(coll)
	if spec == nil {
		e.t.Fatalf("collection %s does not exist", coll)
	}
	opt, optErr := spec.LookupErr("options", "defaultTimeToLive")
	ix := e.index(coll, "_ts_1")
	stats := e.run(bson.D{{Key: "collStats", Value: coll}})
	if want == nil {
		if optErr == nil {
			e.t.Fatalf("TTL is off but listCollections shows options.defaultTimeToLive %s", opt)
		}
		if ix != nil {
			e.t.Fatalf("TTL is off but listIndexes shows %s", ix)
		}
		if v, err := stats.LookupErr("ttl", "defaultTimeToLive"); err == nil && v.Type != bson.TypeNull {
			e.t.Fatalf("TTL is off but collStats ttl.defaultTimeToLive is %s", v)
		}
		return
	}
	w := int64(want.(int))
	if optErr != nil {
		e.t.Fatalf("listCollections lacks options.defaultTimeToLive (want %d): %s", w, spec)
	}
	eq(e.t, "listCollections options.defaultTimeToLive", intOf(e.t, opt, "options.defaultTimeToLive"), w)
	if ix == nil {
		e.t.Fatalf("DefaultTTL is %d but listIndexes has no _ts_1 index: %v", w, e.indexes(coll))
	}
	docEq(e.t, val(e.t, ix, "key").Document(), bson.D{{Key: "_ts", Value: 1}})
	eq(e.t, "_ts_1 expireAfterSeconds", intOf(e.t, val(e.t, ix, "expireAfterSeconds"), "expireAfterSeconds"), w)
	eq(e.t, "collStats ttl.defaultTimeToLive", intOf(e.t, val(e.t, stats, "ttl.defaultTimeToLive"), "collStats ttl.defaultTimeToLive"), w)
	cs := e.aggregate(coll, bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if len(cs) != 1 {
		e.t.Fatalf("$collStats returned %d documents", len(cs))
	}
	eq(e.t, "$collStats storageStats.ttl.defaultTimeToLive", intOf(e.t, val(e.t, cs[0], "storageStats.ttl.defaultTimeToLive"), "$collStats storageStats.ttl.defaultTimeToLive"), w)
}

// ts reads a document's _ts through a projection that names it.
func (e *env) ts(coll string, id any) int64 {
	e.t.Helper()
	raw, err := e.coll(coll).FindOne(e.ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(bson.D{{Key: "_ts", Value: 1}})).Raw()
	noErr(e.t, err, "findOne with _ts projection")
	v := val(e.t, raw, "_ts")
	if v.Type != bson.TypeInt64 {
		e.t.Fatalf("_ts is %s (%s), want int64 seconds", v.Type, v)
	}
	return v.Int64()
}

// wantTS asserts a document's _ts was set by a write that started at
// before: exactly the fake clock's second, or within the real interval.
func (e *env) wantTS(coll string, id any, before time.Time, what string) int64 {
	e.t.Helper()
	got := e.ts(coll, id)
	if e.inProcess() {
		if got != before.Unix() {
			e.t.Fatalf("%s: _ts %d, want %d (the server clock's second)", what, got, before.Unix())
		}
		return got
	}
	if got < before.Unix() || got > time.Now().Unix() {
		e.t.Fatalf("%s: _ts %d outside [%d, %d]", what, got, before.Unix(), time.Now().Unix())
	}
	return got
}

// serverStatus reads serverStatus.
func (e *env) serverStatus() bson.Raw {
	e.t.Helper()
	return e.admin(bson.D{{Key: "serverStatus", Value: 1}})
}
