package update

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// notExactValueField is mongod's NotExactValueField (55).
const notExactValueField = 55

// UpsertSeed builds the document an operator-style upsert starts from: the
// filter's equality predicates, with dotted paths expanded into embedded
// documents, in path order with _id first, as mongod does. Equalities are
// what mongod's canonical query reduces to an equality match: {a: v},
// {a: {$eq: v}}, a one-element $in or $all, each element of a longer $all,
// and those under $and or a one-clause $or. Other predicates contribute
// nothing. Two equalities on the same path, or on a path and its prefix, are
// an error: the seed could not satisfy both.
func UpsertSeed(filter bson.D) (bson.D, error) { return seed(filter, false) }

// UpsertSeed is the package-level UpsertSeed for this update's kind: a
// replacement-style upsert takes only _id from the filter (the replacement
// supplies every other field), so only _id equalities can conflict.
func (u *Update) UpsertSeed(filter bson.D) (bson.D, error) { return seed(filter, u.isRepl) }

func seed(filter bson.D, idOnly bool) (bson.D, error) {
	filter, _ = normalize(filter).(bson.D)
	eq := map[string]any{}
	var order []string
	if err := collectEqualities(filter, eq, &order, idOnly); err != nil {
		return nil, err
	}
	// Conflicts are checked in path order, as mongod's canonical query sorts
	// its predicates: a later path may not extend an earlier one.
	paths := append([]string(nil), order...)
	sort.Strings(paths)
	for i := 1; i < len(paths); i++ {
		for j := 0; j < i; j++ {
			if strings.HasPrefix(paths[i], paths[j]+".") {
				return nil, mongoerr.New(mongoerr.NotSingleValueField, "cannot infer query fields to set, both paths '%s' and '%s' are matched", paths[i], paths[j])
			}
		}
	}
	if idOnly {
		for _, p := range paths {
			if p != "_id" {
				return nil, mongoerr.New(notExactValueField, "field at '_id' must be exactly specified, field at sub-path '%s'found", p)
			}
		}
	}
	root := &obj{}
	for _, p := range paths {
		parts := strings.Split(p, ".")
		cur := root
		for _, s := range parts[:len(parts)-1] {
			v, ok := cur.get(s)
			o, isObj := v.(*obj)
			if !ok || !isObj {
				o = &obj{}
				cur.set(s, o)
			}
			cur = o
		}
		cur.set(parts[len(parts)-1], toM(eq[p]))
	}
	out := idFirst(fromM(root).(bson.D))
	if id, ok := bsonx.Get(out, "_id"); ok {
		if err := validID(id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func collectEqualities(filter bson.D, eq map[string]any, order *[]string, idOnly bool) error {
	add := func(p string, v any) error {
		if idOnly && p != "_id" && !strings.HasPrefix(p, "_id.") {
			return nil
		}
		if _, isUndef := v.(bson.Undefined); isUndef {
			return mongoerr.New(mongoerr.BadValue, "cannot compare to undefined")
		}
		if _, dup := eq[p]; dup {
			return mongoerr.New(mongoerr.NotSingleValueField, "cannot infer query fields to set, path '%s' is matched twice", p)
		}
		eq[p] = v
		*order = append(*order, p)
		return nil
	}
	for _, e := range filter {
		if strings.HasPrefix(e.Key, "$") {
			clauses, _ := e.Value.(bson.A)
			if e.Key == "$and" || (e.Key == "$or" && len(clauses) == 1) {
				for _, c := range clauses {
					if d, ok := c.(bson.D); ok {
						if err := collectEqualities(d, eq, order, idOnly); err != nil {
							return err
						}
					}
				}
			}
			continue
		}
		d, isDoc := e.Value.(bson.D)
		if isDoc && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
			// An operator expression: only some operators are equalities.
			for _, op := range d {
				vals, _ := op.Value.(bson.A)
				switch {
				case op.Key == "$eq":
					vals = bson.A{op.Value}
				case op.Key == "$in" && len(vals) == 1:
				case op.Key == "$all":
				default:
					continue
				}
				for _, v := range vals {
					if isRegexOrElemMatch(v) && op.Key != "$eq" {
						continue
					}
					if err := add(e.Key, v); err != nil {
						return err
					}
				}
			}
			continue
		}
		if _, isRegex := e.Value.(bson.Regex); isRegex {
			continue
		}
		if err := add(e.Key, e.Value); err != nil {
			return err
		}
	}
	return nil
}

// isRegexOrElemMatch reports values of $in/$all that are not equalities.
func isRegexOrElemMatch(v any) bool {
	switch x := v.(type) {
	case bson.Regex:
		return true
	case bson.D:
		return len(x) > 0 && x[0].Key == "$elemMatch"
	}
	return false
}
