package compat

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ---- issue 12 item 1: bypassEmptyTsReplacement

var emptyTS = bson.Timestamp{}

// tsAt returns the Timestamp stored at path, failing when it is another type.
func tsAt(t *testing.T, doc bson.Raw, path string) bson.Timestamp {
	t.Helper()
	v := val(t, doc, path)
	ts, i, ok := v.TimestampOK()
	if !ok {
		t.Fatalf("%s: got %s, want a timestamp", path, v)
	}
	return bson.Timestamp{T: ts, I: i}
}

// wantFreshTS asserts that mongod replaced an empty timestamp with the
// current one (seconds of the server clock, a non-zero increment).
func wantFreshTS(t *testing.T, e *env, doc bson.Raw, path string) bson.Timestamp {
	t.Helper()
	ts := tsAt(t, doc, path)
	if ts.I == 0 || ts.T == 0 {
		t.Fatalf("%s: got %v, want the current timestamp (not Timestamp(0, 0)) in %s", path, ts, doc)
	}
	if d := int64(ts.T) - e.now().Unix(); d < -5 || d > 5 {
		t.Fatalf("%s: got %v (seconds %d), want the server's current time %d", path, ts, ts.T, e.now().Unix())
	}
	return ts
}

func TestIssue12WritesBypassEmptyTsInsert(t *testing.T) {
	e := newEnv(t)
	// The tools send the field only to servers reporting 7.0.13 or later:
	// the version mayfly reports is one of those.
	bi := e.admin(bson.D{{Key: "buildInfo", Value: 1}})
	va := val(t, bi, "versionArray").Array()
	vals, err := va.Values()
	noErr(t, err, "versionArray")
	if len(vals) < 3 || vals[0].Int32() != 7 || vals[1].Int32() != 0 || vals[2].Int32() < 13 {
		t.Fatalf("buildInfo reports %s (versionArray %s), want 7.0.x with x >= 13", val(t, bi, "version"), va)
	}
	doc := func(id any) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "ts", Value: emptyTS}, {Key: "d", Value: bson.D{{Key: "dv", Value: emptyTS}}}}
	}
	// With the flag, Timestamp(0, 0) is stored as given (one document and a batch).
	e.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(1)}}, {Key: "bypassEmptyTsReplacement", Value: true}})
	e.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(2), doc(3)}}, {Key: "bypassEmptyTsReplacement", Value: true}})
	for _, id := range []int32{1, 2, 3} {
		docEq(t, e.find("c", bson.D{{Key: "_id", Value: id}})[0], doc(id))
	}
	// Without it (or false), a top-level empty timestamp becomes the current
	// one; nested ones and _id are left alone.
	e.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(4)}}})
	e.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(5), doc(6)}}, {Key: "bypassEmptyTsReplacement", Value: false}})
	var prev bson.Timestamp
	for _, id := range []int32{4, 5, 6} {
		got := e.find("c", bson.D{{Key: "_id", Value: id}})[0]
		ts := wantFreshTS(t, e, got, "ts")
		if id > 4 && !(ts.T > prev.T || ts.T == prev.T && ts.I > prev.I) {
			t.Fatalf("_id %d: timestamp %v not after the previous one %v", id, ts, prev)
		}
		prev = ts
		if tsAt(t, got, "d.dv") != emptyTS {
			t.Fatalf("nested empty timestamp was replaced: %s", got)
		}
	}
	e.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: emptyTS}, {Key: "x", Value: emptyTS}}}}})
	got := e.find("c", bson.D{{Key: "_id", Value: emptyTS}})
	if len(got) != 1 {
		t.Fatalf("the document with _id Timestamp(0, 0) is not found: %v", got)
	}
	wantFreshTS(t, e, got[0], "x")
	// optionalBool: anything but a boolean is refused.
	wantCode(t, e.runErr(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(7)}}, {Key: "bypassEmptyTsReplacement", Value: "yes"}}), 14, "TypeMismatch")
}

