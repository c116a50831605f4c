package compat

// The MongoDB Database Tools (mongodump, mongorestore, mongoexport,
// mongoimport) cannot be had on the machines this suite runs on: the Go
// module proxy refuses github.com/mongodb/mongo-tools and no Debian or npm
// package carries them. These tests therefore replay, through the official
// driver, the exact command sequences that Database Tools 100.12+ send
// (read from the tools' source: mongodump/metadata_dump.go and mongodump.go,
// mongorestore/restore.go and metadata.go, common/db/buffered_bulk.go and
// empty_timestamp.go, mongoimport's insert/upsert/merge writers), including
// the server-capability probe that made restores insert nothing, and they
// move the data through the same on-disk forms the tools use: concatenated
// BSON for .bson files and canonical Extended JSON for .metadata.json and
// export files. `--archive` and `--gzip` change only the client-side framing
// of those bytes; the server sees the same commands.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// toolsProbe is the command mongorestore and mongoimport send before any
// write (common/db/empty_timestamp.go, MongoCanAcceptLiteralZeroTimestamp):
// an update that matches nothing, carrying bypassEmptyTsReplacement. Any
// error other than 40415 makes the tools abort; 40415 makes them fall back
// to writes without the flag. mongod 7.0.13+ answers ok.
func toolsProbe(e *env) bson.Raw {
	e.t.Helper()
	return e.runOn("_mongorestore_dummy", bson.D{
		{Key: "update", Value: "_mongorestore_dummy.dummy"},
		{Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "____dummy", Value: int32(1)}}},
			{Key: "u", Value: bson.D{{Key: "$rename", Value: bson.D{}}}},
		}}},
		{Key: "ordered", Value: true},
		{Key: "bypassEmptyTsReplacement", Value: true},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}},
	})
}

func TestToolsCapabilityProbe(t *testing.T) {
	e := newEnv(t)
	r := toolsProbe(e)
	valEq(t, r, "ok", 1.0)
	valEq(t, r, "n", int32(0))
	valEq(t, r, "nModified", int32(0))
	// The probe must leave nothing behind: no database, no collection.
	names, err := e.cli.ListDatabaseNames(e.ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, "_mongorestore_dummy") {
		t.Fatalf("the tools' probe created a database: %v", names)
	}
}

// toolsMetadata is the .metadata.json document mongodump writes: options
// come from listCollections (a map, so their order is not kept), indexes
// from listIndexes, uuid as hex.
type toolsMetadata struct {
	Options        bson.M   `bson:"options,omitempty"`
	Indexes        []bson.D `bson:"indexes"`
	UUID           string   `bson:"uuid,omitempty"`
	CollectionName string   `bson:"collectionName"`
}

