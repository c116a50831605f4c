// Package update is MongoDB's update language as pure functions: it compiles
// the `u` of an update (operator document or replacement) and applies it to a
// document, reproducing mongod's semantics, field order and error codes.
//
// Like mongod, a compiled operator update is a tree of paths: internal nodes
// for path components and leaves for operators. Building the tree is what
// detects conflicting paths ("a" and "a.b" in one update), and applying it in
// lexicographic order of components is what fixes the order of new fields.
package update

import (
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// PipelineCompiler compiles a pipeline-style update (an array of stages) into
// a document transform. It is nil until the aggregation engine provides it;
// until then pipeline updates are refused.
var PipelineCompiler func(pipeline bson.A) (func(doc bson.D) (bson.D, error), error)

// Update is a compiled update.
type Update struct {
	replacement bson.D
	isRepl      bool
	pipeline    func(bson.D) (bson.D, error)
	root        *node
	filters     map[string]matcher
	positional  bool
}

// node is one path component of an operator update.
type node struct {
	leaf     *leaf
	array    bool             // children are $[] ("") and $[<id>] (id) of an array
	children map[string]*node // object children, by field name / array index
	pos      *node            // the positional "$" child
}

func newNode(array bool) *node { return &node{array: array, children: map[string]*node{}} }

// IsReplacement reports whether the update replaces the whole document.
func (u *Update) IsReplacement() bool { return u.isRepl }

// UsesPositional reports whether a path uses the positional $, i.e. whether
// Apply needs the matched array position from the query (MatchesPos).
func (u *Update) UsesPositional() bool { return u.positional }

// IsPipeline reports whether the update is a pipeline-style update.
func (u *Update) IsPipeline() bool { return u.pipeline != nil }

// Compile parses the `u` of an update statement together with its
// arrayFilters.
func Compile(u any, arrayFilters bson.A) (*Update, error) {
	var d bson.D
	switch x := u.(type) {
	case bson.A:
		if len(arrayFilters) > 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "arrayFilters may not be specified for pipeline-style updates")
		}
		if PipelineCompiler == nil {
			return nil, mongoerr.New(mongoerr.NotImplemented, "pipeline-style updates are not supported yet")
		}
		f, err := PipelineCompiler(x)
		if err != nil {
			return nil, err
		}
		return &Update{pipeline: f}, nil
	case bson.D, bson.Raw, bson.M:
		d = normalize(x).(bson.D)
		if d == nil {
			d = bson.D{}
		}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Update argument must be either an object or an array")
	}
	if arrayFilters != nil {
		arrayFilters = normalize(arrayFilters).(bson.A)
	}
	filters, ids, err := parseArrayFilters(arrayFilters)
	if err != nil {
		return nil, err
	}
	if len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
		if err := validateReplacement(d); err != nil {
			return nil, err
		}
		if len(ids) > 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "The array filter for identifier '%s' was not used in the update %s", ids[0], fmtDoc(d))
		}
		return &Update{replacement: d, isRepl: true}, nil
	}
	up := &Update{root: newNode(false), filters: filters}
	used := map[string]bool{}
	for _, e := range d {
		spec, ok := ops[e.Key]
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", e.Key)
		}
		args, isDoc := e.Value.(bson.D)
		if !isDoc {
			if r := toD(e.Value); r != nil {
				args, isDoc = r, true
			}
		}
		if !isDoc {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s}", bsonx.TypeName(e.Value), fmtElem(e.Key, e.Value))
		}
		// An empty operand ({$set: {}}) is a no-op since MongoDB 5.0
		// (it was FailedToParse "'$set' is empty…" in 2.6–4.4).
		for _, a := range args {
			if e.Key == "$rename" {
				if err := up.addRename(a, used); err != nil {
					return nil, err
				}
				continue
			}
			l, err := spec(a, up)
			if err != nil {
				return nil, err
			}
			l.op = e.Key
			if err := up.addPath(a.Key, l, used); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range ids {
		if !used[id] {
			return nil, mongoerr.New(mongoerr.FailedToParse, "The array filter for identifier '%s' was not used in the update %s", id, fmtDoc(d))
		}
	}
	return up, nil
}

