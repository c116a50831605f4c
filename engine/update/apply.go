package update

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// maxPadding bounds how far an index path may extend an array with nulls, so
// one update cannot allocate an arbitrarily large array (mongod's limit).
const maxPadding = 1500000

type applier struct {
	u      *Update
	root   *obj
	pos    int
	insert bool
	now    time.Time
	id     any
	hasID  bool
	idPath string // the first path that changed something under _id
	// modified is set by every change an operator reports; it is mongod's
	// "not a no-op", which counts towards nModified.
	modified bool
	// virt is set while operators run below a path that does not exist: the
	// last existing container and the first missing component, which decide
	// whether the path could be created (checkViability).
	virt *virtual
}

type virtual struct {
	c     any    // the last existing container
	cname string // its field name
	first string // the first missing component below it
}

func join(p []string) string { return strings.Join(p, ".") }

func with(p []string, s string) []string {
	out := make([]string, len(p)+1)
	copy(out, p)
	out[len(p)] = s
	return out
}

// idElem renders "{_id: …}" for error messages.
func (a *applier) idElem() string {
	if !a.hasID {
		return "{}"
	}
	return "{" + fmtElem("_id", a.id) + "}"
}

// removed records a change that only removes data ($unset, $pop, $pull, a
// $rename's source): mongod does not storage-validate those, so a
// $-prefixed top-level field may be removed.
func (a *applier) removed(p []string) {
	a.modified = true
	if p[0] == "_id" && a.idPath == "" {
		a.idPath = join(p)
	}
}

