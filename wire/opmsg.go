package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// castagnoli is the CRC-32C table OP_MSG checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Msg is a decoded OP_MSG request.
type Msg struct {
	Header Header
	Flags  uint32
	// Command is the kind-0 body with every kind-1 document sequence merged
	// in as an array under its identifier. It is a fresh allocation, never
	// aliasing the message buffer, so handlers may keep it.
	Command bson.Raw
}

// MoreToCome reports whether the client expects no reply.
func (m *Msg) MoreToCome() bool { return m.Flags&FlagMoreToCome != 0 }

// ExhaustAllowed reports whether the client would accept streamed replies.
func (m *Msg) ExhaustAllowed() bool { return m.Flags&FlagExhaustAllowed != 0 }

type docSequence struct {
	id   string
	docs [][]byte
}

// DecodeOpMsg decodes a whole OP_MSG message (header included). Errors are
// *mongoerr.Error values meant for an error reply: the message was framed
// correctly, so the connection stays usable.
func DecodeOpMsg(msg []byte) (*Msg, error) {
	if len(msg) < HeaderLen+4 {
		return nil, mongoerr.New(mongoerr.ProtocolError, "OP_MSG too short: %d bytes", len(msg))
	}
	h := parseHeader(msg)
	if int(h.Length) != len(msg) || h.OpCode != OpMsg {
		return nil, mongoerr.New(mongoerr.ProtocolError, "not an OP_MSG message of %d bytes", len(msg))
	}
	m := &Msg{Header: h, Flags: binary.LittleEndian.Uint32(msg[HeaderLen:])}
	if unknown := m.Flags & requiredBitsMask &^ knownFlags; unknown != 0 {
		return nil, mongoerr.New(mongoerr.ProtocolError, "Unrecognized required flags in OP_MSG: 0x%x", unknown)
	}
	body := msg[HeaderLen+4:]
	if m.Flags&FlagChecksumPresent != 0 {
		if len(body) < 4 {
			return nil, mongoerr.New(mongoerr.ProtocolError, "OP_MSG checksum flag set but no room for a checksum")
		}
		want := binary.LittleEndian.Uint32(msg[len(msg)-4:])
		if got := crc32.Checksum(msg[:len(msg)-4], castagnoli); got != want {
			return nil, mongoerr.New(mongoerr.ProtocolError, "OP_MSG checksum mismatch: computed 0x%08x, message says 0x%08x", got, want)
		}
		body = body[:len(body)-4]
	}

	var main []byte
	var seqs []docSequence
	for len(body) > 0 {
		kind := body[0]
		body = body[1:]
		switch kind {
		case 0:
			if main != nil {
				return nil, mongoerr.New(mongoerr.ProtocolError, "Multiple body sections in OP_MSG")
			}
			doc, rest, err := cutDocument(body)
			if err != nil {
				return nil, err
			}
			if verr := validateDoc(doc, MaxCommandSize, MaxNestingDepth+commandDepthOverhead); verr != nil {
				return nil, verr
			}
			main, body = doc, rest
		case 1:
			if len(body) < 4 {
				return nil, mongoerr.New(mongoerr.ProtocolError, "truncated document sequence in OP_MSG")
			}
			size := int(int32(binary.LittleEndian.Uint32(body)))
			if size < 4+1 || size > len(body) {
				return nil, mongoerr.New(mongoerr.ProtocolError, "invalid document sequence size %d in OP_MSG", size)
			}
			sec := body[4:size]
			body = body[size:]
			nul := bytes.IndexByte(sec, 0)
			if nul < 0 {
				return nil, mongoerr.New(mongoerr.ProtocolError, "unterminated document sequence identifier in OP_MSG")
			}
			seq := docSequence{id: string(sec[:nul])}
			if seq.id == "" {
				return nil, mongoerr.New(mongoerr.ProtocolError, "empty document sequence identifier in OP_MSG")
			}
			for _, s := range seqs {
				if s.id == seq.id {
					return nil, mongoerr.New(mongoerr.ProtocolError, "Duplicate document sequence: %s", seq.id)
				}
			}
			docs := sec[nul+1:]
			for len(docs) > 0 {
				doc, rest, err := cutDocument(docs)
				if err != nil {
					return nil, err
				}
				if verr := validateDoc(doc, MaxCommandSize, MaxNestingDepth); verr != nil {
					return nil, verr
				}
				seq.docs = append(seq.docs, doc)
				docs = rest
			}
			seqs = append(seqs, seq)
		default:
			return nil, mongoerr.New(mongoerr.ProtocolError, "Unknown section kind %d in OP_MSG", kind)
		}
	}
	if main == nil {
		return nil, mongoerr.New(mongoerr.ProtocolError, "OP_MSG requires exactly one body (kind 0) section")
	}
	cmd, err := merge(main, seqs)
	if err != nil {
		return nil, err
	}
	m.Command = cmd
	return m, nil
}

// cutDocument splits the BSON document at the front of b from the rest,
// checking only that its declared length fits.
func cutDocument(b []byte) (doc, rest []byte, err error) {
	if len(b) < 5 {
		return nil, nil, mongoerr.New(mongoerr.InvalidBSON, "truncated BSON document in OP_MSG")
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > len(b) {
		return nil, nil, mongoerr.New(mongoerr.InvalidBSON, "BSON document length %d is invalid with %d bytes left in the message", n, len(b))
	}
	return b[:n], b[n:], nil
}

// merge builds a new command document: the body's fields followed by one
// array per document sequence. A sequence whose identifier is also a body
// field is refused, as mongod does, rather than guessing which one wins.
func merge(main []byte, seqs []docSequence) (bson.Raw, error) {
	if len(seqs) == 0 {
		return bson.Raw(bytes.Clone(main)), nil
	}
	size := len(main)
	for _, s := range seqs {
		if bsoncore.Document(main).Lookup(s.id).Type != 0 {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "Duplicate field name: %s (in both the body and a document sequence)", s.id)
		}
		size += len(s.id) + 16
		for _, d := range s.docs {
			size += len(d) + 12
		}
	}
	out := make([]byte, 0, size)
	idx, out := bsoncore.AppendDocumentStart(out)
	out = append(out, main[4:len(main)-1]...)
	var key [12]byte
	for _, s := range seqs {
		aidx, o := bsoncore.AppendArrayElementStart(out, s.id)
		out = o
		for i, d := range s.docs {
			out = bsoncore.AppendDocumentElement(out, string(appendIndex(key[:0], i)), d)
		}
		out, _ = bsoncore.AppendArrayEnd(out, aidx)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return bson.Raw(out), nil
}

func appendIndex(b []byte, i int) []byte {
	if i == 0 {
		return append(b, '0')
	}
	var tmp [20]byte
	n := len(tmp)
	for i > 0 {
		n--
		tmp[n] = byte('0' + i%10)
		i /= 10
	}
	return append(b, tmp[n:]...)
}

// AppendOpMsgReply appends an OP_MSG reply: flagBits 0 and exactly one
// kind-0 section, the only shape every driver accepts.
func AppendOpMsgReply(dst []byte, requestID, responseTo int32, doc []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, requestID, responseTo, OpMsg)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, 0)
	dst = append(dst, doc...)
	return finishMessage(dst, start)
}
