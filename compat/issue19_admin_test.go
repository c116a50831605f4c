package compat

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/engine/keycodec"
	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// Issue 19, the admin surface: validate, top, compact, logRotate, dbStats'
// free storage figures.

// adminTarget starts a private in-process server (its store is reached
// directly to inject corruption) whose TTL reaper waits reaperEvery
// between passes.
func adminTarget(t *testing.T, reaperEvery time.Duration) (*env, *server.Server) {
	t.Helper()
	if externalURI != "" {
		t.Skip("injects corruption into the store of an in-process server (MAYFLY_URI is set)")
	}
	mayflyOnly(t)
	t.Parallel()
	clk := ttl.NewFakeClock(epoch)
	srv, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, Clock: clk, ReaperInterval: reaperEvery})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	cli, err := connect(srv.URI())
	if err != nil {
		srv.Close()
		t.Fatalf("connect: %v", err)
	}
	return makeEnv(t, &target{srv: srv, clock: clk, client: cli}, true), srv
}

// storeLayout is what a test needs of mayfly's key space (engine/keys.go):
//
//	0x01 <db> 0x00 <coll>                      catalog entry (BSON: id, indexes[{id, name}])
//	0x10 <collID:8> <_id>                      document: 17-byte header + BSON
//	0x11 <collID:8> <indexID:4> <key…> <_id>   index entry; value = encoded _id
//	0x12 <collID:8> <kind:1> <instant:8> <_id> expiry entry; value = size (4 bytes)
type storeLayout struct {
	kv      storage.KV
	collID  uint64
	indexID map[string]uint32
}

func layoutOf(t *testing.T, srv *server.Server, db, coll string) *storeLayout {
	t.Helper()
	kv := srv.Engine().KV()
	k := append(append(append([]byte{0x01}, db...), 0), coll...)
	v, err := kv.Get(k)
	if err != nil {
		t.Fatalf("catalog entry of %s.%s: %v", db, coll, err)
	}
	var m struct {
		ID      uint64 `bson:"id"`
		Indexes []struct {
			ID   uint32 `bson:"id"`
			Name string `bson:"name"`
		} `bson:"indexes"`
	}
	if err := bson.Unmarshal(v, &m); err != nil {
		t.Fatalf("catalog entry: %v", err)
	}
	l := &storeLayout{kv: kv, collID: m.ID, indexID: map[string]uint32{}}
	for _, ix := range m.Indexes {
		l.indexID[ix.Name] = ix.ID
	}
	return l
}

func (l *storeLayout) prefix(kind byte) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, l.collID)
}

func (l *storeLayout) docKey(id any) []byte { return keycodec.AppendValue(l.prefix(0x10), id) }

func (l *storeLayout) indexKey(index string, key, id any) []byte {
	ix, ok := l.indexID[index]
	if !ok {
		panic("no index " + index)
	}
	k := binary.BigEndian.AppendUint32(l.prefix(0x11), ix)
	k = keycodec.AppendValue(k, key)
	return keycodec.AppendValue(k, id)
}

// expiryKeyOf finds the expiry entry of a document.
func (l *storeLayout) expiryKeyOf(t *testing.T, id any) []byte {
	t.Helper()
	p := l.prefix(0x12)
	idKey := keycodec.AppendValue(nil, id)
	it, err := l.kv.NewIter(p, keycodec.PrefixEnd(p))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); len(k) == 18+len(idKey) && string(k[18:]) == string(idKey) {
			return append([]byte(nil), k...)
		}
	}
	t.Fatalf("no expiry entry for _id %v", id)
	return nil
}

