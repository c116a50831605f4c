package update

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// UpsertSeed builds the document an upsert starts from: the filter's
// equality predicates ({a: 1}, {a: {$eq: 1}}, and those under $and), with
// dotted paths expanded into embedded documents, in path order with _id
// first, as mongod's upsert does. Other predicates contribute nothing. Two
// equalities on the same path, or on a path and its prefix, are an error,
// since the seed could not satisfy both.
func UpsertSeed(filter bson.D) (bson.D, error) {
	eq := map[string]any{}
	if err := collectEqualities(filter, eq); err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(eq))
	for p := range eq {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i := 1; i < len(paths); i++ {
		for j := 0; j < i; j++ {
			if strings.HasPrefix(paths[i], paths[j]+".") {
				return nil, mongoerr.New(mongoerr.NotSingleValueField, "cannot infer query fields to set, both paths '%s' and '%s' are matched", paths[i], paths[j])
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
	out := fromM(root).(bson.D)
	if id, ok := bsonx.Get(out, "_id"); ok && out[0].Key != "_id" {
		out = append(bson.D{{Key: "_id", Value: id}}, bsonx.Delete(out, "_id")...)
	}
	if id, ok := bsonx.Get(out, "_id"); ok {
		if err := validID(id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func collectEqualities(filter bson.D, eq map[string]any) error {
	add := func(p string, v any) error {
		if _, dup := eq[p]; dup {
			return mongoerr.New(mongoerr.NotSingleValueField, "cannot infer query fields to set, path '%s' is matched twice", p)
		}
		eq[p] = v
		return nil
	}
	for _, e := range filter {
		if strings.HasPrefix(e.Key, "$") {
			if e.Key == "$and" {
				if a, ok := e.Value.(bson.A); ok {
					for _, c := range a {
						if d := toD(c); d != nil {
							if err := collectEqualities(d, eq); err != nil {
								return err
							}
						}
					}
				}
			}
			continue
		}
		d, isDoc := e.Value.(bson.D)
		if isDoc && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
			// An operator expression: only $eq is an equality.
			for _, op := range d {
				if op.Key == "$eq" {
					if err := add(e.Key, op.Value); err != nil {
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
