package engine

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// maxReplSetMembers bounds a numeric w as mongod does (ReplSetConfig's
// kMaxMembers) before the standalone check refuses w > 1.
const maxReplSetMembers = 50

// writeConcern is a parsed writeConcern argument.
type writeConcern struct {
	// sync: j or fsync is truthy; the write's batch commits with a WAL
	// sync before the reply.
	sync bool
	// unsatisfiable is, on a replica set, why the write concern cannot be
	// met (reported as writeConcernError after the write); doc is the
	// write concern as given.
	unsatisfiable *mongoerr.Error
	doc           bson.D
}

// wcContext names fields in the errors of mongod's IDL parser
// (WriteConcernIdl parsed with IDLParserContext "WriteConcernOptions").
const wcContext = "WriteConcernOptions"

// parseWriteConcern parses the command's writeConcern the way mongod 7.0
// does (write_concern_options.{idl,cpp}, validateWriteConcern for a
// standalone):
//   - j and fsync are safeBool: bool or any number (int, long, double,
//     decimal), true when non-zero; null and undefined count as absent;
//     other types fail with TypeMismatch. Both truthy: FailedToParse.
//   - w is a number (0..50), a string or a tag document; null/undefined
//     mean the default. On a standalone w > 1, a mode other than
//     "majority" and tags are refused with BadValue.
//   - wtimeout takes any value (non-numbers count as 0); wElectionId,
//     wOpTime and getLastError are ignored; provenance is an enumeration;
//     any other field is an unknown field (40415), a repeated one a
//     duplicate (40413).
func parseWriteConcern(cmd bson.D) (writeConcern, error) { return parseWriteConcernIn(cmd, false) }

// parseWriteConcernIn is parseWriteConcern on a standalone (repl false) or
// on the primary of a one-member replica set.
func parseWriteConcernIn(cmd bson.D, repl bool) (writeConcern, error) {
	var wc writeConcern
	v, ok := bsonx.Get(cmd, "writeConcern")
	if !ok || v == nil {
		return wc, nil
	}
	doc, isDoc := v.(bson.D)
	if !isDoc {
		return wc, mongoerr.New(mongoerr.TypeMismatch, "\"writeConcern\" had the wrong type. Expected object, found %s", bsonx.TypeName(v))
	}
	var (
		j, fsync bool
		wSet     bool
		wNum     int64 = 1
		wMode    string
		wTags    bson.D
	)
	seen := make(map[string]bool, len(doc))
	for _, f := range doc {
		if seen[f.Key] {
			return wc, mongoerr.New(40413, "BSON field '%s.%s' is a duplicate field", wcContext, f.Key)
		}
		seen[f.Key] = true
		switch f.Key {
		case "w":
			switch w := f.Value.(type) {
			case int32, int64, float64, bson.Decimal128:
				n := safeNumberLong(w)
				if n < 0 || n > maxReplSetMembers {
					return wc, mongoerr.New(mongoerr.FailedToParse, "w has to be a non-negative number and not greater than %d; found: %d", maxReplSetMembers, n)
				}
				wSet, wNum, wMode, wTags = true, n, "", nil
			case string:
				wSet, wNum, wMode, wTags = true, 0, w, nil
			case bson.D:
				if len(w) == 0 {
					return wc, mongoerr.New(mongoerr.FailedToParse, "tagged write concern requires tags")
				}
				for _, t := range w {
					if !bsonx.IsNumber(t.Value) {
						return wc, mongoerr.New(mongoerr.FailedToParse, "tags must be a single level document with only number values; found: %s: %s", t.Key, valString(t.Value))
					}
				}
				wSet, wNum, wMode, wTags = true, 0, "", w
			case nil, bson.Null, bson.Undefined:
			default:
				return wc, mongoerr.New(mongoerr.FailedToParse, "w has to be a number, string, or object; found: %s", bsonx.TypeName(w))
			}
		case "j", "fsync":
			b, err := safeBool(f.Key, f.Value)
			if err != nil {
				return wc, err
			}
			if f.Key == "j" {
				j = b
			} else {
				fsync = b
			}
		case "wtimeout", "wElectionId", "wOpTime", "getLastError":
			// wtimeout: any type is accepted; a standalone never waits.
		case "provenance":
			switch p := f.Value.(type) {
			case nil, bson.Null, bson.Undefined:
			case string:
				switch p {
				case "clientSupplied", "implicitDefault", "customDefault", "getLastErrorDefaults", "internalWriteDefault":
				default:
					return wc, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '%s.provenance' is not a valid value.", p, wcContext)
				}
			default:
				return wc, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.provenance' is the wrong type '%s', expected type 'string'", wcContext, bsonx.TypeName(p))
			}
		default:
			return wc, mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", wcContext, f.Key)
		}
	}
	if j && fsync {
		return wc, mongoerr.New(mongoerr.FailedToParse, "fsync and j options cannot be used together")
	}
	if wSet && repl {
		// A one-member replica set: w > 1 and modes other than majority
		// parse, and fail after the write as mongod's wait for them does
		// (a writeConcernError; replWriteConcernError).
		switch {
		case wTags != nil:
			wc.unsatisfiable = mongoerr.New(mongoerr.UnknownReplWriteConcern, "No write concern mode named '%s' found in replica set configuration", valString(wTags))
		case wMode != "" && wMode != "majority":
			wc.unsatisfiable = mongoerr.New(mongoerr.UnknownReplWriteConcern, "No write concern mode named '%s' found in replica set configuration", wMode)
		case wMode == "" && wNum > 1:
			wc.unsatisfiable = mongoerr.New(mongoerr.UnsatisfiableWriteConcern, "Not enough data-bearing nodes")
		}
		wc.doc = doc
	} else if wSet {
		switch {
		case wTags != nil:
			return wc, mongoerr.New(mongoerr.BadValue, "cannot use non-majority 'w' mode %s when a host is not a member of a replica set", valString(wTags))
		case wMode != "" && wMode != "majority":
			return wc, mongoerr.New(mongoerr.BadValue, "cannot use non-majority 'w' mode %s when a host is not a member of a replica set", wMode)
		case wMode == "" && wNum > 1:
			return wc, mongoerr.New(mongoerr.BadValue, "cannot use 'w' > 1 when a host is not replicated")
		}
	}
	wc.sync = j || fsync
	return wc, nil
}

