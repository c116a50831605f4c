package expr

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzCompileEval feeds arbitrary extended-JSON expressions through Compile
// and Eval: any input may fail, but none may panic.
func FuzzCompileEval(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, file := range files {
		fh, err := os.Open(file)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.LastIndex(line, " => "); i > 0 {
				f.Add(line[:i])
			}
		}
		fh.Close()
	}
	root := bson.D{{Key: "a", Value: int32(1)}, {Key: "s", Value: "str"}, {Key: "arr", Value: bson.A{int32(1), "x", bson.D{{Key: "b", Value: 2.5}}}},
		{Key: "d", Value: bson.DateTime(1600000000000)}, {Key: "n", Value: nil}, {Key: "o", Value: bson.D{{Key: "k", Value: int64(3)}}}}
	f.Fuzz(func(t *testing.T, js string) {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(`{"v": `+js+`}`), false, &d); err != nil || len(d) != 1 {
			return
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				panic("slow expression: " + js)
			}
		}()
		e, err := Compile(d[0].Value)
		if err != nil {
			return
		}
		_, _ = e.Eval(&Env{Root: root, Vars: map[string]any{"x": int32(1)}})
	})
}