func (l *storeLayout) write(t *testing.T, f func(b storage.Batch) error) {
	t.Helper()
	b := l.kv.NewBatch()
	defer b.Close()
	if err := f(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

func strList(t *testing.T, doc bson.Raw, path string) []string {
	t.Helper()
	var out []string
	vals, err := val(t, doc, path).Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		out = append(out, v.StringValue())
	}
	return out
}

func arrayLen(t *testing.T, doc bson.Raw, path string) int {
	t.Helper()
	vals, err := val(t, doc, path).Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	return len(vals)
}

func containsStr(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

// A clean collection validates: mongod 7.0's reply shape, the record
// count, and the keys of each index (a multikey index has one per element).
func TestIssue19AdminValidateClean(t *testing.T) {
	needsAdmin(t, "validate (dbAdmin)")
	e := newEnv(t)
	var docs []any
	for i := 0; i < 10; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i % 3)}, {Key: "tags", Value: bson.A{"x", "y"}}})
	}
	e.insert("c", docs...)
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "tags", Value: 1}}}, {Key: "name", Value: "tags_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "b_1"}, {Key: "sparse", Value: true}},
	}}})
	for _, opts := range []bson.D{{}, {{Key: "full", Value: true}}, {{Key: "background", Value: true}}} {
		res := e.run(append(bson.D{{Key: "validate", Value: "c"}}, opts...))
		valEq(t, res, "ns", e.db.Name()+".c")
		valEq(t, res, "valid", true)
		valEq(t, res, "repaired", false)
		eq(t, "nrecords", num(t, res, "nrecords"), 10)
		eq(t, "nInvalidDocuments", num(t, res, "nInvalidDocuments"), 0)
		eq(t, "nNonCompliantDocuments", num(t, res, "nNonCompliantDocuments"), 0)
		eq(t, "nIndexes", num(t, res, "nIndexes"), 4)
		eq(t, "keysPerIndex._id_", num(t, res, "keysPerIndex._id_"), 10)
		eq(t, "keysPerIndex.a_1", num(t, res, "keysPerIndex.a_1"), 10)
		eq(t, "keysPerIndex.tags_1", num(t, res, "keysPerIndex.tags_1"), 20)
		eq(t, "keysPerIndex.b_1", num(t, res, "keysPerIndex.b_1"), 0)
		for _, ix := range []string{"_id_", "a_1", "tags_1", "b_1"} {
			valEq(t, res, "indexDetails."+ix+".valid", true)
		}
		eq(t, "errors", len(strList(t, res, "errors")), 0)
		eq(t, "warnings", len(strList(t, res, "warnings")), 0)
		eq(t, "corruptRecords", arrayLen(t, res, "corruptRecords"), 0)
		if has(res, "advice") {
			t.Fatalf("advice on a valid collection: %s", res)
		}
	}
	// Errors as mongod's validate command.
	code, name, _ := errCode(e.runErr(bson.D{{Key: "validate", Value: "nosuch"}}))
	eq(t, "missing collection", name, "NamespaceNotFound")
	eq(t, "missing collection code", code, int32(26))
	code, _, _ = errCode(e.runErr(bson.D{{Key: "validate", Value: "c"}, {Key: "full", Value: true}, {Key: "background", Value: true}}))
	eq(t, "full+background", code, int32(115))
	code, _, _ = errCode(e.runErr(bson.D{{Key: "validate", Value: "c"}, {Key: "metadata", Value: true}, {Key: "full", Value: true}}))
	eq(t, "metadata+full", code, int32(115))
}

