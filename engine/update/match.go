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

// compileSort builds the comparator of $push's {$sort: {field: ±1}}: fields
// compare in bsonx order, a missing field (or a non-document element) as
// null.
// TODO: switch to query.CompileSort once it is committed, so that array
// values sort as find's sort does.
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
		doc, ok := cur.(bson.D)
		if !ok {
			return nil
		}
		if cur, ok = bsonx.Get(doc, p); !ok {
			return nil
		}
	}
	return cur
}
