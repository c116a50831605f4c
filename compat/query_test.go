package compat

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// queryData is a small collection that exercises type brackets, arrays,
// embedded documents and missing fields.
func queryData(e *env) {
	e.insert("q",
		bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}, {Key: "s", Value: "apple"}, {Key: "tags", Value: bson.A{"red", "fruit"}}, {Key: "o", Value: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: "a"}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: int64(2)}, {Key: "s", Value: "banana"}, {Key: "tags", Value: bson.A{"yellow", "fruit"}}, {Key: "o", Value: bson.D{{Key: "x", Value: 2}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 3.5}, {Key: "s", Value: "cherry"}, {Key: "tags", Value: bson.A{}}, {Key: "arr", Value: bson.A{bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 10}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 20}}}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: "4"}, {Key: "s", Value: nil}, {Key: "arr", Value: bson.A{bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 20}}}}},
		bson.D{{Key: "_id", Value: 5}, {Key: "n", Value: bson.A{1, 5, 9}}, {Key: "d", Value: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}},
		bson.D{{Key: "_id", Value: 6}},
	)
}

func TestQuery_Operators(t *testing.T) {
	e := newEnv(t)
	queryData(e)
	cases := []struct {
		name   string
		filter bson.D
		want   []int
	}{
		{"equality number across types", bson.D{{Key: "n", Value: 2.0}}, []int{2}},
		{"equality matches array element", bson.D{{Key: "n", Value: 5}}, []int{5}},
		{"equality array element or scalar", bson.D{{Key: "n", Value: 1}}, []int{1, 5}},
		{"string is not a number", bson.D{{Key: "n", Value: 4}}, nil},
		{"$gt stays in type bracket", bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 2}}}}, []int{3, 5}},
		{"$gte $lt: array elements may satisfy each bound separately", bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 2}, {Key: "$lt", Value: 4}}}}, []int{2, 3, 5}},
		{"$ne includes missing", bson.D{{Key: "n", Value: bson.D{{Key: "$ne", Value: 1}}}}, []int{2, 3, 4, 6}},
		{"$in", bson.D{{Key: "s", Value: bson.D{{Key: "$in", Value: bson.A{"apple", "cherry", "zzz"}}}}}, []int{1, 3}},
		{"$nin", bson.D{{Key: "s", Value: bson.D{{Key: "$nin", Value: bson.A{"apple", nil}}}}}, []int{2, 3}},
		{"null matches null and missing", bson.D{{Key: "s", Value: nil}}, []int{4, 5, 6}},
		{"$exists true", bson.D{{Key: "s", Value: bson.D{{Key: "$exists", Value: true}}}}, []int{1, 2, 3, 4}},
		{"$exists false", bson.D{{Key: "tags", Value: bson.D{{Key: "$exists", Value: false}}}}, []int{4, 5, 6}},
		{"$type string", bson.D{{Key: "n", Value: bson.D{{Key: "$type", Value: "string"}}}}, []int{4}},
		{"$type number alias", bson.D{{Key: "n", Value: bson.D{{Key: "$type", Value: "number"}}}}, []int{1, 2, 3, 5}},
		{"$type long by code", bson.D{{Key: "n", Value: bson.D{{Key: "$type", Value: 18}}}}, []int{2}},
		{"dotted path", bson.D{{Key: "o.x", Value: 2}}, []int{2}},
		{"embedded document equality is exact", bson.D{{Key: "o", Value: bson.D{{Key: "x", Value: 2}}}}, []int{2}},
		{"embedded document field order matters", bson.D{{Key: "o", Value: bson.D{{Key: "y", Value: "a"}, {Key: "x", Value: 1}}}}, nil},
		{"path through array of documents", bson.D{{Key: "arr.v", Value: 20}}, []int{3, 4}},
		{"$elemMatch", bson.D{{Key: "arr", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 20}}}}}}, []int{4}},
		{"no $elemMatch: conditions across elements", bson.D{{Key: "arr.k", Value: 1}, {Key: "arr.v", Value: 20}}, []int{3, 4}},
		{"$size", bson.D{{Key: "tags", Value: bson.D{{Key: "$size", Value: 2}}}}, []int{1, 2}},
		{"$size 0", bson.D{{Key: "tags", Value: bson.D{{Key: "$size", Value: 0}}}}, []int{3}},
		{"$all", bson.D{{Key: "tags", Value: bson.D{{Key: "$all", Value: bson.A{"fruit", "red"}}}}}, []int{1}},
		{"array index path", bson.D{{Key: "tags.0", Value: "yellow"}}, []int{2}},
		{"$and", bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "tags", Value: "fruit"}}, bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 1}}}}}}}, []int{2}},
		{"$or", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "s", Value: "cherry"}}}}}, []int{1, 3}},
		{"$nor", bson.D{{Key: "$nor", Value: bson.A{bson.D{{Key: "tags", Value: "fruit"}}, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 4}}}}}}}, []int{3, 4}},
		{"$not", bson.D{{Key: "n", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: 2}}}}}}, []int{1, 2, 4, 6}},
		{"$regex", bson.D{{Key: "s", Value: bson.D{{Key: "$regex", Value: "^b"}}}}, []int{2}},
		{"$regex options i", bson.D{{Key: "s", Value: bson.D{{Key: "$regex", Value: "APPLE"}, {Key: "$options", Value: "i"}}}}, []int{1}},
		{"regex literal", bson.D{{Key: "s", Value: bson.Regex{Pattern: "rr", Options: ""}}}, []int{3}},
		{"$mod", bson.D{{Key: "_id", Value: bson.D{{Key: "$mod", Value: bson.A{2, 0}}}}}, []int{2, 4, 6}},
		{"date range", bson.D{{Key: "d", Value: bson.D{{Key: "$gte", Value: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}}}}, []int{5}},
		{"$expr", bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$o.x", 1}}}}}, []int{1}},
	}
	for _, c := range cases {
		docs := e.find("q", c.filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		got := []string{}
		for _, d := range docs {
			got = append(got, d.Lookup("_id").String())
		}
		want := idList(c.want...)
		if len(got) != len(want) || ejson(got) != ejson(want) {
			t.Errorf("%s: filter %s matched %v, want %v", c.name, ejson(c.filter), got, want)
		}
	}
}

func TestQuery_BadOperatorIsBadValue(t *testing.T) {
	e := newEnv(t)
	queryData(e)
	_, err := e.coll("q").Find(e.ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$noSuchOp", Value: 1}}}})
	wantCode(t, err, 2, "BadValue")
	_, err = e.coll("q").Find(e.ctx, bson.D{{Key: "$and", Value: bson.A{}}})
	wantCode(t, err, 2, "BadValue")
}

func TestQuery_CountWithSkipLimit(t *testing.T) {
	e := newEnv(t)
	queryData(e)
	n, err := e.coll("q").CountDocuments(e.ctx, bson.D{}, options.Count().SetSkip(2).SetLimit(3))
	noErr(t, err, "countDocuments")
	eq(t, "count skip 2 limit 3", n, int64(3))
	r := e.run(bson.D{{Key: "count", Value: "q"}, {Key: "query", Value: bson.D{{Key: "tags", Value: "fruit"}}}})
	valEq(t, r, "n", int32(2))
	r = e.run(bson.D{{Key: "count", Value: "missing"}})
	valEq(t, r, "n", int32(0))
}
