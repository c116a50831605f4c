package wire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ConnInfo describes the client connection a request arrived on.
type ConnInfo struct {
	ID         int64  // increasing connection id, as mongod's connectionId
	RemoteAddr string // host:port of the client
	LocalAddr  string // host:port the client connected to
}

// Request is one command, decoded from OP_MSG or from an OP_QUERY on
// "<db>.$cmd".
type Request struct {
	Conn      *ConnInfo
	RequestID int32
	// OpCode is OpMsg or OpQuery (the legacy handshake).
	OpCode int32
	// Command is the command document. For OP_MSG, kind-1 document
	// sequences are merged into it as arrays under their identifiers. For
	// OP_QUERY, "$db" is set from the namespace and a {$query: …} wrapper is
	// unwrapped. The handler may keep references to it.
	Command bson.Raw
	// MoreToCome: the client expects no reply (w:0 writes, endSessions).
	MoreToCome bool
	// ExhaustAllowed is accepted and ignored: mayfly never advertises
	// topologyVersion, so drivers never ask it to stream.
	ExhaustAllowed bool
}

// Handler executes commands. It is the whole contract between the wire
// protocol and everything behind it, in the spirit of net/http.Handler.
//
// Handle returns the reply document. It is called from one goroutine per
// connection, concurrently across connections. A panic inside Handle is
// recovered by the connection loop and answered as InternalError.
type Handler interface {
	Handle(ctx context.Context, req *Request) bson.Raw
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) bson.Raw

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) bson.Raw { return f(ctx, req) }

// ConnObserver is implemented by a Handler that wants to know when a
// connection ends (for currentOp's idle connections and the like).
type ConnObserver interface {
	ConnClosed(c *ConnInfo)
}