// Corruption written straight into the store is found: a document whose
// bytes are damaged, an index entry deleted, a dangling index entry, an
// expiry-index entry removed and one added for no document.
func TestIssue19AdminValidateFindsCorruption(t *testing.T) {
	e, srv := adminTarget(t, 0)
	var docs []any
	for i := 0; i < 10; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i)}})
	}
	e.insert("c", docs...)
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	res := e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", true)

	l := layoutOf(t, srv, e.db.Name(), "c")

	// 1. An index entry deleted: document 3 is missing from a_1.
	l.write(t, func(b storage.Batch) error { return b.Delete(l.indexKey("a_1", int32(3), int32(3))) })
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", false)
	valEq(t, res, "indexDetails.a_1.valid", false)
	valEq(t, res, "indexDetails._id_.valid", true)
	eq(t, "keys a_1", num(t, res, "keysPerIndex.a_1"), 9)
	eq(t, "missing entries", arrayLen(t, res, "missingIndexEntries"), 1)
	valEq(t, res, "missingIndexEntries.0.indexName", "a_1")
	valEq(t, res, "missingIndexEntries.0.idKey._id", int32(3))
	valEq(t, res, "missingIndexEntries.0.indexKey.a", int32(3))
	eq(t, "extra entries", arrayLen(t, res, "extraIndexEntries"), 0)
	if w := strList(t, res, "warnings"); !containsStr(w, "Detected 1 missing index entries.") {
		t.Fatalf("warnings %q", w)
	}
	if errs := strList(t, res, "errors"); !containsStr(errs, "Index with name 'a_1' has inconsistencies.") {
		t.Fatalf("errors %q", errs)
	}
	valEq(t, res, "advice", "A corrupt namespace has been detected. See http://dochub.mongodb.org/core/data-recovery for recovery steps.")

	// 2. A dangling entry: a_1 points at _id 99, which does not exist.
	l.write(t, func(b storage.Batch) error {
		return b.Set(l.indexKey("a_1", int32(99), int32(99)), keycodec.AppendValue(nil, int32(99)))
	})
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	eq(t, "keys a_1", num(t, res, "keysPerIndex.a_1"), 10)
	eq(t, "extra entries", arrayLen(t, res, "extraIndexEntries"), 1)
	valEq(t, res, "extraIndexEntries.0.indexKey.a", int32(99))
	if w := strList(t, res, "warnings"); !containsStr(w, "Detected 1 extra index entries.") || !containsStr(w, "Detected 1 missing index entries.") {
		t.Fatalf("warnings %q", w)
	}

	// 3. A document's bytes damaged (the BSON cut short).
	l.write(t, func(b storage.Batch) error {
		v, err := l.kv.Get(l.docKey(int32(5)))
		if err != nil {
			return err
		}
		return b.Set(l.docKey(int32(5)), v[:len(v)-3])
	})
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", false)
	eq(t, "nrecords", num(t, res, "nrecords"), 10)
	eq(t, "nInvalidDocuments", num(t, res, "nInvalidDocuments"), 1)
	eq(t, "corruptRecords", arrayLen(t, res, "corruptRecords"), 1)
	valEq(t, res, "corruptRecords.0", int32(5))
	errs := strList(t, res, "errors")
	if !containsStr(errs, "Detected one or more invalid documents. See logs.") {
		t.Fatalf("errors %q", errs)
	}
	// The damaged document's own entries are not reported again.
	eq(t, "extra entries", arrayLen(t, res, "extraIndexEntries"), 1)

	// 4. The expiry index: document 7's entry removed, one added for no
	// document.
	l.write(t, func(b storage.Batch) error {
		if err := b.Delete(l.expiryKeyOf(t, int32(7))); err != nil {
			return err
		}
		k := l.expiryKeyOf(t, int32(8))
		k = append(k[:18], keycodec.AppendValue(nil, int32(77))...)
		return b.Set(k, []byte{0, 0, 0, 20})
	})
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	errs = strList(t, res, "errors")
	if !containsStr(errs, "Detected 1 missing expiry index entries: those documents would never expire.") ||
		!containsStr(errs, "Detected 1 extra expiry index entries that match no document's TTL deadline.") {
		t.Fatalf("errors %q", errs)
	}

	// The expiry-index check alone, on a fresh collection.
	e.insert("d", bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(2)}})
	ld := layoutOf(t, srv, e.db.Name(), "d")
	ld.write(t, func(b storage.Batch) error { return b.Delete(ld.expiryKeyOf(t, int32(2))) })
	res = e.run(bson.D{{Key: "validate", Value: "d"}})
	valEq(t, res, "valid", false)
	eq(t, "errors", strings.Join(strList(t, res, "errors"), "|"), "Detected 1 missing expiry index entries: those documents would never expire.")
	eq(t, "nInvalidDocuments", num(t, res, "nInvalidDocuments"), 0)
}