// touched records that the value at p changed; it enforces the rules that
// depend only on the path: _id is immutable and top-level $-prefixed fields
// may not be written by an update (only by an insert/upsert).
func (a *applier) touched(p []string) error {
	a.removed(p)
	if strings.HasPrefix(p[0], "$") && !a.insert {
		return mongoerr.New(mongoerr.DollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", p[0], p[0])
	}
	return nil
}

// applyObj applies an object node to the container c (whose own field name
// is cname) at path p. Children run in lexicographic order, then the
// positional child, which merges with a literal child naming the same index.
func (a *applier) applyObj(n *node, c any, cname string, p []string) error {
	matched := ""
	if n.pos != nil {
		if a.pos < 0 {
			return mongoerr.New(mongoerr.BadValue, "The positional operator did not find the match needed from the query.")
		}
		matched = strconv.Itoa(a.pos)
	}
	posDone := false
	for _, name := range n.sortedChildren() {
		ch := n.children[name]
		if n.pos != nil && name == matched {
			m, err := merge(n.pos, ch, join(with(p, name)))
			if err != nil {
				return err
			}
			ch, posDone = m, true
		}
		if err := a.applyChild(ch, c, cname, name, p); err != nil {
			return err
		}
	}
	if n.pos != nil && !posDone {
		return a.applyChild(n.pos, c, cname, matched, p)
	}
	return nil
}

// applyArr applies an array node ($[] and $[<id>] children) to every element
// of the array v the filters select.
func (a *applier) applyArr(n *node, v any, name string, p []string) error {
	ar, ok := v.(*arr)
	if !ok {
		return mongoerr.New(mongoerr.BadValue, "Cannot apply array updates to non-array element %s", fmtElem(name, v))
	}
	ids := n.sortedChildren()
	for i := 0; i < len(ar.e); i++ {
		idx := strconv.Itoa(i)
		var sel *node
		var elemD bson.D
		for _, id := range ids {
			if id != "" {
				if elemD == nil {
					elemD = bson.D{{Key: id, Value: fromM(ar.e[i])}}
				} else {
					elemD[0].Key = id
				}
				if !a.u.filters[id].Matches(elemD) {
					continue
				}
			}
			m, err := merge(sel, n.children[id], join(with(p, idx)))
			if err != nil {
				return err
			}
			sel = m
		}
		if sel == nil {
			continue
		}
		if err := a.applyChild(sel, ar, name, idx, p); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyChild(ch *node, c any, cname, name string, p []string) error {
	cp := with(p, name)
	v, exists := child(c, name)
	if exists {
		switch {
		case ch.leaf != nil:
			return a.leafExisting(ch.leaf, c, name, v, cp)
		case ch.array:
			return a.applyArr(ch, v, name, cp)
		default:
			return a.applyObj(ch, v, name, cp)
		}
	}
	if ch.leaf != nil {
		return a.leafMissing(ch.leaf, c, cname, name, cp)
	}
	if ch.array {
		return mongoerr.New(mongoerr.BadValue, "The path '%s' must exist in the document in order to apply array updates.", join(cp))
	}
	// The path does not exist: operators below create it in a new document
	// that is attached only if something was created, so that operators
	// which do not create paths ($unset, $pull, …) leave no trace.
	ph := &obj{}
	saved := a.virt
	if a.virt == nil {
		a.virt = &virtual{c: c, cname: cname, first: name}
	}
	err := a.applyObj(ch, ph, name, cp)
	a.virt = saved
	if err != nil {
		return err
	}
	if len(ph.f) == 0 {
		return nil
	}
	return create(c, cname, name, ph)
}

// create adds a new component to container c, padding arrays with nulls;
// anything else cannot hold fields (PathNotViable).
func create(c any, cname, name string, v any) error {
	switch x := c.(type) {
	case *obj:
		x.f = append(x.f, fld{name, v})
		return nil
	case *arr:
		if i, ok := arrayIndex(name); ok {
			if i-len(x.e) > maxPadding {
				return mongoerr.New(mongoerr.PathNotViable, "can't backfill array to larger than %d elements", maxPadding)
			}
			for len(x.e) < i {
				x.e = append(x.e, nil)
			}
			x.e = append(x.e, v)
			return nil
		}
	}
	return mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s}", name, fmtElem(cname, c))
}

// leafMissing applies an operator to a path that does not exist.
func (a *applier) leafMissing(l *leaf, c any, cname, name string, p []string) error {
	var v any
	switch l.op {
	case "$set":
		v = l.arg
	case "$setOnInsert":
		if !a.insert {
			return nil
		}
		v = l.arg
	case "$inc", "$min", "$max":
		v = l.arg
	case "$mul":
		v = zeroOf(l.arg)
	case "$currentDate":
		v = a.currentDate(l)
	case "$push":
		v, _ = a.push(l, bson.A{})
	case "$addToSet":
		v = slices.Clone(l.each)
	case "$bit":
		r, err := a.bit(l, int32(0), name)
		if err != nil {
			return err
		}
		v = r
	case "$rename":
		src, ok, err := a.takeSource(l)
		if err != nil || !ok {
			return err
		}
		if err := a.touched(p); err != nil {
			return err
		}
		return create(c, cname, name, src)
	case "$pop", "$pull", "$pullAll":
		// No-ops, but mongod still refuses a path that could never exist.
		return a.checkViability(c, cname, name, p)
	default: // $unset and the $rename source: no-op
		return nil
	}
	if err := a.touched(p); err != nil {
		return err
	}
	return create(c, cname, name, toM(v))
}

// checkViability fails, as mongod's UpdateLeafNode::checkViability, when a
// missing path could never be created: its first missing component is below
// a scalar, or names a field of an array.
func (a *applier) checkViability(c any, cname, name string, p []string) error {
	if a.virt != nil {
		c, cname, name = a.virt.c, a.virt.cname, a.virt.first
	}
	switch c.(type) {
	case *obj:
		return nil
	case *arr:
		if _, ok := arrayIndex(name); ok {
			return nil
		}
	}
	return mongoerr.New(mongoerr.PathNotViable, "Cannot use the part (%s) of (%s) to traverse the element ({%s})", name, join(p), fmtElem(cname, c))
}

// leafExisting applies an operator to an existing value v.
func (a *applier) leafExisting(l *leaf, c any, name string, v any, p []string) error {
	old := fromM(v)
	var nv any // new value in bson form; nil with remove=false means keep
	keep := false
	switch l.op {
	case "$set":
		nv = l.arg
	case "$setOnInsert":
		if !a.insert {
			return nil
		}
		nv = l.arg
	case "$unset":
		// Always a modification; in an array the element becomes null
		// rather than shifting the elements after it.
		a.removed(p)
		if ar, isArr := c.(*arr); isArr {
			i, _ := arrayIndex(name)
			ar.e[i] = nil
		} else {
			c.(*obj).del(name)
		}
		return nil
	case "$inc", "$mul":
		if !bsonx.IsNumber(old) {
			return mongoerr.New(mongoerr.TypeMismatch, "Cannot apply %s to a value of non-numeric type. %s has the field '%s' of non-numeric type %s", l.op, a.idElem(), name, bsonx.TypeName(old))
		}
		r, ok := arith(old, l.arg, l.op == "$mul")
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "Failed to apply %s operations to current value (%s) for document %s", l.op, safeNumDebug(old), a.idElem())
		}
		nv = r
	case "$min", "$max":
		cmp := bsonx.Compare(l.arg, old)
		if (l.op == "$min" && cmp < 0) || (l.op == "$max" && cmp > 0) {
			nv = l.arg
		} else {
			keep = true
		}
	case "$currentDate":
		// Always a modification, even within the same millisecond.
		if err := a.touched(p); err != nil {
			return err
		}
		setChild(c, name, a.currentDate(l))
		return nil
	case "$push":
		ar, ok := old.(bson.A)
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "The field '%s' must be an array but is of type %s in document {%s}", join(p), bsonx.TypeName(old), a.idText())
		}
		var changed bool
		nv, changed = a.push(l, ar)
		if changed && identical(old, nv) {
			// Sorting or slicing counts as a change even when it leaves
			// the array as it was, as in mongod.
			return a.touched(p)
		}
	case "$addToSet":
		ar, ok := old.(bson.A)
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", name, bsonx.TypeName(old))
		}
		out := slices.Clone(ar)
		for _, e := range l.each {
			if !containsValue(out, e) {
				out = append(out, e)
			}
		}
		nv = out
	case "$pop":
		ar, ok := old.(bson.A)
		if !ok {
			return mongoerr.New(mongoerr.TypeMismatch, "Path '%s' contains an element of non-array type '%s'", join(p), bsonx.TypeName(old))
		}
		switch {
		case len(ar) == 0:
			keep = true
		case l.pop < 0:
			nv = ar[1:]
		default:
			nv = ar[:len(ar)-1]
		}
	case "$pull", "$pullAll":
		ar, ok := old.(bson.A)
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "Cannot apply %s to a non-array value", "$pull")
		}
		out := bson.A{}
		for _, e := range ar {
			if !l.pull(e) {
				out = append(out, e)
			}
		}
		nv = out
	case "$bit":
		r, err := a.bit(l, old, name)
		if err != nil {
			return err
		}
		nv = r
	case "$rename":
		src, ok, err := a.takeSource(l)
		if err != nil || !ok {
			return err
		}
		if err := a.touched(p); err != nil {
			return err
		}
		setChild(c, name, src)
		return nil
	default: // the $rename source placeholder
		return nil
	}
	if keep || identical(old, nv) {
		return nil
	}
	if l.op == "$pop" || l.op == "$pull" || l.op == "$pullAll" {
		a.removed(p)
	} else if err := a.touched(p); err != nil {
		return err
	}
	setChild(c, name, toM(nv))
	return nil
}

