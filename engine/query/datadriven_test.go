package query

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// The testdata files are line-oriented; every value is relaxed extended JSON
// (bson.UnmarshalExtJSON). Blank lines and lines starting with # are
// ignored. Directives:
//
//	match.txt
//	  f <filter>            compile the filter used by the following lines
//	  + <doc>               the filter matches doc
//	  - <doc>               the filter does not match doc
//	  @<n> <doc>            the filter matches doc with positional index n
//	  ! <code> <filter>     compiling filter fails with code
//
//	projection.txt
//	  q <filter>            query whose matcher is passed to Apply (positional $)
//	  p <spec>              compile the projection (clears q unless given after)
//	  > <doc> => <out>      applying the projection to doc gives out
//	  ! <code> <spec>       compiling the projection fails with code
//	  x <code> <doc>        applying the projection to doc fails with code
//
//	sort.txt
//	  s <spec>              compile the sort
//	  d <docs array>        documents to sort
//	  = <_id array>         stable sort of the documents gives this _id order
//	  ! <code> <spec>       compiling the sort fails with code

type ddLine struct {
	file string
	no   int
	dir  string
	rest string
}

func (l ddLine) String() string {
	return l.file + ":" + strconv.Itoa(l.no) + ": " + l.dir + " " + l.rest
}

