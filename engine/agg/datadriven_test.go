package agg

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// fakeEnv is an in-memory Env: collections are slices of documents keyed
// by "db.coll".
type fakeEnv struct {
	colls  map[string][]bson.D
	unique map[string][][]string
}

func newFakeEnv() *fakeEnv {
	return &fakeEnv{colls: map[string][]bson.D{}, unique: map[string][][]string{}}
}

func (f *fakeEnv) Scan(ctx context.Context, db, coll string, filter bson.D) (Iterator, error) {
	m, err := query.Compile(filter)
	if err != nil {
		return nil, err
	}
	var out []bson.D
	for _, d := range f.colls[db+"."+coll] {
		if m.Matches(d) {
			out = append(out, bsonx.CloneD(d))
		}
	}
	return Slice(out), nil
}

func (f *fakeEnv) Out(ctx context.Context, db, coll string, docs Iterator) error {
	all, err := Collect(ctx, docs)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, d := range all {
		id, _ := bsonx.Get(d, "_id")
		k := expr.ExtJSON(id)
		if seen[k] {
			return mongoerr.New(mongoerr.DuplicateKey, "E11000 duplicate key error collection: %s.%s index: _id_ dup key: { _id: %s }", db, coll, k)
		}
		seen[k] = true
	}
	f.colls[db+"."+coll] = all
	return nil
}

func (f *fakeEnv) Insert(ctx context.Context, db, coll string, doc bson.D) error {
	id, _ := bsonx.Get(doc, "_id")
	for _, d := range f.colls[db+"."+coll] {
		if x, _ := bsonx.Get(d, "_id"); bsonx.Compare(x, id) == 0 {
			return mongoerr.New(mongoerr.DuplicateKey, "E11000 duplicate key error")
		}
	}
	f.colls[db+"."+coll] = append(f.colls[db+"."+coll], doc)
	return nil
}

func (f *fakeEnv) Replace(ctx context.Context, db, coll string, id any, doc bson.D) error {
	docs := f.colls[db+"."+coll]
	for i, d := range docs {
		if x, _ := bsonx.Get(d, "_id"); bsonx.Compare(x, id) == 0 {
			docs[i] = doc
			return nil
		}
	}
	return mongoerr.New(mongoerr.NoMatchingDocument, "no document")
}

func (f *fakeEnv) HasUniqueIndex(ctx context.Context, db, coll string, fields []string) (bool, error) {
	want := append([]string{}, fields...)
	sort.Strings(want)
	for _, u := range f.unique[db+"."+coll] {
		got := append([]string{}, u...)
		sort.Strings(got)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeEnv) CollStats(ctx context.Context, db, coll string, spec bson.D) (bson.D, error) {
	d := bson.D{{Key: "ns", Value: db + "." + coll}}
	if _, ok := bsonx.Get(spec, "count"); ok {
		d = append(d, bson.E{Key: "count", Value: int64(len(f.colls[db+"."+coll]))})
	}
	return d, nil
}

func (f *fakeEnv) IndexStats(ctx context.Context, db, coll string) ([]bson.D, error) {
	return []bson.D{{{Key: "name", Value: "_id_"}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}}}, nil
}

func parseJSON(t *testing.T, where, s string) any {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+s+`}`), false, &d); err != nil {
		t.Fatalf("%s: bad json %q: %v", where, s, err)
	}
	return d[0].Value
}

// sameValue is deep equality with exact BSON types.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case bson.D:
		y, ok := b.(bson.D)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !sameValue(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case bson.A:
		y, ok := b.(bson.A)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	case bson.Decimal128:
		y, ok := b.(bson.Decimal128)
		return ok && x.String() == y.String()
	}
	return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) && bsonx.Compare(a, b) == 0
}

func showDocs(docs []bson.D) string {
	var b strings.Builder
	for _, d := range docs {
		j, err := bson.MarshalExtJSON(d, true, false)
		if err != nil {
			fmt.Fprintf(&b, "  %v\n", d)
			continue
		}
		fmt.Fprintf(&b, "  %s\n", j)
	}
	return b.String()
}

func sameDocs(got, want []bson.D, unordered bool) bool {
	if len(got) != len(want) {
		return false
	}
	if !unordered {
		for i := range got {
			if !sameValue(got[i], want[i]) {
				return false
			}
		}
		return true
	}
	used := make([]bool, len(got))
outer:
	for _, w := range want {
		for i, g := range got {
			if !used[i] && sameValue(g, w) {
				used[i] = true
				continue outer
			}
		}
		return false
	}
	return true
}

