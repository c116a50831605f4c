package wire

import (
	"bytes"
	"encoding/binary"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// OP_REPLY responseFlags.
const (
	ReplyCursorNotFound int32 = 1 << 0
	ReplyQueryFailure   int32 = 1 << 1
)

// Query is a decoded legacy OP_QUERY. Drivers still use it for the very
// first hello/isMaster of every connection (the OP_MSG spec tells them to),
// so it must work on "<db>.$cmd"; anything else is refused.
type Query struct {
	Header             Header
	Flags              int32
	FullCollectionName string
	NumberToSkip       int32
	NumberToReturn     int32
	// DB is the namespace's database when the namespace is "<db>.$cmd".
	DB string
	// IsCommand is set for "<db>.$cmd" namespaces.
	IsCommand bool
	// Command is the query document with a {$query: …} wrapper removed and
	// "$db" added from the namespace; a fresh allocation.
	Command bson.Raw
}

// DecodeOpQuery decodes a whole OP_QUERY message (header included).
func DecodeOpQuery(msg []byte) (*Query, error) {
	if len(msg) < HeaderLen+4+1+8+5 {
		return nil, mongoerr.New(mongoerr.ProtocolError, "OP_QUERY too short: %d bytes", len(msg))
	}
	h := parseHeader(msg)
	if int(h.Length) != len(msg) || h.OpCode != OpQuery {
		return nil, mongoerr.New(mongoerr.ProtocolError, "not an OP_QUERY message of %d bytes", len(msg))
	}
	q := &Query{Header: h, Flags: int32(binary.LittleEndian.Uint32(msg[HeaderLen:]))}
	rest := msg[HeaderLen+4:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		return nil, mongoerr.New(mongoerr.ProtocolError, "unterminated namespace in OP_QUERY")
	}
	q.FullCollectionName = string(rest[:nul])
	rest = rest[nul+1:]
	if len(rest) < 8+5 {
		return nil, mongoerr.New(mongoerr.ProtocolError, "OP_QUERY truncated after the namespace")
	}
	q.NumberToSkip = int32(binary.LittleEndian.Uint32(rest))
	q.NumberToReturn = int32(binary.LittleEndian.Uint32(rest[4:]))
	rest = rest[8:]
	doc, rest, err := cutDocument(rest)
	if err != nil {
		return nil, err
	}
	if verr := validateDoc(doc, MaxCommandSize, MaxNestingDepth+commandDepthOverhead); verr != nil {
		return nil, verr
	}
	if len(rest) > 0 { // optional returnFieldsSelector: validate, then ignore
		sel, tail, err := cutDocument(rest)
		if err != nil {
			return nil, err
		}
		if verr := validateDoc(sel, MaxCommandSize, MaxNestingDepth); verr != nil {
			return nil, verr
		}
		if len(tail) != 0 {
			return nil, mongoerr.New(mongoerr.ProtocolError, "%d unexpected bytes after OP_QUERY documents", len(tail))
		}
	}
	if db, ok := strings.CutSuffix(q.FullCollectionName, ".$cmd"); ok && db != "" {
		q.DB, q.IsCommand = db, true
	}
	q.Command = unwrapQuery(doc, q.DB)
	return q, nil
}

// unwrapQuery returns the command inside a legacy {$query: cmd,
// $readPreference: …} wrapper (or doc itself), with $readPreference carried
// inside and $db set from the namespace, as a new document.
func unwrapQuery(doc []byte, db string) bson.Raw {
	d := bsoncore.Document(doc)
	inner := doc
	var readPref bsoncore.Value
	if first, err := d.IndexErr(0); err == nil && (first.Key() == "$query" || first.Key() == "query") {
		if v := first.Value(); v.Type == bsoncore.TypeEmbeddedDocument {
			inner = v.Data
			readPref = d.Lookup("$readPreference")
		}
	}
	out := make([]byte, 0, len(inner)+len(db)+64)
	idx, out := bsoncore.AppendDocumentStart(out)
	out = append(out, inner[4:len(inner)-1]...)
	in := bsoncore.Document(inner)
	if readPref.Type != 0 && in.Lookup("$readPreference").Type == 0 {
		out = bsoncore.AppendValueElement(out, "$readPreference", readPref)
	}
	if db != "" && in.Lookup("$db").Type == 0 {
		out = bsoncore.AppendStringElement(out, "$db", db)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return bson.Raw(out)
}

// AppendOpReply appends an OP_REPLY carrying one document: the legacy
// reply to an OP_QUERY (cursorID 0, startingFrom 0, numberReturned 1).
func AppendOpReply(dst []byte, requestID, responseTo, flags int32, doc []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, requestID, responseTo, OpReply)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(flags))
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, 1)
	dst = append(dst, doc...)
	return finishMessage(dst, start)
}
