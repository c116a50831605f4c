package engine_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

var fuzzOps = []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$and", "$or", "$nor", "$not",
	"$exists", "$type", "$regex", "$options", "$mod", "$all", "$elemMatch", "$size", "$bitsAllSet", "$expr",
	"$set", "$unset", "$inc", "$mul", "$min", "$max", "$rename", "$push", "$each", "$slice", "$sort", "$position",
	"$addToSet", "$pop", "$pull", "$pullAll", "$bit", "$currentDate", "$setOnInsert", "$add", "$concat", "$cond",
	"$ifNull", "$map", "$filter", "$reduce", "$size", "$arrayElemAt", "$toInt", "$convert", "$dateToString",
	"$match", "$project", "$group", "$sum", "$avg", "$unwind", "$lookup", "$facet", "$bucket", "$sortByCount",
	"$limit", "$skip", "$count", "$replaceRoot", "$addFields", "$out", "$merge", "$literal", "$let", "$switch"}

var fuzzFields = []string{"a", "b", "a.b", "a.0", "_id", "ttl", "_ts", "x.$", "a.$[]", "", "$", "a..b"}

func fuzzValue(r *rand.Rand, depth int) any {
	if depth > 4 {
		return int32(r.IntN(3))
	}
	switch r.IntN(16) {
	case 0:
		return int32(r.IntN(5) - 1)
	case 1:
		return int64(r.IntN(1 << 20))
	case 2:
		return []float64{0.5, -1, math.NaN(), math.Inf(1), 1e300}[r.IntN(5)]
	case 3:
		return []string{"", "a", "$a", "$$ROOT", "x.y", "$$NOW", "(a|"}[r.IntN(7)]
	case 4:
		return nil
	case 5:
		return r.IntN(2) == 0
	case 6:
		a := bson.A{}
		for i := r.IntN(4); i > 0; i-- {
			a = append(a, fuzzValue(r, depth+1))
		}
		return a
	case 7:
		return bson.NewDecimal128(uint64(r.Int64()), uint64(r.Int64()))
	case 8:
		return bson.DateTime(r.Int64N(1 << 42))
	case 9:
		return bson.Regex{Pattern: "^a", Options: "i"}
	case 10:
		return bson.MinKey{}
	case 11:
		return bson.Binary{Subtype: 0, Data: []byte{1, 2}}
	case 12, 13:
		return bson.D{{Key: fuzzOps[r.IntN(len(fuzzOps))], Value: fuzzValue(r, depth+1)}}
	}
	d := bson.D{}
	for i := r.IntN(3); i > 0; i-- {
		d = append(d, bson.E{Key: fuzzFields[r.IntN(len(fuzzFields))], Value: fuzzValue(r, depth+1)})
	}
	return d
}

func fuzzDoc(r *rand.Rand) bson.D {
	d := bson.D{}
	for i := r.IntN(3) + 1; i > 0; i-- {
		k := fuzzFields[r.IntN(len(fuzzFields))]
		if r.IntN(2) == 0 {
			k = fuzzOps[r.IntN(len(fuzzOps))]
		}
		d = append(d, bson.E{Key: k, Value: fuzzValue(r, 1)})
	}
	return d
}