// toolsDump does what mongodump does for one collection and returns the
// .metadata.json and .bson file contents.
func toolsDump(e *env, coll string) (metaJSON []byte, data []byte, n int) {
	e.t.Helper()
	// Intent building: listCollections with a name filter gives options and
	// info.uuid (mongodump/prepare.go, common/db/namespaces.go).
	lc := e.run(bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: coll}}}, {Key: "cursor", Value: bson.D{}}})
	batch := val(e.t, lc, "cursor.firstBatch").Array()
	vals, _ := batch.Values()
	if len(vals) != 1 {
		e.t.Fatalf("listCollections for %s: %d entries, want 1: %s", coll, len(vals), lc)
	}
	info := vals[0].Document()
	meta := toolsMetadata{Indexes: []bson.D{}, CollectionName: coll}
	if o, ok := info.Lookup("options").DocumentOK(); ok {
		if err := bson.Unmarshal(o, &meta.Options); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, data, ok := info.Lookup("info", "uuid").BinaryOK(); ok {
		meta.UUID = hex.EncodeToString(data)
	}
	// metadata_dump.go: listIndexes, each spec decoded in order.
	cur, err := e.coll(coll).Indexes().List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for cur.Next(e.ctx) {
		var d bson.D
		if err := cur.Decode(&d); err != nil {
			e.t.Fatal(err)
		}
		meta.Indexes = append(meta.Indexes, d)
	}
	if err := cur.Err(); err != nil {
		e.t.Fatal(err)
	}
	metaJSON, err = bson.MarshalExtJSON(meta, true, false)
	if err != nil {
		e.t.Fatal(err)
	}
	// mongodump.go getCount: estimatedDocumentCount, for the progress bar.
	want, err := e.coll(coll).EstimatedDocumentCount(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	// The data: a plain find with no filter, no sort, no hint (modern
	// storage engines), streamed through getMore; the raw bytes are
	// concatenated into the .bson file.
	fc, err := e.coll(coll).Find(e.ctx, bson.D{})
	if err != nil {
		e.t.Fatal(err)
	}
	var buf bytes.Buffer
	for fc.Next(e.ctx) {
		buf.Write(fc.Current)
		n++
	}
	if err := fc.Err(); err != nil {
		e.t.Fatal(err)
	}
	if int64(n) != want {
		e.t.Fatalf("dump of %s: count said %d, find gave %d", coll, want, n)
	}
	return metaJSON, buf.Bytes(), n
}

// splitBSON cuts a .bson file into its documents.
func splitBSON(t *testing.T, data []byte) []bson.Raw {
	t.Helper()
	var out []bson.Raw
	for len(data) > 0 {
		if len(data) < 5 {
			t.Fatalf("truncated bson file: %d bytes left", len(data))
		}
		l := int(uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24)
		if l > len(data) || l < 5 {
			t.Fatalf("bad document length %d", l)
		}
		out = append(out, bson.Raw(data[:l]))
		data = data[l:]
	}
	return out
}

// toolsRestoreMeta is the restore side's view of .metadata.json
// (mongorestore/metadata.go: options as an ordered document).
type toolsRestoreMeta struct {
	Options        bson.D   `bson:"options,omitempty"`
	Indexes        []bson.D `bson:"indexes"`
	UUID           string   `bson:"uuid"`
	CollectionName string   `bson:"collectionName"`
}

// toolsRestore does what mongorestore (optionally with --drop) does for one
// collection, restoring into db/coll.
func toolsRestore(e *env, db, coll string, metaJSON, data []byte, drop bool) {
	e.t.Helper()
	var meta toolsRestoreMeta
	if err := bson.UnmarshalExtJSON(metaJSON, true, &meta); err != nil {
		e.t.Fatalf("metadata json: %v\n%s", err, metaJSON)
	}
	toolsProbe(e)
	// CollectionExists: listCollections with an empty filter.
	names, err := e.cli.Database(db).ListCollectionNames(e.ctx, bson.D{})
	if err != nil {
		e.t.Fatal(err)
	}
	exists := slices.Contains(names, coll)
	if drop && exists {
		e.runOn(db, bson.D{{Key: "drop", Value: coll}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}})
		exists = false
	}
	// restore.go RestoreIntent: the _id index spec goes into create as
	// idIndex (without v, with ns), replacing any autoIndexId;
	// UpdateAutoIndexId turns autoIndexId:false into true on 4.0+.
	opts := meta.Options
	var rest []bson.D
	for _, ix := range meta.Indexes {
		if lookupD(ix, "name") == "_id_" {
			spec := bson.D{}
			for _, f := range ix {
				if f.Key != "v" {
					spec = append(spec, f)
				}
			}
			spec = append(spec, bson.E{Key: "ns", Value: db + "." + coll})
			opts = slices.DeleteFunc(slices.Clone(opts), func(o bson.E) bool { return o.Key == "autoIndexId" })
			opts = append(opts, bson.E{Key: "idIndex", Value: spec})
			continue
		}
		rest = append(rest, ix)
	}
	if !exists {
		create := append(bson.D{{Key: "create", Value: coll}}, opts...)
		e.runOn(db, create)
	}
	// RestoreCollectionToDB: an unordered bulk insert of the raw documents
	// with bypassEmptyTsReplacement (the probe said yes) and the tools'
	// default write concern, in batches.
	docs := splitBSON(e.t, data)
	for start := 0; start < len(docs); start += 3 {
		end := min(start+3, len(docs))
		batch := bson.A{}
		for _, d := range docs[start:end] {
			batch = append(batch, d)
		}
		r := e.runOn(db, bson.D{
			{Key: "insert", Value: coll},
			{Key: "documents", Value: batch},
			{Key: "ordered", Value: false},
			{Key: "bypassEmptyTsReplacement", Value: true},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}},
		})
		if we, ok := r.Lookup("writeErrors").ArrayOK(); ok {
			e.t.Fatalf("restore insert: write errors %s", we)
		}
		valEq(e.t, r, "n", int32(end-start))
	}
	// RestoreIndexesForNamespace/CreateIndexes: every index but _id, with
	// ns rewritten and v removed, and ignoreUnknownIndexOptions.
	if len(rest) > 0 {
		specs := bson.A{}
		for _, ix := range rest {
			spec := bson.D{}
			for _, f := range ix {
				if f.Key != "v" && f.Key != "ns" {
					spec = append(spec, f)
				}
			}
			spec = append(spec, bson.E{Key: "ns", Value: db + "." + coll})
			specs = append(specs, spec)
		}
		e.runOn(db, bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: specs}, {Key: "ignoreUnknownIndexOptions", Value: true}})
	}
}

