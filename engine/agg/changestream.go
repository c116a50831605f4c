package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// $changeStream: in replica-set mode the engine opens a change stream
// whose pipeline starts with it (engine/changestream.go); this parser sees
// it only elsewhere in a pipeline (40602). A standalone refuses change
// streams as mongod does when it parses the stage
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
			// The engine opens a stream whose pipeline starts with it.
			return nil, mongoerr.New(40602, "$changeStream is only valid as the first stage in a pipeline")
		}
		return nil, mongoerr.New(40573, "The $changeStream stage is only supported on replica sets")
	}
}
