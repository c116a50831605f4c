// Package wire speaks the MongoDB wire protocol: it frames messages off a
// TCP stream, decodes OP_MSG (and the legacy OP_QUERY handshake) into
// Requests, hands them to a Handler and frames the replies. It knows nothing
// about databases; everything behind the Handler is somebody else's problem.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Opcodes, as in the MongoDB wire protocol specification. Only OpMsg and
// OpQuery (on "<db>.$cmd") are served; the rest are named so that logs can
// say what a client tried.
const (
	OpReply       int32 = 1
	OpUpdate      int32 = 2001
	OpInsert      int32 = 2002
	OpQuery       int32 = 2004
	OpGetMore     int32 = 2005
	OpDelete      int32 = 2006
	OpKillCursors int32 = 2007
	OpCompressed  int32 = 2012
	OpMsg         int32 = 2013
)

// Limits advertised in hello and enforced here, with mongod's values.
const (
	// HeaderLen is the size of the standard message header.
	HeaderLen = 16
	// MaxMessageSize is maxMessageSizeBytes: no message, in either
	// direction, may be longer.
	MaxMessageSize = 48_000_000
	// MaxBSONObjectSize is maxBsonObjectSize, the limit for user documents.
	MaxBSONObjectSize = 16 * 1024 * 1024
	// MaxCommandSize is the limit for a command document: a user document
	// plus room for the command around it (mongod's BSONObjMaxInternalSize).
	MaxCommandSize = MaxBSONObjectSize + 16*1024
	// MaxNestingDepth is mongod's default maxBSONDepth for user documents.
	// Deeper documents are refused before anything recurses over them, so
	// a hostile 48 MB chain of nested documents cannot exhaust a stack.
	MaxNestingDepth = 200
	// commandDepthOverhead lets a command wrap user documents at the full
	// depth (e.g. {insert, documents: [ <doc> ]}).
	commandDepthOverhead = 3
)

// OP_MSG flag bits.
const (
	FlagChecksumPresent uint32 = 1 << 0
	FlagMoreToCome      uint32 = 1 << 1
	FlagExhaustAllowed  uint32 = 1 << 16
	// requiredBitsMask covers bits 0-15: a parser must refuse unknown ones.
	requiredBitsMask uint32 = 0xffff
	knownFlags              = FlagChecksumPresent | FlagMoreToCome | FlagExhaustAllowed
)

// Header is the standard message header that starts every message.
type Header struct {
	Length     int32
	RequestID  int32
	ResponseTo int32
	OpCode     int32
}

// parseHeader reads a header from the first 16 bytes of b.
func parseHeader(b []byte) Header {
	return Header{
		Length:     int32(binary.LittleEndian.Uint32(b[0:])),
		RequestID:  int32(binary.LittleEndian.Uint32(b[4:])),
		ResponseTo: int32(binary.LittleEndian.Uint32(b[8:])),
		OpCode:     int32(binary.LittleEndian.Uint32(b[12:])),
	}
}

// appendHeader appends a header whose length is patched in later by
// finishMessage.
func appendHeader(dst []byte, requestID, responseTo, opCode int32) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	return binary.LittleEndian.AppendUint32(dst, uint32(opCode))
}

// finishMessage writes the length of the message that starts at start.
func finishMessage(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// FrameError is a message that cannot be framed: its length is impossible
// or the stream ended inside it. The stream cannot be resynchronised, so
// the connection must close. When HeaderRead is set the header was read and
// a reply may be attempted before closing.
type FrameError struct {
	Header     Header
	HeaderRead bool
	Err        *mongoerr.Error
}

func (e *FrameError) Error() string { return e.Err.Error() }

// ErrTruncated reports a stream that ended in the middle of a message.
var ErrTruncated = errors.New("wire: stream ended inside a message")

// ReadMessage reads one whole message (header included) from r into buf,
// growing it as the bytes arrive, and returns the message bytes, which alias the
// returned buffer. io.EOF means the peer closed cleanly between messages;
// ErrTruncated that it closed inside one; *FrameError that the length field
// is unusable.
func ReadMessage(r io.Reader, buf []byte) (Header, []byte, error) {
	return readMessage(r, buf, nil)
}

// opName names an opcode for logs.
func opName(op int32) string {
	switch op {
	case OpReply:
		return "OP_REPLY"
	case OpUpdate:
		return "OP_UPDATE"
	case OpInsert:
		return "OP_INSERT"
	case OpQuery:
		return "OP_QUERY"
	case OpGetMore:
		return "OP_GET_MORE"
	case OpDelete:
		return "OP_DELETE"
	case OpKillCursors:
		return "OP_KILL_CURSORS"
	case OpCompressed:
		return "OP_COMPRESSED"
	case OpMsg:
		return "OP_MSG"
	}
	return fmt.Sprintf("opcode(%d)", op)
}
