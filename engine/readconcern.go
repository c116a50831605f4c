package engine

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// readConcern is a parsed readConcern argument (mongod's ReadConcernArgs).
type readConcern struct {
	level                           string // "" when not given
	afterClusterTime, atClusterTime *bson.Timestamp
	afterOpTime                     bool
	provenance                      string // as given, or "clientSupplied"
}

// parseReadConcern parses readConcern as mongod's ReadConcernArgs::parse
// does (src/mongo/db/repl/read_concern_args.cpp).
func parseReadConcern(v any) (*readConcern, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "readConcern field should be an object")
	}
	rc := &readConcern{}
	for _, f := range d {
		switch f.Key {
		case "afterOpTime":
			if _, ok := f.Value.(bson.D); !ok {
				return nil, rcWrongType(f.Key, "object", f.Value)
			}
			rc.afterOpTime = true
		case "afterClusterTime", "atClusterTime":
			ts, ok := f.Value.(bson.Timestamp)
			if !ok {
				return nil, rcWrongType(f.Key, "timestamp", f.Value)
			}
			if f.Key == "afterClusterTime" {
				rc.afterClusterTime = &ts
			} else {
				rc.atClusterTime = &ts
			}
		case "level":
			s, ok := f.Value.(string)
			if !ok {
				return nil, rcWrongType(f.Key, "string", f.Value)
			}
			switch s {
			case "local", "majority", "linearizable", "available", "snapshot":
				rc.level = s
			default:
				return nil, mongoerr.New(mongoerr.FailedToParse, "readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'")
			}
		case "allowTransactionTableSnapshot":
			if _, ok := f.Value.(bool); !ok {
				return nil, rcWrongType(f.Key, "bool", f.Value)
			}
		case "provenance":
			s, ok := f.Value.(string)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'ReadConcernArgs::parse.provenance' is the wrong type '%s', expected type 'string'", bsonx.TypeName(f.Value))
			}
			switch s {
			case "clientSupplied", "implicitDefault", "customDefault", "getLastErrorDefaults", "internalWriteDefault":
				rc.provenance = s
			default:
				return nil, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field 'ReadConcernArgs::parse.provenance' is not a valid value.", s)
			}
		default:
			return nil, mongoerr.New(mongoerr.InvalidOptions, "Unrecognized option in readConcern: %s", f.Key)
		}
	}
	level := rc.effectiveLevel()
	switch {
	case rc.afterClusterTime != nil && rc.afterOpTime:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Can not specify both afterClusterTime and afterOpTime")
	case rc.afterClusterTime != nil && rc.atClusterTime != nil:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency")
	case rc.afterClusterTime != nil && level != "majority" && level != "local" && level != "snapshot":
		return nil, mongoerr.New(mongoerr.InvalidOptions, "afterClusterTime field can be set only if level is equal to majority, local, or snapshot")
	case rc.afterOpTime && level == "snapshot":
		return nil, mongoerr.New(mongoerr.InvalidOptions, "afterOpTime field cannot be set if level is equal to snapshot")
	case rc.atClusterTime != nil && level != "snapshot":
		return nil, mongoerr.New(mongoerr.InvalidOptions, "atClusterTime field can be set only if level is equal to snapshot")
	case rc.atClusterTime != nil && rc.atClusterTime.T == 0 && rc.atClusterTime.I == 0:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "atClusterTime cannot be a null timestamp")
	}
	return rc, nil
}

// rcWrongType is ReadConcernArgs::parse's type error (not the IDL one of wrongType).
func rcWrongType(field, want string, v any) error {
	return mongoerr.New(mongoerr.TypeMismatch, "\"%s\" had the wrong type. Expected %s, found %s", field, want, bsonx.TypeName(v))
}

func (rc *readConcern) effectiveLevel() string {
	if rc.level == "" {
		return "local"
	}
	return rc.level
}