// everyTypeDocs gives documents with nine kinds of _id and, between them,
// every BSON type: Decimal128 edge values, each binary subtype, the
// deprecated types, nested arrays, an empty Timestamp, MinKey/MaxKey.
func everyTypeDocs(t *testing.T) []bson.D {
	t.Helper()
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			t.Fatalf("decimal %q: %v", s, err)
		}
		return d
	}
	oid, _ := bson.ObjectIDFromHex("5f2b6a7e9d1c4e3a2b1c0d9e")
	ids := []any{
		oid, "str-id", int32(7), int64(1) << 40, 2.5, dec("1.10"),
		bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}},
		bson.Binary{Subtype: 0, Data: []byte{1, 2, 3}},
		bson.NewDateTimeFromTime(time.Date(2020, 1, 2, 3, 4, 5, 6e6, time.UTC)),
	}
	u16 := []byte("0123456789abcdef")
	var bins bson.A
	for _, st := range []byte{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x80, 0xff} {
		data := []byte{9, 8, 7}
		if st == 0x03 || st == 0x04 || st == 0x05 {
			data = u16
		}
		bins = append(bins, bson.Binary{Subtype: st, Data: data})
	}
	var decs bson.A
	for _, s := range []string{"0", "-0", "0E-6176", "-0E+6111", "1E+6144", "9.999999999999999999999999999999999E+6144",
		"-9.999999999999999999999999999999999E+6144", "1E-6176", "1.000", "-1.23E+10", "Infinity", "-Infinity", "NaN",
		"1234567890123456789012345678901234"} {
		decs = append(decs, dec(s))
	}
	var out []bson.D
	for i, id := range ids {
		out = append(out, bson.D{
			{Key: "_id", Value: id},
			{Key: "i", Value: int32(i)},
			{Key: "double", Value: math.Copysign(0, -1)},
			{Key: "doubles", Value: bson.A{1.5, 1e308, 5e-324}},
			{Key: "str", Value: "ünïcødé ✓"},
			{Key: "doc", Value: bson.D{{Key: "z", Value: int32(1)}, {Key: "a", Value: bson.D{{Key: "deep", Value: bson.A{}}}}}},
			{Key: "nested", Value: bson.A{bson.A{int32(1), bson.A{int64(2), bson.A{}}}, bson.D{}}},
			{Key: "bins", Value: bins},
			{Key: "undef", Value: bson.Undefined{}},
			{Key: "oid", Value: oid},
			{Key: "t", Value: true},
			{Key: "date", Value: bson.DateTime(-62135596800000)},
			{Key: "null", Value: nil},
			{Key: "re", Value: bson.Regex{Pattern: "^a.b$", Options: "imsx"}},
			{Key: "dbptr", Value: bson.DBPointer{DB: "db.coll", Pointer: oid}},
			{Key: "js", Value: bson.JavaScript("function() { return 1 }")},
			{Key: "sym", Value: bson.Symbol("sym")},
			{Key: "jsws", Value: bson.CodeWithScope{Code: "x", Scope: bson.D{{Key: "x", Value: int32(1)}}}},
			{Key: "i32", Value: int32(-2147483648)},
			{Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 3}},
			{Key: "ts0", Value: bson.Timestamp{}},
			{Key: "i64", Value: int64(9223372036854775807)},
			{Key: "decs", Value: decs},
			{Key: "min", Value: bson.MinKey{}},
			{Key: "max", Value: bson.MaxKey{}},
			{Key: "ttl", Value: int32(-1)},
		})
	}
	return out
}

