package update

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// The datadriven files in testdata/ hold one case per paragraph:
//
//	doc: <extended JSON document>   (carried over from the previous case when omitted)
//	update: <extended JSON document or array>
//	filters: <extended JSON array of arrayFilters>
//	pos: <positional match index>
//	insert: true
//	want: <extended JSON document>  (types compared exactly)
//	modified: true|false            (default: want differs from doc)
//	error: <code> [exact message]
//	seed: <filter>                  (tests UpsertSeed instead; want/error apply)
//
// Extended JSON is relaxed: 1 is int32, 1.0 a double; use {"$numberLong"}
// and friends where the type matters.

var testNow = time.Date(2024, 1, 2, 3, 4, 5, 6000000, time.UTC)

type tcase struct {
	file     string
	line     int
	fields   map[string]string
	docText  string
	hasModif bool
}

func parseEJ(t *testing.T, where, s string) any {
	t.Helper()
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		var w bson.D
		if err := bson.UnmarshalExtJSON([]byte(`{"v":`+s+`}`), false, &w); err != nil {
			t.Fatalf("%s: bad extended JSON %s: %v", where, s, err)
		}
		return w[0].Value
	}
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("%s: bad extended JSON %s: %v", where, s, err)
	}
	return d
}

func loadCases(t *testing.T) []tcase {
	files, _ := filepath.Glob("testdata/*.txt")
	var out []tcase
	for _, fn := range files {
		f, err := os.Open(fn)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		lastDoc := "{}"
		cur := tcase{file: fn, fields: map[string]string{}}
		flush := func() {
			if len(cur.fields) == 0 {
				return
			}
			if d, ok := cur.fields["doc"]; ok {
				lastDoc = d
			}
			cur.docText = lastDoc
			out = append(out, cur)
			cur = tcase{file: fn, fields: map[string]string{}}
		}
		n := 0
		for sc.Scan() {
			n++
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				flush()
				continue
			}
			if strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("%s:%d: bad line %q", fn, n, line)
			}
			if len(cur.fields) == 0 {
				cur.line = n
			}
			cur.fields[k] = strings.TrimSpace(v)
		}
		flush()
		f.Close()
	}
	return out
}

func TestDatadriven(t *testing.T) {
	cases := loadCases(t)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cases {
		where := c.file + ":" + strconv.Itoa(c.line)
		t.Run(where, func(t *testing.T) {
			var got bson.D
			var modified bool
			var err error
			doc := parseEJ(t, where, c.docText).(bson.D)
			if s, ok := c.fields["seed"]; ok {
				got, err = UpsertSeed(parseEJ(t, where, s).(bson.D))
				modified = true
			} else {
				var filters bson.A
				if s, ok := c.fields["filters"]; ok {
					filters = parseEJ(t, where, s).(bson.A)
				}
				pos := -1
				if s, ok := c.fields["pos"]; ok {
					pos, _ = strconv.Atoi(s)
				}
				insert := c.fields["insert"] == "true"
				before := bsonx.CloneD(doc)
				var u *Update
				u, err = Compile(parseEJ(t, where, c.fields["update"]), filters)
				if err == nil {
					got, modified, err = u.Apply(doc, pos, insert, testNow)
				}
				if !identical(before, doc) {
					t.Fatalf("Apply mutated its input: %s", fmtDoc(doc))
				}
			}
			if want, ok := c.fields["error"]; ok {
				code, msg, _ := strings.Cut(want, " ")
				wc, _ := strconv.Atoi(code)
				if err == nil {
					t.Fatalf("want error %s, got %s", want, fmtDoc(got))
				}
				me := mongoerr.From(err)
				if int(me.Code) != wc || (msg != "" && me.Msg != msg) {
					t.Fatalf("want error %d %q\n got error %d %q", wc, msg, me.Code, me.Msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			want := parseEJ(t, where, c.fields["want"]).(bson.D)
			if !identical(got, want) {
				t.Fatalf("\nwant %s\n got %s", ejson(want), ejson(got))
			}
			wantMod := !identical(doc, want)
			if s, ok := c.fields["modified"]; ok {
				wantMod = s == "true"
			}
			if _, isSeed := c.fields["seed"]; !isSeed && modified != wantMod {
				t.Fatalf("modified = %v, want %v", modified, wantMod)
			}
		})
	}
	t.Logf("%d datadriven cases", len(cases))
}

func ejson(d bson.D) string {
	b, err := bson.MarshalExtJSON(d, true, false)
	if err != nil {
		return fmtDoc(d)
	}
	return string(b)
}

// Go values built in code (untyped int constants, bson.M) behave like their
// BSON encodings.
func TestGoIntArguments(t *testing.T) {
	u, err := Compile(bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1 << 40}}}, {Key: "$set", Value: bson.M{"c": 2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, mod, err := u.Apply(bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: int32(1)}}, -1, false, testNow)
	if err != nil || !mod {
		t.Fatal(err, mod)
	}
	want := bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: int32(2)}, {Key: "b", Value: int64(1 << 40)}, {Key: "c", Value: int32(2)}}
	if !identical(got[1:], want[1:]) {
		t.Fatalf("got %s", fmtDoc(got))
	}
}

