package agg

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzPipeline runs arbitrary pipelines over a small collection: any may
// fail, none may panic or hang.
func FuzzPipeline(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, file := range files {
		fh, err := os.Open(file)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "pipeline "); ok {
				if _, pj, ok := strings.Cut(rest, " "); ok {
					f.Add(pj)
				}
			}
		}
		fh.Close()
	}
	docs := []bson.D{
		{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}, {Key: "arr", Value: bson.A{int32(1), bson.D{{Key: "x", Value: "y"}}}}},
		{{Key: "_id", Value: int32(2)}, {Key: "a", Value: "s"}, {Key: "o", Value: bson.D{{Key: "k", Value: 2.5}}}},
		{{Key: "_id", Value: int32(3)}, {Key: "d", Value: bson.DateTime(0)}, {Key: "n", Value: nil}},
	}
	f.Fuzz(func(t *testing.T, js string) {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(`{"v": `+js+`}`), false, &d); err != nil || len(d) != 1 {
			return
		}
		pipe, ok := d[0].Value.(bson.A)
		if !ok {
			return
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				panic("slow pipeline: " + js)
			}
		}()
		p, err := Parse(pipe, Options{DB: "test", Coll: "c", MemoryLimit: 1 << 20, TempDir: t.TempDir(), AllowDiskUse: true})
		if err != nil {
			return
		}
		env := newFakeEnv()
		env.colls["test.c"] = docs
		env.colls["test.inventory"] = docs
		in, _ := env.Scan(context.Background(), "test", "c", nil)
		it, err := p.Run(context.Background(), env, in)
		if err != nil {
			return
		}
		_, _ = Collect(context.Background(), it)
	})
}