func TestIssue12WritesBypassEmptyTsUpdate(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "_id", Value: 4}})
	upd := func(id int32, u any, extra ...bson.E) bson.D {
		cmd := bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "u", Value: u}, {Key: "upsert", Value: true}}}}}
		return append(cmd, extra...)
	}
	repl := bson.D{{Key: "ts", Value: emptyTS}, {Key: "n", Value: bson.D{{Key: "t", Value: emptyTS}}}}
	// Replacement with the flag: kept.
	e.run(upd(1, repl, bson.E{Key: "bypassEmptyTsReplacement", Value: true}))
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: 1}})[0], bson.D{{Key: "_id", Value: int32(1)}, {Key: "ts", Value: emptyTS}, {Key: "n", Value: bson.D{{Key: "t", Value: emptyTS}}}})
	// Replacement without it: the top-level one is replaced.
	e.run(upd(2, repl))
	got := e.find("c", bson.D{{Key: "_id", Value: 2}})[0]
	wantFreshTS(t, e, got, "ts")
	if tsAt(t, got, "n.t") != emptyTS {
		t.Fatalf("nested empty timestamp was replaced: %s", got)
	}
	// An upserted replacement likewise.
	e.run(upd(10, repl))
	wantFreshTS(t, e, e.find("c", bson.D{{Key: "_id", Value: 10}})[0], "ts")
	e.run(upd(11, repl, bson.E{Key: "bypassEmptyTsReplacement", Value: true}))
	if tsAt(t, e.find("c", bson.D{{Key: "_id", Value: 11}})[0], "ts") != emptyTS {
		t.Fatal("upserted replacement with bypassEmptyTsReplacement lost its empty timestamp")
	}
	// $set is not a replacement: mongod stores the value as given.
	e.run(upd(3, bson.D{{Key: "$set", Value: bson.D{{Key: "ts", Value: emptyTS}}}}))
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: 3}})[0], bson.D{{Key: "_id", Value: int32(3)}, {Key: "ts", Value: emptyTS}})
	// delete accepts the field too (it is a field of every write command).
	e.run(bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 4}}}, {Key: "limit", Value: 1}}}}, {Key: "bypassEmptyTsReplacement", Value: true}})
	eq(t, "documents left with _id 4", e.count("c", bson.D{{Key: "_id", Value: 4}}), int64(0))
	wantCode(t, e.runErr(upd(1, repl, bson.E{Key: "bypassEmptyTsReplacement", Value: int32(1)})), 14, "TypeMismatch")
}

func TestIssue12WritesBypassEmptyTsFindAndModify(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	fam := func(id int32, extra ...bson.E) bson.Raw {
		cmd := bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: id}}},
			{Key: "update", Value: bson.D{{Key: "ts", Value: emptyTS}}}, {Key: "new", Value: true}}
		return e.run(append(cmd, extra...))
	}
	r := fam(1, bson.E{Key: "bypassEmptyTsReplacement", Value: true})
	docEq(t, r.Lookup("value").Document(), bson.D{{Key: "_id", Value: int32(1)}, {Key: "ts", Value: emptyTS}})
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: 1}})[0], bson.D{{Key: "_id", Value: int32(1)}, {Key: "ts", Value: emptyTS}})
	r = fam(2)
	wantFreshTS(t, e, r.Lookup("value").Document(), "ts")
	wantFreshTS(t, e, e.find("c", bson.D{{Key: "_id", Value: 2}})[0], "ts")
}

// ---- issue 12 item 2: empty field names