// String renders the read concern as mongod's ReadConcernArgs::toString
// does in its "does not support" messages.
func (rc *readConcern) String() string {
	var parts []string
	if rc.level != "" {
		parts = append(parts, fmt.Sprintf("level: %q", rc.level))
	}
	if rc.afterClusterTime != nil {
		parts = append(parts, fmt.Sprintf("afterClusterTime: Timestamp(%d, %d)", rc.afterClusterTime.T, rc.afterClusterTime.I))
	}
	if rc.atClusterTime != nil {
		parts = append(parts, fmt.Sprintf("atClusterTime: Timestamp(%d, %d)", rc.atClusterTime.T, rc.atClusterTime.I))
	}
	prov := rc.provenance
	if prov == "" {
		prov = "clientSupplied"
	}
	parts = append(parts, fmt.Sprintf("provenance: %q", prov))
	return "{ readConcern: { " + strings.Join(parts, ", ") + " } }"
}

// readConcernSupport is which levels a command accepts outside a
// transaction (each command's supportsReadConcern in mongod 7.0): the
// query commands and the cursor commands take every level (count all but
// snapshot, count_cmd.cpp); writes and every other command only "local"
// (Command::supportsReadConcern's default).
func readConcernSupport(cmd, level string) (bool, string) {
	switch cmd {
	case "find", "aggregate", "distinct", "getMore", "killCursors":
		return true, ""
	case "count":
		if level == "snapshot" {
			return false, "read concern snapshot not supported"
		}
		return true, ""
	}
	return level == "local", "read concern not supported"
}

// checkReadConcern validates the readConcern of a command and refuses
// what a standalone cannot honour, in mongod's order: parse, then the
// command's support for the level, then what waitForReadConcern refuses on
// a node without replication (src/mongo/db/read_concern_mongod.cpp).
func (e *Engine) checkReadConcern(r *Request, cmd string) error {
	v, ok := r.Arg("readConcern")
	if !ok {
		return nil
	}
	if _, isDoc := v.(bson.D); !isDoc && v != nil && cmd == "find" {
		// find_command.idl types readConcern as an object; the IDL parser
		// checks it before the generic read concern parsing.
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'find.readConcern' is the wrong type '%s', expected type 'object'", bsonx.TypeName(v))
	}
	rc, err := parseReadConcern(v)
	if err != nil {
		return err
	}
	level := rc.effectiveLevel()
	supportOf := cmd
	if inner, ok := r.Cmd[0].Value.(bson.D); ok && cmd == "explain" && len(inner) > 0 {
		// explain supports what the explained command supports.
		if ic := LookupCommand(inner[0].Key); ic != nil {
			supportOf = ic.Name
		}
	}
	if rc.level != "" {
		if ok, why := readConcernSupport(supportOf, level); !ok {
			return mongoerr.New(mongoerr.InvalidOptions, "Command %s does not support %s :: caused by :: %s", cmd, rc, why)
		}
	}
	if ok, _ := readConcernSupport(supportOf, level); !ok {
		return nil // no level given on a command without read concern support
	}
	if e != nil && e.repl != nil {
		return e.checkReplReadConcern(rc, level)
	}
	switch {
	case level == "linearizable":
		return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use read concern")
	case level == "snapshot":
		return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use readConcern: snapshot")
	case rc.afterClusterTime != nil:
		return mongoerr.New(mongoerr.IllegalOperation, "Cannot specify afterClusterTime readConcern without replication enabled")
	case rc.afterOpTime:
		return mongoerr.New(mongoerr.NotAReplicaSet, "node needs to be a replica set member to use read concern")
	}
	return nil
}

// checkReplReadConcern is what a one-member replica set's primary refuses:
// an afterClusterTime it has not reached (mongod's check before waiting
// for it), and snapshot reads, which mayfly cannot serve at a point in
// time yet. Every other level is served as local: with one member, every
// write is majority-committed once applied.
func (e *Engine) checkReplReadConcern(rc *readConcern, level string) error {
	switch {
	case level == "snapshot" || rc.atClusterTime != nil:
		return mongoerr.New(mongoerr.NotImplemented, "readConcern level snapshot is not supported by mayfly yet")
	case rc.afterClusterTime != nil:
		if cur := e.opTime.Last(); tsAfter(*rc.afterClusterTime, cur) {
			return mongoerr.New(mongoerr.InvalidOptions, "readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: { ts: Timestamp(%d, %d) }; current clusterTime: { ts: Timestamp(%d, %d) }",
				rc.afterClusterTime.T, rc.afterClusterTime.I, cur.T, cur.I)
		}
	}
	return nil
}
