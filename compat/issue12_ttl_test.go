package compat

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Issue 12 item 17: the six gaps of the TTL review, through the driver
// (ttl-spec.md §5.2: _ts is returned only when a projection names it, and
// usable by filters, sorts and projections everywhere; §6: expired means
// gone at once).

// findAndModify's fields may name _ts: the document comes back with it
// (the new _ts for new: true, the old one otherwise); without it, no _ts.
func TestIssue12TTLFindAndModifyFieldsTS(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	c := e.coll("c")
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	t1 := e.now().Unix()
	e.advance(5 * sec)
	e.insert("c", bson.D{{Key: "_id", Value: 2}})
	e.advance(5 * sec)
	t3 := e.now().Unix()

	raw, err := c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t1}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}},
		options.FindOneAndUpdate().SetSort(bson.D{{Key: "_ts", Value: -1}}).
			SetProjection(bson.D{{Key: "_ts", Value: 1}}).SetReturnDocument(options.After)).Raw()
	noErr(t, err, "findAndModify new: true, fields {_ts: 1}")
	docEq(t, raw, bson.D{{Key: "_id", Value: int32(2)}, {Key: "_ts", Value: t3}})

	raw, err = c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}},
		options.FindOneAndUpdate().SetProjection(bson.D{{Key: "_ts", Value: 1}, {Key: "_id", Value: 0}})).Raw()
	noErr(t, err, "findAndModify new: false, fields {_ts: 1, _id: 0}")
	docEq(t, raw, bson.D{{Key: "_ts", Value: t1}})

	raw, err = c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 1}}}}).Raw()
	noErr(t, err, "findAndModify without fields")
	docEq(t, raw, bson.D{{Key: "_id", Value: int32(1)}, {Key: "y", Value: int32(1)}})

	raw, err = c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 2}}}},
		options.FindOneAndUpdate().SetProjection(bson.D{{Key: "y", Value: 0}})).Raw()
	noErr(t, err, "findAndModify with an exclusion projection")
	docEq(t, raw, bson.D{{Key: "_id", Value: int32(1)}, {Key: "z", Value: int32(1)}})

	raw, err = c.FindOneAndDelete(e.ctx, bson.D{{Key: "_id", Value: 2}}, options.FindOneAndDelete().SetProjection(bson.D{{Key: "_ts", Value: 1}})).Raw()
	noErr(t, err, "findAndModify remove, fields {_ts: 1}")
	docEq(t, raw, bson.D{{Key: "_id", Value: int32(2)}, {Key: "_ts", Value: t3}})

	raw, err = c.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 1}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After).SetProjection(bson.D{{Key: "_ts", Value: 1}, {Key: "u", Value: 1}})).Raw()
	noErr(t, err, "findAndModify upsert, fields {_ts: 1, u: 1}")
	docEq(t, raw, bson.D{{Key: "_id", Value: int32(3)}, {Key: "u", Value: int32(1)}, {Key: "_ts", Value: t3}})
}

