package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// apiV1Commands are the commands in Stable API version 1 in mongod 7.0
// (those whose IDL or apiVersions() declare version "1"). isMaster is not
// one of them: only its successor hello is.
var apiV1Commands = map[string]bool{
	"abortTransaction": true, "aggregate": true, "authenticate": true, "collMod": true,
	"commitTransaction": true, "count": true, "create": true, "createIndexes": true, "delete": true,
	"drop": true, "dropDatabase": true, "dropIndexes": true, "endSessions": true, "explain": true,
	"find": true, "findAndModify": true, "getMore": true, "hello": true, "insert": true,
	"killCursors": true, "listCollections": true, "listDatabases": true, "listIndexes": true,
	"ping": true, "refreshSessions": true, "saslContinue": true, "saslStart": true, "update": true,
}

// apiStrictStages are the aggregation stages registered with
// AllowedWithApiStrict::kNeverInVersion1 that a client may name.
var apiStrictStages = map[string]bool{
	"$currentOp": true, "$indexStats": true, "$listLocalSessions": true, "$listSessions": true,
	"$planCacheStats": true, "$listCatalog": true, "$listSearchIndexes": true, "$search": true,
	"$searchMeta": true, "$vectorSearch": true, "$shardedDataDistribution": true,
}

// apiUnstableFields are the command fields whose IDL marks them
// `unstable: true`: refused under apiStrict even though the command is in
// API version 1 (find_command.idl, aggregate_command.idl, ...).
var apiUnstableFields = map[string]map[string]bool{
	"find": {"ntoreturn": true, "min": true, "max": true, "returnKey": true, "showRecordId": true,
		"$queryOptions": true, "tailable": true, "oplogReplay": true, "noCursorTimeout": true, "awaitData": true,
		"options": true, "term": true, "readOnce": true, "allowSpeculativeMajorityRead": true,
		"$_requestResumeToken": true, "$_resumeAfter": true, "runtimeConstants": true, "collectionUUID": true},
	"aggregate":       {"explain": true, "fromMongos": true, "needsMerge": true, "exchange": true, "runtimeConstants": true, "isMapReduceCommand": true, "collectionUUID": true},
	"create":          {"autoIndexId": true},
	"listCollections": {"includePendingDrops": true},
	"listIndexes":     {"includeBuildUUIDs": true},
}

// apiCommandName is the name mongod reports for a command under the
// Stable API: hello's legacy spellings are their own command there.
func apiCommandName(sent string, c *Command) string {
	if c.Name == "hello" && sent != "hello" {
		return "isMaster"
	}
	return c.Name
}

// apiVersionsOf is what listCommands reports as a command's apiVersions.
func apiVersionsOf(name string) bson.A {
	if apiV1Commands[name] {
		return bson.A{"1"}
	}
	return bson.A{}
}

// checkAPIParameters applies the Stable API parameters as mongod's
// initializeAPIParameters does (src/mongo/db/initialize_api_parameters.cpp),
// and apiStrict's limits on aggregation stages.
func checkAPIParameters(r *Request, c *Command) error {
	var version string
	hasVersion, strict, hasStrict, hasDeprecation, deprecationErrors := false, false, false, false, false
	for _, f := range r.Cmd {
		switch f.Value.(type) {
		case nil, bson.Undefined:
			continue // IDL treats null and undefined as absent
		}
		switch f.Key {
		case "apiVersion":
			s, ok := f.Value.(string)
			if !ok {
				return apiParamType(f.Key, "string", f.Value)
			}
			version, hasVersion = s, true
		case "apiStrict":
			b, ok := f.Value.(bool)
			if !ok {
				return apiParamType(f.Key, "bool", f.Value)
			}
			strict, hasStrict = b, true
		case "apiDeprecationErrors":
			b, ok := f.Value.(bool)
			if !ok {
				return apiParamType(f.Key, "bool", f.Value)
			}
			deprecationErrors, hasDeprecation = b, true
		}
	}
	if (hasStrict || hasDeprecation) && !hasVersion {
		return mongoerr.New(4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion")
	}
	if !hasVersion {
		return nil
	}
	if version == "2" {
		return mongoerr.New(mongoerr.APIVersionError, "Cannot accept API version 2")
	}
	if version != "1" {
		return mongoerr.New(mongoerr.APIVersionError, "API version must be \"1\"")
	}
	_ = deprecationErrors // no command is deprecated in API version 1
	if !strict {
		return nil
	}
	name := apiCommandName(r.Name, c)
	if !apiV1Commands[name] {
		return mongoerr.New(mongoerr.APIStrictError, "Provided apiStrict:true, but the command %s is not in API Version 1. Information on supported commands and migrations in API Version 1 can be found at https://dochub.mongodb.org/core/manual-versioned-api", name)
	}
	if c.Write && r.Target() == "system.js" {
		return mongoerr.New(mongoerr.APIStrictError, "Provided apiStrict:true, but the command %s attempts to write to system.js", name)
	}
	if unstable := apiUnstableFields[name]; unstable != nil {
		for _, f := range r.Cmd[1:] {
			if unstable[f.Key] {
				return mongoerr.New(mongoerr.APIStrictError, "BSON field '%s.%s' is not allowed with apiStrict:true.", name, f.Key)
			}
		}
	}
	switch name {
	case "aggregate":
		return checkStrictPipeline(r.Cmd)
	case "explain":
		if inner, ok := r.Cmd[0].Value.(bson.D); ok && len(inner) > 0 && inner[0].Key == "aggregate" {
			return checkStrictPipeline(inner)
		}
	}
	return nil
}

func apiParamType(field, want string, v any) error {
	return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'APIParametersFromClient.%s' is the wrong type '%s', expected type '%s'", field, bsonx.TypeName(v), want)
}

// checkStrictPipeline refuses stages outside API version 1 anywhere in an
// aggregate's pipeline, sub-pipelines included.
func checkStrictPipeline(cmd bson.D) error {
	p, _ := bsonx.Get(cmd, "pipeline")
	return checkStrictStages(p)
}

func checkStrictStages(p any) error {
	stages, _ := p.(bson.A)
	for _, s := range stages {
		d, ok := s.(bson.D)
		if !ok || len(d) == 0 {
			continue
		}
		name := d[0].Key
		if apiStrictStages[name] {
			return mongoerr.New(mongoerr.APIStrictError, "%s is not allowed with 'apiStrict: true' in API Version 1", name)
		}
		spec, _ := d[0].Value.(bson.D)
		switch name {
		case "$collStats":
			for _, f := range spec {
				if f.Key != "count" {
					return mongoerr.New(mongoerr.APIStrictError, "only the 'count' option to $collStats is supported in API Version 1")
				}
			}
		case "$facet":
			for _, f := range spec {
				if err := checkStrictStages(f.Value); err != nil {
					return err
				}
			}
		case "$lookup", "$unionWith":
			sub, _ := bsonx.Get(spec, "pipeline")
			if err := checkStrictStages(sub); err != nil {
				return err
			}
		}
	}
	return nil
}
