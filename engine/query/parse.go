package query

// Parsing of filters into match trees. Every check mongod makes when it
// parses a filter is made here, with its error codes and messages, so that
// a compiled Matcher cannot fail except in $expr evaluation.

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

type parser struct {
	hasExpr bool
	rt      *expr.Runtime // given to $expr evaluations (CompileWithRuntime)
}

func badValue(format string, args ...any) error {
	return mongoerr.New(mongoerr.BadValue, format, args...)
}

func and(nodes []node) node {
	switch len(nodes) {
	case 0:
		return constNode(true)
	case 1:
		return nodes[0]
	}
	return andNode(nodes)
}

func (p *parser) parseFilter(d bson.D, depth int) (node, error) {
	if depth > maxDepth {
		return nil, badValue("exceeded maximum query tree depth of %d", maxDepth)
	}
	var nodes []node
	for _, e := range d {
		var (
			n   node
			err error
		)
		if strings.HasPrefix(e.Key, "$") {
			n, err = p.parseTopLevel(e.Key, e.Value, depth)
		} else {
			n, err = p.parseField(newFieldPath(e.Key), e.Value, depth)
		}
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	return and(nodes), nil
}

func (p *parser) parseTopLevel(key string, v any, depth int) (node, error) {
	switch key {
	case "$and", "$or", "$nor":
		arr, ok := v.(bson.A)
		if !ok {
			return nil, badValue("%s must be an array", key)
		}
		if len(arr) == 0 {
			return nil, badValue("$and/$or/$nor must be a nonempty array")
		}
		kids := make([]node, 0, len(arr))
		for _, e := range arr {
			d, ok := e.(bson.D)
			if !ok {
				return nil, badValue("$or/$and/$nor entries need to be full objects")
			}
			n, err := p.parseFilter(d, depth+1)
			if err != nil {
				return nil, err
			}
			kids = append(kids, n)
		}
		switch key {
		case "$and":
			return and(kids), nil
		case "$or":
			if len(kids) == 1 {
				return kids[0], nil
			}
			return orNode(kids), nil
		}
		return norNode(kids), nil
	case "$comment":
		return nil, nil
	case "$id", "$ref", "$db":
		// DBRef fields (mongod's parseDBRef): an equality on the field of
		// that name, whatever the value, e.g. inside
		// {members: {$elemMatch: {$id: oid}}}.
		return newEq(newFieldPath(key), v)
	case "$expr":
		e, err := expr.Compile(v)
		if err != nil {
			return nil, err
		}
		p.hasExpr = true
		return exprNode{e: e, rt: p.rt}, nil
	case "$alwaysTrue", "$alwaysFalse":
		if n, ok := bsonx.ToInt64(v); !ok || n != 1 {
			return nil, badValue("%s must be an integer value of 1", key)
		}
		return constNode(key == "$alwaysTrue"), nil
	case "$where":
		return nil, badValue("$where is not supported: mayfly does not run server-side JavaScript")
	case "$text":
		return nil, mongoerr.New(mongoerr.IndexNotFound, "text index required for $text query")
	case "$jsonSchema":
		return nil, mongoerr.New(mongoerr.NotImplemented, "$jsonSchema is not supported by mayfly")
	case "$sampleRate":
		return nil, mongoerr.New(mongoerr.NotImplemented, "$sampleRate is not supported by mayfly")
	}
	return nil, badValue("unknown top level operator: %s. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.", key)
}

// isOperatorDoc reports whether a field's value is an operator document
// ({$gt: 1}) rather than a literal to compare with. DBRefs (documents with
// both $ref and $id) are literals; an incomplete one ({$id: 1}) is an
// operator document, as in mongod's isExpressionDocument(e, false).
func isOperatorDoc(v any) (bson.D, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
		return nil, false
	}
	if isDBRefDoc(d, false) {
		return nil, false
	}
	return d, true
}

// isDBRefDoc is mongod's isDBRefDocument: a document with $ref and $id
// (with allowIncomplete, with any of $ref, $id or $db).
func isDBRefDoc(d bson.D, allowIncomplete bool) bool {
	var hasRef, hasID, hasDB bool
	for _, e := range d {
		switch e.Key {
		case "$ref":
			hasRef = true
		case "$id":
			hasID = true
		case "$db":
			hasDB = true
		}
	}
	if allowIncomplete {
		return hasRef || hasID || hasDB
	}
	return hasRef && hasID
}

func (p *parser) parseField(fp fieldPath, v any, depth int) (node, error) {
	if ops, ok := isOperatorDoc(v); ok {
		nodes, err := p.parseOps(fp, ops, depth)
		if err != nil {
			return nil, err
		}
		return and(nodes), nil
	}
	if r, ok := v.(bson.Regex); ok {
		rp, err := newRegexPred(r.Pattern, r.Options)
		if err != nil {
			return nil, err
		}
		return &pathNode{path: fp, pred: rp}, nil
	}
	return newEq(fp, v)
}

