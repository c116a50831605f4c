package compat

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ---- item 10: query parts are validated even when the collection is missing ----

func TestIssue12QueryValidatedOnMissingCollection(t *testing.T) {
	e := newEnv(t)
	e.insert("present", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	bogus := bson.D{{Key: "a", Value: bson.D{{Key: "$bogus", Value: 1}}}}
	// Each command is run on an existing and on a missing collection: both
	// must fail the same way (a command error).
	cmds := []struct {
		name string
		cmd  func(coll string) bson.D
		code int32
	}{
		{"find filter", func(c string) bson.D {
			return bson.D{{Key: "find", Value: c}, {Key: "filter", Value: bogus}}
		}, 2},
		{"find projection", func(c string) bson.D {
			return bson.D{{Key: "find", Value: c}, {Key: "projection", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0}}}}
		}, 31254},
		{"find sort", func(c string) bson.D {
			return bson.D{{Key: "find", Value: c}, {Key: "sort", Value: bson.D{{Key: "a", Value: "up"}}}}
		}, 0},
		{"count", func(c string) bson.D {
			return bson.D{{Key: "count", Value: c}, {Key: "query", Value: bogus}}
		}, 2},
		{"distinct", func(c string) bson.D {
			return bson.D{{Key: "distinct", Value: c}, {Key: "key", Value: "a"}, {Key: "query", Value: bogus}}
		}, 2},
		{"aggregate $match", func(c string) bson.D {
			return bson.D{{Key: "aggregate", Value: c}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bogus}}}}, {Key: "cursor", Value: bson.D{}}}
		}, 2},
		{"findAndModify query", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bogus}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}}}
		}, 2},
		{"findAndModify remove", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bogus}, {Key: "remove", Value: true}}
		}, 2},
		{"findAndModify sort", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bson.D{}}, {Key: "sort", Value: bson.D{{Key: "a", Value: "up"}}}, {Key: "remove", Value: true}}
		}, 0},
		{"findAndModify update operator", func(c string) bson.D {
			return bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bson.D{}}, {Key: "update", Value: bson.D{{Key: "$bogus", Value: bson.D{{Key: "b", Value: 1}}}}}}
		}, 9},
	}
	for _, c := range cmds {
		errHere := e.runErr(c.cmd("present"))
		code, _, ok := errCode(errHere)
		if !ok {
			t.Fatalf("%s on an existing collection: want an error, got %v", c.name, errHere)
		}
		if c.code != 0 && code != c.code {
			t.Fatalf("%s on an existing collection: code %d (%v), want %d", c.name, code, errHere, c.code)
		}
		errMissing := e.runErr(c.cmd("missing"))
		wantCode(t, errMissing, code, "")
		if errMsg(errMissing) != errMsg(errHere) {
			t.Fatalf("%s: message on a missing collection %q, on an existing one %q", c.name, errMsg(errMissing), errMsg(errHere))
		}
	}
	// Writes: the statement fails with a write error, as on an existing
	// collection, and the missing collection is not created (mongod creates
	// it for an upsert before parsing the statement, so upserts are left
	// out: write_ops_exec.cpp performSingleUpdateOp).
	writes := []struct {
		name string
		run  func(coll string) error
		code int32
	}{
		{"delete filter", func(c string) error {
			_, err := e.coll(c).DeleteMany(e.ctx, bogus)
			return err
		}, 2},
		{"update filter", func(c string) error {
			_, err := e.coll(c).UpdateMany(e.ctx, bogus, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
			return err
		}, 2},
		{"update operator", func(c string) error {
			_, err := e.coll(c).UpdateMany(e.ctx, bson.D{}, bson.D{{Key: "$bogus", Value: bson.D{{Key: "b", Value: 1}}}})
			return err
		}, 9},
		{"replace filter", func(c string) error {
			_, err := e.coll(c).ReplaceOne(e.ctx, bogus, bson.D{{Key: "b", Value: 1}})
			return err
		}, 2},
	}
	for _, w := range writes {
		errHere := w.run("present")
		code, _, ok := errCode(errHere)
		if !ok || code != w.code {
			t.Fatalf("%s on an existing collection: got %v, want code %d", w.name, errHere, w.code)
		}
		errMissing := w.run("missing")
		wantCode(t, errMissing, w.code, "")
		if errMsg(errMissing) != errMsg(errHere) {
			t.Fatalf("%s: message on a missing collection %q, on an existing one %q", w.name, errMsg(errMissing), errMsg(errHere))
		}
	}
	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	noErr(t, err, "listCollections")
	strsEq(t, "collections", names, []string{"present"})
}
