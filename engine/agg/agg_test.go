package agg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func mustParse(t *testing.T, js string, opts Options) *Pipeline {
	t.Helper()
	p, err := Parse(parseJSON(t, "test", js).(bson.A), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSplit(t *testing.T) {
	cases := []struct {
		pipe                 string
		filter, sort         string
		skip, limit, restLen int64
		restFirst            string
	}{
		{`[{"$match": {"a": 1}}, {"$project": {"a": 1}}]`, `{"a": 1}`, ``, 0, -1, 1, "$project"},
		{`[{"$match": {"a": 1}}, {"$match": {"b": 2}}, {"$sort": {"a": -1}}, {"$skip": 2}, {"$limit": 5}, {"$group": {"_id": null}}]`,
			`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": -1}`, 2, 5, 1, "$group"},
		{`[{"$limit": 10}, {"$skip": 3}]`, ``, ``, 3, 7, 0, ""},
		{`[{"$skip": 3}, {"$limit": 10}, {"$limit": 4}]`, ``, ``, 3, 4, 0, ""},
		{`[{"$sort": {"x": 1}}]`, ``, `{"x": 1}`, 0, -1, 0, ""},
		{`[{"$project": {"a": 1}}, {"$match": {"a": 1}}]`, ``, ``, 0, -1, 2, "$project"},
		{`[{"$match": {"$expr": {"$eq": ["$a", "$$x"]}}}, {"$limit": 1}]`, ``, ``, 0, -1, 2, "$match"},
	}
	for _, c := range cases {
		opts := Options{DB: "test", Coll: "c"}
		if strings.Contains(c.pipe, "$$x") {
			opts.Let = bson.D{{Key: "x", Value: int32(1)}}
		}
		p := mustParse(t, c.pipe, opts)
		pre, rest := p.Split()
		check := func(name string, got bson.D, want string) {
			if want == "" {
				if got != nil {
					t.Errorf("%s: %s = %v, want nil", c.pipe, name, got)
				}
				return
			}
			w := parseJSON(t, "want", want)
			if !sameValue(got, w) {
				t.Errorf("%s: %s = %v, want %v", c.pipe, name, got, w)
			}
		}
		check("filter", pre.Filter, c.filter)
		check("sort", pre.Sort, c.sort)
		if pre.Skip != c.skip || pre.Limit != c.limit {
			t.Errorf("%s: skip/limit = %d/%d, want %d/%d", c.pipe, pre.Skip, pre.Limit, c.skip, c.limit)
		}
		if int64(rest.Len()) != c.restLen {
			t.Errorf("%s: rest has %d stages, want %d", c.pipe, rest.Len(), c.restLen)
		}
		if c.restFirst != "" && rest.StageNames()[0] != c.restFirst {
			t.Errorf("%s: rest starts with %s", c.pipe, rest.StageNames()[0])
		}
	}
}

func TestUpdatePipeline(t *testing.T) {
	fn, err := CompileUpdatePipeline(parseJSON(t, "u", `[{"$set": {"b": {"$add": ["$a", "$$inc"]}}}, {"$unset": "a"}, {"$replaceWith": {"$mergeObjects": ["$$ROOT", {"c": "$$NOW"}]}}, {"$project": {"c": 0}}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	doc := bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(2)}}
	got, err := fn(doc, map[string]any{"inc": int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: int32(1)}, {Key: "b", Value: int32(7)}}
	if !sameValue(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if len(doc) != 2 {
		t.Fatal("input document was modified")
	}
	for js, code := range map[string]int32{
		`[{"$match": {}}]`:              mongoerr.InvalidOptions,
		`[{"$group": {"_id": null}}]`:   mongoerr.InvalidOptions,
		`[{"$bogus": {}}]`:              40324,
		`[{"$set": {}, "$unset": "a"}]`: 40323,
		`[1]`:                           mongoerr.TypeMismatch,
		`[{"$project": {}}]`:            51272,
	} {
		_, err := CompileUpdatePipeline(parseJSON(t, "u", js).(bson.A))
		if !mongoerr.Is(err, code) {
			t.Errorf("%s: got %v, want code %d", js, err, code)
		}
	}
	fn, _ = CompileUpdatePipeline(parseJSON(t, "u", `[{"$replaceWith": "$a"}]`).(bson.A))
	if _, err := fn(doc, nil); !mongoerr.Is(err, 40228) {
		t.Errorf("replaceWith scalar: %v", err)
	}
}

// TestSpillCleanup checks that external sorts and group spills actually
// write temporary files and remove them.
func TestSpillCleanup(t *testing.T) {
	dir := t.TempDir()
	var docs []bson.D
	for i := 0; i < 2000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(i % 7)}, {Key: "pad", Value: strings.Repeat("x", 100)}})
	}
	env := newFakeEnv()
	env.colls["test.big"] = docs
	for _, js := range []string{
		`[{"$sort": {"k": 1, "_id": -1}}]`,
		`[{"$group": {"_id": "$_id", "all": {"$push": "$pad"}}}, {"$sort": {"_id": 1}}]`,
	} {
		p := mustParse(t, js, Options{DB: "test", Coll: "big", AllowDiskUse: true, MemoryLimit: 20000, TempDir: dir})
		in, _ := env.Scan(context.Background(), "test", "big", nil)
		it, err := p.Run(context.Background(), env, in)
		if err != nil {
			t.Fatal(err)
		}
		d, ok, err := it.Next(context.Background())
		if err != nil || !ok {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 0 && strings.Contains(js, "$sort\": {\"k") {
			t.Errorf("%s: no spill files while iterating", js)
		}
		out, err := Collect(context.Background(), it)
		if err != nil {
			t.Fatal(err)
		}
		out = append([]bson.D{d}, out...)
		if len(out) != 2000 {
			t.Fatalf("%s: %d docs", js, len(out))
		}
		if strings.Contains(js, "$sort\": {\"k") {
			for i := 1; i < len(out); i++ {
				a, b := out[i-1], out[i]
				ka, kb := a[1].Value.(int32), b[1].Value.(int32)
				if ka > kb || (ka == kb && a[0].Value.(int32) < b[0].Value.(int32)) {
					t.Fatalf("not sorted at %d: %v %v", i, a[:2], b[:2])
				}
			}
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 0 {
			t.Errorf("%s: %d spill files left", js, len(entries))
		}
	}
	// without allowDiskUse the same pipelines fail with 292
	p := mustParse(t, `[{"$sort": {"k": 1}}]`, Options{DB: "test", Coll: "big", MemoryLimit: 20000})
	in, _ := env.Scan(context.Background(), "test", "big", nil)
	it, err := p.Run(context.Background(), env, in)
	if err == nil {
		_, err = Collect(context.Background(), it)
	}
	if !mongoerr.Is(err, mongoerr.QueryExceededMemoryLimit) {
		t.Fatalf("want 292, got %v", err)
	}
}

func TestLimitStopsUpstream(t *testing.T) {
	pulled := 0
	src := &funcIter{next: func(ctx context.Context) (bson.D, bool, error) {
		pulled++
		return bson.D{{Key: "i", Value: int32(pulled)}}, true, nil
	}}
	p := mustParse(t, `[{"$project": {"i": 1}}, {"$limit": 3}]`, Options{})
	it, err := p.Run(context.Background(), newFakeEnv(), src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Collect(context.Background(), it)
	if err != nil || len(out) != 3 || pulled != 3 {
		t.Fatalf("out=%d pulled=%d err=%v", len(out), pulled, err)
	}
}

func TestAddFieldsDoesNotMutateInput(t *testing.T) {
	in := bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}, {Key: "arr", Value: bson.A{bson.D{{Key: "x", Value: int32(1)}}}}}
	orig := parseJSON(t, "x", `{"a": {"b": 1}, "arr": [{"x": 1}]}`)
	p := mustParse(t, `[{"$addFields": {"a.c": 2, "a.b": 5, "arr.y": 3, "z": 1}}, {"$unset": "a.b"}]`, Options{})
	it, err := p.Run(context.Background(), newFakeEnv(), Slice([]bson.D{in}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Collect(context.Background(), it)
	if err != nil {
		t.Fatal(err)
	}
	want := parseJSON(t, "w", `{"a": {"c": 2}, "arr": [{"x": 1, "y": 3}], "z": 1}`)
	if !sameValue(out[0], want) {
		t.Errorf("got %v", out[0])
	}
	if !sameValue(in, orig) {
		t.Errorf("input mutated: %v", in)
	}
}