func fuzzCommand(r *rand.Rand) bson.D {
	switch r.IntN(11) {
	case 0:
		return bson.D{{Key: "find", Value: "f"}, {Key: "filter", Value: fuzzDoc(r)}, {Key: "projection", Value: fuzzDoc(r)}, {Key: "sort", Value: fuzzDoc(r)}}
	case 1:
		return bson.D{{Key: "aggregate", Value: "f"}, {Key: "pipeline", Value: bson.A{fuzzDoc(r), fuzzDoc(r)}}, {Key: "cursor", Value: bson.D{}}}
	case 2:
		return bson.D{{Key: "update", Value: "f"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: fuzzDoc(r)}, {Key: "u", Value: fuzzDoc(r)}, {Key: "upsert", Value: r.IntN(2) == 0}}}}}
	case 3:
		return bson.D{{Key: "insert", Value: "f"}, {Key: "documents", Value: bson.A{fuzzDoc(r), fuzzDoc(r)}}}
	case 4:
		return bson.D{{Key: "delete", Value: "f"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: fuzzDoc(r)}, {Key: "limit", Value: int32(r.IntN(2))}}}}}
	case 5:
		return bson.D{{Key: "findAndModify", Value: "f"}, {Key: "query", Value: fuzzDoc(r)}, {Key: "update", Value: fuzzDoc(r)}, {Key: "sort", Value: fuzzDoc(r)}, {Key: "new", Value: true}}
	case 6:
		return bson.D{{Key: "count", Value: "f"}, {Key: "query", Value: fuzzDoc(r)}}
	case 7:
		return bson.D{{Key: "distinct", Value: "f"}, {Key: "key", Value: fuzzFields[r.IntN(len(fuzzFields))]}, {Key: "query", Value: fuzzDoc(r)}}
	case 8:
		return bson.D{{Key: "createIndexes", Value: "f"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: fuzzDoc(r)}, {Key: "name", Value: fmt.Sprint("i", r.IntN(5))}, {Key: fuzzFields[r.IntN(4)], Value: fuzzValue(r, 2)}}}}}
	case 9:
		return bson.D{{Key: "collMod", Value: "f"}, {Key: "defaultTimeToLive", Value: fuzzValue(r, 3)}}
	}
	return bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "f"}, {Key: "filter", Value: fuzzDoc(r)}}}, {Key: "verbosity", Value: "executionStats"}}
}

// TestRandomCommandsNeverInternalError sends thousands of random, mostly
// malformed commands. Each must succeed or fail with a MongoDB-shaped
// error of a specific code — never InternalError (an unclassified failure
// or a recovered panic) — and the server must keep answering.
func TestRandomCommandsNeverInternalError(t *testing.T) {
	ts := startServer(t)
	db := ts.db("fz")
	db.Collection("f").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2, bson.D{{Key: "b", Value: "x"}}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.D{{Key: "b", Value: 3}}}, {Key: "ttl", Value: 5}},
		bson.D{{Key: "_id", Value: 3}, {Key: "b", Value: nil}},
	})
	r := rand.New(rand.NewPCG(fuzzSeed, 7))
	n := 3000
	if testing.Short() {
		n = 600
	}
	codes := map[int32]int{}
	for i := 0; i < n; i++ {
		cmd := fuzzCommand(r)
		var reply bson.D
		err := db.RunCommand(ctx, cmd).Decode(&reply)
		if we, ok := m(reply)["writeErrors"].(bson.A); ok {
			for _, w := range we {
				code, _ := m(w)["code"].(int32)
				codes[code]++
				if code == 1 || code == 0 {
					t.Fatalf("command %v: internal write error %v", cmd, w)
				}
			}
		}
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			codes[ce.Code]++
		} else if err == nil {
			codes[-1]++
		}
		if errors.As(err, &ce) && (ce.Code == 1 || ce.Code == 0) {
			t.Fatalf("command %v: internal error %v", cmd, err)
		}
		if err != nil && !errors.As(err, &ce) {
			var we mongo.WriteException
			if !errors.As(err, &we) && err != mongo.ErrNoDocuments {
				t.Fatalf("command %v: %T %v", cmd, err, err)
			}
			for _, e := range we.WriteErrors {
				if e.Code == 1 || e.Code == 0 {
					t.Fatalf("command %v: internal write error %v", cmd, e)
				}
			}
		}
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("server no longer answers: %v", err)
	}
	if codes[-1] < n/20 || len(codes) < 10 {
		t.Fatalf("the random commands did not exercise enough paths: %v", codes)
	}
	t.Logf("outcomes by code (-1 = ok): %v", codes)
}

var fuzzSeed uint64 = 42
