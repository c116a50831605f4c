package engine

import (
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// maxIndexes is mongod's limit of indexes per collection, _id included
// (IndexCatalog kMaxNumIndexesAllowed).
const maxIndexes = 64

// checkIndexLimit refuses a new index once the collection (with the
// indexes this createIndexes has already added to m) holds 64, with
// mongod's CannotCreateIndex message. An index that already exists was
// skipped before this check, as in mongod.
func checkIndexLimit(db, coll string, m *collMeta, ix *indexMeta) error {
	if len(listIndexSpecs(m)) < maxIndexes {
		return nil
	}
	return mongoerr.New(mongoerr.CannotCreateIndex, "add index fails, too many indexes for %s.%s key:%s", db, coll, objString(ix.Key))
}

// objString renders a document as mongod's BSONObj::toString does for key
// patterns: { a: 1, b: -1, c: "text" }.
func objString(d bson.D) string {
	if len(d) == 0 {
		return "{}"
	}
	var sb strings.Builder
	sb.WriteString("{ ")
	for i, e := range d {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(e.Key)
		sb.WriteString(": ")
		switch v := e.Value.(type) {
		case int32:
			sb.WriteString(strconv.FormatInt(int64(v), 10))
		case int64:
			sb.WriteString(strconv.FormatInt(v, 10))
		case float64:
			if v == math.Trunc(v) && math.Abs(v) < 1e15 {
				sb.WriteString(strconv.FormatFloat(v, 'f', 1, 64))
			} else {
				sb.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			}
		case string:
			sb.WriteString(strconv.Quote(v))
		case bson.D:
			sb.WriteString(objString(v))
		default:
			sb.WriteString(valString(v))
		}
	}
	sb.WriteString(" }")
	return sb.String()
}