// $lookup and $unionWith sub-pipelines can use _ts like the top level
// ($match/$sort/$project on the foreign collection's _ts), and their
// results carry it only when a projection names it.
func TestIssue12TTLSubPipelinesTS(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	t0 := e.now().Unix()
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "t", Value: t0 + 5}})
	e.insert("f", bson.D{{Key: "_id", Value: 10}})
	e.advance(5 * sec)
	e.insert("f", bson.D{{Key: "_id", Value: 11}})
	recent := bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0 + 5}}}}}}}

	got := e.aggregate("c", bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "f"}, {Key: "pipeline", Value: recent}, {Key: "as", Value: "x"}}}}})
	docsEq(t, got, bson.D{{Key: "_id", Value: int32(1)}, {Key: "t", Value: t0 + 5}, {Key: "x", Value: bson.A{bson.D{{Key: "_id", Value: int32(11)}}}}})

	got = e.aggregate("c", bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "t", Value: 0}}}},
		bson.D{{Key: "$unionWith", Value: bson.D{{Key: "coll", Value: "f"}, {Key: "pipeline", Value: recent}}}}})
	docsEq(t, got, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(11)}})

	// Named by a projection inside the sub-pipeline: returned.
	sorted := bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "_ts", Value: -1}}}}, bson.D{{Key: "$project", Value: bson.D{{Key: "_ts", Value: 1}}}}}
	got = e.aggregate("c", bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "f"}, {Key: "pipeline", Value: sorted}, {Key: "as", Value: "x"}}}}, bson.D{{Key: "$project", Value: bson.D{{Key: "x", Value: 1}}}}})
	docsEq(t, got, bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: bson.A{
		bson.D{{Key: "_id", Value: int32(11)}, {Key: "_ts", Value: t0 + 5}},
		bson.D{{Key: "_id", Value: int32(10)}, {Key: "_ts", Value: t0}}}}})

	// The equality form joining on the foreign _ts, and let over the local _ts.
	got = e.aggregate("c", bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "f"}, {Key: "localField", Value: "t"}, {Key: "foreignField", Value: "_ts"}, {Key: "as", Value: "x"}}}}})
	docsEq(t, got, bson.D{{Key: "_id", Value: int32(1)}, {Key: "t", Value: t0 + 5}, {Key: "x", Value: bson.A{bson.D{{Key: "_id", Value: int32(11)}}}}})
	same := bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$_ts", "$$lt"}}}}}}}}
	got = e.aggregate("c", bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "f"}, {Key: "let", Value: bson.D{{Key: "lt", Value: "$_ts"}}}, {Key: "pipeline", Value: same}, {Key: "as", Value: "x"}}}}})
	docsEq(t, got, bson.D{{Key: "_id", Value: int32(1)}, {Key: "t", Value: t0 + 5}, {Key: "x", Value: bson.A{bson.D{{Key: "_id", Value: int32(10)}}}}})
}

// _ts used by $match/$sort does not leak into documents built from whole
// documents: $facet results, $push of $$ROOT, $replaceRoot with $$ROOT.
// A stage that names _ts as its own output field still returns it.
func TestIssue12TTLNoLeakThroughFacetAndRoot(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	t0 := e.now().Unix()
	e.insert("f", bson.D{{Key: "_id", Value: 10}})
	e.advance(5 * sec)
	e.insert("f", bson.D{{Key: "_id", Value: 11}})
	recent := bson.D{{Key: "$match", Value: bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: t0 + 5}}}}}}
	byTS := bson.D{{Key: "$sort", Value: bson.D{{Key: "_ts", Value: -1}}}}
	d10, d11 := bson.D{{Key: "_id", Value: int32(10)}}, bson.D{{Key: "_id", Value: int32(11)}}

	docsEq(t, e.aggregate("f", bson.A{bson.D{{Key: "$facet", Value: bson.D{{Key: "a", Value: bson.A{recent}}, {Key: "b", Value: bson.A{byTS}}, {Key: "c", Value: bson.A{bson.D{{Key: "$count", Value: "n"}}}}}}}}),
		bson.D{{Key: "a", Value: bson.A{d11}}, {Key: "b", Value: bson.A{d11, d10}}, {Key: "c", Value: bson.A{bson.D{{Key: "n", Value: int32(2)}}}}})
	docsEq(t, e.aggregate("f", bson.A{recent, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "docs", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}}}),
		bson.D{{Key: "_id", Value: nil}, {Key: "docs", Value: bson.A{d11}}})
	docsEq(t, e.aggregate("f", bson.A{byTS, bson.D{{Key: "$replaceRoot", Value: bson.D{{Key: "newRoot", Value: bson.D{{Key: "d", Value: "$$ROOT"}}}}}}}),
		bson.D{{Key: "d", Value: d11}}, bson.D{{Key: "d", Value: d10}})
	docsEq(t, e.aggregate("f", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 10}}}}, bson.D{{Key: "$addFields", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$subtract", Value: bson.A{t0 + 5, "$_ts"}}}}}}}}),
		bson.D{{Key: "_id", Value: int32(10)}, {Key: "age", Value: int64(5)}})
	// Behind stages that keep documents whole, _ts is still usable; a
	// $$ROOT copy does not carry it.
	docsEq(t, e.aggregate("f", bson.A{bson.D{{Key: "$addFields", Value: bson.D{{Key: "a", Value: 1}}}}, bson.D{{Key: "$unset", Value: "a"}}, byTS}), d11, d10)
	docsEq(t, e.aggregate("f", bson.A{recent, bson.D{{Key: "$addFields", Value: bson.D{{Key: "copy", Value: "$$ROOT"}}}}}),
		bson.D{{Key: "_id", Value: int32(11)}, {Key: "copy", Value: d11}})
	docsEq(t, e.aggregate("f", bson.A{byTS, bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "_ts", Value: 1}}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "all", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}}}),
		bson.D{{Key: "_id", Value: nil}, {Key: "all", Value: bson.A{bson.D{{Key: "_ts", Value: t0 + 5}}, bson.D{{Key: "_ts", Value: t0}}}}})
}