// sortedRaw returns the collection's documents ordered by _id, as stored.
func sortedRaw(e *env, db, coll string) []bson.Raw {
	e.t.Helper()
	cur, err := e.cli.Database(db).Collection(coll).Find(e.ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []bson.Raw
	if err := cur.All(e.ctx, &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func sameDocs(t *testing.T, what string, got, want []bson.Raw) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d documents, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: document %d differs\n got %s\nwant %s", what, i, ejsonRaw(got[i]), ejsonRaw(want[i]))
		}
	}
}

func ejsonRaw(r bson.Raw) string {
	b, err := bson.MarshalExtJSON(r, true, false)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

func indexSpecs(e *env, db, coll string) []string {
	e.t.Helper()
	cur, err := e.cli.Database(db).Collection(coll).Indexes().List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for cur.Next(e.ctx) {
		out = append(out, ejsonRaw(cur.Current))
	}
	slices.Sort(out)
	return out
}

func collOptions(e *env, db, coll string) string {
	e.t.Helper()
	lc := e.runOn(db, bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: coll}}}})
	vals, _ := val(e.t, lc, "cursor.firstBatch").Array().Values()
	if len(vals) != 1 {
		e.t.Fatalf("listCollections %s.%s: %d entries", db, coll, len(vals))
	}
	return ejsonRaw(vals[0].Document().Lookup("options").Document())
}

// toolsSource builds the data set a user would move: every BSON type,
// secondary indexes of several kinds, and Cosmos DB-style DefaultTTL.
func toolsSource(e *env, coll string) {
	e.t.Helper()
	e.run(bson.D{{Key: "create", Value: coll}, {Key: "defaultTimeToLive", Value: int32(86400)}})
	var docs []any
	for _, d := range everyTypeDocs(e.t) {
		docs = append(docs, d)
	}
	// Inserted as mongod would store them: the empty timestamp kept as is.
	r := e.run(bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: docs}, {Key: "bypassEmptyTsReplacement", Value: true}})
	valEq(e.t, r, "n", int32(len(docs)))
	e.run(bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "i", Value: int32(1)}}}, {Key: "name", Value: "i_1"}, {Key: "unique", Value: true}},
		bson.D{{Key: "key", Value: bson.D{{Key: "str", Value: int32(1)}, {Key: "i", Value: int32(-1)}}}, {Key: "name", Value: "str_i"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "oid", Value: int32(1)}}}, {Key: "name", Value: "oid_sparse"}, {Key: "sparse", Value: true}},
		bson.D{{Key: "key", Value: bson.D{{Key: "date", Value: int32(1)}}}, {Key: "name", Value: "date_ttl"}, {Key: "expireAfterSeconds", Value: int32(3600)},
			{Key: "partialFilterExpression", Value: bson.D{{Key: "i", Value: bson.D{{Key: "$gt", Value: int32(100)}}}}}},
	}}})
}