func newEq(fp fieldPath, v any) (node, error) {
	if _, ok := v.(bson.Undefined); ok {
		return nil, badValue("cannot compare to undefined")
	}
	return &pathNode{path: fp, pred: &eqPred{val: v, null: isNullish(v)}}, nil
}

// parseOps compiles an operator document {$op: arg, ...} on one path; each
// operator becomes its own node (they are ANDed, each traversing the path
// independently, as in mongod).
func (p *parser) parseOps(fp fieldPath, ops bson.D, depth int) ([]node, error) {
	var (
		nodes                []node
		regex, options       any
		hasRegex, hasOptions bool
		regexFirst           bool
	)
	for _, e := range ops {
		switch e.Key {
		case "$regex":
			regex, hasRegex = e.Value, true
			regexFirst = !hasOptions
			continue
		case "$options":
			options, hasOptions = e.Value, true
			continue
		}
		n, err := p.parseOp(fp, e.Key, e.Value, depth)
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	if hasOptions && !hasRegex {
		return nil, badValue("$options needs a $regex")
	}
	if hasRegex {
		opts := ""
		if hasOptions {
			s, ok := options.(string)
			if !ok {
				return nil, badValue("$options has to be a string")
			}
			opts = s
		}
		var pattern string
		switch r := regex.(type) {
		case string:
			pattern = r
		case bson.Regex:
			if hasOptions && r.Options != "" {
				code := int32(51074)
				if regexFirst {
					code = 51075
				}
				return nil, mongoerr.New(code, "options set in both $regex and $options")
			}
			pattern = r.Pattern
			if !hasOptions {
				opts = r.Options
			}
		default:
			return nil, badValue("$regex has to be a string")
		}
		rp, err := newRegexPred(pattern, opts)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, &pathNode{path: fp, pred: rp})
	}
	return nodes, nil
}

func (p *parser) parseOp(fp fieldPath, op string, v any, depth int) (node, error) {
	path := func(pr pred) node { return &pathNode{path: fp, pred: pr} }
	switch op {
	case "$eq":
		return newEq(fp, v)
	case "$ne":
		if _, ok := v.(bson.Regex); ok {
			return nil, badValue("Can't have regex as arg to $ne.")
		}
		n, err := newEq(fp, v)
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	case "$lt", "$lte", "$gt", "$gte":
		if _, ok := v.(bson.Undefined); ok {
			return nil, badValue("cannot compare to undefined")
		}
		if _, ok := v.(bson.Regex); ok {
			return nil, badValue("Can't have RegEx as arg to predicate over field '%s'.", fp.full)
		}
		return path(newCmpPred(cmpOps[op], v)), nil
	case "$in", "$nin":
		ip, err := parseIn(op, v)
		if err != nil {
			return nil, err
		}
		if op == "$nin" {
			return notNode{path(ip)}, nil
		}
		return path(ip), nil
	case "$exists":
		if trueValue(v) {
			return path(existsPred{}), nil
		}
		return notNode{path(existsPred{})}, nil
	case "$type":
		tp, err := parseType(fp.full, v)
		if err != nil {
			return nil, err
		}
		return path(tp), nil
	case "$size":
		n, err := parseSize(v)
		if err != nil {
			return nil, err
		}
		return &pathNode{path: fp, pred: sizePred{n}, noExpand: true}, nil
	case "$mod":
		mp, err := parseMod(v)
		if err != nil {
			return nil, err
		}
		return path(mp), nil
	case "$all":
		return p.parseAll(fp, v, depth)
	case "$elemMatch":
		return p.parseElemMatch(fp, v, depth)
	case "$not":
		return p.parseNot(fp, v, depth)
	case "$bitsAllSet", "$bitsAnySet", "$bitsAllClear", "$bitsAnyClear":
		bp, err := parseBits(op, bitsOps[op], v)
		if err != nil {
			return nil, err
		}
		return path(bp), nil
	case "$near", "$nearSphere":
		return nil, mongoerr.New(291, "error processing query: planner returned error :: caused by :: unable to find index for $geoNear query")
	case "$geoWithin", "$geoIntersects", "$within", "$maxDistance", "$minDistance", "$geometry",
		"$box", "$center", "$centerSphere", "$polygon", "$uniqueDocs":
		return nil, mongoerr.New(mongoerr.NotImplemented, "%s is not supported by mayfly: geospatial queries are not implemented", op)
	case "$text", "$where":
		return nil, badValue("unknown operator: %s", op)
	}
	return nil, badValue("unknown operator: %s", op)
}

