// Package query implements MongoDB's query language over bson.D documents:
// filter matching (Compile / Matcher), find projections (CompileProjection /
// Projection) and sort orders (CompileSort / Sort / TopK).
//
// Everything here is pure: no storage, no I/O. Filters, projections and sorts
// are compiled once per query into small trees so that the per-document work
// (which runs for every scanned document) does no parsing and, for matching,
// no allocation.
package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// fieldPath is a dotted path split into components, with each component's
// array index precomputed (-1 when the component is not a plain decimal
// number) so traversal never parses numbers per document.
type fieldPath struct {
	full  string
	parts []string
	idx   []int
}

func newFieldPath(p string) fieldPath {
	parts := strings.Split(p, ".")
	idx := make([]int, len(parts))
	for i, s := range parts {
		idx[i] = arrayIndex(s)
	}
	return fieldPath{full: p, parts: parts, idx: idx}
}

// arrayIndex returns the array position a path component names, or -1. Like
// mongod, only plain decimal digits count ("01" is not position 1: leading
// zeros make it a field name only).
func arrayIndex(s string) int {
	if s == "" || len(s) > 9 {
		return -1
	}
	if len(s) > 1 && s[0] == '0' {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// lookup returns the value of a top-level field of d. It is the hot loop of
// matching, so it is a plain linear scan (documents are small).
func lookup(d bson.D, key string) (any, bool) {
	for i := range d {
		if d[i].Key == key {
			return d[i].Value, true
		}
	}
	return nil, false
}

// validateFieldPath applies mongod's FieldPath rules to a path used by sort
// and projection specifications.
func validateFieldPath(p string) error {
	if p == "" {
		return mongoerr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasSuffix(p, ".") {
		return mongoerr.New(40353, "FieldPath must not end with a '.'.")
	}
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return mongoerr.New(15998, "FieldPath field names may not be empty strings.")
		}
		if part[0] == '$' {
			return mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return nil
}

// arrayAsDoc views an array as the document {"0": a[0], "1": a[1], ...}, as
// mongod does when an array element is matched against an $elemMatch object.
func arrayAsDoc(a bson.A) bson.D {
	d := make(bson.D, len(a))
	for i, v := range a {
		d[i] = bson.E{Key: itoa(i), Value: v}
	}
	return d
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}
