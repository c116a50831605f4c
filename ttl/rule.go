// Package ttl is mayfly's time-to-live model (../shared/reference/ttl-spec.md):
// the one expiry rule every read and write path goes through, the clock it
// is decided by, and the background reaper that removes expired documents.
//
// The rule is a pure function of the collection's policy, the document's
// header (_ts and its own valid ttl) and, for MongoDB TTL indexes, its Date
// fields. Deadlines are Unix milliseconds: Cosmos-style deadlines are whole
// seconds ((_ts+ttl)*1000), TTL-index deadlines are Date+expireAfterSeconds.
// A document is expired when deadline <= now.
package ttl

import (
	"fmt"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Never is the deadline of a document that does not expire.
const Never int64 = math.MaxInt64

// MaxTTL is the largest DefaultTTL or document ttl (seconds).
const MaxTTL = 2147483647

// NoOwnTTL in a document header means the document has no valid ttl field
// (absent, or invalid when written while TTL was off): it inherits.
const NoOwnTTL int64 = 0

// IndexRule is a MongoDB TTL index: documents whose Field holds a Date (or an
// array with Dates: the earliest counts) expire ExpireAfterSeconds later.
type IndexRule struct {
	Field              string
	ExpireAfterSeconds int64
	// Applies filters documents by the index's partialFilterExpression; nil
	// means every document.
	Applies func(doc bson.Raw) bool
}

// Policy is everything about a collection that expiry depends on.
type Policy struct {
	// HasDefault is false when DefaultTTL is absent (TTL off); DefaultTTL is
	// then meaningless. DefaultTTL -1 means "on, nothing expires by default".
	HasDefault bool
	DefaultTTL int64
	Indexes    []IndexRule
}

// Active reports whether anything in the collection can expire.
func (p *Policy) Active() bool { return p != nil && (p.HasDefault || len(p.Indexes) > 0) }

// Deadline is THE expiry rule (spec §2, §7): the Unix-ms instant at which a
// document with last-modified time ts (Unix seconds) and own valid ttl
// ownTTL (NoOwnTTL when it has none) expires under policy p, or Never. doc is
// consulted only when the policy has TTL indexes.
func (p *Policy) Deadline(ts, ownTTL int64, doc bson.Raw) int64 {
	if p == nil {
		return Never
	}
	d := Never
	if p.HasDefault {
		eff := p.DefaultTTL
		if ownTTL != NoOwnTTL {
			eff = ownTTL
		}
		if eff > 0 {
			d = (ts + eff) * 1000
		}
	}
	for i := range p.Indexes {
		r := &p.Indexes[i]
		if r.Applies != nil && !r.Applies(doc) {
			continue
		}
		if ms, ok := EarliestDate(doc, r.Field); ok {
			if dl := ms + r.ExpireAfterSeconds*1000; dl < d {
				d = dl
			}
		}
	}
	return d
}

// Expired reports whether a deadline has passed at nowMS (Unix ms).
func Expired(deadline, nowMS int64) bool { return deadline != Never && deadline <= nowMS }

// EarliestDate returns the earliest Date at a (possibly dotted) path of
// doc, traversing arrays as MongoDB's index keys do: a Date at the path, or
// the smallest Date among array elements there (arrays of sub-documents
// along the path are walked too). Other types never expire (spec §7).
func EarliestDate(doc bson.Raw, path string) (int64, bool) {
	best, found := int64(0), false
	var walk func(v bson.RawValue, parts []string, inArray bool)
	walk = func(v bson.RawValue, parts []string, inArray bool) {
		if len(parts) == 0 {
			switch v.Type {
			case bson.TypeDateTime:
				if !found || v.DateTime() < best {
					best, found = v.DateTime(), true
				}
			case bson.TypeArray:
				if !inArray {
					vals, _ := v.Array().Values()
					for _, e := range vals {
						walk(e, nil, true)
					}
				}
			}
			return
		}
		switch v.Type {
		case bson.TypeEmbeddedDocument:
			if f, err := v.Document().LookupErr(parts[0]); err == nil {
				walk(f, parts[1:], false)
			}
		case bson.TypeArray:
			vals, _ := v.Array().Values()
			for _, e := range vals {
				if e.Type == bson.TypeEmbeddedDocument {
					walk(e, parts, true)
				}
			}
		}
	}
	walk(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}, strings.Split(path, "."), false)
	return best, found
}

// DocTTL interprets a document's top-level ttl value: -1 or an integral
// 1..MaxTTL of any numeric type is valid. It returns the value and whether it
// is valid.
func DocTTL(v any) (int64, bool) {
	n, ok := bsonx.ToInt64(v)
	if !ok {
		return 0, false
	}
	if n == -1 || (n >= 1 && n <= MaxTTL) {
		return n, true
	}
	return 0, false
}

// OwnTTL returns the header value for a document: its valid ttl, or
// NoOwnTTL when the field is absent or invalid.
func OwnTTL(doc bson.D) int64 {
	v, ok := bsonx.Get(doc, "ttl")
	if !ok {
		return NoOwnTTL
	}
	if n, valid := DocTTL(v); valid {
		return n
	}
	return NoOwnTTL
}

// ValidateDocTTL is the write-time check (spec §4.1): while TTL is on, a
// document carrying an invalid ttl is refused with BadValue.
func ValidateDocTTL(doc bson.D) error {
	v, ok := bsonx.Get(doc, "ttl")
	if !ok {
		return nil
	}
	if _, valid := DocTTL(v); valid {
		return nil
	}
	return mongoerr.New(mongoerr.BadValue,
		"invalid ttl %s: the document ttl must be -1 (never expire) or an integer from 1 to %d seconds",
		describe(v), MaxTTL)
}

// ParseDefaultTTL validates a defaultTimeToLive (or the expireAfterSeconds
// of a _ts index) value (spec §3.4). null means off when allowNull.
func ParseDefaultTTL(v any, allowNull bool) (n int64, on bool, err error) {
	if v == nil || v == (bson.Null{}) {
		if allowNull {
			return 0, false, nil
		}
	} else if n, ok := DocTTL(v); ok {
		return n, true, nil
	}
	return 0, false, mongoerr.New(mongoerr.BadValue,
		"invalid defaultTimeToLive %s: it must be -1 (on, nothing expires by default) or an integer from 1 to %d seconds%s",
		describe(v), MaxTTL, map[bool]string{true: ", or null to turn TTL off", false: ""}[allowNull])
}

// ParseExpireAfterSeconds validates a MongoDB TTL index's expireAfterSeconds
// (0..MaxTTL, integral), with mongod's error.
func ParseExpireAfterSeconds(v any) (int64, error) {
	n, ok := bsonx.ToInt64(v)
	if !ok || n < 0 || n > MaxTTL {
		return 0, mongoerr.New(mongoerr.CannotCreateIndex,
			"TTL index 'expireAfterSeconds' option must be within an acceptable range [0, %d], found: %s", MaxTTL, describe(v))
	}
	return n, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil, bson.Null:
		return "null"
	case string:
		return fmt.Sprintf("%q (string)", x)
	}
	return fmt.Sprintf("%v (%s)", v, bsonx.TypeName(v))
}