// safeNumDebug renders a number as mongod's SafeNum::debugString.
func safeNumDebug(v any) string {
	switch n := v.(type) {
	case int32:
		return "(NumberInt)" + strconv.FormatInt(int64(n), 10)
	case int64:
		return "(NumberLong)" + strconv.FormatInt(n, 10)
	case float64:
		return "(NumberDouble)" + strconv.FormatFloat(n, 'g', -1, 64)
	case bson.Decimal128:
		return "(NumberDecimal)" + n.String()
	}
	return fmtValue(v)
}

func (a *applier) currentDate(l *leaf) any {
	if l.timestamp {
		return bson.Timestamp{T: uint32(a.now.Unix()), I: 1}
	}
	return bson.NewDateTimeFromTime(a.now)
}

// push inserts $each at $position, then sorts, then slices, as mongod does.
// changed is mongod's notion of "not a no-op": something was pushed, or a
// sort ran, or the slice removed elements.
func (a *applier) push(l *leaf, cur bson.A) (bson.A, bool) {
	changed := len(l.each) > 0 || l.hasSort
	out := make(bson.A, 0, len(cur)+len(l.each))
	at := int64(len(cur))
	if l.position != nil {
		at = *l.position
		if at < 0 {
			at = max(0, int64(len(cur))+at)
		}
		at = min(at, int64(len(cur)))
	}
	out = append(out, cur[:at]...)
	out = append(out, l.each...)
	out = append(out, cur[at:]...)
	if l.hasSort {
		if l.sortCmp != nil {
			sort.SliceStable(out, func(i, j int) bool {
				x, _ := out[i].(bson.D)
				y, _ := out[j].(bson.D)
				return l.sortCmp(x, y) < 0
			})
		} else {
			sort.SliceStable(out, func(i, j int) bool { return bsonx.Compare(out[i], out[j])*l.sortDir < 0 })
		}
	}
	if l.slice != nil {
		n := *l.slice
		switch {
		case n >= 0 && n < int64(len(out)):
			out, changed = out[:n], true
		case n < 0 && -n < int64(len(out)):
			out, changed = out[int64(len(out))+n:], true
		}
	}
	return out, changed
}

