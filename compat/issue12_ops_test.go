package compat

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Issue 12 items 15 and 16: operations and sessions stages and commands
// as a standalone mongod 7.0 has them.

// $changeStream on a standalone: mongod refuses it while parsing the stage
// (DocumentSourceChangeStream::assertIsLegalSpecification) with 40573 —
// collection, database and cluster streams alike, wherever the stage is.
func TestIssue12OpsChangeStreamStandalone(t *testing.T) {
	e := newEnv(t)
	e.insert("c", bson.D{{Key: "_id", Value: 1}})
	const msg = "The $changeStream stage is only supported on replica sets"
	check := func(what string, err error) {
		t.Helper()
		wantCode(t, err, 40573, "Location40573")
		if errMsg(err) != msg {
			t.Fatalf("%s: errmsg %q, want %q", what, errMsg(err), msg)
		}
	}
	_, err := e.coll("c").Watch(e.ctx, bson.A{})
	check("collection.watch", err)
	_, err = e.db.Watch(e.ctx, bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}})
	check("db.watch", err)
	_, err = e.cli.Watch(e.ctx, bson.A{})
	check("client.watch", err)
	agg := func(coll any, p bson.A) error {
		return e.runErr(bson.D{{Key: "aggregate", Value: coll}, {Key: "pipeline", Value: p}, {Key: "cursor", Value: bson.D{}}})
	}
	check("aggregate with options", agg("c", bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "fullDocument", Value: "updateLookup"}, {Key: "showExpandedEvents", Value: true}}}}}))
	check("not the first stage", agg("c", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$changeStream", Value: bson.D{}}}}))
	check("a missing collection", agg("nope", bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}))
	check("inside $lookup", agg("c", bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "as", Value: "x"}}}}}))

	err = agg("c", bson.A{bson.D{{Key: "$changeStream", Value: 5}}})
	wantCode(t, err, 6188500, "Location6188500")
	if !strings.Contains(errMsg(err), "$changeStream must take a nested object but found: $changeStream: 5") {
		t.Fatalf("errmsg %q", errMsg(err))
	}
	err = agg("c", bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "bogus", Value: 1}}}}})
	wantCode(t, err, 40415, "Location40415")
}
