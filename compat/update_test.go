package compat

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func (e *env) updateOneGet(coll string, start bson.D, update any, opts ...options.Lister[options.UpdateOneOptions]) bson.Raw {
	e.t.Helper()
	_, err := e.coll(coll).UpdateOne(e.ctx, bson.D{{Key: "_id", Value: start[0].Value}}, update, opts...)
	noErr(e.t, err, "updateOne "+ejson(update))
	raw, err := e.coll(coll).FindOne(e.ctx, bson.D{{Key: "_id", Value: start[0].Value}}).Raw()
	noErr(e.t, err, "findOne after update")
	return raw
}

func TestUpdate_Operators(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		start  bson.D
		update any
		want   bson.D
	}{
		{"$set new and nested", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: "x"}, {Key: "o.p.q", Value: true}}}},
			bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "x"}, {Key: "o", Value: bson.D{{Key: "p", Value: bson.D{{Key: "q", Value: true}}}}}}},
		{"$set keeps field position", bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}, {Key: "b", Value: 2}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: "new"}}}},
			bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: "new"}, {Key: "b", Value: 2}}},
		{"$unset", bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 1}, {Key: "b", Value: 2}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "a", Value: ""}, {Key: "zz", Value: 1}}}},
			bson.D{{Key: "_id", Value: 3}, {Key: "b", Value: 2}}},
		{"$inc int32 stays int32", bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: int32(1)}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(2)}, {Key: "m", Value: int32(5)}}}},
			bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: int32(3)}, {Key: "m", Value: int32(5)}}},
		{"$inc int32 overflow promotes to int64", bson.D{{Key: "_id", Value: 5}, {Key: "n", Value: int32(2147483647)}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}},
			bson.D{{Key: "_id", Value: 5}, {Key: "n", Value: int64(2147483648)}}},
		{"$inc int by double gives double", bson.D{{Key: "_id", Value: 6}, {Key: "n", Value: int32(1)}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 0.5}}}},
			bson.D{{Key: "_id", Value: 6}, {Key: "n", Value: 1.5}}},
		{"$mul", bson.D{{Key: "_id", Value: 7}, {Key: "n", Value: int64(3)}},
			bson.D{{Key: "$mul", Value: bson.D{{Key: "n", Value: int32(4)}, {Key: "absent", Value: int32(2)}}}},
			bson.D{{Key: "_id", Value: 7}, {Key: "n", Value: int64(12)}, {Key: "absent", Value: int32(0)}}},
		{"$rename", bson.D{{Key: "_id", Value: 8}, {Key: "a", Value: 1}, {Key: "b", Value: 2}},
			bson.D{{Key: "$rename", Value: bson.D{{Key: "a", Value: "z"}}}},
			bson.D{{Key: "_id", Value: 8}, {Key: "b", Value: 2}, {Key: "z", Value: 1}}},
		{"$min $max", bson.D{{Key: "_id", Value: 9}, {Key: "lo", Value: 5}, {Key: "hi", Value: 5}},
			bson.D{{Key: "$min", Value: bson.D{{Key: "lo", Value: 3}}}, {Key: "$max", Value: bson.D{{Key: "hi", Value: 4}}}},
			bson.D{{Key: "_id", Value: 9}, {Key: "lo", Value: 3}, {Key: "hi", Value: 5}}},
		{"$push $each $sort $slice", bson.D{{Key: "_id", Value: 10}, {Key: "a", Value: bson.A{5, 1}}},
			bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$each", Value: bson.A{3, 9}}, {Key: "$sort", Value: 1}, {Key: "$slice", Value: 3}}}}}},
			bson.D{{Key: "_id", Value: 10}, {Key: "a", Value: bson.A{1, 3, 5}}}},
		{"$push $position", bson.D{{Key: "_id", Value: 11}, {Key: "a", Value: bson.A{"x", "y"}}},
			bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$each", Value: bson.A{"w"}}, {Key: "$position", Value: 0}}}}}},
			bson.D{{Key: "_id", Value: 11}, {Key: "a", Value: bson.A{"w", "x", "y"}}}},
		{"$push creates array", bson.D{{Key: "_id", Value: 12}},
			bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: bson.D{{Key: "k", Value: 1}}}}}},
			bson.D{{Key: "_id", Value: 12}, {Key: "a", Value: bson.A{bson.D{{Key: "k", Value: 1}}}}}},
		{"$addToSet $each", bson.D{{Key: "_id", Value: 13}, {Key: "a", Value: bson.A{1, 2}}},
			bson.D{{Key: "$addToSet", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$each", Value: bson.A{2, 3, 3}}}}}}},
			bson.D{{Key: "_id", Value: 13}, {Key: "a", Value: bson.A{1, 2, 3}}}},
		{"$pull condition", bson.D{{Key: "_id", Value: 14}, {Key: "a", Value: bson.A{1, 5, 2, 8}}},
			bson.D{{Key: "$pull", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 5}}}}}},
			bson.D{{Key: "_id", Value: 14}, {Key: "a", Value: bson.A{1, 2}}}},
		{"$pullAll", bson.D{{Key: "_id", Value: 15}, {Key: "a", Value: bson.A{1, 2, 1, 3}}},
			bson.D{{Key: "$pullAll", Value: bson.D{{Key: "a", Value: bson.A{1, 3}}}}},
			bson.D{{Key: "_id", Value: 15}, {Key: "a", Value: bson.A{2}}}},
		{"$pop first and last", bson.D{{Key: "_id", Value: 16}, {Key: "a", Value: bson.A{1, 2, 3}}, {Key: "b", Value: bson.A{1, 2, 3}}},
			bson.D{{Key: "$pop", Value: bson.D{{Key: "a", Value: -1}, {Key: "b", Value: 1}}}},
			bson.D{{Key: "_id", Value: 16}, {Key: "a", Value: bson.A{2, 3}}, {Key: "b", Value: bson.A{1, 2}}}},
		{"positional $", bson.D{{Key: "_id", Value: 17}, {Key: "a", Value: bson.A{bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 0}}}}},
			nil, // special-cased below
			bson.D{{Key: "_id", Value: 17}, {Key: "a", Value: bson.A{bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 9}}}}}},
		{"all positional $[]", bson.D{{Key: "_id", Value: 18}, {Key: "a", Value: bson.A{1, 2, 3}}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "a.$[]", Value: 10}}}},
			bson.D{{Key: "_id", Value: 18}, {Key: "a", Value: bson.A{11, 12, 13}}}},
		{"array index path", bson.D{{Key: "_id", Value: 19}, {Key: "a", Value: bson.A{1, 2}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "a.1", Value: "two"}, {Key: "a.3", Value: "four"}}}},
			bson.D{{Key: "_id", Value: 19}, {Key: "a", Value: bson.A{1, "two", nil, "four"}}}},
		{"pipeline update", bson.D{{Key: "_id", Value: 20}, {Key: "a", Value: 2}},
			bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bson.D{{Key: "$multiply", Value: bson.A{"$a", 10}}}}}}}, bson.D{{Key: "$unset", Value: "a"}}},
			bson.D{{Key: "_id", Value: 20}, {Key: "b", Value: 20}}},
	}
	for _, c := range cases {
		e.insert("u", c.start)
		var got bson.Raw
		if c.update == nil { // positional $ needs the array in the filter
			_, err := e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 17}, {Key: "a.k", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a.$.v", Value: 9}}}})
			noErr(t, err, "positional update")
			got, _ = e.coll("u").FindOne(e.ctx, bson.D{{Key: "_id", Value: 17}}).Raw()
		} else {
			got = e.updateOneGet("u", c.start, c.update)
		}
		if canon(t, got) != canon(t, c.want) {
			t.Errorf("%s: got %s, want %s", c.name, canon(t, got), canon(t, c.want))
		}
	}
}

