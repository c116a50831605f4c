package query

import (
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func mustDoc(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMatchesDoesNotAllocate(t *testing.T) {
	doc := mustDoc(t, `{"_id": 1, "a": 5, "s": "hello", "arr": [1, 2, {"b": 3}], "sub": {"x": {"y": [4, 5]}}, "n": null}`)
	for _, f := range []string{
		`{"a": 5}`,
		`{"a": {"$gt": 1, "$lte": 10}}`,
		`{"a": {"$in": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}}`,
		`{"a": {"$nin": [1, 2]}}`,
		`{"s": {"$regex": "^he"}}`,
		`{"arr.b": 3}`,
		`{"sub.x.y": {"$gte": 5}}`,
		`{"arr": {"$elemMatch": {"b": {"$exists": true}}}}`,
		`{"$or": [{"a": 4}, {"n": null}]}`,
		`{"missing": {"$exists": false}, "arr": {"$size": 3}, "a": {"$type": "number"}}`,
		`{"a": {"$bitsAllSet": [0, 2]}, "a2": {"$not": {"$mod": [2, 0]}}}`,
	} {
		m, err := Compile(mustDoc(t, f))
		if err != nil {
			t.Fatal(f, err)
		}
		if !m.Matches(doc) {
			t.Errorf("%s: expected match", f)
		}
		if n := testing.AllocsPerRun(100, func() { m.Matches(doc) }); n != 0 {
			t.Errorf("%s: Matches allocates %.0f times", f, n)
		}
	}
}

func TestMatchesErrReportsExprErrors(t *testing.T) {
	m, err := Compile(mustDoc(t, `{"$expr": {"$divide": [1, "$z"]}}`))
	if err != nil {
		t.Skipf("expression support not available: %v", err)
	}
	if !m.HasExpr() {
		t.Error("HasExpr false")
	}
	doc := mustDoc(t, `{"z": 0}`)
	ok, err := m.MatchesErr(doc)
	if ok || err == nil {
		t.Errorf("MatchesErr = %v, %v; want false and an error", ok, err)
	}
	if m.Matches(doc) {
		t.Error("Matches true on an evaluation error")
	}
	// a negation must not turn the error into a match
	m2, err := Compile(mustDoc(t, `{"$nor": [{"$expr": {"$divide": [1, "$z"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m2.Matches(doc) {
		t.Error("$nor of a failing $expr matched")
	}
	if ok, err := m.MatchesErr(mustDoc(t, `{"z": 2}`)); !ok || err != nil {
		t.Errorf("MatchesErr = %v, %v", ok, err)
	}
}

func TestCompileErrorsAreMongoErrors(t *testing.T) {
	_, err := Compile(mustDoc(t, `{"$foo": 1}`))
	me := mongoerr.From(err)
	if me.Code != mongoerr.BadValue || !strings.HasPrefix(me.Msg, "unknown top level operator: $foo") {
		t.Errorf("got %v", err)
	}
	_, err = Compile(mustDoc(t, `{"a": {"$bar": 1}}`))
	if me := mongoerr.From(err); me.Msg != "unknown operator: $bar" {
		t.Errorf("got %v", err)
	}
	_, err = Compile(mustDoc(t, `{"a": {"$regex": "("}}`))
	if me := mongoerr.From(err); me.Code != 51091 || !strings.HasPrefix(me.Msg, "Regular expression is invalid: ") {
		t.Errorf("got %v", err)
	}
	_, err = Compile(mustDoc(t, `{"a": {"$size": -1}}`))
	if me := mongoerr.From(err); me.Msg != "$size may not be negative" {
		t.Errorf("got %v", err)
	}
	_, err = Compile(mustDoc(t, `{"$and": []}`))
	if me := mongoerr.From(err); me.Msg != "$and/$or/$nor must be a nonempty array" {
		t.Errorf("got %v", err)
	}
	_, err = CompileProjection(mustDoc(t, `{"a": 1, "b": 0}`))
	if me := mongoerr.From(err); me.Msg != "Cannot do exclusion on field b in inclusion projection" {
		t.Errorf("got %v", err)
	}
	_, err = CompileProjection(mustDoc(t, `{"a": 1, "a.b": 1}`))
	if me := mongoerr.From(err); me.Msg != "Path collision at a.b remaining portion b" {
		t.Errorf("got %v", err)
	}
}

func TestDeepFilterRefused(t *testing.T) {
	f := `{"a": 1}`
	for i := 0; i < 150; i++ {
		f = `{"$and": [` + f + `]}`
	}
	if _, err := Compile(mustDoc(t, f)); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("deep filter: %v", err)
	}
	f = `{"a": 1}`
	for i := 0; i < 50; i++ {
		f = `{"$and": [` + f + `]}`
	}
	m, err := Compile(mustDoc(t, f))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Matches(mustDoc(t, `{"a": 1}`)) {
		t.Error("nested $and")
	}
}

func TestProjectionIncludes(t *testing.T) {
	for _, c := range []struct {
		spec  string
		field string
		want  bool
	}{
		{`{"a": 1}`, "a", true},
		{`{"a": 1}`, "_ts", false},
		{`{"_ts": 1}`, "_ts", true},
		{`{"a.b": 1}`, "a", true},
		{`{"a": 0}`, "a", false},
		{`{"a": 0}`, "b", false},
		{`{"a": {"$slice": 1}, "b": 1}`, "a", true},
		{`{"a": {"$elemMatch": {"x": 1}}}`, "a", true},
		{`{"a.$": 1}`, "a", true},
		{`{"x": "$a"}`, "x", false},
		{`{"_id": 0, "a": 1}`, "_id", false},
	} {
		p, err := CompileProjection(mustDoc(t, c.spec))
		if err != nil {
			t.Fatal(c.spec, err)
		}
		if got := p.Includes(c.field); got != c.want {
			t.Errorf("%s Includes(%q) = %v", c.spec, c.field, got)
		}
	}
	p, _ := CompileProjection(mustDoc(t, `{"a": 1}`))
	if !p.IsInclusion() {
		t.Error("IsInclusion")
	}
	p, _ = CompileProjection(mustDoc(t, `{"a": 0}`))
	if p.IsInclusion() {
		t.Error("IsInclusion on exclusion")
	}
}

func TestSortKeysAndCompare(t *testing.T) {
	s, err := CompileSort(mustDoc(t, `{"a": 1, "b": -1}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Fatal("Len")
	}
	x := mustDoc(t, `{"a": [3, 1], "b": 2}`)
	y := mustDoc(t, `{"a": 1, "b": [5, 0]}`)
	kx, ky := s.Keys(x), s.Keys(y)
	if kx[0] != int32(1) || ky[1] != int32(5) {
		t.Errorf("keys %v %v", kx, ky)
	}
	if s.CompareKeys(kx, ky) != 1 || s.Compare(x, y) != 1 || s.Compare(y, x) != -1 || s.Compare(x, x) != 0 {
		t.Error("compare")
	}
}

func TestTopKMemoryLimit(t *testing.T) {
	s, _ := CompileSort(mustDoc(t, `{"a": 1}`))
	big := strings.Repeat("x", 1000)
	tk := NewTopK(s, 0, 10_000)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = tk.Push(bson.D{{Key: "a", Value: int32(i)}, {Key: "s", Value: big}})
	}
	me := mongoerr.From(err)
	if me == nil || me.Code != 292 || me.CodeName() != "QueryExceededMemoryLimitNoDiskUseAllowed" ||
		!strings.Contains(me.Msg, "Sort exceeded memory limit of 10000 bytes, but did not opt in to external sorting.") {
		t.Fatalf("got %v", err)
	}
	// A bounded top-k holds only k documents and so stays under the limit.
	tk = NewTopK(s, 3, 10_000)
	for i := 100; i > 0; i-- {
		if err := tk.Push(bson.D{{Key: "a", Value: int32(i)}, {Key: "s", Value: big}}); err != nil {
			t.Fatal(err)
		}
	}
	if tk.Len() != 3 || tk.MemUsage() <= 3000 || tk.MemUsage() > 10_000 {
		t.Errorf("Len %d MemUsage %d", tk.Len(), tk.MemUsage())
	}
	got := tk.Sorted()
	for i, d := range got {
		if d[0].Value != int32(i+1) {
			t.Errorf("top-3: %v", got)
		}
	}
	if DocSize(bson.D{{Key: "s", Value: big}}) < 1000 {
		t.Error("DocSize underestimates")
	}
	if SortMemoryLimitError(DefaultSortMemoryLimit).Msg != "Executor error during find command :: caused by :: Sort exceeded memory limit of 104857600 bytes, but did not opt in to external sorting." {
		t.Error("message")
	}
}

func TestProjectionDoesNotAliasSlices(t *testing.T) {
	p, _ := CompileProjection(mustDoc(t, `{"a": {"$slice": 2}}`))
	doc := mustDoc(t, `{"a": [1, 2, 3]}`)
	out, err := p.Apply(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	arr := out[0].Value.(bson.A)
	_ = append(arr, "x")
	if doc[0].Value.(bson.A)[2] != int32(3) {
		t.Error("appending to a sliced result clobbered the input")
	}
}

func TestRegexTranslation(t *testing.T) {
	for _, c := range []struct{ pat, opts, s string }{
		{`a # c`, "x", "a"},
		{`[#] a`, "x", "#a"},
		{`[]a]`, "", "]"},
		{`[^]a]`, "", "b"},
		{`\hx`, "", " x"},
		{`[\h]x`, "", "\tx"},
		{`(?i)ab`, "", "AB"},
	} {
		re, err := CompileRegex(c.pat, c.opts)
		if err != nil {
			t.Errorf("%q/%s: %v", c.pat, c.opts, err)
			continue
		}
		if !re.MatchString(c.s) {
			t.Errorf("%q/%s does not match %q (%s)", c.pat, c.opts, c.s, re)
		}
	}
}

func BenchmarkMatches(b *testing.B) {
	doc := mustDoc(b, `{"_id": 1, "a": 5, "s": "hello", "arr": [1, 2, {"b": 3}], "sub": {"x": {"y": [4, 5]}}}`)
	for _, f := range []string{`{"a": 5}`, `{"arr.b": 3, "a": {"$gte": 1}}`, `{"s": {"$regex": "^hel"}}`, `{"$or": [{"a": 4}, {"sub.x.y": 5}]}`} {
		m, err := Compile(mustDoc(b, f))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(f, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				m.Matches(doc)
			}
		})
	}
}

func BenchmarkTopK(b *testing.B) {
	s, _ := CompileSort(mustDoc(b, `{"a": 1, "b": -1}`))
	docs := make([]bson.D, 1000)
	for i := range docs {
		docs[i] = bson.D{{Key: "a", Value: int32((i * 7919) % 1000)}, {Key: "b", Value: fmt.Sprint(i)}}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tk := NewTopK(s, 10, DefaultSortMemoryLimit)
		for _, d := range docs {
			_ = tk.Push(d)
		}
		tk.Sorted()
	}
}

func TestSortFieldsAndNatural(t *testing.T) {
	s, err := CompileSort(mustDoc(t, `{"a.b": -1, "c": 1, "$natural": -1}`))
	if err != nil {
		t.Fatal(err)
	}
	f := s.Fields()
	if len(f) != 2 || f[0] != (SortField{"a.b", true}) || f[1] != (SortField{"c", false}) || s.Natural() != -1 {
		t.Errorf("Fields %v Natural %d", f, s.Natural())
	}
}

func TestMatchesAll(t *testing.T) {
	for f, want := range map[string]bool{`{}`: true, `{"$comment": "x"}`: true, `{"$alwaysTrue": 1}`: true, `{"a": 1}`: false, `{"$alwaysFalse": 1}`: false} {
		m, err := Compile(mustDoc(t, f))
		if err != nil {
			t.Fatal(err)
		}
		if m.MatchesAll() != want {
			t.Errorf("%s: MatchesAll = %v", f, !want)
		}
	}
	m, _ := Compile(nil)
	if !m.MatchesAll() || !m.Matches(bson.D{}) {
		t.Error("nil filter")
	}
}

// Filters built in Go code carry plain ints; they must mean what the
// equivalent int32 would.
func TestGoIntArguments(t *testing.T) {
	doc := bson.D{{Key: "a", Value: bson.A{int32(1), int32(2)}}, {Key: "b", Value: int32(5)}}
	for _, f := range []bson.D{
		{{Key: "a", Value: bson.D{{Key: "$size", Value: 2}}}},
		{{Key: "c", Value: bson.D{{Key: "$exists", Value: 0}}}},
		{{Key: "b", Value: bson.D{{Key: "$mod", Value: bson.A{2, 1}}}}},
		{{Key: "b", Value: bson.D{{Key: "$bitsAllSet", Value: 5}}}},
		{{Key: "b", Value: bson.D{{Key: "$type", Value: 16}}}},
		{{Key: "b", Value: 5}},
		{{Key: "b", Value: bson.D{{Key: "$in", Value: bson.A{4, 5}}}}},
	} {
		m, err := Compile(f)
		if err != nil {
			t.Fatal(f, err)
		}
		if !m.Matches(doc) {
			t.Errorf("%v does not match", f)
		}
	}
	p, err := CompileProjection(bson.D{{Key: "b", Value: 1}, {Key: "_id", Value: 0}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := p.Apply(doc, nil)
	if len(out) != 1 || out[0].Key != "b" {
		t.Errorf("projection with Go ints: %v", out)
	}
	s, err := CompileSort(bson.D{{Key: "b", Value: -1}})
	if err != nil || s.Fields()[0] != (SortField{"b", true}) {
		t.Errorf("sort with Go ints: %v %v", s, err)
	}
}