func readDD(t *testing.T, name string) []ddLine {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ddLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	no := 0
	for sc.Scan() {
		no++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		dir, rest, _ := strings.Cut(s, " ")
		out = append(out, ddLine{file: name, no: no, dir: dir, rest: strings.TrimSpace(rest)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func parseDoc(t *testing.T, l ddLine, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("%s: bad extended JSON %q: %v", l, s, err)
	}
	return d
}

func parseArr(t *testing.T, l ddLine, s string) bson.A {
	t.Helper()
	d := parseDoc(t, l, `{"v": `+s+`}`)
	a, ok := d[0].Value.(bson.A)
	if !ok {
		t.Fatalf("%s: not an array: %s", l, s)
	}
	return a
}

// cutCode splits "<code> <rest>".
func cutCode(t *testing.T, l ddLine) (int32, string) {
	t.Helper()
	c, rest, _ := strings.Cut(l.rest, " ")
	n, err := strconv.Atoi(c)
	if err != nil {
		t.Fatalf("%s: bad error code %q", l, c)
	}
	return int32(n), strings.TrimSpace(rest)
}

func checkCode(t *testing.T, l ddLine, err error, code int32) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: expected error code %d, got success", l, code)
		return
	}
	var me *mongoerr.Error
	if !errors.As(err, &me) {
		t.Errorf("%s: expected *mongoerr.Error code %d, got %T %v", l, code, err, err)
		return
	}
	if me.Code != code {
		t.Errorf("%s: expected error code %d, got %d (%s)", l, code, me.Code, me.Msg)
	}
}

func extJSON(v any) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestMatchDatadriven(t *testing.T) {
	var m *Matcher
	var cur ddLine
	cases := 0
	for _, l := range readDD(t, "match.txt") {
		switch {
		case l.dir == "f":
			cur = l
			var err error
			m, err = Compile(parseDoc(t, l, l.rest))
			if err != nil {
				t.Errorf("%s: compile: %v", l, err)
				m = nil
			}
		case l.dir == "+" || l.dir == "-":
			cases++
			if m == nil {
				continue
			}
			doc := parseDoc(t, l, l.rest)
			got := m.Matches(doc)
			if got != (l.dir == "+") {
				t.Errorf("%s: filter %s: Matches = %v", l, cur.rest, got)
			}
			// MatchesPos must agree with Matches.
			if ok, _ := m.MatchesPos(doc); ok != got {
				t.Errorf("%s: MatchesPos disagrees with Matches", l)
			}
		case strings.HasPrefix(l.dir, "@"):
			cases++
			if m == nil {
				continue
			}
			want, err := strconv.Atoi(l.dir[1:])
			if err != nil {
				t.Fatalf("%s: bad position", l)
			}
			ok, pos := m.MatchesPos(parseDoc(t, l, l.rest))
			if !ok || pos != want {
				t.Errorf("%s: filter %s: MatchesPos = %v, %d; want true, %d", l, cur.rest, ok, pos, want)
			}
		case l.dir == "!":
			cases++
			code, rest := cutCode(t, l)
			_, err := Compile(parseDoc(t, l, rest))
			checkCode(t, l, err, code)
		default:
			t.Fatalf("%s: unknown directive", l)
		}
	}
	t.Logf("%d match cases", cases)
}

func TestProjectionDatadriven(t *testing.T) {
	var (
		p     *Projection
		m     *Matcher
		cur   ddLine
		cases int
	)
	for _, l := range readDD(t, "projection.txt") {
		switch l.dir {
		case "q":
			var err error
			m, err = Compile(parseDoc(t, l, l.rest))
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
		case "p":
			cur = l
			var err error
			p, err = CompileProjection(parseDoc(t, l, l.rest))
			if err != nil {
				t.Errorf("%s: compile: %v", l, err)
				p = nil
			}
		case ">":
			cases++
			if p == nil {
				continue
			}
			in, out, ok := strings.Cut(l.rest, "=>")
			if !ok {
				t.Fatalf("%s: missing =>", l)
			}
			doc := parseDoc(t, l, strings.TrimSpace(in))
			want := parseDoc(t, l, strings.TrimSpace(out))
			orig := bsonx.CloneD(doc)
			got, err := p.Apply(doc, m)
			if err != nil {
				t.Errorf("%s: projection %s: %v", l, cur.rest, err)
				continue
			}
			if extJSON(got) != extJSON(want) {
				t.Errorf("%s: projection %s:\n got %s\nwant %s", l, cur.rest, extJSON(got), extJSON(want))
			}
			if extJSON(orig) != extJSON(doc) {
				t.Errorf("%s: Apply modified its input", l)
			}
		case "!":
			cases++
			code, rest := cutCode(t, l)
			_, err := CompileProjection(parseDoc(t, l, rest))
			checkCode(t, l, err, code)
		case "x":
			cases++
			code, rest := cutCode(t, l)
			if p == nil {
				continue
			}
			_, err := p.Apply(parseDoc(t, l, rest), m)
			checkCode(t, l, err, code)
		case "qclear":
			m = nil
		default:
			t.Fatalf("%s: unknown directive", l)
		}
	}
	t.Logf("%d projection cases", cases)
}

func TestSortDatadriven(t *testing.T) {
	var (
		s     *Sort
		docs  []bson.D
		cur   ddLine
		cases int
	)
	for _, l := range readDD(t, "sort.txt") {
		switch l.dir {
		case "s":
			cur = l
			var err error
			s, err = CompileSort(parseDoc(t, l, l.rest))
			if err != nil {
				t.Errorf("%s: compile: %v", l, err)
				s = nil
			}
		case "d":
			docs = docs[:0]
			for _, v := range parseArr(t, l, l.rest) {
				docs = append(docs, v.(bson.D))
			}
		case "=":
			cases++
			if s == nil {
				continue
			}
			want := extJSON(parseArr(t, l, l.rest))
			// Full sort through TopK with no bound, and through Compare.
			tk := NewTopK(s, 0, 0)
			for _, d := range docs {
				if err := tk.Push(d); err != nil {
					t.Fatal(err)
				}
			}
			if got := extJSON(ids(tk.Sorted())); got != want {
				t.Errorf("%s: sort %s: got %s want %s", l, cur.rest, got, want)
			}
			byCompare := append([]bson.D(nil), docs...)
			stableSort(byCompare, s.Compare)
			if got := extJSON(ids(byCompare)); got != want {
				t.Errorf("%s: sort %s via Compare: got %s want %s", l, cur.rest, got, want)
			}
			// Bounded top-k agrees with the prefix of the full order.
			for k := 1; k <= len(docs); k++ {
				tk := NewTopK(s, k, 0)
				for _, d := range docs {
					if err := tk.Push(d); err != nil {
						t.Fatal(err)
					}
				}
				full := parseArr(t, l, l.rest)
				if got, w := extJSON(ids(tk.Sorted())), extJSON(full[:k]); got != w {
					t.Errorf("%s: sort %s top-%d: got %s want %s", l, cur.rest, k, got, w)
				}
			}
		case "!":
			cases++
			code, rest := cutCode(t, l)
			_, err := CompileSort(parseDoc(t, l, rest))
			checkCode(t, l, err, code)
		default:
			t.Fatalf("%s: unknown directive", l)
		}
	}
	t.Logf("%d sort cases", cases)
}

func ids(docs []bson.D) bson.A {
	out := bson.A{}
	for _, d := range docs {
		v, _ := bsonx.Get(d, "_id")
		out = append(out, v)
	}
	return out
}

func stableSort(docs []bson.D, cmp func(a, b bson.D) int) {
	// insertion sort: stable and obviously correct, fine for test sizes
	for i := 1; i < len(docs); i++ {
		for j := i; j > 0 && cmp(docs[j-1], docs[j]) > 0; j-- {
			docs[j-1], docs[j] = docs[j], docs[j-1]
		}
	}
}
