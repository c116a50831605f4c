package engine

import (
	"errors"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// marshalReply encodes a reply document exactly as bson.Marshal does, but
// appends bson.Raw values (the documents of a find/getMore batch) as they
// are: bson.Marshal walks every element of every raw document again,
// allocating each key, which made encoding a 16 MB batch cost twice the
// scan that produced it. bson.D and bson.A are walked here; any other value
// goes through bson.MarshalValue, so its encoding is the driver's.
func marshalReply(d bson.D) (bson.Raw, error) {
	return appendReplyDoc(make([]byte, 0, replySize(d)+16), d)
}

func appendReplyDoc(dst []byte, d bson.D) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	for _, e := range d {
		var err error
		if dst, err = appendReplyElem(dst, e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

var errReplyKey = errors.New("reply field name contains a NUL byte")

func appendReplyElem(dst []byte, key string, v any) ([]byte, error) {
	if strings.IndexByte(key, 0) >= 0 {
		return nil, errReplyKey
	}
	switch v := v.(type) {
	case nil:
		return bsoncore.AppendNullElement(dst, key), nil
	case bson.Raw:
		if len(v) < 5 || int(uint32(v[0])|uint32(v[1])<<8|uint32(v[2])<<16|uint32(v[3])<<24) != len(v) || v[len(v)-1] != 0 {
			return nil, errors.New("reply holds a malformed document")
		}
		return bsoncore.AppendDocumentElement(dst, key, v), nil
	case bson.D:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		return appendReplyDoc(dst, v)
	case bson.A:
		idx, dst := bsoncore.AppendArrayElementStart(dst, key)
		var err error
		for i, x := range v {
			if dst, err = appendReplyElem(dst, arrayKey(i), x); err != nil {
				return nil, err
			}
		}
		return bsoncore.AppendArrayEnd(dst, idx)
	default:
		t, data, err := bson.MarshalValue(v)
		if err != nil {
			return nil, err
		}
		return bsoncore.AppendValueElement(dst, key, bsoncore.Value{Type: bsoncore.Type(t), Data: data}), nil
	}
}

// arrayKeys are the element names of the first entries of an array.
var arrayKeys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = strconv.Itoa(i)
	}
	return k
}()

func arrayKey(i int) string {
	if i < len(arrayKeys) {
		return arrayKeys[i]
	}
	return strconv.Itoa(i)
}

// replySize estimates the encoded size, so the buffer is allocated once.
func replySize(v any) int {
	switch v := v.(type) {
	case bson.Raw:
		return len(v)
	case bson.D:
		n := 5
		for _, e := range v {
			n += len(e.Key) + 2 + replySize(e.Value)
		}
		return n
	case bson.A:
		n := 5
		for _, x := range v {
			n += 8 + replySize(x)
		}
		return n
	default:
		return 16
	}
}
