package compat

import (
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIssue21IndexLimit: a collection holds at most 64 indexes, _id
// included; the 65th fails with 67 CannotCreateIndex and mongod's message,
// a createIndexes that would pass the limit creates none of its indexes,
// and a spec that already exists stays a no-op at the limit.
func TestIssue21IndexLimit(t *testing.T) {
	e := newEnv(t)
	e.run(bson.D{{Key: "create", Value: "c"}})
	specs := func(from, to int) bson.A {
		a := bson.A{}
		for i := from; i < to; i++ {
			a = append(a, bson.D{{Key: "key", Value: bson.D{{Key: fmt.Sprintf("f%d", i), Value: int32(1)}}}, {Key: "name", Value: fmt.Sprintf("f%d_1", i)}})
		}
		return a
	}
	listed := func() int {
		raw := e.run(bson.D{{Key: "listIndexes", Value: "c"}})
		arr, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
		return len(arr)
	}

	// 62 + _id = 63; then two more in one command would make 65: refused
	// as a whole.
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: specs(0, 62)}})
	err := e.runErr(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: specs(62, 64)}})
	wantCode(t, err, 67, "CannotCreateIndex")
	if want := "add index fails, too many indexes for " + e.db.Name() + ".c key:{ f63: 1 }"; errMsg(err) != want {
		t.Errorf("message %q, want %q", errMsg(err), want)
	}
	if n := listed(); n != 63 {
		t.Fatalf("%d indexes after the refused createIndexes, want 63 (none of its indexes kept)", n)
	}
	// The 64th fits.
	raw := e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: specs(62, 63)}})
	if got := raw.Lookup("numIndexesAfter").Int32(); got != 64 {
		t.Fatalf("numIndexesAfter %d, want 64", got)
	}
	// The 65th does not, whatever its key.
	err = e.runErr(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(-1)}}}, {Key: "name", Value: "ab"}}}}})
	wantCode(t, err, 67, "CannotCreateIndex")
	if want := "add index fails, too many indexes for " + e.db.Name() + ".c key:{ a: 1, b: -1 }"; errMsg(err) != want {
		t.Errorf("message %q, want %q", errMsg(err), want)
	}
	// An existing spec again is still a no-op.
	raw = e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: specs(10, 11)}})
	if got := raw.Lookup("numIndexesAfter").Int32(); got != 64 {
		t.Fatalf("re-creating an existing index at the limit: numIndexesAfter %d", got)
	}
	// Dropping one makes room for one.
	e.run(bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "f0_1"}})
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: specs(63, 64)}})
	if n := listed(); n != 64 {
		t.Fatalf("%d indexes, want 64", n)
	}
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "f5", Value: 5}})
}

// TestIssue21NamespaceRules: database and collection names follow mongod
// 7.0 (NamespaceString and DatabaseName as built for Linux, and
// userAllowedCreateNS for what is created or written to), each refusal
// with 73 InvalidNamespace and mongod's message.
func TestIssue21NamespaceRules(t *testing.T) {
	needsAdmin(t, "createCollection on system.* collections (readWrite covers only non-system ones, so mongod answers 13 before the namespace check)")
	e := newClockEnv(t) // a private server: the odd databases stay there
	created := map[string]bool{}
	t.Cleanup(func() {
		for db := range created {
			_ = e.cli.Database(db).Drop(e.ctx)
		}
	})
	create := func(db, coll string) error {
		created[db] = true
		return e.cli.Database(db).RunCommand(e.ctx, bson.D{{Key: "create", Value: coll}}).Err()
	}
	const db = "i21ns"
	for _, ok := range []struct{ db, coll string }{
		{db, "a."},
		{db, "a..b"},
		{db, "collection.name"},
		{db, " "},
		{db, "+-/*<>=~!@#%^&|`?()[],;:. "},
		{db, "コレクション"},
		{db, strings.Repeat("c", 255-len(db)-1)},
		{db, "system.js"},
		{strings.Repeat("d", 63), "c"},
		{"--", "c"},
		{"0prefix", "c"},
		{"a*b<c>d:e|f?g", "c"}, // FAT32 characters are refused only on Windows
	} {
		if err := create(ok.db, ok.coll); err != nil {
			t.Errorf("create %q in %q refused: %v", ok.coll, ok.db, err)
			continue
		}
		if err := e.cli.Database(ok.db).RunCommand(e.ctx, bson.D{{Key: "insert", Value: ok.coll}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}).Err(); err != nil {
			t.Errorf("insert into %q.%q: %v", ok.db, ok.coll, err)
		}
	}
	long := strings.Repeat("c", 255-len(db))
	for _, c := range []struct{ db, coll, msg string }{
		{db, "", "Invalid namespace specified 'i21ns.'"},
		{db, "\x00", "namespaces cannot have embedded null characters"},
		{db, "a\x00b", "namespaces cannot have embedded null characters"},
		{db, ".collection..", "Collection names cannot start with '.': .collection.."},
		{db, ".", "Collection names cannot start with '.': ."},
		{db, "with-a-$", "Invalid collection name: with-a-$"},
		{db, "$cmd", "Invalid collection name: $cmd"},
		{db, long, "Fully qualified namespace is too long. Namespace: i21ns." + long + " Max: 255"},
		{db, "system.foo", "Invalid system namespace: i21ns.system.foo"},
		{strings.Repeat("d", 64), "c", "db name must be at most 63 characters, found: 64"},
		{"/", "c", "Invalid namespace specified '/.c'"},
		{`\`, "c", `Invalid namespace specified '\.c'`},
		{"data base", "c", "Invalid namespace specified 'data base.c'"},
		{`a"b`, "c", `Invalid namespace specified 'a"b.c'`},
		{"with-a-$", "c", "Invalid namespace: with-a-$.c"},
		{"database.test", "c", "'.' is an invalid character in a db name: database.test"},
	} {
		err := create(c.db, c.coll)
		if authenticated && c.coll == "system.foo" {
			// No built-in role (root neither) has createCollection on an
			// arbitrary system collection: authorization refuses it first.
			wantCode(t, err, 13, "Unauthorized")
			continue
		}
		wantCode(t, err, 73, "InvalidNamespace")
		if errMsg(err) != c.msg {
			t.Errorf("create %q in %q: message %q, want %q", c.coll, c.db, errMsg(err), c.msg)
		}
	}
	// Writes refuse what cannot be created; reads of such a name find
	// nothing, as in mongod (the namespace only has to parse).
	err := e.cli.Database(db).RunCommand(e.ctx, bson.D{{Key: "insert", Value: "a$b"}, {Key: "documents", Value: bson.A{bson.D{}}}}).Err()
	wantCode(t, err, 73, "InvalidNamespace")
	err = e.cli.Database(db).RunCommand(e.ctx, bson.D{{Key: "delete", Value: "a$b"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}}).Err()
	wantCode(t, err, 73, "InvalidNamespace")
	raw, err := e.cli.Database(db).RunCommand(e.ctx, bson.D{{Key: "find", Value: "a$b"}}).Raw()
	if err != nil {
		t.Fatalf("find on a$b: %v", err)
	}
	if n, _ := raw.Lookup("cursor", "firstBatch").Array().Values(); len(n) != 0 {
		t.Fatalf("find on a$b returned %d documents", len(n))
	}
	// A database name too long fails whatever the command.
	err = e.cli.Database(strings.Repeat("d", 64)).RunCommand(e.ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	wantCode(t, err, 73, "InvalidNamespace")
}
