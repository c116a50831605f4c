package agg

import (
	"context"
	"crypto/sha256"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// $currentOp, $listLocalSessions and $listSessions, as a standalone mongod
// 7.0 parses and runs them (document_source_current_op.cpp,
// document_source_list_local_sessions.cpp, document_source_list_sessions.cpp).

// CurrentOpOptions are $currentOp's settings.
type CurrentOpOptions struct {
	IdleConnections, IdleSessions, AllUsers, LocalOps, TruncateOps, IdleCursors, Backtrace bool
}

// OpsEnv is implemented by an Env that knows the server's operations and
// logical sessions.
type OpsEnv interface {
	// CurrentOp returns one document per operation (and per idle
	// connection when asked).
	CurrentOp(ctx context.Context, opts CurrentOpOptions) ([]bson.D, error)
	// LocalSessions returns the session cache's records whose user digest
	// is one of uids (nil: every user).
	LocalSessions(ctx context.Context, uids []bson.Binary) ([]bson.D, error)
}

type currentOpStage struct{ opts CurrentOpOptions }

func (*currentOpStage) name() string { return "$currentOp" }

func (s *currentOpStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	oe, ok := rc.env.(OpsEnv)
	if !ok {
		return Slice(nil), nil
	}
	docs, err := oe.CurrentOp(ctx, s.opts)
	if err != nil {
		return nil, err
	}
	return Slice(docs), nil
}

type listLocalSessionsStage struct{ uids []bson.Binary }

func (*listLocalSessionsStage) name() string { return "$listLocalSessions" }

func (s *listLocalSessionsStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	oe, ok := rc.env.(OpsEnv)
	if !ok {
		return Slice(nil), nil
	}
	docs, err := oe.LocalSessions(ctx, s.uids)
	if err != nil {
		return nil, err
	}
	return Slice(docs), nil
}

// listSessionsStage is a $match over config.system.sessions by user.
type listSessionsStage struct{ m *query.Matcher }

func (*listSessionsStage) name() string { return "$listSessions" }

func (s *listSessionsStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	if s.m == nil {
		return in, nil
	}
	return mapIter(in, func(d bson.D) (bson.D, error) {
		if s.m.Matches(d) {
			return d, nil
		}
		return nil, nil
	}), nil
}

// userDigest is mongod's getLogicalSessionUserDigestFor: SHA-256 of
// "user@db", or of nothing for the unauthenticated user ("", "").
func userDigest(user, db string) bson.Binary {
	var h [32]byte
	if user == "" && db == "" {
		h = sha256.Sum256(nil)
	} else {
		h = sha256.Sum256([]byte(user + "@" + db))
	}
	return bson.Binary{Subtype: 0, Data: h[:]}
}

// parseListSessionsSpec is mongod's listSessionsParseSpec (the
// ListSessionsSpec IDL): it returns the user digests to list, nil for all.
func parseListSessionsSpec(stage string, spec any) ([]bson.Binary, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "%s options must be specified in an object, but found: %s", stage, bsonx.TypeName(spec))
	}
	allUsers := false
	var users []bson.Binary
	hasUsers := false
	for _, e := range d {
		switch e.Key {
		case "allUsers":
			b, ok := e.Value.(bool)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.allUsers' is the wrong type '%s', expected type 'bool'", stage, bsonx.TypeName(e.Value))
			}
			allUsers = b
		case "users":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.users' is the wrong type '%s', expected type 'array'", stage, bsonx.TypeName(e.Value))
			}
			hasUsers = true
			for _, u := range arr {
				ud, ok := u.(bson.D)
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.users' is the wrong type '%s', expected type 'object'", stage, bsonx.TypeName(u))
				}
				var name, db string
				var hasName, hasDB bool
				for _, f := range ud {
					s, isStr := f.Value.(string)
					switch f.Key {
					case "user", "db":
						if !isStr {
							return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'ListSessionsUser.%s' is the wrong type '%s', expected type 'string'", f.Key, bsonx.TypeName(f.Value))
						}
						if f.Key == "user" {
							name, hasName = s, true
						} else {
							db, hasDB = s, true
						}
					default:
						return nil, mongoerr.New(40415, "BSON field 'ListSessionsUser.%s' is an unknown field.", f.Key)
					}
				}
				if !hasName {
					return nil, mongoerr.New(40414, "BSON field 'ListSessionsUser.user' is missing but a required field")
				}
				if !hasDB {
					return nil, mongoerr.New(40414, "BSON field 'ListSessionsUser.db' is missing but a required field")
				}
				users = append(users, userDigest(name, db))
			}
		case "$_internalPredicate":
			if _, ok := e.Value.(bson.D); !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.$_internalPredicate' is the wrong type '%s', expected type 'object'", stage, bsonx.TypeName(e.Value))
			}
		default:
			return nil, mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", stage, e.Key)
		}
	}
	if allUsers && len(users) > 0 {
		return nil, mongoerr.New(12, "%s may not specify {allUsers:true} and {users:[...]} at the same time", stage)
	}
	if allUsers {
		return nil, nil
	}
	if !hasUsers || len(users) == 0 {
		return []bson.Binary{userDigest("", "")}, nil // the implicit request for oneself
	}
	return users, nil
}

