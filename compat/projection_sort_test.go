package compat

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func projDoc() bson.D {
	return bson.D{
		{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "two"},
		{Key: "o", Value: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 2}}},
		{Key: "tags", Value: bson.A{"t1", "t2", "t3"}},
		{Key: "arr", Value: bson.A{bson.D{{Key: "k", Value: 1}, {Key: "v", Value: "p"}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: "q"}}}},
	}
}

func TestProjection_Forms(t *testing.T) {
	e := newEnv(t)
	e.insert("p", projDoc())
	one := func(filter, proj bson.D) bson.Raw {
		t.Helper()
		raw, err := e.coll("p").FindOne(e.ctx, filter, options.FindOne().SetProjection(proj)).Raw()
		noErr(t, err, "findOne with projection "+ejson(proj))
		return raw
	}
	// Inclusion keeps document order, not projection order, and _id.
	docEq(t, one(bson.D{}, bson.D{{Key: "b", Value: 1}, {Key: "a", Value: 1}}),
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "two"}})
	docEq(t, one(bson.D{}, bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 0}}), bson.D{{Key: "a", Value: 1}})
	docEq(t, one(bson.D{}, bson.D{{Key: "o", Value: 0}, {Key: "tags", Value: 0}, {Key: "arr", Value: 0}}),
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "two"}})
	docEq(t, one(bson.D{}, bson.D{{Key: "o.y", Value: 1}}),
		bson.D{{Key: "_id", Value: 1}, {Key: "o", Value: bson.D{{Key: "y", Value: 2}}}})
	docEq(t, one(bson.D{}, bson.D{{Key: "arr.v", Value: 1}, {Key: "_id", Value: 0}}),
		bson.D{{Key: "arr", Value: bson.A{bson.D{{Key: "v", Value: "p"}}, bson.D{{Key: "v", Value: "q"}}}}})
	docEq(t, one(bson.D{}, bson.D{{Key: "tags", Value: bson.D{{Key: "$slice", Value: 2}}}, {Key: "_id", Value: 0}, {Key: "a", Value: 1}}),
		bson.D{{Key: "a", Value: 1}, {Key: "tags", Value: bson.A{"t1", "t2"}}})
	docEq(t, one(bson.D{}, bson.D{{Key: "tags", Value: bson.D{{Key: "$slice", Value: -1}}}, {Key: "_id", Value: 0}, {Key: "a", Value: 1}}),
		bson.D{{Key: "a", Value: 1}, {Key: "tags", Value: bson.A{"t3"}}})
	docEq(t, one(bson.D{}, bson.D{{Key: "arr", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "k", Value: 2}}}}}}),
		bson.D{{Key: "_id", Value: 1}, {Key: "arr", Value: bson.A{bson.D{{Key: "k", Value: 2}, {Key: "v", Value: "q"}}}}})
	docEq(t, one(bson.D{{Key: "arr.k", Value: 2}}, bson.D{{Key: "arr.$", Value: 1}}),
		bson.D{{Key: "_id", Value: 1}, {Key: "arr", Value: bson.A{bson.D{{Key: "k", Value: 2}, {Key: "v", Value: "q"}}}}})
	// Computed field (4.4+).
	docEq(t, one(bson.D{}, bson.D{{Key: "_id", Value: 0}, {Key: "sum", Value: bson.D{{Key: "$add", Value: bson.A{"$a", "$o.y"}}}}}),
		bson.D{{Key: "sum", Value: 3}})
}

func TestProjection_MixedInclusionExclusionRefused(t *testing.T) {
	e := newEnv(t)
	e.insert("p", projDoc())
	_, err := e.coll("p").Find(e.ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0}}))
	wantCode(t, err, 31254, "Location31254")
	_, err = e.coll("p").Find(e.ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "a", Value: 0}, {Key: "b", Value: 1}}))
	wantCode(t, err, 31253, "Location31253")
}

func TestSort_TypeBracketOrder(t *testing.T) {
	e := newEnv(t)
	vals := []any{ // in MongoDB's ascending comparison order
		bson.MinKey{}, nil, int32(1), 2.5, int64(3), "a", "b",
		bson.D{{Key: "k", Value: 1}}, bson.Binary{Subtype: 0, Data: []byte{1}},
		bson.ObjectID{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, false, true,
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), bson.Timestamp{T: 1, I: 1},
		bson.Regex{Pattern: "x"}, bson.MaxKey{},
	}
	// Insert in a scrambled order.
	order := []int{7, 3, 12, 0, 15, 9, 1, 14, 5, 11, 2, 13, 8, 4, 10, 6}
	for _, i := range order {
		e.insert("s", bson.D{{Key: "_id", Value: i}, {Key: "v", Value: vals[i]}})
	}
	got := func(dir int) []string {
		var ids []string
		for _, d := range e.find("s", bson.D{}, options.Find().SetSort(bson.D{{Key: "v", Value: dir}})) {
			ids = append(ids, d.Lookup("_id").String())
		}
		return ids
	}
	asc := idList(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	strsEq(t, "ascending", got(1), asc)
	desc := idList(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
	strsEq(t, "descending", got(-1), desc)
}

func TestSort_ArraysUseMinAscendingMaxDescending(t *testing.T) {
	e := newEnv(t)
	e.insert("s",
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: bson.A{5, 1}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 3}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: bson.A{2, 9}}},
	)
	var got []string
	for _, d := range e.find("s", bson.D{}, options.Find().SetSort(bson.D{{Key: "v", Value: 1}})) {
		got = append(got, d.Lookup("_id").String())
	}
	strsEq(t, "ascending uses the smallest element", got, idList(1, 3, 2))
	got = nil
	for _, d := range e.find("s", bson.D{}, options.Find().SetSort(bson.D{{Key: "v", Value: -1}})) {
		got = append(got, d.Lookup("_id").String())
	}
	strsEq(t, "descending uses the largest element", got, idList(3, 1, 2))
}

func TestSort_CompoundAndDotted(t *testing.T) {
	e := newEnv(t)
	e.insert("s",
		bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: "b"}, {Key: "o", Value: bson.D{{Key: "n", Value: 2}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: "a"}, {Key: "o", Value: bson.D{{Key: "n", Value: 2}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "g", Value: "b"}, {Key: "o", Value: bson.D{{Key: "n", Value: 1}}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "g", Value: "a"}, {Key: "o", Value: bson.D{{Key: "n", Value: 7}}}},
	)
	var got []string
	for _, d := range e.find("s", bson.D{}, options.Find().SetSort(bson.D{{Key: "g", Value: 1}, {Key: "o.n", Value: -1}})) {
		got = append(got, d.Lookup("_id").String())
	}
	strsEq(t, "g asc, o.n desc", got, idList(4, 2, 1, 3))
}