func TestUpdate_ArrayFilters(t *testing.T) {
	e := newEnv(t)
	e.insert("u", bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.A{95, 102, 90, 150}}})
	_, err := e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "g.$[big]", Value: 100}}}},
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "big", Value: bson.D{{Key: "$gte", Value: 100}}}}}))
	noErr(t, err, "update with arrayFilters")
	docsEq(t, e.find("u", nil), bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: bson.A{95, 100, 90, 100}}})
}

func TestUpdate_CurrentDate(t *testing.T) {
	e := newEnv(t)
	e.insert("u", bson.D{{Key: "_id", Value: 1}})
	before := time.Now().Add(-time.Second)
	_, err := e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$currentDate", Value: bson.D{{Key: "d", Value: true}, {Key: "ts", Value: bson.D{{Key: "$type", Value: "timestamp"}}}}}})
	noErr(t, err, "$currentDate")
	raw, _ := e.coll("u").FindOne(e.ctx, bson.D{}).Raw()
	d := val(t, raw, "d")
	if d.Type != bson.TypeDateTime {
		t.Fatalf("$currentDate true gives %s, want a date", d.Type)
	}
	if ts := val(t, raw, "ts"); ts.Type != bson.TypeTimestamp {
		t.Fatalf("$currentDate timestamp gives %s, want a timestamp", ts.Type)
	}
	_ = before // $currentDate follows the server's clock, which may be fake.
}