// validateReplacement applies mongod's storage rules to a replacement
// document: no top-level $-prefixed fields, and an _id of a storable type.
func validateReplacement(d bson.D) error {
	for _, e := range d {
		if strings.HasPrefix(e.Key, "$") {
			return mongoerr.New(mongoerr.DollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", e.Key, e.Key)
		}
		if e.Key == "_id" {
			if err := validID(e.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

func validID(v any) error {
	switch v.(type) {
	case bson.A, bson.Regex, bson.Undefined:
		return mongoerr.New(mongoerr.InvalidIdField, "The '_id' value cannot be of type %s", bsonx.TypeName(v))
	}
	return nil
}

// splitPath parses a dotted update path, rejecting empty components as
// mongod's fieldchecker::isUpdatable does.
func splitPath(p string) ([]string, error) {
	if p == "" {
		return nil, mongoerr.New(mongoerr.EmptyFieldName, "An empty update path is not valid.")
	}
	parts := strings.Split(p, ".")
	for _, s := range parts {
		if s == "" {
			return nil, mongoerr.New(mongoerr.EmptyFieldName, "The update path '%s' contains an empty field name, which is not allowed.", p)
		}
	}
	return parts, nil
}

func isIdentifierPart(s string) bool { return strings.HasPrefix(s, "$[") && strings.HasSuffix(s, "]") }

// addPath inserts a leaf into the tree at path p, detecting conflicts.
func (u *Update) addPath(p string, l *leaf, used map[string]bool) error {
	parts, err := splitPath(p)
	if err != nil {
		return err
	}
	npos := 0
	for i, s := range parts {
		if s == "$" {
			npos++
			if i == 0 {
				return mongoerr.New(mongoerr.BadValue, "Cannot have positional (i.e. '$') element in the first position in path '%s'", p)
			}
		}
	}
	if npos > 1 {
		return mongoerr.New(mongoerr.BadValue, "Too many positional (i.e. '$') elements found in path '%s'", p)
	}
	if npos > 0 {
		u.positional = true
	}
	l.path = parts
	l.dotted = p
	cur := u.root
	for i, s := range parts {
		name := s
		if isIdentifierPart(s) {
			if i == 0 {
				return mongoerr.New(mongoerr.BadValue, "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", p)
			}
			name = s[2 : len(s)-1]
			if name != "" {
				if _, ok := u.filters[name]; !ok {
					return mongoerr.New(mongoerr.BadValue, "No array filter found for identifier '%s' in path '%s'", name, p)
				}
				used[name] = true
			}
		}
		last := i == len(parts)-1
		existing := cur.get(name)
		if last {
			if existing != nil {
				return conflict(p, p)
			}
			cur.put(name, &node{leaf: l})
			return nil
		}
		wantArray := isIdentifierPart(parts[i+1])
		if existing != nil {
			if existing.leaf != nil || existing.array != wantArray {
				return conflict(p, strings.Join(parts[:i+1], "."))
			}
		} else {
			existing = newNode(wantArray)
			cur.put(name, existing)
		}
		cur = existing
	}
	return nil
}

func conflict(p, at string) error {
	return mongoerr.New(mongoerr.ConflictingUpdateOperators, "Updating the path '%s' would create a conflict at '%s'", p, at)
}

func (n *node) get(name string) *node {
	if !n.array && name == "$" {
		return n.pos
	}
	return n.children[name]
}

func (n *node) put(name string, c *node) {
	if !n.array && name == "$" {
		n.pos = c
		return
	}
	n.children[name] = c
}

// sortedChildren returns the child names in the order mongod (5.0+)
// applies them: lexicographic, except that numeric names compare as numbers
// ("a.2" before "a.10"). The order fixes where new fields are appended.
func (n *node) sortedChildren() []string {
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return lessField(names[i], names[j]) })
	return names
}

func lessField(a, b string) bool {
	if isDigits(a) && isDigits(b) {
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(ta) != len(tb) {
			return len(ta) < len(tb)
		}
		if ta != tb {
			return ta < tb
		}
	}
	return a < b
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// merge combines two nodes that apply to the same element (the positional
// child and a literal index, or several array filters matching one element).
// Two leaves, or a leaf and anything, cannot be combined.
func merge(a, b *node, at string) (*node, error) {
	if a == nil {
		return b, nil
	}
	if b == nil {
		return a, nil
	}
	if a.leaf != nil || b.leaf != nil || a.array != b.array {
		return nil, mongoerr.New(mongoerr.ConflictingUpdateOperators, "Update created a conflict at '%s'", at)
	}
	m := newNode(a.array)
	for k, v := range a.children {
		m.children[k] = v
	}
	for k, v := range b.children {
		name := k
		if m.array {
			name = "$[" + k + "]"
		}
		mv, err := merge(m.children[k], v, at+"."+name)
		if err != nil {
			return nil, err
		}
		m.children[k] = mv
	}
	p, err := merge(a.pos, b.pos, at+".$")
	if err != nil {
		return nil, err
	}
	m.pos = p
	return m, nil
}

// parseArrayFilters compiles arrayFilters, keyed by their identifier.
func parseArrayFilters(afs bson.A) (map[string]matcher, []string, error) {
	if len(afs) == 0 {
		return nil, nil, nil
	}
	out := map[string]matcher{}
	var ids []string
	for _, f := range afs {
		d, ok := f.(bson.D)
		if !ok {
			if d = toD(f); d == nil {
				return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "Expected arrayFilters to be an array of objects, but found element of type %s", bsonx.TypeName(f))
			}
		}
		names := map[string]bool{}
		var order []string
		collectTopNames(d, names, &order)
		if len(order) == 0 {
			return nil, nil, mongoerr.New(mongoerr.FailedToParse, "Cannot use an expression without a top-level field name in arrayFilters")
		}
		if len(order) > 1 {
			return nil, nil, mongoerr.New(mongoerr.FailedToParse, "Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", order[0], order[1])
		}
		id := order[0]
		if !validIdentifier(id) {
			return nil, nil, mongoerr.New(mongoerr.BadValue, "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
		}
		if _, dup := out[id]; dup {
			return nil, nil, mongoerr.New(mongoerr.FailedToParse, "Found multiple array filters with the same top-level field name %s", id)
		}
		m, err := compileFilter(d)
		if err != nil {
			return nil, nil, err
		}
		out[id] = m
		ids = append(ids, id)
	}
	return out, ids, nil
}

// collectTopNames gathers the first components of the paths a filter uses,
// looking through $and/$or/$nor as mongod's ExpressionWithPlaceholder does.
func collectTopNames(d bson.D, seen map[string]bool, order *[]string) {
	for _, e := range d {
		if strings.HasPrefix(e.Key, "$") {
			if e.Key == "$and" || e.Key == "$or" || e.Key == "$nor" {
				if a, ok := e.Value.(bson.A); ok {
					for _, c := range a {
						if cd, ok := c.(bson.D); ok {
							collectTopNames(cd, seen, order)
						}
					}
				}
			}
			continue
		}
		n, _, _ := strings.Cut(e.Key, ".")
		if !seen[n] {
			seen[n] = true
			*order = append(*order, n)
		}
	}
}

func validIdentifier(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Apply returns the updated document. pos is the array position the query
// matched for the positional $ (-1 if none), insert says the document is an
// upsert's seed ($setOnInsert applies and top-level $-fields are allowed),
// now is the time $currentDate records. modified is false when the result is
// identical to doc (same fields, order, types and values), which is mongod's
// nModified rule. doc is never modified.
func (u *Update) Apply(doc bson.D, pos int, insert bool, now time.Time) (bson.D, bool, error) {
	if u.pipeline != nil {
		out, err := u.pipeline(bsonx.CloneD(doc))
		if err != nil {
			return nil, false, err
		}
		modified := replaceModifies(doc, out)
		out = keepID(doc, out)
		if err := checkReplacedID(doc, out); err != nil {
			return nil, false, err
		}
		if insert {
			out = idFirst(out)
		}
		return out, modified, nil
	}
	if u.isRepl {
		return u.applyReplacement(doc, insert)
	}
	root := toM(doc).(*obj)
	if doc == nil {
		root = &obj{}
	}
	a := &applier{u: u, root: root, pos: pos, insert: insert, now: now}
	a.id, a.hasID = bsonx.Get(doc, "_id")
	if err := a.applyObj(u.root, root, "", nil); err != nil {
		return nil, false, err
	}
	out := fromM(root).(bson.D)
	newID, has := bsonx.Get(out, "_id")
	if a.hasID && (!has || !identical(a.id, newID)) {
		if insert {
			if err := checkReplacedID(doc, out); err != nil {
				return nil, false, err
			}
		} else {
			return nil, false, mongoerr.New(mongoerr.ImmutableField, "Performing an update on the path '%s' would modify the immutable field '_id'", a.idPath)
		}
	}
	if has {
		if err := validID(newID); err != nil {
			return nil, false, err
		}
	}
	if insert {
		out = idFirst(out)
	}
	return out, a.modified, nil
}

func checkReplacedID(orig, out bson.D) error {
	oldID, had := bsonx.Get(orig, "_id")
	if !had {
		return nil
	}
	newID, has := bsonx.Get(out, "_id")
	if !has {
		return mongoerr.New(mongoerr.ImmutableField, "After applying the update, the (immutable) field '_id' was found to have been removed.")
	}
	if bsonx.Compare(oldID, newID) != 0 {
		return mongoerr.New(mongoerr.ImmutableField, "After applying the update, the (immutable) field '_id' was found to have been altered to %s", fmtElem("_id", newID))
	}
	return nil
}

// idFirst moves _id to the front, as mongod does for every document an
// upsert inserts.
func idFirst(d bson.D) bson.D {
	for i, e := range d {
		if e.Key == "_id" {
			if i == 0 {
				return d
			}
			out := make(bson.D, 0, len(d))
			out = append(out, e)
			out = append(out, d[:i]...)
			return append(out, d[i+1:]...)
		}
	}
	return d
}

// applyReplacement keeps the original _id (as the first field) unless the
// replacement carries an equal one.
func (u *Update) applyReplacement(doc bson.D, insert bool) (bson.D, bool, error) {
	out := keepID(doc, bsonx.CloneD(u.replacement))
	if err := checkReplacedID(doc, out); err != nil {
		return nil, false, err
	}
	if insert {
		out = idFirst(out)
	}
	return out, replaceModifies(doc, u.replacement), nil
}

// keepID gives a replacement (or a pipeline's result) without _id the _id
// of the document it replaces, first, as mongod's ObjectReplaceExecutor
// keeps that element when it empties the document.
func keepID(doc, repl bson.D) bson.D {
	if _, has := bsonx.Get(repl, "_id"); has {
		return repl
	}
	oldID, had := bsonx.Get(doc, "_id")
	if !had {
		return repl
	}
	out := make(bson.D, 0, len(repl)+1)
	out = append(out, bson.E{Key: "_id", Value: bsonx.Clone(oldID)})
	return append(out, repl...)
}

// replaceModifies is whether mongod counts replacing doc by repl (a
// replacement as sent, or a pipeline's result) as a modification: only a
// replacement binary-equal to the stored document is a no-op
// (ObjectReplaceExecutor), so one that leaves _id out counts even when the
// result is the same document, unless nothing but _id is there to remove
// and nothing is added (the update stage then sees no change at all).
func replaceModifies(doc, repl bson.D) bool {
	if identical(doc, repl) {
		return false
	}
	if len(repl) == 0 && len(doc) == 1 && doc[0].Key == "_id" {
		return false
	}
	return true
}
