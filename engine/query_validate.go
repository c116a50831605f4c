package engine

import "github.com/mayflydb/mayfly/engine/query"

// validateQuery parses a query's filter, projection and sort without a
// collection, as mongod canonicalises a query before it looks at whether
// the collection exists: a bad query fails the same way on a missing
// collection as on an existing one (the hint is not checked, as mongod
// plans an end-of-file scan for a missing collection).
func validateQuery(q *querySpec) error {
	if len(q.filter) > 0 {
		if _, err := query.Compile(q.filter); err != nil {
			return err
		}
	}
	if len(q.projection) > 0 {
		if _, err := query.CompileProjection(q.projection); err != nil {
			return err
		}
	}
	s := q.sort
	if len(s) == 1 && s[0].Key == "$natural" {
		s = nil
	}
	if len(s) > 0 {
		if _, err := query.CompileSort(s); err != nil {
			return err
		}
	}
	return nil
}