func init() {
	stageParsers["$currentOp"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "$currentOp options must be specified in an object, but found: %s", bsonx.TypeName(spec))
		}
		// The lite parse checks allUsers and localOps first, with
		// TypeMismatch; the full parse the rest, with FailedToParse.
		for _, e := range d {
			if e.Key == "allUsers" || e.Key == "localOps" {
				if _, ok := e.Value.(bool); !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "The '%s' parameter of the $currentOp stage must be a boolean value, but found: %s", e.Key, bsonx.TypeName(e.Value))
				}
			}
		}
		if opts.DB != "admin" || opts.Coll != "" || opts.inLookup {
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}")
		}
		s := &currentOpStage{opts: CurrentOpOptions{IdleSessions: true}}
		for _, e := range d {
			var dst *bool
			switch e.Key {
			case "idleConnections":
				dst = &s.opts.IdleConnections
			case "idleSessions":
				dst = &s.opts.IdleSessions
			case "allUsers":
				dst = &s.opts.AllUsers
			case "localOps":
				dst = &s.opts.LocalOps
			case "truncateOps":
				dst = &s.opts.TruncateOps
			case "idleCursors":
				dst = &s.opts.IdleCursors
			case "backtrace":
				dst = &s.opts.Backtrace
			default:
				return nil, mongoerr.New(mongoerr.FailedToParse, "Unrecognized option '%s' in $currentOp stage.", e.Key)
			}
			b, ok := e.Value.(bool)
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "The '%s' parameter of the $currentOp stage must be a boolean value, but found: %s", e.Key, bsonx.TypeName(e.Value))
			}
			*dst = b
		}
		return s, nil
	}
	stageParsers["$listLocalSessions"] = func(spec any, opts *Options) (stage, error) {
		uids, err := parseListSessionsSpec("$listLocalSessions", spec)
		if err != nil {
			return nil, err
		}
		if opts.Coll != "" || opts.inLookup {
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection")
		}
		return &listLocalSessionsStage{uids: uids}, nil
	}
	stageParsers["$listSessions"] = func(spec any, opts *Options) (stage, error) {
		uids, err := parseListSessionsSpec("$listSessions", spec)
		if err != nil {
			return nil, err
		}
		if opts.DB != "config" || opts.Coll != "system.sessions" || opts.inLookup {
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$listSessions may only be run against config.system.sessions")
		}
		if uids == nil {
			return &listSessionsStage{}, nil
		}
		in := bson.A{}
		for _, u := range uids {
			in = append(in, u)
		}
		m, err := query.Compile(bson.D{{Key: "_id.uid", Value: bson.D{{Key: "$in", Value: in}}}})
		if err != nil {
			return nil, err
		}
		return &listSessionsStage{m: m}, nil
	}
	firstOnly["$currentOp"] = true
	firstOnly["$listLocalSessions"] = true
}
