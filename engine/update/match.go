package update

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
)

// matcher is the part of the query engine updates need: $pull conditions and
// arrayFilters are ordinary query filters evaluated against array elements.
type matcher interface {
	Matches(doc bson.D) bool
}

// compileFilter goes through the query engine so that updates share its one
// notion of matching.
func compileFilter(filter bson.D) (matcher, error) { return query.Compile(filter) }

// compileSort builds the comparator of $push's {$sort: {field: ±1}}. This is
// deliberately not find's sort: mongod's PatternElementCmp extracts each
// field with getFieldDotted (numeric components index arrays, arrays are not
// traversed, no min/max of array values), uses null for a missing field, and
// treats an element that is not a document as having no fields.
func compileSort(spec bson.D) (func(a, b bson.D) int, error) {
	type key struct {
		path []string
		dir  int
	}
	keys := make([]key, len(spec))
	for i, e := range spec {
		n, _ := bsonx.ToInt64(e.Value)
		keys[i] = key{strings.Split(e.Key, "."), int(n)}
	}
	return func(a, b bson.D) int {
		for _, k := range keys {
			if c := bsonx.Compare(lookup(a, k.path), lookup(b, k.path)); c != 0 {
				return c * k.dir
			}
		}
		return 0
	}, nil
}

func lookup(d bson.D, path []string) any {
	var cur any = d
	for _, p := range path {
		switch x := cur.(type) {
		case bson.D:
			v, ok := bsonx.Get(x, p)
			if !ok {
				return nil
			}
			cur = v
		case bson.A:
			i, ok := arrayIndex(p)
			if !ok || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
	}
	return cur
}