// The _ts index listIndexes shows while DefaultTTL is set can be hinted,
// by name (its own name too) or key pattern, in find, count, aggregate,
// update and delete; once TTL is off it no longer exists for hints.
func TestIssue12TTLHintTSIndex(t *testing.T) {
	needsAdmin(t, "collMod (dbAdmin)")
	mayflyOnly(t)
	e := newClockEnv(t)
	e.create("c", dttl(100))
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	e.advance(5 * sec)
	e.insert("c", bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}, {Key: "ttl", Value: 1}})
	e.advance(sec) // _id 3 expired
	d1, d2 := bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(2)}}
	byTS := options.Find().SetSort(bson.D{{Key: "_ts", Value: -1}})
	docsEq(t, e.find("c", bson.D{{Key: "_ts", Value: bson.D{{Key: "$gte", Value: 0}}}}, byTS.SetHint("_ts_1")), d2, d1)
	docsEq(t, e.find("c", bson.D{}, options.Find().SetHint(bson.D{{Key: "_ts", Value: 1}}).SetSort(bson.D{{Key: "_id", Value: 1}})), d1, d2)
	n, err := e.coll("c").CountDocuments(e.ctx, bson.D{}, options.Count().SetHint("_ts_1"))
	noErr(t, err, "countDocuments hint _ts_1")
	eq(t, "countDocuments hint _ts_1", n, int64(2))
	cur, err := e.coll("c").Aggregate(e.ctx, bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "_ts", Value: 1}}}}}, options.Aggregate().SetHint("_ts_1"))
	noErr(t, err, "aggregate hint _ts_1")
	var got []bson.Raw
	noErr(t, cur.All(e.ctx, &got), "aggregate hint _ts_1")
	docsEq(t, got, d1, d2)
	res, err := e.coll("c").UpdateMany(e.ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, options.UpdateMany().SetHint(bson.D{{Key: "_ts", Value: 1}}))
	noErr(t, err, "updateMany hint {_ts: 1}")
	eq(t, "updateMany matched", res.MatchedCount, int64(2))
	dres, err := e.coll("c").DeleteOne(e.ctx, bson.D{{Key: "_id", Value: 2}}, options.DeleteOne().SetHint("_ts_1"))
	noErr(t, err, "deleteOne hint _ts_1")
	eq(t, "deleteOne deleted", dres.DeletedCount, int64(1))

	// A custom name for the _ts index is the name hints use.
	e.create("named")
	e.run(bson.D{{Key: "createIndexes", Value: "named"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "expiry"}, {Key: "expireAfterSeconds", Value: 100}}}}})
	e.insert("named", bson.D{{Key: "_id", Value: 1}})
	docsEq(t, e.find("named", bson.D{}, options.Find().SetHint("expiry")), d1)
	_, err = e.coll("named").Find(e.ctx, bson.D{}, options.Find().SetHint("_ts_1"))
	wantCode(t, err, 2, "BadValue")

	// TTL off: no _ts index to hint.
	e.run(bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: nil}})
	_, err = e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetHint("_ts_1"))
	wantCode(t, err, 2, "BadValue")
	_, err = e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetHint(bson.D{{Key: "_ts", Value: 1}}))
	wantCode(t, err, 2, "BadValue")
}