// safeBool is mongod's IDL safeBool: bool or a number, true when non-zero
// (BSONElement::trueValue; NaN is non-zero).
func safeBool(field string, v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case int32:
		return b != 0, nil
	case int64:
		return b != 0, nil
	case float64:
		return b != 0, nil
	case bson.Decimal128:
		// NaN and the infinities are non-zero; BigInt fails only on them.
		bi, _, err := b.BigInt()
		return err != nil || bi.Sign() != 0, nil
	case nil, bson.Null, bson.Undefined:
		return false, nil
	}
	return false, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double']", wcContext, field, bsonx.TypeName(v))
}

// safeNumberLong is BSONElement::safeNumberLong: doubles and decimals
// truncate toward zero, NaN is 0, out-of-range values clamp.
func safeNumberLong(v any) int64 {
	switch n := v.(type) {
	case int32:
		return int64(n)
	case int64:
		return n
	}
	f, _ := bsonx.ToFloat(v)
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// replWriteConcernError returns the writeConcernError a one-member replica
// set's primary reports after a command whose write concern it cannot
// meet (w > 1, an unknown mode), or nil.
func (e *Engine) replWriteConcernError(r *Request) bson.D {
	if e.repl == nil {
		return nil
	}
	if _, ok := r.Arg("writeConcern"); !ok {
		return nil
	}
	wc, err := parseWriteConcernIn(r.Cmd, true)
	if err != nil || wc.unsatisfiable == nil {
		return nil
	}
	given := bson.D{}
	for _, f := range wc.doc {
		if f.Key == "w" || f.Key == "wtimeout" || f.Key == "j" || f.Key == "fsync" {
			given = append(given, f)
		}
	}
	if _, ok := bsonx.Get(given, "wtimeout"); !ok {
		given = append(given, bson.E{Key: "wtimeout", Value: int32(0)})
	}
	given = append(given, bson.E{Key: "provenance", Value: "clientSupplied"})
	return bson.D{
		{Key: "code", Value: wc.unsatisfiable.Code},
		{Key: "codeName", Value: wc.unsatisfiable.CodeName()},
		{Key: "errmsg", Value: wc.unsatisfiable.Msg},
		{Key: "errInfo", Value: bson.D{{Key: "writeConcern", Value: given}}},
	}
}