func (a *applier) bit(l *leaf, cur any, name string) (any, error) {
	var x int64
	wide := false
	switch n := cur.(type) {
	case int32:
		x = int64(n)
	case int64:
		x, wide = n, true
	default:
		return nil, mongoerr.New(mongoerr.BadValue, "Cannot apply $bit to a value of non-integral type.%s has the field %s of non-integer type %s", a.idPlain(), name, bsonx.TypeName(cur))
	}
	for _, b := range l.bits {
		var y int64
		switch n := b.v.(type) {
		case int32:
			y = int64(n)
		case int64:
			y, wide = n, true
		}
		if !wide {
			// int32 operands combine as 32-bit values (sign extension of
			// both sides keeps the low 32 bits right).
			y = int64(int32(y))
		}
		switch b.op {
		case "and":
			x &= y
		case "or":
			x |= y
		case "xor":
			x ^= y
		}
	}
	if wide {
		return x, nil
	}
	return int32(x), nil
}

// takeSource finds and removes $rename's source. ok is false when the source
// does not exist (the rename is a no-op). Neither path may go through an
// array.
func (a *applier) takeSource(l *leaf) (any, bool, error) {
	var cur any = a.root
	var parent any
	var arrName string
	name := ""
	for i, s := range l.from {
		var v any
		var ok bool
		switch x := cur.(type) {
		case *obj:
			v, ok = x.get(s)
		case *arr:
			idx, numeric := arrayIndex(s)
			if !numeric {
				return nil, false, a.sourceNotViable(l, i, cur, name)
			}
			if idx < len(x.e) {
				v, ok = x.e[idx], true
			}
			arrName = name
		default:
			return nil, false, a.sourceNotViable(l, i, cur, name)
		}
		if !ok {
			return nil, false, nil
		}
		parent, cur, name = cur, v, s
	}
	if arrName != "" {
		return nil, false, mongoerr.New(mongoerr.BadValue, "The source field cannot be an array element, '%s' in doc with %s has an array field called '%s'", l.fromDotted, a.idText(), arrName)
	}
	var dc any = a.root
	for _, s := range l.path[:len(l.path)-1] {
		v, ok := child(dc, s)
		if !ok {
			break
		}
		if _, isArr := v.(*arr); isArr {
			return nil, false, mongoerr.New(mongoerr.BadValue, "The destination field cannot be an array element, '%s' in doc with %s has an array field called '%s'", l.dotted, a.idText(), s)
		}
		dc = v
	}
	a.removed(l.from)
	parent.(*obj).del(name)
	return cur, true, nil
}

// idPlain renders the _id element without braces ("_id: 1").
func (a *applier) idPlain() string {
	if !a.hasID {
		return ""
	}
	return fmtElem("_id", a.id)
}

// sourceNotViable is findLongestPrefix's error: the source path goes through
// a value that cannot have the next component.
func (a *applier) sourceNotViable(l *leaf, i int, cur any, name string) error {
	return mongoerr.New(mongoerr.PathNotViable, "cannot use the part (%s of %s) to traverse the element ({%s})", l.from[i-1], l.fromDotted, fmtElem(name, cur))
}

func (a *applier) idText() string {
	if !a.hasID {
		return "no id"
	}
	return fmtElem("_id", a.id)
}