// Documents expired but not yet purged by the reaper are not corruption,
// even though expired documents need hold no index keys; an expiry entry
// moved to another deadline is.
func TestIssue19AdminValidateExpired(t *testing.T) {
	e, srv := adminTarget(t, time.Hour) // the reaper does not pass during the test
	e.create("c", dttl(60))
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	e.insert("c", bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "a", Value: int32(2)}, {Key: "ttl", Value: int32(5)}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "a", Value: int32(3)}, {Key: "ttl", Value: int32(-1)}})
	e.advance(10 * time.Second) // _id 2 expired, not reaped
	eq(t, "count", e.count("c", bson.D{}), int64(2))
	res := e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", true)
	eq(t, "nrecords", num(t, res, "nrecords"), 3)
	eq(t, "errors", len(strList(t, res, "errors")), 0)
	if w := strList(t, res, "warnings"); !containsStr(w, "1 expired documents are awaiting the TTL reaper (not counted as errors).") {
		t.Fatalf("warnings %q", w)
	}
	// The expired document's a_1 entry gone (as an index build would skip
	// it): still valid.
	l := layoutOf(t, srv, e.db.Name(), "c")
	l.write(t, func(b storage.Batch) error { return b.Delete(l.indexKey("a_1", int32(2), int32(2))) })
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", true)
	// The live document's expiry entry moved to another deadline: the
	// document would expire at the wrong time.
	l.write(t, func(b storage.Batch) error {
		k := l.expiryKeyOf(t, int32(1))
		if err := b.Delete(k); err != nil {
			return err
		}
		moved := append([]byte(nil), k...)
		moved[17]++
		return b.Set(moved, []byte{0, 0, 0, 20})
	})
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", false)
	errs := strList(t, res, "errors")
	if !containsStr(errs, "Detected 1 missing expiry index entries: those documents would never expire.") ||
		!containsStr(errs, "Detected 1 extra expiry index entries that match no document's TTL deadline.") {
		t.Fatalf("errors %q", errs)
	}
}

// top accounts each command on a collection under its kind and lock, as
// mongotop reads it: {totals: {note, "<db>.<coll>": {total, readLock,
// writeLock, queries, getmore, insert, update, remove, commands}}}.
func TestIssue19AdminTop(t *testing.T) {
	needsAdmin(t, "top (clusterMonitor)")
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}})
	e.insert("c", bson.D{{Key: "_id", Value: 4}})
	e.run(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}})
	cur, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetBatchSize(2))
	noErr(t, err, "find")
	var all []bson.Raw
	noErr(t, cur.All(e.ctx, &all), "getMore")
	eq(t, "found", len(all), 4)
	_, err = e.coll("c").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}})
	noErr(t, err, "update")
	_, err = e.coll("c").DeleteOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "delete")
	e.run(bson.D{{Key: "count", Value: "c"}})

	res := e.admin(bson.D{{Key: "top", Value: 1}})
	valEq(t, res, "totals.note", "all times in microseconds")
	ns := e.db.Name() + ".c"
	entry, err := val(t, res, "totals").Document().LookupErr(ns)
	noErr(t, err, "totals."+ns)
	d := entry.Document()
	cnt := func(k string) int64 { return val(t, bson.Raw(d), k+".count").Int64() }
	tm := func(k string) int64 { return val(t, bson.Raw(d), k+".time").Int64() }
	eq(t, "insert", cnt("insert"), int64(2))
	eq(t, "queries", cnt("queries"), int64(2))
	eq(t, "getmore", cnt("getmore"), int64(2)) // the second finds the cursor exhausted
	eq(t, "update", cnt("update"), int64(1))
	eq(t, "remove", cnt("remove"), int64(1))
	eq(t, "commands", cnt("commands"), int64(1))
	eq(t, "total", cnt("total"), int64(9))
	eq(t, "writeLock", cnt("writeLock"), int64(4))
	eq(t, "readLock", cnt("readLock"), int64(5))
	if tm("total") < tm("insert") || tm("total") != tm("readLock")+tm("writeLock") {
		t.Fatalf("times do not add up: %s", d)
	}
	keys, _ := bson.Raw(d).Elements()
	var names []string
	for _, k := range keys {
		names = append(names, k.Key())
	}
	strsEq(t, "fields", names, []string{"total", "readLock", "writeLock", "queries", "getmore", "insert", "update", "remove", "commands"})

	// A dropped collection leaves top, as in mongod.
	e.run(bson.D{{Key: "drop", Value: "c"}})
	res = e.admin(bson.D{{Key: "top", Value: 1}})
	if _, err := val(t, res, "totals").Document().LookupErr(ns); err == nil {
		t.Fatalf("%s still in top after drop: %s", ns, res)
	}
	code, name, _ := errCode(e.runErr(bson.D{{Key: "top", Value: 1}}))
	eq(t, "top off admin", code, int32(13))
	eq(t, "top off admin codeName", name, "Unauthorized")
}

