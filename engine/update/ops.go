package update

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// leaf is one operator applied to one path.
type leaf struct {
	op     string
	path   []string // components of the target path
	dotted string   // the target path as written
	arg    any      // the operator's argument

	// $push / $addToSet
	each     bson.A
	slice    *int64
	position *int64
	hasSort  bool
	sortDir  int                   // 1/-1 to sort whole elements
	sortCmp  func(a, b bson.D) int // sort by a pattern
	// $pop: -1 removes the first element, 1 the last
	pop int
	// $pull / $pullAll: whether an element goes
	pull func(v any) bool
	// $bit
	bits []bitOp
	// $currentDate
	timestamp bool
	// $rename: the source path
	from       []string
	fromDotted string
}

type bitOp struct {
	op string
	v  any // int32 or int64
}

type opParser func(a bson.E, u *Update) (*leaf, error)

var ops map[string]opParser

func init() {
	ops = map[string]opParser{
		"$set":         func(a bson.E, _ *Update) (*leaf, error) { return &leaf{arg: a.Value}, nil },
		"$setOnInsert": func(a bson.E, _ *Update) (*leaf, error) { return &leaf{arg: a.Value}, nil },
		"$unset":       func(a bson.E, _ *Update) (*leaf, error) { return &leaf{arg: a.Value}, nil },
		"$inc":         parseArith("increment"),
		"$mul":         parseArith("multiply"),
		"$min":         func(a bson.E, _ *Update) (*leaf, error) { return &leaf{arg: a.Value}, nil },
		"$max":         func(a bson.E, _ *Update) (*leaf, error) { return &leaf{arg: a.Value}, nil },
		"$currentDate": parseCurrentDate,
		"$push":        parsePush,
		"$addToSet":    parseAddToSet,
		"$pop":         parsePop,
		"$pull":        parsePull,
		"$pullAll":     parsePullAll,
		"$bit":         parseBit,
		"$rename":      nil, // handled by addRename
	}
}

func parseArith(verb string) opParser {
	return func(a bson.E, _ *Update) (*leaf, error) {
		if !bsonx.IsNumber(a.Value) {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Cannot %s with non-numeric argument: {%s}", verb, fmtElem(a.Key, a.Value))
		}
		return &leaf{arg: a.Value}, nil
	}
}

func parseCurrentDate(a bson.E, _ *Update) (*leaf, error) {
	switch v := a.Value.(type) {
	case bool:
		return &leaf{arg: v}, nil
	case bson.D:
		found := false
		ts := false
		for _, e := range v {
			if e.Key != "$type" {
				return nil, mongoerr.New(mongoerr.BadValue, "Unrecognized $currentDate option: %s", e.Key)
			}
			// Other values are ignored, as by mongod: only a valid
			// $type counts.
			if s, ok := e.Value.(string); ok && (s == "date" || s == "timestamp") {
				found, ts = true, s == "timestamp"
			}
		}
		if !found {
			return nil, mongoerr.New(mongoerr.BadValue, "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
		}
		return &leaf{arg: v, timestamp: ts}, nil
	}
	return nil, mongoerr.New(mongoerr.BadValue, "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).", bsonx.TypeName(a.Value))
}

// integral reads $slice / $position: any number holding an integer.
func integral(v any) (int64, bool) {
	if !bsonx.IsNumber(v) {
		return 0, false
	}
	if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return 0, false
	}
	return bsonx.ToInt64(v)
}

func parsePush(a bson.E, _ *Update) (*leaf, error) {
	l := &leaf{arg: a.Value}
	d, ok := a.Value.(bson.D)
	if !ok {
		l.each = bson.A{a.Value}
		return l, nil
	}
	eachV, hasEach := bsonx.Get(d, "$each")
	if !hasEach {
		l.each = bson.A{a.Value}
		return l, nil
	}
	each, ok := eachV.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "The argument to $each in $push must be an array but it was of type: %s", bsonx.TypeName(eachV))
	}
	l.each = each
	seen := map[string]bool{}
	for _, e := range d {
		if seen[e.Key] {
			return nil, mongoerr.New(mongoerr.BadValue, "Only one %s is supported.", e.Key)
		}
		seen[e.Key] = true
		switch e.Key {
		case "$each":
		case "$slice":
			n, ok := integral(e.Value)
			if !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "The value for $slice must be an integer value but was given type: %s", bsonx.TypeName(e.Value))
			}
			l.slice = &n
		case "$position":
			n, ok := integral(e.Value)
			if !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "The value for $position must be an integer value, not of type: %s", bsonx.TypeName(e.Value))
			}
			l.position = &n
		case "$sort":
			if err := parsePushSort(l, e.Value); err != nil {
				return nil, err
			}
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "Unrecognized clause in $push: %s", e.Key)
		}
	}
	return l, nil
}