// $out into a collection whose _ts index has a custom name keeps that
// name (with the setting), as it keeps the other indexes and options.
func TestIssue12TTLOutKeepsTSIndexName(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	e.insert("src", bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "ttl", Value: 3}})
	e.create("tgt")
	e.run(bson.D{{Key: "createIndexes", Value: "tgt"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "_ts", Value: 1}}}, {Key: "name", Value: "expiry"}, {Key: "expireAfterSeconds", Value: 10}},
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	e.aggregate("src", bson.A{bson.D{{Key: "$out", Value: "tgt"}}})
	specs, err := e.coll("tgt").Indexes().ListSpecifications(e.ctx)
	noErr(t, err, "listIndexes")
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		if s.Name == "expiry" {
			if s.ExpireAfterSeconds == nil || *s.ExpireAfterSeconds != 10 {
				t.Fatalf("expiry index after $out: %+v", s)
			}
		}
	}
	strsEq(t, "indexes after $out", names, []string{"_id_", "expiry", "a_1"})
	e.wantIDs("tgt", "after $out", 1, 2)
	e.advance(3 * sec)
	e.wantIDs("tgt", "3 s later (ttl: 3 honoured)", 1)
	e.advance(7 * sec)
	e.wantIDs("tgt", "10 s later (DefaultTTL 10 kept)")
}

// An aggregation $sort that the server cannot push into the query (behind
// $addFields/$project) buffers documents; one that expires before its
// batch is sent is not returned (spec §6.1), also as top-k and through a
// second $sort.
func TestIssue12TTLAggregateSortBufferRechecksExpiry(t *testing.T) {
	mayflyOnly(t)
	addX := bson.D{{Key: "$addFields", Value: bson.D{{Key: "x", Value: 1}}}}
	for i, tc := range []struct {
		p    bson.A
		want []string
	}{
		{bson.A{addX, bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}}, idList(0, 1, 2, 3, 4)},
		{bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "k", Value: 1}}}}, bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: -1}}}}}, idList(9, 8, 4, 3, 2, 1, 0)},
		{bson.A{addX, bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}, bson.D{{Key: "$limit", Value: 8}}}, idList(0, 1, 2, 3, 4)},
		{bson.A{addX, bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}, bson.D{{Key: "$unset", Value: "x"}}, bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: -1}}}}}, idList(9, 8, 4, 3, 2, 1, 0)},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newClockEnv(t)
			e.create("c", dttl(100))
			for i := 0; i < 10; i++ {
				d := bson.D{{Key: "_id", Value: i}}
				if i >= 5 {
					d = append(d, bson.E{Key: "ttl", Value: 5})
				}
				e.insert("c", d)
			}
			cur, err := e.coll("c").Aggregate(e.ctx, tc.p, options.Aggregate().SetBatchSize(2))
			noErr(t, err, "aggregate")
			got := []string{}
			for cur.Next(e.ctx) {
				got = append(got, cur.Current.Lookup("_id").String())
				if len(got) == 2 {
					e.advance(5 * sec) // ids 5..9 expire before the next batch
				}
			}
			noErr(t, cur.Err(), "iterating")
			strsEq(t, "ids returned", got, tc.want)
		})
	}
}