// compact really frees the space of deleted documents: after a delete of
// most of a collection, bytesFreed is most of its size and collStats'
// storageSize falls.
func TestIssue19AdminCompact(t *testing.T) {
	e, _ := adminTarget(t, 0) // private: no other test flushes its store
	rng := rand.New(rand.NewSource(19))
	var docs []any
	for i := 0; i < 2000; i++ {
		pad := make([]byte, 1000) // incompressible, so storage sizes show it
		rng.Read(pad)
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i)}, {Key: "pad", Value: bson.Binary{Data: pad}}})
	}
	e.insert("c", docs...)
	e.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	e.admin(bson.D{{Key: "fsync", Value: 1}})
	before := num(t, e.run(bson.D{{Key: "collStats", Value: "c"}}), "storageSize")
	if before < 1e6 {
		t.Fatalf("storageSize %v before the delete: expected about 2 MB", before)
	}
	_, err := e.coll("c").DeleteMany(e.ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 100}}}})
	noErr(t, err, "delete")
	res := e.run(bson.D{{Key: "compact", Value: "c"}})
	freed := val(t, res, "bytesFreed").Int64()
	if float64(freed) < before/2 {
		t.Fatalf("bytesFreed %d, storage before %v", freed, before)
	}
	after := num(t, e.run(bson.D{{Key: "collStats", Value: "c"}}), "storageSize")
	if after > before/4 {
		t.Fatalf("storageSize %v after compact (before %v)", after, before)
	}
	t.Logf("storageSize %v before, %v after compact; bytesFreed %d", before, after, freed)
	eq(t, "documents kept", e.count("c", bson.D{}), int64(100))
	res = e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", true)
	// Nothing left to free.
	res = e.run(bson.D{{Key: "compact", Value: "c"}, {Key: "force", Value: true}})
	if f := val(t, res, "bytesFreed").Int64(); f > int64(before/10) {
		t.Fatalf("second compact freed %d", f)
	}

	code, _, _ := errCode(e.runErr(bson.D{{Key: "compact", Value: "nosuch"}}))
	eq(t, "compact missing collection", code, int32(26))
	code, _, _ = errCode(e.runErr(bson.D{{Key: "compact", Value: "c"}, {Key: "paddingFactor", Value: 1.5}}))
	eq(t, "compact unknown field", code, int32(40415))
	code, _, _ = errCode(e.runErr(bson.D{{Key: "compact", Value: "c"}, {Key: "force", Value: "yes"}}))
	eq(t, "compact force type", code, int32(14))
}

// logRotate: mayfly logs to stderr, so there is no file to rotate and the
// command succeeds as mongod's does when it logs to the console; admin
// only; no audit log.
func TestIssue19AdminLogRotate(t *testing.T) {
	needsAdmin(t, "logRotate (hostManager)")
	e := newEnv(t)
	e.admin(bson.D{{Key: "logRotate", Value: 1}})
	e.admin(bson.D{{Key: "logRotate", Value: "server"}})
	code, name, _ := errCode(e.runErr(bson.D{{Key: "logRotate", Value: 1}}))
	eq(t, "off admin", code, int32(13))
	eq(t, "off admin name", name, "Unauthorized")
	err := e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "logRotate", Value: "audit"}}).Err()
	code, _, _ = errCode(err)
	eq(t, "audit", code, int32(115))
}