var (
	cmpOps  = map[string]int{"$lt": opLT, "$lte": opLTE, "$gt": opGT, "$gte": opGTE}
	bitsOps = map[string]int{"$bitsAllSet": bitsAllSet, "$bitsAnySet": bitsAnySet, "$bitsAllClear": bitsAllClear, "$bitsAnyClear": bitsAnyClear}
)

// trueValue is BSON truthiness as mongod's BSONElement::trueValue: false,
// zero, null and undefined are false; everything else is true.
func trueValue(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil, bson.Null, bson.Undefined:
		return false
	case int32:
		return x != 0
	case int:
		return x != 0
	case int64:
		return x != 0
	case float64:
		return x != 0
	case bson.Decimal128:
		return !x.IsZero()
	}
	return true
}

func parseIn(op string, v any) (*inPred, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, badValue("%s needs an array", op)
	}
	ip := &inPred{}
	for _, e := range arr {
		switch x := e.(type) {
		case bson.Regex:
			rp, err := newRegexPred(x.Pattern, x.Options)
			if err != nil {
				return nil, err
			}
			ip.regexes = append(ip.regexes, rp)
			continue
		case bson.Undefined:
			return nil, badValue("InMatchExpression equality cannot be undefined")
		}
		if _, ok := isOperatorDoc(e); ok {
			return nil, badValue("cannot nest $ under %s", op)
		}
		if isNullish(e) {
			ip.hasNull = true
			continue
		}
		ip.vals = append(ip.vals, e)
	}
	sort.SliceStable(ip.vals, func(i, j int) bool { return bsonx.Compare(ip.vals[i], ip.vals[j]) < 0 })
	return ip, nil
}

var typeAliases = map[string]int{
	"double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
	"objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
	"javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16,
	"timestamp": 17, "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
}

func parseType(path string, v any) (*typePred, error) {
	tp := &typePred{}
	add := func(e any) error {
		switch x := e.(type) {
		case string:
			if x == "number" {
				tp.number = true
				return nil
			}
			n, ok := typeAliases[x]
			if !ok {
				return badValue("Unknown type name alias: %s", x)
			}
			tp.set[byte(n)] = true
			return nil
		}
		if !bsonx.IsNumber(e) {
			return mongoerr.New(mongoerr.TypeMismatch, "type must be represented as a number or a string")
		}
		n, ok := bsonx.ToInt64(e)
		if !ok || !((n >= 1 && n <= 19) || n == -1 || n == 127) {
			return badValue("Invalid numerical type code: %s", describe(e))
		}
		tp.set[byte(n)] = true
		return nil
	}
	if arr, ok := v.(bson.A); ok {
		if len(arr) == 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "%s must match at least one type", path)
		}
		for _, e := range arr {
			if err := add(e); err != nil {
				return nil, err
			}
		}
		return tp, nil
	}
	if err := add(v); err != nil {
		return nil, err
	}
	return tp, nil
}

func parseSize(v any) (int, error) {
	var n int64
	switch x := v.(type) {
	case int32:
		n = int64(x)
	case int:
		n = int64(x)
		if x > math.MaxInt32 || x < math.MinInt32 {
			return 0, badValue("$size must be representable as a 32-bit integer")
		}
	case int64:
		if x > math.MaxInt32 || x < math.MinInt32 {
			return 0, badValue("$size must be representable as a 32-bit integer")
		}
		n = x
	case float64, bson.Decimal128:
		i, ok := bsonx.ToInt64(x)
		if !ok || i > math.MaxInt32 || i < math.MinInt32 {
			return 0, badValue("$size must be a whole number")
		}
		n = i
	default:
		return 0, badValue("$size needs a number")
	}
	if n < 0 {
		return 0, badValue("$size may not be negative")
	}
	return int(n), nil
}

func parseMod(v any) (modPred, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return modPred{}, badValue("malformed mod, needs to be an array")
	}
	if len(arr) < 2 {
		return modPred{}, badValue("malformed mod, not enough elements")
	}
	if len(arr) > 2 {
		return modPred{}, badValue("malformed mod, too many elements")
	}
	if !bsonx.IsNumber(arr[0]) {
		return modPred{}, badValue("malformed mod, divisor not a number")
	}
	if !bsonx.IsNumber(arr[1]) {
		return modPred{}, badValue("malformed mod, remainder not a number")
	}
	div, err := truncToInt64(arr[0])
	if err != nil {
		return modPred{}, badValue("malformed mod, divisor value is invalid :: caused by :: %s", err.Error())
	}
	rem, err := truncToInt64(arr[1])
	if err != nil {
		return modPred{}, badValue("malformed mod, remainder value is invalid :: caused by :: %s", err.Error())
	}
	if div == 0 {
		return modPred{}, badValue("divisor cannot be 0")
	}
	return modPred{div: div, rem: rem}, nil
}