func TestIssue12WritesEmptyFieldNames(t *testing.T) {
	e := newEnv(t)
	d1 := bson.D{{Key: "_id", Value: int32(1)}, {Key: "", Value: "foo"}, {Key: "n", Value: bson.D{{Key: "", Value: int32(1)}, {Key: "a", Value: bson.A{bson.D{{Key: "", Value: true}}}}}}}
	d2 := bson.D{{Key: "_id", Value: bson.D{{Key: "", Value: int32(2)}}}, {Key: "x", Value: int32(2)}}
	// One document (its own path) and a batch.
	if _, err := e.coll("c").InsertOne(e.ctx, d1); err != nil {
		t.Fatalf("insert %s: %v", ejson(d1), err)
	}
	e.insert("c", d2, bson.D{{Key: "_id", Value: int32(3)}, {Key: "", Value: "bar"}})
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: int32(1)}})[0], d1)
	// Queries on the empty name work: top level, nested, and an _id document.
	docsEq(t, e.find("c", bson.D{{Key: "", Value: "foo"}}), d1)
	docsEq(t, e.find("c", bson.D{{Key: "n.", Value: int32(1)}}), d1)
	docsEq(t, e.find("c", bson.D{{Key: "_id", Value: bson.D{{Key: "", Value: int32(2)}}}}), d2)
	eq(t, "documents with an empty field name", e.count("c", bson.D{{Key: "", Value: bson.D{{Key: "$exists", Value: true}}}}), int64(2))
	// A replacement may carry one too; an update path may not (mongod: 56).
	res, err := e.coll("c").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: int32(3)}}, bson.D{{Key: "", Value: "baz"}})
	noErr(t, err, "replaceOne with an empty field name")
	eq(t, "replaceOne modified", res.ModifiedCount, int64(1))
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: int32(3)}})[0], bson.D{{Key: "_id", Value: int32(3)}, {Key: "", Value: "baz"}})
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: int32(3)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "", Value: 1}}}})
	wantCode(t, err, 56, "EmptyFieldName")
	// findAndModify replacement and an upsert replacement.
	r := e.run(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: int32(4)}}},
		{Key: "update", Value: bson.D{{Key: "", Value: int32(4)}}}, {Key: "upsert", Value: true}, {Key: "new", Value: true}})
	docEq(t, r.Lookup("value").Document(), bson.D{{Key: "_id", Value: int32(4)}, {Key: "", Value: int32(4)}})
}

// ---- issue 12 item 3: pipeline updates keep _id

// updateCmd runs one update statement and returns the reply.
func (e *env) updateCmd(coll string, q bson.D, u any, upsert bool) bson.Raw {
	e.t.Helper()
	return e.runWrite(bson.D{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: q}, {Key: "u", Value: u}, {Key: "upsert", Value: upsert}}}}})
}

