package update

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
)

// matcher is the part of the query engine updates need: $pull conditions and
// arrayFilters are ordinary query filters evaluated against array elements.
type matcher interface {
	Matches(doc bson.D) bool
}

// compileFilter and compileSort go through the query engine so that updates
// share its one notion of matching and ordering.
func compileFilter(filter bson.D) (matcher, error) { return query.Compile(filter) }

func compileSort(spec bson.D) (func(a, b bson.D) int, error) {
	s, err := query.CompileSort(spec)
	if err != nil {
		return nil, err
	}
	return s.Compare, nil
}
