package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// ExternalSorter is the spilling sorter of $sort, for the engine's blocking
// find sort: records (key, document) are held in memory up to a limit, then
// sorted and written as runs to temporary files; Finish merges the runs.
// Ties keep insertion order.
type ExternalSorter struct{ s *sorter }

// NewExternalSorter makes a sorter that spills whenever it holds more than
// memLimit bytes (estimated with query.DocSize).
func NewExternalSorter(cmp func(a, b []any) int, memLimit int64, dir string) *ExternalSorter {
	return &ExternalSorter{s: &sorter{cmp: cmp, limit: memLimit, disk: true, dir: dir,
		memError: func(int64) error { return nil }}}
}

// Add adds a record; doc is retained.
func (x *ExternalSorter) Add(key []any, doc bson.D) error { return x.s.add(key, doc) }

// Spilled reports whether any run was written to disk.
func (x *ExternalSorter) Spilled() bool { return len(x.s.runs) > 0 }

// Finish returns the documents in sort order. Close the iterator (or the
// sorter) to remove the temporary files.
func (x *ExternalSorter) Finish() (Iterator, error) { return x.s.finish() }

// Close removes the temporary files.
func (x *ExternalSorter) Close() { x.s.cleanup() }