// dbStats { freeStorage: 1 } reports the space deleted documents still
// hold (freeStorageSize, indexFreeStorageSize, totalFreeStorageSize, in
// mongod's places); compact gives it back. Without freeStorage the fields
// are absent, as in mongod.
func TestIssue19AdminDBStatsFreeStorage(t *testing.T) {
	e, _ := adminTarget(t, 0)
	res := e.run(bson.D{{Key: "dbStats", Value: 1}})
	for _, f := range []string{"freeStorageSize", "indexFreeStorageSize", "totalFreeStorageSize"} {
		if has(res, f) {
			t.Fatalf("%s without freeStorage: %s", f, res)
		}
	}
	stats := func() bson.Raw { return e.run(bson.D{{Key: "dbStats", Value: 1}, {Key: "freeStorage", Value: 1}}) }
	rng := rand.New(rand.NewSource(20))
	// Pebble may compact a tombstone-heavy table on its own as soon as it
	// is flushed, freeing the space before dbStats looks: try again on a
	// fresh collection when that happens.
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("the deleted space was never seen as free storage before the store reclaimed it")
		}
		coll := fmt.Sprintf("c%d", attempt)
		var docs []any
		for i := 0; i < 2000; i++ {
			pad := make([]byte, 1000)
			rng.Read(pad)
			docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i)}, {Key: "pad", Value: bson.Binary{Data: pad}}})
		}
		e.insert(coll, docs...)
		e.run(bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{
			bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
		// Settle the data in the store's bottom level, as on a server that
		// has run a while: the estimate weighs tombstones against what lies
		// below.
		e.run(bson.D{{Key: "compact", Value: coll}})
		_, err := e.coll(coll).DeleteMany(e.ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 100}}}})
		noErr(t, err, "delete")
		e.admin(bson.D{{Key: "fsync", Value: 1}})
		// 1900 documents of about 1 KB were deleted; the store computes
		// table statistics in the background after a flush (slowly when
		// other tests load the machine: the 30 s bank-transfer test runs
		// alongside).
		seen := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !seen; time.Sleep(20 * time.Millisecond) {
			res = stats()
			seen = num(t, res, "totalFreeStorageSize") > 1.5e6
		}
		if !seen {
			t.Logf("attempt %d: free space reclaimed before it was seen", attempt)
			e.run(bson.D{{Key: "drop", Value: coll}})
			continue
		}
		keys, _ := res.Elements()
		var names []string
		for _, k := range keys {
			names = append(names, k.Key())
		}
		order := strings.Join(names, ",")
		for _, want := range []string{"storageSize,freeStorageSize,indexes", "indexSize,indexFreeStorageSize,totalSize,totalFreeStorageSize,scaleFactor"} {
			if !strings.Contains(order, want) {
				t.Fatalf("field order %s lacks %s", order, want)
			}
		}
		free, ixFree := num(t, res, "freeStorageSize"), num(t, res, "indexFreeStorageSize")
		eq(t, "totalFreeStorageSize", num(t, res, "totalFreeStorageSize"), free+ixFree)
		// Most of what was deleted is documents; their index entries are small.
		if free < 1e6 || ixFree <= 0 || ixFree > free || free+ixFree > 4e6 {
			t.Fatalf("freeStorageSize %v, indexFreeStorageSize %v after deleting 1900 indexed documents of 1 KB", free, ixFree)
		}
		scaled := e.run(bson.D{{Key: "dbStats", Value: 1}, {Key: "freeStorage", Value: 1}, {Key: "scale", Value: 1024}})
		if got := num(t, scaled, "freeStorageSize"); got > free/1024+1 {
			t.Fatalf("scaled freeStorageSize %v, unscaled %v", got, free)
		}
		t.Logf("freeStorageSize %v, indexFreeStorageSize %v", free, ixFree)
		e.run(bson.D{{Key: "compact", Value: coll}})
		if got := num(t, stats(), "totalFreeStorageSize"); got > (free+ixFree)/10 {
			t.Fatalf("totalFreeStorageSize %v after compact (was %v)", got, free+ixFree)
		}
		return
	}
}