func parsePushSort(l *leaf, v any) error {
	l.hasSort = true
	if bsonx.IsNumber(v) {
		n, ok := bsonx.ToInt64(v)
		if !ok || (n != 1 && n != -1) {
			return mongoerr.New(mongoerr.BadValue, "The $sort element value must be either 1 or -1")
		}
		l.sortDir = int(n)
		return nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return mongoerr.New(mongoerr.BadValue, "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
	}
	if len(d) == 0 {
		return mongoerr.New(mongoerr.BadValue, "The $sort pattern is empty when it should be a set of fields.")
	}
	for _, e := range d {
		if e.Key == "" || strings.HasPrefix(e.Key, ".") || strings.HasSuffix(e.Key, ".") || strings.Contains(e.Key, "..") {
			return mongoerr.New(mongoerr.BadValue, "The $sort field is a dotted field but has an empty part: %s", e.Key)
		}
		n, ok := bsonx.ToInt64(e.Value)
		if !bsonx.IsNumber(e.Value) || !ok || (n != 1 && n != -1) {
			return mongoerr.New(mongoerr.BadValue, "The $sort element value must be either 1 or -1")
		}
	}
	cmp, err := compileSort(d)
	if err != nil {
		return err
	}
	l.sortCmp = cmp
	return nil
}

func parseAddToSet(a bson.E, _ *Update) (*leaf, error) {
	l := &leaf{arg: a.Value}
	vals := bson.A{a.Value}
	if d, ok := a.Value.(bson.D); ok && len(d) > 0 && d[0].Key == "$each" {
		each, ok := d[0].Value.(bson.A)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "The argument to $each in $addToSet must be an array but it was of type %s", bsonx.TypeName(d[0].Value))
		}
		if len(d) > 1 {
			return nil, mongoerr.New(mongoerr.BadValue, "Found unexpected fields after $each in $addToSet: %s", fmtDoc(d))
		}
		vals = each
	}
	// Duplicates within $each are added once, keeping the first.
	for _, v := range vals {
		if !containsValue(l.each, v) {
			l.each = append(l.each, v)
		}
	}
	if l.each == nil {
		l.each = bson.A{}
	}
	return l, nil
}

func containsValue(a bson.A, v any) bool {
	for _, e := range a {
		if bsonx.Compare(e, v) == 0 {
			return true
		}
	}
	return false
}

func parsePop(a bson.E, _ *Update) (*leaf, error) {
	n, err := parseIntegerElement(a)
	if err != nil {
		return nil, err
	}
	if n != 1 && n != -1 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$pop expects 1 or -1, found: %d", n)
	}
	return &leaf{arg: a.Value, pop: int(n)}, nil
}

// parseIntegerElement reads a number holding an integer, with the errors of
// mongod's MatchExpressionParser::parseIntegerElementToLong.
func parseIntegerElement(a bson.E) (int64, error) {
	if !bsonx.IsNumber(a.Value) {
		return 0, mongoerr.New(mongoerr.FailedToParse, "Expected a number in: %s", fmtElem(a.Key, a.Value))
	}
	if bsonx.IsNaN(a.Value) {
		return 0, mongoerr.New(mongoerr.FailedToParse, "Expected an integer, but found NaN in: %s", fmtElem(a.Key, a.Value))
	}
	if n, ok := bsonx.ToInt64(a.Value); ok {
		return n, nil
	}
	if f, _ := bsonx.ToFloat(a.Value); f == math.Trunc(f) {
		return 0, mongoerr.New(mongoerr.FailedToParse, "Cannot represent as a 64-bit integer: %s", fmtElem(a.Key, a.Value))
	}
	return 0, mongoerr.New(mongoerr.FailedToParse, "Expected an integer: %s", fmtElem(a.Key, a.Value))
}

