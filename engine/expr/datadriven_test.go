package expr

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Test files in testdata/*.txt hold one case per line:
//
//	<expression as relaxed extended JSON> => <expected>
//
// where <expected> is an extended-JSON value (types are asserted exactly:
// 1 is int32, {"$numberLong":"1"} int64, 1.0 double...), `missing`,
// `type <name>` (only the $type alias is checked), or
// `error <code> [message substring]`. Directives:
//
//	doc <json document>   — $$ROOT for the following cases (default {})
//	vars <json document>  — pipeline variables for the following cases
//	compile-error ...     — (via `=> error`) errors may come from Compile or Eval
//
// Blank lines and lines starting with # are ignored.

func parseValue(t *testing.T, s string) any {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+s+`}`), false, &d); err != nil {
		t.Fatalf("bad json %q: %v", s, err)
	}
	return d[0].Value
}

// SameValue reports deep equality including exact BSON types.
func SameValue(a, b any) bool {
	switch x := a.(type) {
	case bson.D:
		y, ok := b.(bson.D)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !SameValue(x[i].Value, y[i].Value) {
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
			if !SameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y)) && math.Signbit(x) == math.Signbit(y)
	case bson.Decimal128:
		y, ok := b.(bson.Decimal128)
		return ok && x.String() == y.String()
	case bson.Binary:
		y, ok := b.(bson.Binary)
		return ok && x.Subtype == y.Subtype && string(x.Data) == string(y.Data)
	}
	if bsonx.IsMissing(a) || bsonx.IsMissing(b) {
		return bsonx.IsMissing(a) && bsonx.IsMissing(b)
	}
	return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) && bsonx.Compare(a, b) == 0
}

func show(v any) string {
	if bsonx.IsMissing(v) {
		return "missing"
	}
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), `{"v":`), "}")
}

func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	total := 0
	Rand = func() float64 { return 0.5 }
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			var root bson.D = bson.D{}
			var vars map[string]any
			ln := 0
			for sc.Scan() {
				ln++
				line := strings.TrimSpace(sc.Text())
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if rest, ok := strings.CutPrefix(line, "doc "); ok {
					root = parseValue(t, rest).(bson.D)
					continue
				}
				if rest, ok := strings.CutPrefix(line, "vars "); ok {
					vars = map[string]any{}
					for _, e := range parseValue(t, rest).(bson.D) {
						vars[e.Key] = e.Value
					}
					continue
				}
				i := strings.LastIndex(line, " => ")
				if i < 0 {
					t.Fatalf("%s:%d: no =>", f, ln)
				}
				total++
				lhs, want := line[:i], strings.TrimSpace(line[i+4:])
				var got any
				e, err := Compile(parseValue(t, lhs))
				if err == nil {
					got, err = e.Eval(&Env{Root: root, Vars: vars})
				}
				where := fmt.Sprintf("%s:%d: %s", f, ln, lhs)
				if rest, ok := strings.CutPrefix(want, "error "); ok {
					codeS, msg, _ := strings.Cut(rest, " ")
					code, _ := strconv.Atoi(codeS)
					if err == nil {
						t.Errorf("%s: want error %d, got %s", where, code, show(got))
						continue
					}
					me := mongoerr.From(err)
					if me.Code != int32(code) || !strings.Contains(me.Msg, msg) {
						t.Errorf("%s: want error %d %q, got %d %q", where, code, msg, me.Code, me.Msg)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: unexpected error %v", where, err)
					continue
				}
				if tn, ok := strings.CutPrefix(want, "type "); ok {
					if bsonx.TypeName(got) != tn {
						t.Errorf("%s: want type %s, got %s", where, tn, show(got))
					}
					continue
				}
				var exp any = bsonx.Missing
				if want != "missing" {
					exp = parseValue(t, want)
				}
				if !SameValue(got, exp) {
					t.Errorf("%s:\n  got  %s\n  want %s", where, show(got), show(exp))
				}
			}
		})
	}
	t.Logf("%d expression cases", total)
}