func TestToolsDumpRestoreRoundTrip(t *testing.T) {
	e := newEnv(t)
	const coll = "src"
	toolsSource(e, coll)
	wantDocs := sortedRaw(e, e.db.Name(), coll)
	wantIdx := indexSpecs(e, e.db.Name(), coll)
	wantOpts := collOptions(e, e.db.Name(), coll)
	if !strings.Contains(wantOpts, `"defaultTimeToLive"`) {
		t.Fatalf("source options lack defaultTimeToLive: %s", wantOpts)
	}
	metaJSON, data, n := toolsDump(e, coll)
	if n != len(wantDocs) {
		t.Fatalf("dumped %d documents, want %d", n, len(wantDocs))
	}
	if !strings.Contains(string(metaJSON), `"defaultTimeToLive"`) {
		t.Fatalf("the dump's metadata lost defaultTimeToLive: %s", metaJSON)
	}

	// mongorestore --drop into the same namespace: drop, create, insert, index.
	toolsRestore(e, e.db.Name(), coll, metaJSON, data, true)
	sameDocs(t, "restore --drop", sortedRaw(e, e.db.Name(), coll), wantDocs)
	strsEq(t, "indexes after restore --drop", indexSpecs(e, e.db.Name(), coll), wantIdx)
	eq(t, "options after restore --drop", collOptions(e, e.db.Name(), coll), wantOpts)

	// mongorestore --nsTo into a new namespace (another database): the
	// ns field in the specs is rewritten by the tool.
	other := e.db.Name() + "_to"
	t.Cleanup(func() { _ = dropDB(e.ctx, e.cli.Database(other)) })
	_ = dropDB(e.ctx, e.cli.Database(other))
	toolsRestore(e, other, "dst", metaJSON, data, false)
	sameDocs(t, "restore to a new namespace", sortedRaw(e, other, "dst"), wantDocs)
	strsEq(t, "indexes in the new namespace", indexSpecs(e, other, "dst"), wantIdx)
	eq(t, "options in the new namespace", collOptions(e, other, "dst"), wantOpts)

	// Restoring again without --drop: every insert is a duplicate key,
	// which the tools log and continue through; nothing is lost.
	docs := splitBSON(t, data)
	batch := bson.A{}
	for _, d := range docs {
		batch = append(batch, d)
	}
	r := e.runWrite(bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: batch}, {Key: "ordered", Value: false}, {Key: "bypassEmptyTsReplacement", Value: true}})
	valEq(t, r, "n", int32(0))
	wes, _ := r.Lookup("writeErrors").Array().Values()
	if len(wes) != len(docs) {
		t.Fatalf("re-restore: %d write errors, want %d", len(wes), len(docs))
	}
	for _, we := range wes {
		valEq(t, we.Document(), "code", int32(11000))
	}
	sameDocs(t, "after a second restore without --drop", sortedRaw(e, e.db.Name(), coll), wantDocs)
}

// TestToolsRestoreKeepsTTL checks that the DefaultTTL that came through a
// dump still works after the restore: documents restored into the TTL
// collection expire under it (the restore is their last modification, so
// their _ts restarts), and the Cosmos `_ts_1` index is listed again.
func TestToolsRestoreKeepsTTL(t *testing.T) {
	e := newClockEnv(t)
	// Short lives, so that the real-clock run (MAYFLY_URI) waits seconds.
	e.run(bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: int32(2)}})
	e.insert("c", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: int32(-1)}}, bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: int32(5)}})
	metaJSON, data, n := toolsDump(e, "c")
	eq(t, "dumped", n, 3)
	if !strings.Contains(string(metaJSON), `"_ts_1"`) {
		t.Fatalf("the dump's index list lacks the _ts_1 index of the DefaultTTL: %s", metaJSON)
	}
	e.alignSecond()
	toolsRestore(e, e.db.Name(), "c", metaJSON, data, true)
	eq(t, "options", collOptions(e, e.db.Name(), "c"), `{"defaultTimeToLive":{"$numberInt":"2"}}`)
	strsEq(t, "ids right after restore"+e.timing(), e.ids("c"), idList(1, 2, 3))
	e.advance(3 * time.Second)
	strsEq(t, "ids after DefaultTTL"+e.timing(), e.ids("c"), idList(2, 3))
	e.advance(3 * time.Second)
	strsEq(t, "ids after the document ttl"+e.timing(), e.ids("c"), idList(2))
}