func TestIssue12WritesPipelineKeepsID(t *testing.T) {
	e := newEnv(t)
	stage := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	cases := []struct {
		name string
		u    bson.A
		want bson.D // without _id
	}{
		{"$replaceRoot then $addFields", bson.A{stage("$replaceRoot", bson.D{{Key: "newRoot", Value: "$t"}}), stage("$addFields", bson.D{{Key: "foo", Value: int32(1)}})},
			bson.D{{Key: "x", Value: int32(9)}, {Key: "foo", Value: int32(1)}}},
		{"$replaceWith", bson.A{stage("$replaceWith", "$t")}, bson.D{{Key: "x", Value: int32(9)}}},
		{"$unset _id", bson.A{stage("$unset", "_id")}, bson.D{{Key: "a", Value: int32(1)}, {Key: "t", Value: bson.D{{Key: "x", Value: int32(9)}}}}},
		{"$project _id: 0", bson.A{stage("$project", bson.D{{Key: "_id", Value: int32(0)}, {Key: "a", Value: int32(1)}})}, bson.D{{Key: "a", Value: int32(1)}}},
	}
	for i, c := range cases {
		id := int32(i + 1)
		e.insert("c", bson.D{{Key: "_id", Value: id}, {Key: "a", Value: int32(1)}, {Key: "t", Value: bson.D{{Key: "x", Value: int32(9)}}}})
		r := e.updateCmd("c", bson.D{{Key: "_id", Value: id}}, c.u, false)
		if has(r, "writeErrors") {
			t.Fatalf("%s: %s", c.name, r)
		}
		eq(t, c.name+": n", r.Lookup("n").Int32(), int32(1))
		eq(t, c.name+": nModified", r.Lookup("nModified").Int32(), int32(1))
		docEq(t, e.find("c", bson.D{{Key: "_id", Value: id}})[0], append(bson.D{{Key: "_id", Value: id}}, c.want...))
	}
	// Changing _id to another value is still refused (66 ImmutableField), as a write error.
	r := e.updateCmd("c", bson.D{{Key: "_id", Value: int32(1)}}, bson.A{stage("$replaceWith", bson.D{{Key: "_id", Value: int32(7)}})}, false)
	eq(t, "write error code for a changed _id", val(t, r, "writeErrors.0.code").Int32(), int32(66))
	eq(t, "documents with _id 7", e.count("c", bson.D{{Key: "_id", Value: int32(7)}}), int64(0))

	// Upserts: _id from the query's equality ...
	r = e.updateCmd("u", bson.D{{Key: "_id", Value: int32(5)}, {Key: "k", Value: "a"}}, bson.A{stage("$replaceWith", bson.D{{Key: "v", Value: int32(1)}})}, true)
	eq(t, "upserted _id", val(t, r, "upserted.0._id").Int32(), int32(5))
	docEq(t, e.find("u", bson.D{{Key: "_id", Value: int32(5)}})[0], bson.D{{Key: "_id", Value: int32(5)}, {Key: "v", Value: int32(1)}})
	r = e.updateCmd("u", bson.D{{Key: "_id", Value: int32(6)}, {Key: "k", Value: "b"}}, bson.A{stage("$project", bson.D{{Key: "_id", Value: int32(0)}, {Key: "k", Value: int32(1)}})}, true)
	docEq(t, e.find("u", bson.D{{Key: "_id", Value: int32(6)}})[0], bson.D{{Key: "_id", Value: int32(6)}, {Key: "k", Value: "b"}})
	// ... or generated when the query has none.
	r = e.updateCmd("u", bson.D{{Key: "k", Value: "c"}}, bson.A{stage("$replaceWith", bson.D{{Key: "v", Value: int32(3)}})}, true)
	if val(t, r, "upserted.0._id").Type != bson.TypeObjectID {
		t.Fatalf("upsert without an _id in the query: want a generated ObjectId, got %s", r)
	}
	got := e.find("u", bson.D{{Key: "v", Value: int32(3)}})
	if len(got) != 1 || val(t, got[0], "_id").Type != bson.TypeObjectID || len(mustElems(t, got[0])) != 2 {
		t.Fatalf("upserted document: %v", got)
	}
	// findAndModify with a pipeline likewise.
	fr := e.run(bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: int32(2)}}},
		{Key: "update", Value: bson.A{stage("$replaceWith", bson.D{{Key: "z", Value: int32(1)}})}}, {Key: "new", Value: true}})
	docEq(t, fr.Lookup("value").Document(), bson.D{{Key: "_id", Value: int32(2)}, {Key: "z", Value: int32(1)}})
}

func mustElems(t *testing.T, d bson.Raw) []bson.RawElement {
	t.Helper()
	el, err := d.Elements()
	noErr(t, err, "elements")
	return el
}

// ---- issue 12 item 4: nModified of a replacement identical to the document