// pathAcceptingOps are the query operators that, first in a $pull argument,
// make it a condition on the elements themselves ({$gte: 6}) rather than a
// query on embedded documents ({size: "M"}).
var pathAcceptingOps = map[string]bool{
	"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true,
	"$in": true, "$nin": true, "$exists": true, "$type": true, "$mod": true,
	"$regex": true, "$options": true, "$elemMatch": true, "$size": true, "$all": true,
	"$not": true, "$bitsAllSet": true, "$bitsAllClear": true, "$bitsAnySet": true,
	"$bitsAnyClear": true, "$geoWithin": true, "$geoIntersects": true, "$near": true,
	"$nearSphere": true, "$within": true,
}

const pullKey = "pull"

func parsePull(a bson.E, _ *Update) (*leaf, error) {
	l := &leaf{arg: a.Value}
	d, ok := a.Value.(bson.D)
	_, isRegex := a.Value.(bson.Regex)
	switch {
	case (ok && len(d) > 0 && pathAcceptingOps[d[0].Key]) || isRegex:
		// A condition on the element itself ({$gte: 6}, /re/): match the
		// element wrapped in a document, as mongod's WrappedObjectMatcher.
		m, err := compileFilter(bson.D{{Key: pullKey, Value: a.Value}})
		if err != nil {
			return nil, err
		}
		l.pull = func(v any) bool { return m.Matches(bson.D{{Key: pullKey, Value: v}}) }
	case ok:
		// A query on embedded documents ({size: "M"}); other elements
		// never match (ObjectMatcher).
		m, err := compileFilter(d)
		if err != nil {
			return nil, err
		}
		l.pull = func(v any) bool {
			vd, ok := v.(bson.D)
			return ok && m.Matches(vd)
		}
	default:
		// Plain values and arrays: equality in BSON order (EqualityMatcher).
		arg := a.Value
		l.pull = func(v any) bool { return bsonx.Compare(v, arg) == 0 }
	}
	return l, nil
}

func parsePullAll(a bson.E, _ *Update) (*leaf, error) {
	vals, ok := a.Value.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "$pullAll requires an array argument but was given a %s", bsonx.TypeName(a.Value))
	}
	return &leaf{arg: a.Value, pull: func(v any) bool { return containsValue(vals, v) }}, nil
}

func parseBit(a bson.E, _ *Update) (*leaf, error) {
	d, ok := a.Value.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "The $bit modifier is not compatible with a %s. You must pass in an embedded document: {$bit: {field: {and/or/xor: #}}", bsonx.TypeName(a.Value))
	}
	if len(d) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}")
	}
	l := &leaf{arg: a.Value}
	for _, e := range d {
		if e.Key != "and" && e.Key != "or" && e.Key != "xor" {
			return nil, mongoerr.New(mongoerr.BadValue, "The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s}", e.Key, fmtElem(e.Key, e.Value))
		}
		switch e.Value.(type) {
		case int32, int64:
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: {%s}", bsonx.TypeName(e.Value), fmtElem(e.Key, e.Value))
		}
		l.bits = append(l.bits, bitOp{e.Key, e.Value})
	}
	return l, nil
}

// addRename adds $rename's two nodes: a placeholder at the source (so that no
// other operator may touch it) and the rename itself at the destination.
func (u *Update) addRename(a bson.E, used map[string]bool) error {
	ph := &leaf{op: "$rename.from"}
	if err := u.addPath(a.Key, ph, used); err != nil {
		return err
	}
	to, ok := a.Value.(string)
	if !ok {
		return mongoerr.New(mongoerr.BadValue, "The 'to' field for $rename must be a string: %s", fmtElem(a.Key, a.Value))
	}
	from := ph.path
	toParts, err := splitPath(to)
	if err != nil {
		return err
	}
	if a.Key == to {
		return mongoerr.New(mongoerr.BadValue, "The source and target field for $rename must differ: %s", fmtElem(a.Key, a.Value))
	}
	if prefixOf(from, toParts) || prefixOf(toParts, from) {
		return mongoerr.New(mongoerr.BadValue, "The source and target field for $rename must not be on the same path: %s", fmtElem(a.Key, a.Value))
	}
	for _, p := range from {
		if p == "$" || isIdentifierPart(p) {
			return mongoerr.New(mongoerr.BadValue, "The source field for $rename may not be dynamic: %s", a.Key)
		}
	}
	for _, p := range toParts {
		if p == "$" || isIdentifierPart(p) {
			return mongoerr.New(mongoerr.BadValue, "The destination field for $rename may not be dynamic: %s", to)
		}
	}
	l := &leaf{op: "$rename", arg: a.Value, from: from, fromDotted: a.Key}
	return u.addPath(to, l, used)
}

func prefixOf(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
