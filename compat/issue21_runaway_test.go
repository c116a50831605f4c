package compat

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// issue21SetParams sets server parameters on the test's server and puts the
// old values back when the test ends.
func issue21SetParams(e *env, params bson.D) {
	e.t.Helper()
	for _, p := range params {
		old := e.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: p.Key, Value: 1}})
		prev := old.Lookup(p.Key)
		if prev.Type == 0 {
			e.t.Fatalf("getParameter %s: %s", p.Key, old)
		}
		e.t.Cleanup(func() {
			e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: p.Key, Value: prev}})
		})
		e.admin(bson.D{{Key: "setParameter", Value: 1}, {Key: p.Key, Value: p.Value}})
	}
}

func issue21Ints(t *testing.T, docs []bson.Raw, field string) []int {
	t.Helper()
	out := make([]int, len(docs))
	for i, d := range docs {
		v, ok := d.Lookup(field).AsInt64OK()
		if !ok {
			t.Fatalf("doc %d: %s has no integer %s", i, d, field)
		}
		out[i] = int(v)
	}
	return out
}

func issue21Cmd(e *env, cmd bson.D) []bson.Raw {
	e.t.Helper()
	raw := e.run(cmd)
	var reply struct {
		Cursor struct {
			ID         int64      `bson:"id"`
			FirstBatch []bson.Raw `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	if err := bson.Unmarshal(raw, &reply); err != nil {
		e.t.Fatal(err)
	}
	out := reply.Cursor.FirstBatch
	for id := reply.Cursor.ID; id != 0; {
		var more struct {
			Cursor struct {
				ID        int64      `bson:"id"`
				NextBatch []bson.Raw `bson:"nextBatch"`
			} `bson:"cursor"`
		}
		coll := cmd[0].Value.(string)
		if err := bson.Unmarshal(e.run(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}}), &more); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, more.Cursor.NextBatch...)
		id = more.Cursor.ID
	}
	return out
}

// TestIssue21AllowDiskUseByDefault: as mongod 6.0+, a find or aggregate
// that does not say allowDiskUse may spill ($sort, blocking find sorts,
// $group, $bucketAuto) instead of failing with 292; allowDiskUse: false
// still refuses; allowDiskUseByDefault is a runtime server parameter.
func TestIssue21AllowDiskUseByDefault(t *testing.T) {
	e := newParamEnv(t)
	got := e.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: 1}})
	valEq(t, got, "allowDiskUseByDefault", true)
	issue21SetParams(e, bson.D{
		{Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: int32(20000)},
		{Key: "internalDocumentSourceGroupMaxMemoryBytes", Value: int64(20000)},
		{Key: "internalDocumentSourceBucketAutoMaxMemoryBytes", Value: int64(20000)},
	})
	const n = 300
	pad := strings.Repeat("x", 200)
	var docs []any
	for i := 0; i < n; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32((i * 7) % n)}, {Key: "pad", Value: pad}})
	}
	e.insert("c", docs...)
	// k = 7i mod 300 is a permutation: sorted by k, the _ids are 43k mod 300
	// (43 = 7⁻¹ mod 300).
	wantIDs := func(from, to int, desc bool) []int {
		var out []int
		for j := from; j < to; j++ {
			k := j
			if desc {
				k = n - 1 - j
			}
			out = append(out, (k*43)%n)
		}
		return out
	}
	same := func(what string, got, want []int) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}

	// find: blocking sort over the limit spills by default
	res := issue21Cmd(e, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "batchSize", Value: 50}})
	same("find sort", issue21Ints(t, res, "_id"), wantIDs(0, n, false))
	res = issue21Cmd(e, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: -1}}},
		{Key: "skip", Value: 10}, {Key: "limit", Value: 250}, {Key: "projection", Value: bson.D{{Key: "k", Value: 1}}}})
	same("find sort desc skip limit", issue21Ints(t, res, "_id"), wantIDs(10, 260, true))
	if len(res) > 0 && res[0].Lookup("pad").Type != 0 {
		t.Fatalf("projection not applied after a spill: %s", res[0])
	}
	res = issue21Cmd(e, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "allowDiskUse", Value: true}})
	same("find sort allowDiskUse", issue21Ints(t, res, "_id"), wantIDs(0, n, false))
	err := e.runErr(bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "allowDiskUse", Value: false}})
	wantCode(t, err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed")

	// ties, a filter and a positional projection: the spilled sort returns
	// what the in-memory one returns
	e.insert("t", func() []any {
		var ds []any
		for i := 0; i < 400; i++ {
			ds = append(ds, bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(i % 7)}, {Key: "arr", Value: bson.A{i % 3, i % 5, pad}}})
		}
		return ds
	}()...)
	tieCmd := bson.D{{Key: "find", Value: "t"}, {Key: "filter", Value: bson.D{{Key: "arr", Value: int32(2)}}},
		{Key: "sort", Value: bson.D{{Key: "k", Value: -1}}}, {Key: "projection", Value: bson.D{{Key: "k", Value: 1}, {Key: "arr.$", Value: 1}}}, {Key: "skip", Value: 3}}
	spilled := issue21Cmd(e, tieCmd)
	e.admin(bson.D{{Key: "setParameter", Value: 1}, {Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: int32(100 << 20)}})
	inMemory := issue21Cmd(e, tieCmd)
	e.admin(bson.D{{Key: "setParameter", Value: 1}, {Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: int32(20000)}})
	if len(spilled) != len(inMemory) || len(spilled) < 100 {
		t.Fatalf("spilled sort: %d docs, in memory: %d", len(spilled), len(inMemory))
	}
	for i := range spilled {
		if !bytes.Equal(spilled[i], inMemory[i]) {
			t.Fatalf("doc %d: spilled %s, in memory %s", i, spilled[i], inMemory[i])
		}
	}
	wantCode(t, e.runErr(append(tieCmd, bson.E{Key: "allowDiskUse", Value: false})), 292, "QueryExceededMemoryLimitNoDiskUseAllowed")

	// aggregate: $sort, $group, $bucketAuto
	agg := func(allow any, stages ...bson.D) bson.D {
		p := bson.A{}
		for _, s := range stages {
			p = append(p, s)
		}
		cmd := bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: p}, {Key: "cursor", Value: bson.D{}}}
		if allow != nil {
			cmd = append(cmd, bson.E{Key: "allowDiskUse", Value: allow})
		}
		return cmd
	}
	// an unselective $match first keeps the $sort out of the query layer
	sortStage := bson.D{{Key: "$sort", Value: bson.D{{Key: "k", Value: 1}}}}
	addF := bson.D{{Key: "$addFields", Value: bson.D{{Key: "z", Value: 1}}}}
	res = issue21Cmd(e, agg(nil, addF, sortStage))
	same("$sort", issue21Ints(t, res, "_id"), wantIDs(0, n, false))
	wantCode(t, e.runErr(agg(false, addF, sortStage)), 292, "QueryExceededMemoryLimitNoDiskUseAllowed")

	group := bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$k"}, {Key: "p", Value: bson.D{{Key: "$push", Value: "$pad"}}}}}}
	res = issue21Cmd(e, agg(nil, group, bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}))
	if len(res) != n {
		t.Fatalf("$group: %d groups, want %d", len(res), n)
	}
	for i, d := range res {
		if v, _ := d.Lookup("_id").AsInt64OK(); int(v) != i {
			t.Fatalf("$group result %d: %s", i, d)
		}
	}
	wantCode(t, e.runErr(agg(false, group)), 292, "QueryExceededMemoryLimitNoDiskUseAllowed")

	bucket := bson.D{{Key: "$bucketAuto", Value: bson.D{{Key: "groupBy", Value: "$k"}, {Key: "buckets", Value: 5}}}}
	res = issue21Cmd(e, agg(nil, bucket))
	if len(res) != 5 {
		t.Fatalf("$bucketAuto: %d buckets, want 5: %v", len(res), res)
	}
	for i, d := range res {
		docEq(t, d, bson.D{{Key: "_id", Value: bson.D{{Key: "min", Value: int32(60 * i)}, {Key: "max", Value: int32(60*i + 60 - boolInt(i == 4))}}}, {Key: "count", Value: int32(60)}})
	}
	wantCode(t, e.runErr(agg(false, bucket)), 292, "QueryExceededMemoryLimitNoDiskUseAllowed")

	// allowDiskUseByDefault: false brings back the refusal for commands
	// that do not say allowDiskUse
	set := e.admin(bson.D{{Key: "setParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: false}})
	valEq(t, set, "was", true)
	t.Cleanup(func() {
		e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: true}})
	})
	valEq(t, e.admin(bson.D{{Key: "getParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: 1}}), "allowDiskUseByDefault", false)
	wantCode(t, e.runErr(bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}}), 292, "QueryExceededMemoryLimitNoDiskUseAllowed")
	wantCode(t, e.runErr(agg(nil, group)), 292, "QueryExceededMemoryLimitNoDiskUseAllowed")
	res = issue21Cmd(e, agg(true, addF, sortStage))
	same("$sort allowDiskUse:true", issue21Ints(t, res, "_id"), wantIDs(0, n, false))

	// setParameter errors, as mongod's CmdSet
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "noSuchParameter", Value: 1}}).Err()
	wantCode(t, err, 72, "InvalidOptions")
	err = e.cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "setParameter", Value: 1}}).Err()
	wantCode(t, err, 72, "InvalidOptions")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestIssue21PushOntoLargeIndexedArray: updating a document with a large
// indexed array costs time linear in the array, not quadratic (one $push
// onto 100k elements took over 20 s before), and the index stays exact.
func TestIssue21PushOntoLargeIndexedArray(t *testing.T) {
	e := newEnv(t)
	e.run(bson.D{{Key: "createIndexes", Value: "big"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	const n = 100_000
	arr := make(bson.A, n)
	for i := range arr {
		arr[i] = int32(i)
	}
	e.insert("big", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: arr}})
	start := time.Now()
	e.run(bson.D{{Key: "update", Value: "big"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: int32(n)}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$pull", Value: bson.D{{Key: "a", Value: int32(5)}}}}}},
	}}})
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("$push and $pull on a %d-element indexed array took %v", n, d)
	}
	hint := options.Find().SetHint("a_1")
	eq(t, "docs with a: n (new key)", len(e.find("big", bson.D{{Key: "a", Value: int32(n)}}, hint)), 1)
	eq(t, "docs with a: 5 (deleted key)", len(e.find("big", bson.D{{Key: "a", Value: int32(5)}}, hint)), 0)
	eq(t, "docs with a: 6 (kept key)", len(e.find("big", bson.D{{Key: "a", Value: int32(6)}}, hint)), 1)
	eq(t, "docs with a in [0, 10)", len(e.find("big", bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 0}, {Key: "$lt", Value: 10}}}}, hint)), 1)
}

// TestIssue21RunawayExpressionStopsAtMaxTimeMS: maxTimeMS interrupts a
// single long expression evaluation (a quadratic $reduce over 100k
// elements ran 12 s before), with 50 MaxTimeMSExpired, within about
// maxTimeMS.
func TestIssue21RunawayExpressionStopsAtMaxTimeMS(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	reduce := bson.D{{Key: "$reduce", Value: bson.D{
		{Key: "input", Value: bson.D{{Key: "$range", Value: bson.A{0, 100000}}}},
		{Key: "initialValue", Value: bson.A{}},
		{Key: "in", Value: bson.D{{Key: "$concatArrays", Value: bson.A{"$$value", bson.A{"$$this"}}}}},
	}}}
	for _, stage := range []bson.D{
		{{Key: "$project", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$size", Value: reduce}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "r", Value: bson.D{{Key: "$max", Value: reduce}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{bson.D{{Key: "$size", Value: reduce}}, 0}}}}}}},
	} {
		start := time.Now()
		err := e.runErr(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{stage}},
			{Key: "cursor", Value: bson.D{}}, {Key: "maxTimeMS", Value: 1000}})
		took := time.Since(start)
		wantCode(t, err, 50, "MaxTimeMSExpired")
		if took > 4*time.Second {
			t.Fatalf("%s: stopped after %v, want about 1 s", stage[0].Key, took)
		}
	}
	// find: the same in a projection and in an $expr filter
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "projection", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$size", Value: reduce}}}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{bson.D{{Key: "$size", Value: reduce}}, 0}}}}}}},
	} {
		start := time.Now()
		err := e.runErr(append(cmd, bson.E{Key: "maxTimeMS", Value: 1000}))
		took := time.Since(start)
		wantCode(t, err, 50, "MaxTimeMSExpired")
		if took > 4*time.Second {
			t.Fatalf("find %s: stopped after %v, want about 1 s", cmd[1].Key, took)
		}
	}
	// a $map and a $filter over a large range, each element costly
	costly := bson.D{{Key: "$size", Value: bson.D{{Key: "$range", Value: bson.A{0, "$$this"}}}}}
	for _, op := range []bson.D{
		{{Key: "$map", Value: bson.D{{Key: "input", Value: bson.D{{Key: "$range", Value: bson.A{0, 200000}}}}, {Key: "in", Value: costly}}}},
		{{Key: "$filter", Value: bson.D{{Key: "input", Value: bson.D{{Key: "$range", Value: bson.A{0, 200000}}}}, {Key: "cond", Value: bson.D{{Key: "$eq", Value: bson.A{costly, -1}}}}}}},
	} {
		start := time.Now()
		err := e.runErr(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$project", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$size", Value: op}}}}}}}},
			{Key: "cursor", Value: bson.D{}}, {Key: "maxTimeMS", Value: 500}})
		took := time.Since(start)
		wantCode(t, err, 50, "MaxTimeMSExpired")
		if took > 4*time.Second {
			t.Fatalf("%s: stopped after %v, want about 0.5 s", op[0].Key, took)
		}
	}
	// without maxTimeMS a reasonable expression still completes
	res := e.aggregate("c", bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$size", Value: bson.D{{Key: "$reduce", Value: bson.D{
		{Key: "input", Value: bson.D{{Key: "$range", Value: bson.A{0, 2000}}}},
		{Key: "initialValue", Value: bson.A{}},
		{Key: "in", Value: bson.D{{Key: "$concatArrays", Value: bson.A{"$$value", bson.A{"$$this"}}}}},
	}}}}}}}}}})
	if len(res) != 1 {
		t.Fatalf("got %d results", len(res))
	}
	valEq(t, res[0], "r", int32(2000))
}

// TestIssue21ExpressionLimits: expression results respect mongod's limits:
// strings under 16 MB (16493, "Tried to create string longer than 16MB"),
// $range under internalQueryMaxRangeBytes (146), the $push and $addToSet
// accumulators under internalQueryMaxPushBytes / internalQueryMaxAddToSetBytes
// (146, "<op> used too much memory and cannot spill to disk"), and an array
// doubled by $concatArrays in a $reduce fails instead of exhausting memory.
func TestIssue21ExpressionLimits(t *testing.T) {
	e := newParamEnv(t)
	var docs []any
	for i := 0; i < 100; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "y", Value: fmt.Sprintf("string %d", i%5)}})
	}
	e.insert("c", docs...)
	project := func(x any) error {
		return e.runErr(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$limit", Value: 1}},
			bson.D{{Key: "$project", Value: bson.D{{Key: "x", Value: x}}}}}},
			{Key: "cursor", Value: bson.D{}}})
	}
	wantMsg := func(err error, sub string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), sub) {
			t.Fatalf("error %v, want it to say %q", err, sub)
		}
	}
	// a string doubling itself
	doubling := func(op string, init any) bson.D {
		return bson.D{{Key: "$reduce", Value: bson.D{
			{Key: "input", Value: bson.D{{Key: "$range", Value: bson.A{0, 40}}}},
			{Key: "initialValue", Value: init},
			{Key: "in", Value: bson.D{{Key: op, Value: bson.A{"$$value", "$$value"}}}},
		}}}
	}
	err := project(bson.D{{Key: "$strLenBytes", Value: doubling("$concat", "x")}})
	wantCode(t, err, 16493, "Location16493")
	wantMsg(err, "Tried to create string longer than 16MB")
	// $replaceAll growing a string past 16 MB
	big := strings.Repeat("a", 1<<20)
	err = project(bson.D{{Key: "$strLenBytes", Value: bson.D{{Key: "$replaceAll", Value: bson.D{
		{Key: "input", Value: big}, {Key: "find", Value: "a"}, {Key: "replacement", Value: "aaaaaaaaaaaaaaaaaaaa"}}}}}})
	wantCode(t, err, 16493, "Location16493")
	// under the limit: fine
	res := e.aggregate("c", bson.A{bson.D{{Key: "$limit", Value: 1}}, bson.D{{Key: "$project", Value: bson.D{
		{Key: "x", Value: bson.D{{Key: "$strLenBytes", Value: bson.D{{Key: "$concat", Value: bson.A{big, big}}}}}}}}}})
	valEq(t, res[0], "x", int32(2<<20))

	// an array doubling itself
	err = project(bson.D{{Key: "$size", Value: doubling("$concatArrays", bson.A{1})}})
	wantCode(t, err, 146, "ExceededMemoryLimit")

	// $range
	err = project(bson.D{{Key: "$size", Value: bson.D{{Key: "$range", Value: bson.A{0, 2147483647}}}}})
	wantCode(t, err, 146, "ExceededMemoryLimit")
	wantMsg(err, "$range would use too much memory")
	issue21SetParams(e, bson.D{{Key: "internalQueryMaxRangeBytes", Value: int32(1100)}})
	wantCode(t, project(bson.D{{Key: "$range", Value: bson.A{0, 100}}}), 146, "ExceededMemoryLimit")
	res = e.aggregate("c", bson.A{bson.D{{Key: "$limit", Value: 1}}, bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0},
		{Key: "x", Value: bson.D{{Key: "$size", Value: bson.D{{Key: "$range", Value: bson.A{0, 20}}}}}}}}}})
	valEq(t, res[0], "x", int32(20))

	// $push / $addToSet accumulators (mongod's jstests
	// agg_configurable_memory_limit.js: 100 strings of ~22 bytes)
	group := func(op string) error {
		_, err := e.coll("c").Aggregate(e.ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
			{Key: "s", Value: bson.D{{Key: op, Value: "$y"}}}}}}})
		return err
	}
	if err := group("$push"); err != nil {
		t.Fatalf("$push under the default limit: %v", err)
	}
	issue21SetParams(e, bson.D{{Key: "internalQueryMaxPushBytes", Value: int32(1100)}, {Key: "internalQueryMaxAddToSetBytes", Value: int32(1100)}})
	err = group("$push")
	wantCode(t, err, 146, "ExceededMemoryLimit")
	wantMsg(err, "$push used too much memory and cannot spill to disk. Memory limit: 1100 bytes")
	if err := group("$addToSet"); err != nil { // 5 distinct strings only
		t.Fatalf("$addToSet of 5 distinct values: %v", err)
	}
	e.admin(bson.D{{Key: "setParameter", Value: 1}, {Key: "internalQueryMaxAddToSetBytes", Value: int32(50)}})
	err = group("$addToSet")
	wantCode(t, err, 146, "ExceededMemoryLimit")
	wantMsg(err, "$addToSet used too much memory and cannot spill to disk")
	// allowDiskUse does not help: one group's array cannot spill
	_, err = e.coll("c").Aggregate(e.ctx, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
		{Key: "s", Value: bson.D{{Key: "$push", Value: "$y"}}}}}}}, options.Aggregate().SetAllowDiskUse(true))
	wantCode(t, err, 146, "ExceededMemoryLimit")
}

// TestIssue21ResultSizeAndSetOperators: a pipeline result over the BSON
// size limit fails as mongod's serialization does (10334
// BSONObjectTooLarge) rather than being sent; set operators over large
// arrays finish (n log n; they were quadratic and could not be
// interrupted) with the same results.
func TestIssue21ResultSizeAndSetOperators(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	s12 := strings.Repeat("x", 12<<20)
	err := e.runErr(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
		bson.D{{Key: "$project", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$literal", Value: s12}}}, {Key: "b", Value: bson.D{{Key: "$concat", Value: bson.A{s12, ""}}}}}}}}},
		{Key: "cursor", Value: bson.D{}}})
	wantCode(t, err, 10334, "BSONObjectTooLarge")
	if !strings.Contains(err.Error(), "is invalid. Size must be between 0 and 16793600(16MB)") {
		t.Fatalf("message: %v", err)
	}

	rng := func(a, b int) bson.D { return bson.D{{Key: "$range", Value: bson.A{a, b}}} }
	start := time.Now()
	res := e.aggregate("c", bson.A{bson.D{{Key: "$project", Value: bson.D{
		{Key: "u", Value: bson.D{{Key: "$size", Value: bson.D{{Key: "$setUnion", Value: bson.A{rng(0, 200000), rng(100000, 300000)}}}}}},
		{Key: "i", Value: bson.D{{Key: "$size", Value: bson.D{{Key: "$setIntersection", Value: bson.A{rng(0, 200000), rng(100000, 300000)}}}}}},
		{Key: "d", Value: bson.D{{Key: "$size", Value: bson.D{{Key: "$setDifference", Value: bson.A{rng(0, 200000), rng(100000, 300000)}}}}}},
		{Key: "e", Value: bson.D{{Key: "$setEquals", Value: bson.A{rng(0, 200000), bson.D{{Key: "$reverseArray", Value: rng(0, 200000)}}}}}},
		{Key: "s", Value: bson.D{{Key: "$setIsSubset", Value: bson.A{rng(100000, 200000), rng(0, 300000)}}}},
		{Key: "f", Value: bson.D{{Key: "$first", Value: bson.D{{Key: "$setUnion", Value: bson.A{bson.A{3, 1.0, 1, 2, int64(3)}, rng(0, 100)}}}}}},
	}}}})
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("set operators over 200k elements took %v", took)
	}
	docEq(t, res[0], bson.D{{Key: "_id", Value: int32(1)}, {Key: "u", Value: int32(300000)}, {Key: "i", Value: int32(100000)},
		{Key: "d", Value: int32(100000)}, {Key: "e", Value: true}, {Key: "s", Value: true}, {Key: "f", Value: int32(0)}})
}

// TestIssue21NonSpillingStagesKeepTheirLimit: what cannot spill keeps its
// memory limit when disk use is allowed (now the default), failing with
// mongod's codes: $facet's output document 4031700 at
// internalQueryFacetMaxOutputDocSizeBytes; $graphLookup 40099 at
// internalDocumentSourceGraphLookupMaxMemoryBytes (mongod cannot spill it
// either); one $setWindowFields partition 5414201 (mayfly holds a partition
// in memory; mongod 7.0 can spill it); $densify 6007200. The sort in front
// of $setWindowFields' partitions does spill.
func TestIssue21NonSpillingStagesKeepTheirLimit(t *testing.T) {
	mayflyOnly(t) // the window and densify limits are mayfly's stage limit
	e := newParamEnv(t)
	pad := strings.Repeat("p", 200)
	var docs []any
	for i := 0; i < 200; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "next", Value: int32(i + 1)}, {Key: "v", Value: int32(i * 2)}, {Key: "pad", Value: pad}})
	}
	e.insert("g", docs...)
	graph := bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 0}}}}, bson.D{{Key: "$graphLookup", Value: bson.D{
		{Key: "from", Value: "g"}, {Key: "startWith", Value: "$next"}, {Key: "connectFromField", Value: "next"},
		{Key: "connectToField", Value: "_id"}, {Key: "as", Value: "chain"}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$size", Value: "$chain"}}}}}}}
	res := e.aggregate("g", graph)
	valEq(t, res[0], "n", int32(199))
	window := bson.A{bson.D{{Key: "$setWindowFields", Value: bson.D{
		{Key: "output", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$sum", Value: "$v"}}}}}}}}}
	densify := bson.A{bson.D{{Key: "$densify", Value: bson.D{{Key: "field", Value: "v"}, {Key: "range", Value: bson.D{{Key: "step", Value: 1}, {Key: "bounds", Value: "full"}}}}}}}
	if len(e.aggregate("g", window)) != 200 || len(e.aggregate("g", densify)) != 399 {
		t.Fatal("window/densify under the default limit")
	}
	issue21SetParams(e, bson.D{
		{Key: "internalDocumentSourceGraphLookupMaxMemoryBytes", Value: int64(10000)},
		{Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: int32(10000)},
		{Key: "internalQueryFacetMaxOutputDocSizeBytes", Value: int64(10000)},
	})
	facet := bson.A{bson.D{{Key: "$facet", Value: bson.D{{Key: "all", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}}}}}}}
	for _, allow := range []bool{true, false} {
		opts := options.Aggregate().SetAllowDiskUse(allow)
		_, err := e.coll("g").Aggregate(e.ctx, facet, opts)
		wantCode(t, err, 4031700, "Location4031700")
		if !strings.Contains(err.Error(), "document constructed by $facet is") {
			t.Fatalf("$facet: %v", err)
		}
		_, err = e.coll("g").Aggregate(e.ctx, graph, opts)
		wantCode(t, err, 40099, "Location40099")
		// one partition over the limit
		_, err = e.coll("g").Aggregate(e.ctx, window, opts)
		wantCode(t, err, 5414201, "Location5414201")
		_, err = e.coll("g").Aggregate(e.ctx, densify, opts)
		wantCode(t, err, 6007200, "Location6007200")
	}
	// small partitions: the input is sorted by (partition, sortBy) with a
	// spilling sort, as mongod's $sort before the window stage, and
	// processed a partition at a time
	parts := bson.A{bson.D{{Key: "$setWindowFields", Value: bson.D{
		{Key: "partitionBy", Value: bson.D{{Key: "$mod", Value: bson.A{"$_id", 10}}}},
		{Key: "sortBy", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "output", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$sum", Value: "$v"}}}, {Key: "r", Value: bson.D{{Key: "$rank", Value: bson.D{}}}}}}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "s", Value: 1}, {Key: "r", Value: 1}}}}}
	cur, err := e.coll("g").Aggregate(e.ctx, parts)
	if err != nil {
		t.Fatalf("partitioned $setWindowFields with disk use allowed: %v", err)
	}
	var out []bson.Raw
	if err := cur.All(e.ctx, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 200 {
		t.Fatalf("%d results", len(out))
	}
	for i, d := range out {
		// partition p = i/20 holds _ids p, p+10, ..., p+190 in order
		p, k := i/20, i%20
		want := bson.D{{Key: "_id", Value: int32(p + 10*k)}, {Key: "s", Value: int32(20*2*p + 2*10*190)}, {Key: "r", Value: int32(k + 1)}}
		docEq(t, d, want)
	}
	_, err = e.coll("g").Aggregate(e.ctx, parts, options.Aggregate().SetAllowDiskUse(false))
	wantCode(t, err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed")
}