// A compiled update is immutable: applying it concurrently, and mutating the
// argument it was compiled from, change nothing.
func TestCompiledUpdateIsIndependent(t *testing.T) {
	arg := bson.D{{Key: "x", Value: bson.A{int32(1)}}}
	u, err := Compile(bson.D{{Key: "$set", Value: arg}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	arg[0].Value.(bson.A)[0] = "changed"
	done := make(chan bson.D)
	for range 4 {
		go func() {
			d, _, _ := u.Apply(bson.D{{Key: "_id", Value: int32(1)}}, -1, false, testNow)
			done <- d
		}()
	}
	for range 4 {
		d := <-done
		d[1].Value.(bson.A)[0] = "mutated" // results are not shared
	}
	d, _, _ := u.Apply(bson.D{{Key: "_id", Value: int32(1)}}, -1, false, testNow)
	if !identical(d, bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: bson.A{int32(1)}}}) {
		t.Fatalf("got %s", fmtDoc(d))
	}
}

func TestIsReplacement(t *testing.T) {
	for _, c := range []struct {
		u    any
		repl bool
	}{
		{bson.D{}, true},
		{bson.D{{Key: "a", Value: 1}}, true},
		{bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, false},
	} {
		u, err := Compile(c.u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u.IsReplacement() != c.repl {
			t.Fatalf("%v: IsReplacement = %v", c.u, u.IsReplacement())
		}
	}
	if _, err := Compile("x", nil); !mongoerr.Is(err, mongoerr.FailedToParse) {
		t.Fatalf("string update: %v", err)
	}
}

// PipelineCompiler, once the aggregation engine sets it, runs pipeline
// updates; _id stays immutable.
func TestPipelineHook(t *testing.T) {
	defer func() { PipelineCompiler = nil }()
	PipelineCompiler = func(p bson.A) (func(bson.D) (bson.D, error), error) {
		return func(d bson.D) (bson.D, error) {
			return append(d, bson.E{Key: "n", Value: int32(len(p))}), nil
		}, nil
	}
	u, err := Compile(bson.A{bson.D{{Key: "$set", Value: bson.D{}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !u.IsPipeline() || u.IsReplacement() {
		t.Fatal("kind")
	}
	got, mod, err := u.Apply(bson.D{{Key: "_id", Value: int32(1)}}, -1, false, testNow)
	if err != nil || !mod || !identical(got, bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: int32(1)}}) {
		t.Fatal(got, mod, err)
	}
	PipelineCompiler = func(bson.A) (func(bson.D) (bson.D, error), error) {
		return func(bson.D) (bson.D, error) { return bson.D{{Key: "_id", Value: int32(2)}}, nil }, nil
	}
	u, _ = Compile(bson.A{}, nil)
	if _, _, err := u.Apply(bson.D{{Key: "_id", Value: int32(1)}}, -1, false, testNow); !mongoerr.Is(err, mongoerr.ImmutableField) {
		t.Fatalf("changing _id: %v", err)
	}
}

// A replacement-style upsert takes only _id from the filter, and only _id
// equalities can conflict (jstests/core/upsert_fields.js).
func TestReplacementUpsertSeed(t *testing.T) {
	repl, _ := Compile(bson.D{{Key: "a", Value: int32(1)}}, nil)
	ops, _ := Compile(bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: int32(1)}}}}, nil)
	for _, c := range []struct {
		filter bson.D
		repl   string // want, or "error <code>"
		ops    string
	}{
		{bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: int32(2)}}, `{"_id": 1}`, `{"_id": 1, "x": 2}`},
		{bson.D{{Key: "x", Value: int32(1)}, {Key: "x.x", Value: int32(1)}}, `{}`, "error 54"},
		{bson.D{{Key: "_id.x", Value: int32(1)}, {Key: "_id.y", Value: int32(2)}}, "error 55", `{"_id": {"x": 1, "y": 2}}`},
		{bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(1)}}}}}, "error 54", "error 54"},
	} {
		for _, k := range []struct {
			u    *Update
			want string
		}{{repl, c.repl}, {ops, c.ops}} {
			got, err := k.u.UpsertSeed(c.filter)
			if code, isErr := strings.CutPrefix(k.want, "error "); isErr {
				if me := mongoerr.From(err); err == nil || strconv.Itoa(int(me.Code)) != code {
					t.Errorf("%s (replacement %v): want error %s, got %v %v", fmtDoc(c.filter), k.u.IsReplacement(), code, got, err)
				}
				continue
			}
			want := parseEJ(t, "seed", k.want).(bson.D)
			if err != nil || !identical(got, want) {
				t.Errorf("%s (replacement %v): want %s, got %s %v", fmtDoc(c.filter), k.u.IsReplacement(), k.want, fmtDoc(got), err)
			}
		}
	}
}

func TestUsesPositional(t *testing.T) {
	for _, c := range []struct {
		u    bson.D
		want bool
	}{
		{bson.D{{Key: "$set", Value: bson.D{{Key: "a.$", Value: 1}}}}, true},
		{bson.D{{Key: "$set", Value: bson.D{{Key: "a.$[]", Value: 1}}}}, false},
		{bson.D{{Key: "$inc", Value: bson.D{{Key: "a.0", Value: 1}}}, {Key: "$unset", Value: bson.D{{Key: "b.$.c", Value: 1}}}}, true},
		{bson.D{{Key: "a", Value: "$"}}, false},
	} {
		u, err := Compile(c.u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u.UsesPositional() != c.want {
			t.Errorf("%s: UsesPositional = %v", fmtDoc(c.u), !c.want)
		}
	}
}