// mongoexport writes one Extended JSON document per line (relaxed by
// default, canonical with --jsonFormat=canonical) from a find;
// mongoimport parses each line and inserts unordered (--mode=insert), or
// sends replacement upserts keyed on _id (--mode=upsert), or $set upserts
// (--mode=merge), or deletes (--mode=delete).
func toolsExport(e *env, coll string, canonical bool) []byte {
	e.t.Helper()
	if _, err := e.coll(coll).CountDocuments(e.ctx, bson.D{}); err != nil {
		e.t.Fatal(err)
	}
	cur, err := e.coll(coll).Find(e.ctx, bson.D{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out bytes.Buffer
	for cur.Next(e.ctx) {
		b, err := bson.MarshalExtJSON(cur.Current, canonical, false)
		if err != nil {
			e.t.Fatal(err)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	if err := cur.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out.Bytes()
}

func parseExport(t *testing.T, data []byte) []bson.D {
	t.Helper()
	var out []bson.D
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var d bson.D
		if err := bson.UnmarshalExtJSON(line, false, &d); err != nil {
			t.Fatalf("import line %s: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

func TestToolsExportImport(t *testing.T) {
	e := newEnv(t)
	toolsSource(e, "src")
	want := sortedRaw(e, e.db.Name(), "src")

	for _, canonical := range []bool{true, false} {
		name := map[bool]string{true: "canonical", false: "relaxed"}[canonical]
		exported := toolsExport(e, "src", canonical)
		docs := parseExport(t, exported)
		// mongoimport --drop --mode=insert.
		toolsProbe(e)
		e.run(bson.D{{Key: "drop", Value: "imp"}})
		batch := bson.A{}
		for _, d := range docs {
			batch = append(batch, d)
		}
		r := e.run(bson.D{{Key: "insert", Value: "imp"}, {Key: "documents", Value: batch}, {Key: "ordered", Value: false},
			{Key: "bypassEmptyTsReplacement", Value: true}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}})
		valEq(t, r, "n", int32(len(docs)))
		got := sortedRaw(e, e.db.Name(), "imp")
		if canonical {
			sameDocs(t, "canonical export/import", got, want)
		} else {
			// Relaxed JSON cannot tell int64(5) from int32(5) or a Date
			// from its ISO string's type: what comes back is exactly what
			// the JSON says, which is what mongod stores too.
			var expect []bson.Raw
			for _, d := range docs {
				b, err := bson.Marshal(d)
				if err != nil {
					t.Fatal(err)
				}
				expect = append(expect, b)
			}
			sameDocs(t, name+" export/import", got, sortedByID(e, expect))
		}

		// mongoimport --mode=upsert over the imported data: replacements
		// keyed on _id, nothing changes, nothing duplicates.
		ups := bson.A{}
		for _, d := range docs {
			ups = append(ups, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: lookupD(d, "_id")}}}, {Key: "u", Value: d}, {Key: "upsert", Value: true}})
		}
		r = e.run(bson.D{{Key: "update", Value: "imp"}, {Key: "updates", Value: ups}, {Key: "ordered", Value: false}, {Key: "bypassEmptyTsReplacement", Value: true}})
		valEq(t, r, "n", int32(len(docs)))
		if _, ok := r.Lookup("upserted").ArrayOK(); ok {
			t.Fatalf("%s: upsert mode over existing documents inserted some: %s", name, r)
		}
		sameDocs(t, name+" after --mode=upsert", sortedRaw(e, e.db.Name(), "imp"), got)

		// --mode=merge: $set of every field but _id.
		merges := bson.A{}
		for _, d := range docs {
			set := bson.D{}
			for _, f := range d {
				if f.Key != "_id" {
					set = append(set, f)
				}
			}
			set = append(set, bson.E{Key: "merged", Value: true})
			merges = append(merges, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: lookupD(d, "_id")}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: set}}}, {Key: "upsert", Value: true}})
		}
		r = e.run(bson.D{{Key: "update", Value: "imp"}, {Key: "updates", Value: merges}, {Key: "ordered", Value: false}, {Key: "bypassEmptyTsReplacement", Value: true}})
		valEq(t, r, "nModified", int32(len(docs)))
		eq(t, name+" merged", e.count("imp", bson.D{{Key: "merged", Value: true}}), int64(len(docs)))
	}
}

func sortedByID(e *env, docs []bson.Raw) []bson.Raw {
	e.t.Helper()
	e.run(bson.D{{Key: "drop", Value: "sortbuf"}})
	batch := bson.A{}
	for _, d := range docs {
		batch = append(batch, d)
	}
	e.run(bson.D{{Key: "insert", Value: "sortbuf"}, {Key: "documents", Value: batch}, {Key: "bypassEmptyTsReplacement", Value: true}})
	return sortedRaw(e, e.db.Name(), "sortbuf")
}

// lookupD is the value of key in d, or nil.
func lookupD(d bson.D, key string) any {
	for _, f := range d {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}