func TestIssue12WritesIdenticalReplacement(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}}, bson.D{{Key: "_id", Value: int32(2)}})
	// mongod's ObjectReplaceExecutor treats only a replacement binary-equal
	// to the stored document as a no-op. Sent without _id, the document is
	// emptied (keeping _id) and refilled: matched 1, modified 1, unchanged.
	r := e.updateCmd("c", bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}}, false)
	eq(t, "n without _id", r.Lookup("n").Int32(), int32(1))
	eq(t, "nModified without _id", r.Lookup("nModified").Int32(), int32(1))
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: int32(1)}})[0], bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}})
	// With the same _id first and the same values and types: a no-op.
	r = e.updateCmd("c", bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}}, false)
	eq(t, "n with _id", r.Lookup("n").Int32(), int32(1))
	eq(t, "nModified with _id", r.Lookup("nModified").Int32(), int32(0))
	// A document holding only _id replaced by {}: nothing removed, nothing added.
	r = e.updateCmd("c", bson.D{{Key: "_id", Value: int32(2)}}, bson.D{}, false)
	eq(t, "nModified of {} over {_id}", r.Lookup("nModified").Int32(), int32(0))
	// The driver's replaceOne reports the same.
	res, err := e.coll("c").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}})
	noErr(t, err, "replaceOne")
	eq(t, "replaceOne matched", res.MatchedCount, int64(1))
	eq(t, "replaceOne modified", res.ModifiedCount, int64(1))
}

// ---- issue 12 item 9: error shapes of write commands

// wantCmdFail asserts that a command failed as a whole (ok: 0) with code,
// not with a write error.
func wantCmdFail(t *testing.T, e *env, cmd bson.D, code int32, msg string) {
	t.Helper()
	raw, err := e.db.RunCommand(e.ctx, cmd).Raw()
	if err == nil {
		t.Fatalf("%s: want the command to fail with %d, got %s", ejson(cmd), code, raw)
	}
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: want a command error (ok: 0) with code %d, got %T %v", ejson(cmd), code, err, err)
	}
	if ce.Code != code || (msg != "" && ce.Message != msg) {
		t.Fatalf("%s: got %d %q, want %d %q", ejson(cmd), ce.Code, ce.Message, code, msg)
	}
}

func TestIssue12WritesStatementErrorsFailCommand(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(0)}})
	good := bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: int32(1)}}}}}}
	with := func(st bson.D, extra ...bson.E) bson.D { return append(append(bson.D{}, st...), extra...) }
	upd := func(stmts ...bson.D) bson.D {
		a := bson.A{}
		for _, s := range stmts {
			a = append(a, s)
		}
		return bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: a}}
	}
	// 7.0's update statement has no sort (added in 8.0): unknown, and the
	// whole command fails before any statement runs (the first is valid).
	wantCmdFail(t, e, upd(good, with(good, bson.E{Key: "sort", Value: bson.D{{Key: "a", Value: 1}}})), 40415, "BSON field 'update.updates.sort' is an unknown field.")
	wantCmdFail(t, e, upd(good, with(good, bson.E{Key: "bogus", Value: 1})), 40415, "BSON field 'update.updates.bogus' is an unknown field.")
	wantCmdFail(t, e, upd(good, bson.D{{Key: "q", Value: int32(1)}, {Key: "u", Value: bson.D{}}}), 14, "BSON field 'update.updates.q' is the wrong type 'int', expected type 'object'")
	wantCmdFail(t, e, upd(good, bson.D{{Key: "q", Value: bson.D{}}}), 40414, "BSON field 'update.updates.u' is missing but a required field")
	wantCmdFail(t, e, upd(good, with(good, bson.E{Key: "multi", Value: "yes"})), 14, "BSON field 'update.updates.multi' is the wrong type 'string', expected type 'bool'")
	wantCmdFail(t, e, upd(good, bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: int32(5)}}), 9, "Update argument must be either an object or an array")
	wantCmdFail(t, e, upd(), 16, "Write batch sizes must be between 1 and 100000. Got 0 operations.")
	docEq(t, e.find("c", bson.D{{Key: "_id", Value: int32(1)}})[0], bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(0)}})

	del := func(stmts ...bson.D) bson.D {
		a := bson.A{}
		for _, s := range stmts {
			a = append(a, s)
		}
		return bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: a}}
	}
	gd := bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "limit", Value: int32(1)}}
	wantCmdFail(t, e, del(gd, with(gd, bson.E{Key: "sort", Value: bson.D{{Key: "a", Value: 1}}})), 40415, "BSON field 'delete.deletes.sort' is an unknown field.")
	wantCmdFail(t, e, del(gd, bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: int32(5)}}), 9, "")
	wantCmdFail(t, e, del(gd, bson.D{{Key: "q", Value: "x"}, {Key: "limit", Value: int32(0)}}), 14, "BSON field 'delete.deletes.q' is the wrong type 'string', expected type 'object'")
	eq(t, "documents left after failed deletes", e.count("c", nil), int64(1))

	wantCmdFail(t, e, bson.D{{Key: "insert", Value: "n"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, int32(7)}}}, 14, "BSON field 'insert.documents.1' is the wrong type 'int', expected type 'object'")
	eq(t, "documents inserted by a refused insert", e.count("n", nil), int64(0))

	// A stage not allowed in an update pipeline fails while the statement
	// runs: a write error 72 (InvalidOptions) in update, as mongod's
	// PipelineExecutor; findAndModify has no write errors, so it fails whole.
	r := e.runWrite(upd(bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "u", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}}}))
	eq(t, "$group in an update pipeline: write error code", val(t, r, "writeErrors.0.code").Int32(), int32(72))
	eq(t, "$group in an update pipeline: message", val(t, r, "writeErrors.0.errmsg").StringValue(), "$group is not allowed to be used within an update")
	wantCmdFail(t, e, bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{}}, {Key: "update", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}}}, 72, "$group is not allowed to be used within an update")
}