// checkBSONConformance (and full) also checks UTF-8: a stored document
// whose string is not UTF-8 is well-formed BSON, so it is counted in
// nNonCompliantDocuments with a warning but the collection stays valid.
func TestIssue19AdminValidateConformance(t *testing.T) {
	e, srv := adminTarget(t, 0)
	e.insert("c", bson.D{{Key: "_id", Value: int32(1)}, {Key: "s", Value: "ok"}}, bson.D{{Key: "_id", Value: int32(2)}, {Key: "s", Value: "ok"}})
	l := layoutOf(t, srv, e.db.Name(), "c")
	body, err := bson.Marshal(bson.D{{Key: "_id", Value: int32(2)}, {Key: "s", Value: "bad \xff\xfe"}})
	noErr(t, err, "marshal")
	l.write(t, func(b storage.Batch) error {
		v, err := l.kv.Get(l.docKey(int32(2)))
		if err != nil {
			return err
		}
		// Keep the 17-byte header (_ts, ttl) and the expiry entry's size
		// in step, so only the string differs.
		if err := b.Set(l.docKey(int32(2)), append(append([]byte(nil), v[:17]...), body...)); err != nil {
			return err
		}
		return b.Set(l.expiryKeyOf(t, int32(2)), binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	})
	res := e.run(bson.D{{Key: "validate", Value: "c"}})
	valEq(t, res, "valid", true)
	eq(t, "nNonCompliantDocuments without the check", num(t, res, "nNonCompliantDocuments"), 0)
	for _, opt := range []string{"checkBSONConformance", "full"} {
		res = e.run(bson.D{{Key: "validate", Value: "c"}, {Key: opt, Value: true}})
		valEq(t, res, "valid", true)
		eq(t, "nNonCompliantDocuments with "+opt, num(t, res, "nNonCompliantDocuments"), 1)
		eq(t, "nInvalidDocuments", num(t, res, "nInvalidDocuments"), 0)
		if w := strList(t, res, "warnings"); len(w) != 1 || !strings.HasPrefix(w[0], "Detected one or more documents in this collection not conformant to BSON specifications") {
			t.Fatalf("warnings %q", w)
		}
	}
}

// hostInfo, as Compass and monitoring agents read it: on any database,
// with mongod's sections and types.
func TestIssue19AdminHostInfo(t *testing.T) {
	needsAdmin(t, "hostInfo (clusterMonitor's hostInfo action)")
	e := newEnv(t)
	r, err := e.db.RunCommand(e.ctx, bson.D{{Key: "hostInfo", Value: 1}}).Raw()
	noErr(t, err, "hostInfo on a user database")
	for path, typ := range map[string]bson.Type{
		"system.currentTime": bson.TypeDateTime, "system.hostname": bson.TypeString, "system.cpuAddrSize": bson.TypeInt32,
		"system.memSizeMB": bson.TypeInt64, "system.memLimitMB": bson.TypeInt64, "system.numCores": bson.TypeInt32,
		"system.cpuArch": bson.TypeString, "system.numaEnabled": bson.TypeBoolean,
		"os.type": bson.TypeString, "os.name": bson.TypeString, "os.version": bson.TypeString,
		"extra.pageSize": bson.TypeInt64,
	} {
		if v := val(t, r, path); v.Type != typ {
			t.Errorf("hostInfo.%s is %s, want %s", path, v.Type, typ)
		}
	}
	if num(t, r, "system.numCores") < 1 || num(t, r, "system.memSizeMB") < 1 || val(t, r, "system.hostname").StringValue() == "" {
		t.Errorf("hostInfo figures: %v", r)
	}
	if d := time.Since(val(t, r, "system.currentTime").Time()); d < -time.Minute || d > time.Minute {
		t.Errorf("hostInfo.system.currentTime is %v off", d)
	}
}
