package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// $changeStream: mayfly runs as a standalone server (no replica set, no
// oplog), where mongod refuses change streams when it parses the stage
// (DocumentSourceChangeStream::createFromBson): the spec must be a
// document (6188500, from its lite parse), its fields known (40415), and
// then the deployment must be a replica set (40573) — wherever the stage
// appears, and for collection, database and cluster streams alike.

// changeStreamFields are DocumentSourceChangeStreamSpec's fields.
var changeStreamFields = map[string]bool{
	"resumeAfter": true, "startAfter": true, "startAtOperationTime": true, "fullDocument": true,
	"fullDocumentBeforeChange": true, "allChangesForCluster": true, "showMigrationEvents": true,
	"showSystemEvents": true, "allowToRunOnConfigDB": true, "allowToRunOnSystemNS": true,
	"showExpandedEvents": true, "showRawUpdateDescription": true, "$_generateV2ResumeTokens": true,
}

func init() {
	stageParsers["$changeStream"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(6188500, "$changeStream must take a nested object but found: $changeStream: %s", expr.ExtJSON(spec))
		}
		for _, e := range d {
			if !changeStreamFields[e.Key] {
				return nil, mongoerr.New(40415, "BSON field '$changeStream.%s' is an unknown field.", e.Key)
			}
		}
		if opts != nil && opts.ReplicaSet {
			return nil, mongoerr.New(mongoerr.NotImplemented, "$changeStream is not supported by mayfly yet (its replica-set mode has no change streams)")
		}
		return nil, mongoerr.New(40573, "The $changeStream stage is only supported on replica sets")
	}
}
