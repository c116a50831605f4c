package compat

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Write replies inside a transaction count what the statement did, as
// mongod's do: n and nModified of update, the findAndModify value. (They
// once counted at the commit only, so every reply said 0 and findAndModify
// null; Mongoose's save() then failed with DocumentNotFoundError.)
func TestIssue13TxnWriteRepliesCount(t *testing.T) {
	e := newReplEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 0}},
		bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 0}}, bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: 0}})
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	defer sess.EndSession(e.ctx)
	noErr(t, sess.StartTransaction(), "start")
	ctx := mongo.NewSessionContext(e.ctx, sess)
	c := e.coll("c")
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}

	u1, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, inc)
	noErr(t, err, "updateOne")
	eq(t, "updateOne matched", u1.MatchedCount, int64(1))
	eq(t, "updateOne modified", u1.ModifiedCount, int64(1))

	um, err := c.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: 3}}}}, inc)
	noErr(t, err, "updateMany")
	eq(t, "updateMany matched", um.MatchedCount, int64(3))
	eq(t, "updateMany modified", um.ModifiedCount, int64(3))

	noop, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 2}}}})
	noErr(t, err, "no-op updateOne")
	eq(t, "no-op matched", noop.MatchedCount, int64(1))
	eq(t, "no-op modified", noop.ModifiedCount, int64(0))

	rp, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "r", Value: true}})
	noErr(t, err, "replaceOne")
	eq(t, "replaceOne matched", rp.MatchedCount, int64(1))
	eq(t, "replaceOne modified", rp.ModifiedCount, int64(1))

	up, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, inc, options.UpdateOne().SetUpsert(true))
	noErr(t, err, "upsert")
	eq(t, "upsert matched", up.MatchedCount, int64(0))
	eq(t, "upsert upsertedId", up.UpsertedID, any(int32(9)))

	var after bson.M
	noErr(t, c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 2}}, inc, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after), "findOneAndUpdate")
	eq(t, "findOneAndUpdate value n", after["n"], any(int32(2)))
	var before bson.M
	noErr(t, c.FindOneAndReplace(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "x", Value: 1}}).Decode(&before), "findOneAndReplace")
	eq(t, "findOneAndReplace value n", before["n"], any(int32(1)))
	var removed bson.M
	noErr(t, c.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&removed), "findOneAndDelete")
	eq(t, "findOneAndDelete value n", removed["n"], any(int32(2)))

	// Nothing is visible outside until the commit; then all of it is.
	eq(t, "outside before commit: untouched documents", e.count("c", bson.D{{Key: "n", Value: 0}}), int64(4))
	noErr(t, sess.CommitTransaction(e.ctx), "commit")
	var docs []bson.M
	cur, err := e.coll("c").Find(e.ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	noErr(t, err, "find")
	noErr(t, cur.All(e.ctx, &docs), "read")
	want := []bson.M{{"_id": int32(2), "n": int32(2)}, {"_id": int32(3), "x": int32(1)}, {"_id": int32(4), "r": true}, {"_id": int32(9), "n": int32(1)}}
	eq(t, "documents after the commit", len(docs), len(want))
	for i := range want {
		for k, v := range want[i] {
			eq(t, "document field "+k, docs[i][k], v)
		}
	}
}