func TestUpdate_MatchedModifiedCounts(t *testing.T) {
	e := newEnv(t)
	e.insert("u", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}}, bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 1}})
	r, err := e.coll("u").UpdateMany(e.ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}})
	noErr(t, err, "updateMany")
	eq(t, "matched", r.MatchedCount, int64(3))
	eq(t, "modified (only the one that changed)", r.ModifiedCount, int64(1))
	eq(t, "upserted", r.UpsertedCount, int64(0))
	if r.UpsertedID != nil {
		t.Fatalf("upsertedID %v, want nil", r.UpsertedID)
	}
	r, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "a", Value: 99}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}})
	noErr(t, err, "updateOne no match")
	eq(t, "matched none", r.MatchedCount, int64(0))
	eq(t, "modified none", r.ModifiedCount, int64(0))
}

func TestUpsert_FromEqualityFilterAndSetOnInsert(t *testing.T) {
	e := newEnv(t)
	opts := options.UpdateOne().SetUpsert(true)
	r, err := e.coll("u").UpdateOne(e.ctx,
		bson.D{{Key: "k", Value: "a"}, {Key: "n", Value: bson.D{{Key: "$gt", Value: 5}}}, {Key: "o.p", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: true}}}}, opts)
	noErr(t, err, "upsert")
	eq(t, "matched", r.MatchedCount, int64(0))
	eq(t, "modified", r.ModifiedCount, int64(0))
	eq(t, "upserted", r.UpsertedCount, int64(1))
	oid, ok := r.UpsertedID.(bson.ObjectID)
	if !ok {
		t.Fatalf("upsertedID %T %v, want an ObjectID", r.UpsertedID, r.UpsertedID)
	}
	// Equality fields of the filter are copied; $gt is not. Fields the
	// update adds are appended in lexicographic order, as mongod does.
	docsEq(t, e.find("u", nil), bson.D{{Key: "_id", Value: oid}, {Key: "k", Value: "a"}, {Key: "o", Value: bson.D{{Key: "p", Value: 1}}}, {Key: "created", Value: true}, {Key: "x", Value: 1}})

	// Second time it matches: $setOnInsert does nothing.
	r, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "k", Value: "a"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}, {Key: "$setOnInsert", Value: bson.D{{Key: "created", Value: "again"}}}}, opts)
	noErr(t, err, "upsert matching")
	eq(t, "matched", r.MatchedCount, int64(1))
	eq(t, "modified", r.ModifiedCount, int64(1))
	eq(t, "upserted", r.UpsertedCount, int64(0))
	docsEq(t, e.find("u", nil), bson.D{{Key: "_id", Value: oid}, {Key: "k", Value: "a"}, {Key: "o", Value: bson.D{{Key: "p", Value: 1}}}, {Key: "created", Value: true}, {Key: "x", Value: 2}})
}

func TestUpsert_ReplaceWithIdFromFilter(t *testing.T) {
	e := newEnv(t)
	r, err := e.coll("u").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: "given"}}, bson.D{{Key: "v", Value: 1}}, options.Replace().SetUpsert(true))
	noErr(t, err, "replace upsert")
	eq(t, "upsertedID", r.UpsertedID, any("given"))
	docsEq(t, e.find("u", nil), bson.D{{Key: "_id", Value: "given"}, {Key: "v", Value: 1}})
	// Raw command reply shape: n counts the upsert, upserted lists index and _id.
	raw := e.run(bson.D{{Key: "update", Value: "u"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "other"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 2}}}}}, {Key: "upsert", Value: true}},
	}}})
	valEq(t, raw, "n", int32(1))
	valEq(t, raw, "nModified", int32(0))
	valEq(t, raw, "upserted", bson.A{bson.D{{Key: "index", Value: int32(0)}, {Key: "_id", Value: "other"}}})
}

func TestUpdate_Errors(t *testing.T) {
	e := newEnv(t)
	e.insert("u", bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: "str"}, {Key: "a", Value: 1}})
	_, err := e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "s", Value: 1}}}})
	wantCode(t, err, 14, "TypeMismatch")
	_, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: "x"}}}})
	wantCode(t, err, 14, "TypeMismatch")
	_, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "_id", Value: 2}}}})
	wantCode(t, err, 66, "ImmutableField")
	_, err = e.coll("u").ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}})
	wantCode(t, err, 66, "ImmutableField")
	_, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}}})
	wantCode(t, err, 40, "ConflictingUpdateOperators")
	_, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "s.x", Value: 1}}}})
	wantCode(t, err, 28, "PathNotViable")
	_, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$bogus", Value: bson.D{{Key: "a", Value: 1}}}})
	wantCode(t, err, 9, "FailedToParse")
	_, err = e.coll("u").UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: 1}}}})
	wantCode(t, err, 2, "BadValue") // "The field 'a' must be an array but is of type int …"
	// Nothing changed.
	docsEq(t, e.find("u", nil), bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: "str"}, {Key: "a", Value: 1}})
}