// Test files (testdata/*.txt) are sequences of directives:
//
//	collection <name>          documents (one extended-JSON doc per line) until a blank line
//	unique <name> <f1,f2>      declare a unique index (for $merge "on")
//	pipeline <coll|-> <json array>
//	opts <json>                optional: {allowDiskUse, memoryLimit, let, now}
//	unordered                  optional: compare results as a multiset
//	error <code> [substring]   expected error, or:
//	<docs>                     expected documents until a blank line ("empty" for none)
//	check <name>               expected collection contents until a blank line
//
// Lines starting with # are comments. Types are compared exactly.
func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	expr.Rand = func() float64 { return 0.5 }
	total := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			total += runFile(t, f)
		})
	}
	t.Logf("%d pipeline cases", total)
}

func runFile(t *testing.T, file string) int {
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	env := newFakeEnv()
	cases := 0
	i := 0
	readDocs := func() []bson.D {
		var docs []bson.D
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			l := strings.TrimSpace(lines[i])
			i++
			if strings.HasPrefix(l, "#") || l == "empty" {
				continue
			}
			docs = append(docs, parseJSON(t, fmt.Sprintf("%s:%d", file, i), l).(bson.D))
		}
		return docs
	}
	for i < len(lines) {
		line := strings.TrimSpace(lines[i])
		i++
		where := fmt.Sprintf("%s:%d", file, i)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "collection "):
			name := strings.TrimSpace(strings.TrimPrefix(line, "collection "))
			env.colls["test."+name] = readDocs()
		case strings.HasPrefix(line, "unique "):
			parts := strings.Fields(line)
			env.unique["test."+parts[1]] = append(env.unique["test."+parts[1]], strings.Split(parts[2], ","))
		case strings.HasPrefix(line, "check "):
			name := strings.TrimSpace(strings.TrimPrefix(line, "check "))
			want := readDocs()
			got := env.colls["test."+name]
			if !sameDocs(got, want, true) {
				t.Errorf("%s: collection %s:\n got:\n%s want:\n%s", where, name, showDocs(got), showDocs(want))
			}
		case strings.HasPrefix(line, "pipeline "):
			cases++
			rest := strings.TrimPrefix(line, "pipeline ")
			coll, pj, _ := strings.Cut(rest, " ")
			pipe, ok := parseJSON(t, where, pj).(bson.A)
			if !ok {
				t.Fatalf("%s: pipeline must be an array", where)
			}
			opts := Options{DB: "test", Coll: coll, Now: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
			if coll == "-" {
				opts.Coll = ""
			}
			unordered := false
			for i < len(lines) {
				l := strings.TrimSpace(lines[i])
				if rest, ok := strings.CutPrefix(l, "opts "); ok {
					od := parseJSON(t, where, rest).(bson.D)
					for _, e := range od {
						switch e.Key {
						case "allowDiskUse":
							opts.AllowDiskUse = e.Value.(bool)
						case "memoryLimit":
							opts.MemoryLimit, _ = bsonx.ToInt64(e.Value)
						case "let":
							opts.Let = e.Value.(bson.D)
						}
					}
					i++
					continue
				}
				if l == "unordered" {
					unordered = true
					i++
					continue
				}
				break
			}
			var got []bson.D
			p, err := Parse(pipe, opts)
			if err == nil {
				var input Iterator
				if opts.Coll != "" {
					input, _ = env.Scan(context.Background(), "test", opts.Coll, nil)
				}
				var it Iterator
				it, err = p.Run(context.Background(), env, input)
				if err == nil {
					got, err = Collect(context.Background(), it)
				}
			}
			l := ""
			if i < len(lines) {
				l = strings.TrimSpace(lines[i])
			}
			if rest, ok := strings.CutPrefix(l, "error "); ok {
				i++
				codeS, msg, _ := strings.Cut(rest, " ")
				code, _ := strconv.Atoi(codeS)
				if err == nil {
					t.Errorf("%s: want error %d, got:\n%s", where, code, showDocs(got))
					continue
				}
				me := mongoerr.From(err)
				if me.Code != int32(code) || !strings.Contains(me.Msg, msg) {
					t.Errorf("%s: want error %d %q, got %d %q", where, code, msg, me.Code, me.Msg)
				}
				continue
			}
			want := readDocs()
			if err != nil {
				t.Errorf("%s: unexpected error %v", where, err)
				continue
			}
			if !sameDocs(got, want, unordered) {
				t.Errorf("%s: %s\n got:\n%s want:\n%s", where, pj, showDocs(got), showDocs(want))
			}
		default:
			t.Fatalf("%s: unknown directive %q", where, line)
		}
	}
	return cases
}
