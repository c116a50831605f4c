package agg

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// trackedSlice is an input whose documents can die (expire) later.
type trackedSlice struct {
	docs []bson.D
	dead map[int32]bool
	i    int
}

type fakeSource struct {
	in *trackedSlice
	id int32
}

func (f fakeSource) Live() bool { return !f.in.dead[f.id] }

func (t *trackedSlice) Next(ctx context.Context) (bson.D, bool, error) {
	if t.i >= len(t.docs) {
		return nil, false, nil
	}
	t.i++
	return t.docs[t.i-1], true, nil
}
func (t *trackedSlice) Close() {}
func (t *trackedSlice) Source() Source {
	return fakeSource{t, t.docs[t.i-1][0].Value.(int32)}
}

// $sort re-checks each buffered document's source before returning it, in
// memory, as top-k and after spilling to disk, and through a second $sort.
func TestSortDropsDocumentsWhoseSourceDied(t *testing.T) {
	for _, tc := range []struct {
		js   string
		opts Options
		want int // odd ids left after the first document
	}{
		{`[{"$addFields": {"x": 1}}, {"$sort": {"_id": -1}}]`, Options{}, 99},
		{`[{"$addFields": {"x": 1}}, {"$sort": {"_id": -1}}, {"$limit": 100}]`, Options{}, 49}, // ids 198..100
		{`[{"$addFields": {"x": 1}}, {"$sort": {"_id": -1}}]`, Options{AllowDiskUse: true, MemoryLimit: 5000, TempDir: t.TempDir()}, 99},
		{`[{"$sort": {"_id": 1}}, {"$unwind": "$a"}, {"$sort": {"_id": -1}}]`, Options{}, 99},
	} {
		in := &trackedSlice{dead: map[int32]bool{}}
		for i := int32(0); i < 200; i++ {
			in.docs = append(in.docs, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: bson.A{1}}, {Key: "pad", Value: strings.Repeat("x", 50)}})
		}
		p := mustParse(t, tc.js, tc.opts)
		it, err := p.Run(context.Background(), newFakeEnv(), in)
		if err != nil {
			t.Fatal(err)
		}
		d, ok, err := it.Next(context.Background())
		if err != nil || !ok || d[0].Value != int32(199) {
			t.Fatalf("%s: first %v %v %v", tc.js, d, ok, err)
		}
		for i := int32(0); i < 200; i += 2 {
			in.dead[i] = true // the even ids expire now
		}
		out, err := Collect(context.Background(), it)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != tc.want {
			t.Fatalf("%s: %d documents after the even ids died, want %d", tc.js, len(out), tc.want)
		}
		for _, d := range out {
			if id := d[0].Value.(int32); id%2 == 0 {
				t.Fatalf("%s: returned dead document %d", tc.js, id)
			}
		}
	}
}
