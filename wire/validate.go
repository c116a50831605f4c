package wire

import (
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// validateDoc checks that doc is exactly one well-formed BSON document, no
// larger than maxSize and nested no deeper than maxDepth. The driver's own
// Validate only checks the top level; everything behind the wire layer
// decodes recursively, so the whole tree is checked here once, with the
// depth bound applied before any recursion can go deep.
func validateDoc(doc []byte, maxSize, maxDepth int) *mongoerr.Error {
	if len(doc) < 5 {
		return mongoerr.New(mongoerr.InvalidBSON, "BSON document too short: %d bytes", len(doc))
	}
	n := int(int32(binary.LittleEndian.Uint32(doc)))
	if n != len(doc) {
		return mongoerr.New(mongoerr.InvalidBSON, "BSON document length %d does not match the %d bytes available", n, len(doc))
	}
	if n > maxSize {
		return mongoerr.New(mongoerr.BSONObjectTooLarge, "BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(%dMB)", n, n, maxSize, maxSize/(1024*1024))
	}
	return walk(doc, 1, maxDepth)
}

// walk validates the elements of a document whose outer length is already
// known to match len(doc).
func walk(doc []byte, depth, maxDepth int) *mongoerr.Error {
	if depth > maxDepth {
		return mongoerr.New(mongoerr.Overflow, "BSONObj exceeds maximum nested object depth: %d", maxDepth)
	}
	if len(doc) < 5 || int(int32(binary.LittleEndian.Uint32(doc))) != len(doc) || doc[len(doc)-1] != 0 {
		return invalidBSON("bad embedded document length or terminator")
	}
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		elem, rest, ok := bsoncore.ReadElement(rem)
		if !ok {
			return invalidBSON("truncated or unknown element")
		}
		rem = rest
		t := bsoncore.Type(elem[0])
		keyEnd := 1
		for elem[keyEnd] != 0 {
			keyEnd++
		}
		val := elem[keyEnd+1:]
		switch t {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if err := walk(val, depth+1, maxDepth); err != nil {
				return err
			}
		case bsoncore.TypeString, bsoncore.TypeJavaScript, bsoncore.TypeSymbol:
			if err := checkString(val); err != nil {
				return err
			}
		case bsoncore.TypeCodeWithScope:
			// int32 total, string, document
			if len(val) < 4+5+5 {
				return invalidBSON("bad code with scope")
			}
			sl := int(int32(binary.LittleEndian.Uint32(val[4:])))
			if sl < 1 || 8+sl > len(val) {
				return invalidBSON("bad code with scope")
			}
			if err := checkString(val[4 : 8+sl]); err != nil {
				return err
			}
			if err := walk(val[8+sl:], depth+1, maxDepth); err != nil {
				return err
			}
		case bsoncore.TypeBoolean:
			if val[0] > 1 {
				return invalidBSON("boolean must be 0 or 1")
			}
		case bsoncore.TypeBinary:
			// A negative length can still add up to a plausible element
			// size once the fixed overhead is added.
			if len(val) < 5 || int32(binary.LittleEndian.Uint32(val)) < 0 {
				return invalidBSON("bad binary length")
			}
		case bsoncore.TypeDBPointer:
			if len(val) < 4+1+12 {
				return invalidBSON("bad DBPointer")
			}
			if err := checkString(val[:len(val)-12]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkString checks an int32-length-prefixed, NUL-terminated string value.
func checkString(val []byte) *mongoerr.Error {
	if len(val) < 5 {
		return invalidBSON("string too short")
	}
	l := int(int32(binary.LittleEndian.Uint32(val)))
	if l < 1 || 4+l != len(val) || val[len(val)-1] != 0 {
		return invalidBSON("bad string length or terminator")
	}
	return nil
}

func invalidBSON(why string) *mongoerr.Error {
	return mongoerr.New(mongoerr.InvalidBSON, "invalid BSON: %s", why)
}