func TestIssue12WritesMergeDuplicateKey(t *testing.T) {
	e := newEnv(t)
	ns := e.db.Name() + ".out"
	e.insert("src", bson.D{{Key: "_id", Value: int32(1)}, {Key: "k", Value: "a"}})
	e.insert("out", bson.D{{Key: "_id", Value: int32(1)}, {Key: "k", Value: "z"}}, bson.D{{Key: "_id", Value: int32(2)}, {Key: "k", Value: "a"}})
	_, err := e.coll("out").Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	noErr(t, err, "createIndex")
	agg := func(merge bson.D) error {
		_, err := e.coll("src").Aggregate(e.ctx, bson.A{bson.D{{Key: "$merge", Value: merge}}})
		return err
	}
	check := func(err error, msg string, pattern, value bson.D) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("want a command error, got %T %v", err, err)
		}
		if ce.Code != 11000 || ce.Name != "DuplicateKey" || ce.Message != msg {
			t.Fatalf("got %d %s %q\nwant 11000 DuplicateKey %q", ce.Code, ce.Name, ce.Message, msg)
		}
		docEq(t, ce.Raw.Lookup("keyPattern").Document(), pattern)
		docEq(t, ce.Raw.Lookup("keyValue").Document(), value)
	}
	// whenMatched: fail on the _id the source shares with the target.
	check(agg(bson.D{{Key: "into", Value: "out"}, {Key: "whenMatched", Value: "fail"}}),
		"$merge with whenMatched: fail found an existing document with the same values for the 'on' fields :: caused by :: E11000 duplicate key error collection: "+ns+" index: _id_ dup key: { _id: 1 }",
		bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(1)}})
	// Replacing _id 1 with k "a" collides with _id 2 on the unique k index.
	check(agg(bson.D{{Key: "into", Value: "out"}, {Key: "whenMatched", Value: "replace"}}),
		"$merge failed due to a DuplicateKey error :: caused by :: E11000 duplicate key error collection: "+ns+" index: k_1 dup key: { k: \"a\" }",
		bson.D{{Key: "k", Value: int32(1)}}, bson.D{{Key: "k", Value: "a"}})
}