// truncToInt64 converts a number to int64 truncating toward zero, failing
// for NaN, infinities and values outside int64's range.
func truncToInt64(v any) (int64, error) {
	f, _ := bsonx.ToFloat(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("Unable to coerce NaN/Inf to integral type")
	}
	if n, ok := bsonx.ToInt64(v); ok {
		return n, nil
	}
	if _, ok := v.(bson.Decimal128); ok {
		r := bsonx.ToRat(v)
		q := new(big.Int).Quo(r.Num(), r.Denom())
		if !q.IsInt64() {
			return 0, fmt.Errorf("Out of bounds coercing to integral value")
		}
		return q.Int64(), nil
	}
	t := math.Trunc(f)
	if t >= 9223372036854775808.0 || t < -9223372036854775808.0 {
		return 0, fmt.Errorf("Out of bounds coercing to integral value")
	}
	return int64(t), nil
}

func (p *parser) parseAll(fp fieldPath, v any, depth int) (node, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, badValue("$all needs an array")
	}
	if len(arr) == 0 {
		return constNode(false), nil
	}
	first, isElem := arr[0].(bson.D)
	isElem = isElem && len(first) > 0 && first[0].Key == "$elemMatch"
	nodes := make([]node, 0, len(arr))
	for _, e := range arr {
		d, isDoc := e.(bson.D)
		if isElem {
			if !isDoc || len(d) == 0 || d[0].Key != "$elemMatch" {
				return nil, badValue("$all/$elemMatch has to be consistent")
			}
			n, err := p.parseElemMatch(fp, d[0].Value, depth)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
			continue
		}
		if r, ok := e.(bson.Regex); ok {
			rp, err := newRegexPred(r.Pattern, r.Options)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, &pathNode{path: fp, pred: rp})
			continue
		}
		if _, ok := isOperatorDoc(e); ok {
			return nil, badValue("no $ expressions in $all")
		}
		n, err := newEq(fp, e)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return and(nodes), nil
}

// pathlessOps are the operators that, first in an $elemMatch document, make
// it a query on the elements' fields rather than on the elements themselves.
var pathlessOps = map[string]bool{
	"$and": true, "$or": true, "$nor": true, "$where": true, "$expr": true, "$comment": true,
	"$text": true, "$jsonSchema": true, "$alwaysTrue": true, "$alwaysFalse": true, "$sampleRate": true,
}

func (p *parser) parseElemMatch(fp fieldPath, v any, depth int) (node, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, badValue("$elemMatch needs an Object")
	}
	if depth+1 > maxDepth {
		return nil, badValue("exceeded maximum query tree depth of %d", maxDepth)
	}
	if ops, ok := isOperatorDoc(d); ok && !pathlessOps[ops[0].Key] && !isDBRefDoc(d, true) {
		nodes, err := p.parseOps(fieldPath{}, ops, depth+1)
		if err != nil {
			return nil, err
		}
		ep := &elemValPred{sub: and(nodes)}
		return &pathNode{path: fp, pred: ep, noExpand: true, posPred: ep}, nil
	}
	for _, e := range d {
		if e.Key == "$where" {
			return nil, badValue("$elemMatch cannot contain $where expression")
		}
	}
	sub, err := p.parseFilter(d, depth+1)
	if err != nil {
		return nil, err
	}
	ep := &elemObjPred{sub: sub}
	return &pathNode{path: fp, pred: ep, noExpand: true, posPred: ep}, nil
}

func (p *parser) parseNot(fp fieldPath, v any, depth int) (node, error) {
	switch x := v.(type) {
	case bson.Regex:
		rp, err := newRegexPred(x.Pattern, x.Options)
		if err != nil {
			return nil, err
		}
		return notNode{&pathNode{path: fp, pred: rp}}, nil
	case bson.D:
		if len(x) == 0 {
			return nil, badValue("$not cannot be empty")
		}
		if depth+1 > maxDepth {
			return nil, badValue("exceeded maximum query tree depth of %d", maxDepth)
		}
		nodes, err := p.parseOps(fp, x, depth+1)
		if err != nil {
			return nil, err
		}
		return notNode{and(nodes)}, nil
	}
	return nil, badValue("$not needs a regex or a document")
}

// describe renders a value for error messages roughly as mongod prints BSON.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	case bson.D, bson.A:
		b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: x}}, false, false)
		if err == nil {
			s := string(b)
			return strings.TrimSuffix(strings.TrimPrefix(s, `{"v":`), "}")
		}
	}
	return fmt.Sprint(v)
}
