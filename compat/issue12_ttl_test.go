package compat

import (
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
