package wire

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("wire: server closed")

// Options configures a Server.
type Options struct {
	// Logger receives connection and protocol events; nil means no logs.
	Logger *zap.Logger
	// Limits bound connections and their memory (see Limits).
	Limits Limits
	// Compressors are those hello may negotiate (--networkMessageCompressors,
	// see ParseCompressors); nil means mongod's default, snappy, zstd and
	// zlib, and an empty list disables compression.
	Compressors []string
}

// Stats are the wire layer's counters, as serverStatus reports them under
// connections and network.
type Stats struct {
	Current      int64 // open connections
	TotalCreated int64 // connections accepted since start
	BytesIn      int64
	BytesOut     int64
	NumRequests  int64
}

// Server accepts connections and runs one goroutine per connection, each
// reading a request, calling the Handler and writing the reply, strictly in
// order (drivers never pipeline on a connection). Nothing a client sends can
// stop the server or touch another connection: at worst its own connection
// is closed.
type Server struct {
	handler Handler
	log     *zap.Logger
	lim     serverLimits

	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu        sync.Mutex
	closing   bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	done      chan struct{} // closed when the last connection leaves during shutdown

	nextConnID   atomic.Int64
	nextReqID    atomic.Int32
	current      atomic.Int64
	totalCreated atomic.Int64
	bytesIn      atomic.Int64
	bytesOut     atomic.Int64
	numRequests  atomic.Int64

	compressors []string
	comp        compressionStats
}

// NewServer returns a server that answers with h.
func NewServer(h Handler, opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		handler: h, log: log, baseCtx: ctx, cancelBase: cancel,
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
	}
	s.initLimits(opts.Limits)
	s.compressors = opts.Compressors
	if s.compressors == nil {
		s.compressors, _ = ParseCompressors(DefaultCompressors)
	}
	return s
}

// Stats returns the current counters.
func (s *Server) Stats() Stats {
	return Stats{
		Current: s.current.Load(), TotalCreated: s.totalCreated.Load(),
		BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(), NumRequests: s.numRequests.Load(),
	}
}

// Serve accepts connections on ln until Shutdown or Close, and then returns
// ErrServerClosed. Other accept errors are returned as they are.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			// Running out of file descriptors must not end the server:
			// back off and try again, as net/http does.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &conn{srv: s, nc: nc, id: s.nextConnID.Add(1)}
		c.initLimits() // before the connection is visible to shed
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		if n := len(s.conns); n >= s.lim.MaxConns {
			s.mu.Unlock()
			s.refuse(nc, n)
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.current.Add(1)
		s.totalCreated.Add(1)
		go c.serve()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Shutdown stops accepting, closes idle connections and waits for requests
// in flight to finish and their connections to close. If ctx ends first,
// the remaining handlers see their context cancelled, every connection is
// closed and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() {
			return nil
		}
		select {
		case <-ctx.Done():
			s.forceClose()
			return ctx.Err()
		case <-s.done:
			return nil
		case <-tick.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.beginClose()
	s.forceClose()
	// Wait for the connection goroutines to finish (their sockets are
	// closed, so they end at once; the bound covers a handler that does
	// not return).
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.log.Warn("connections still running after close")
	}
	return nil
}

func (s *Server) beginClose() {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.done = make(chan struct{})
		if len(s.conns) == 0 {
			close(s.done)
		}
	}
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
}

// closeIdle closes connections waiting for a request and reports whether
// none are left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if !c.active {
			c.nc.Close()
		}
	}
	return len(s.conns) == 0
}

func (s *Server) forceClose() {
	s.cancelBase()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.nc.Close()
	}
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.current.Add(-1)
	if s.closing && len(s.conns) == 0 {
		select {
		case <-s.done:
		default:
			close(s.done)
		}
	}
	s.mu.Unlock()
}

// Buffers are pooled across connections: a thousand mostly idle
// connections should not each pin their own read and write buffers.
const (
	ioBufSize = 16 << 10
	// maxPooledBuf caps what goes back to the pool, so one 48 MB message
	// does not keep 48 MB alive for the life of the process.
	maxPooledBuf = unbudgeted
)

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, ioBufSize) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, ioBufSize) }}
	bufPool    = sync.Pool{New: func() any { b := make([]byte, 0, ioBufSize); return &b }}
)

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// conn is one client connection.
type conn struct {
	srv  *Server
	nc   net.Conn
	id   int64
	info ConnInfo
	lim  connLimits
	// active is set while a request is being read or handled; guarded by
	// srv.mu. Shutdown closes only connections that are not active.
	active bool
	br     *bufio.Reader
	bw     *bufio.Writer
	comp   compressState
}

func (c *conn) setActive(active bool) bool {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if active && c.srv.closing {
		return false
	}
	c.active = active
	return true
}

func (c *conn) serve() {
	s := c.srv
	c.info = ConnInfo{ID: c.id, RemoteAddr: c.nc.RemoteAddr().String(), LocalAddr: c.nc.LocalAddr().String()}
	log := s.log.With(zap.Int64("connectionId", c.id), zap.String("remote", c.info.RemoteAddr))
	log.Info("connection accepted", zap.Int64("connectionCount", s.current.Load()))
	c.br = readerPool.Get().(*bufio.Reader)
	c.br.Reset(c.lim.tc)
	c.bw = writerPool.Get().(*bufio.Writer)
	c.bw.Reset(c.lim.tc)
	ctx, cancel := context.WithCancel(s.baseCtx)
	defer func() {
		cancel()
		c.nc.Close()
		c.br.Reset(nil)
		readerPool.Put(c.br)
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		c.releaseBudget()
		if o, ok := s.handler.(ConnObserver); ok {
			o.ConnClosed(&c.info)
		}
		log.Info("connection ended", zap.Int64("connectionCount", s.current.Load()-1))
		// Last: Close returns once every connection got here, so nothing
		// of a closed server logs or calls its handler afterwards.
		s.removeConn(c)
	}()

	in, out := getBuf(), getBuf()
	defer func() { putBuf(in); putBuf(out) }()
	c.lim.out = out
	for {
		// Idle until the first byte of the next message arrives.
		if _, err := c.br.Peek(1); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("read failed", zap.Error(err))
			}
			return
		}
		if !c.setActive(true) {
			return // shutting down: do not start a new request
		}
		h, msg, err := c.readMessage(ctx, *in)
		*in = msg[:0]
		if err == nil {
			s.bytesIn.Add(int64(len(msg)))
		} else if h.Length != 0 {
			s.bytesIn.Add(HeaderLen) // the body, if any, was not (all) read
		}
		if err != nil {
			c.frameFailed(log, h, err)
			return
		}
		if h.OpCode == OpCompressed {
			if h, msg, err = c.decompress(ctx, h, msg); err != nil {
				c.badCompressedFrame(log, h, err)
				return
			}
		}
		s.numRequests.Add(1)
		keep := c.handle(ctx, log, h, msg, out)
		c.endCompressed()
		c.afterRequest(in, out) // large buffers are dropped and their budget returned
		c.setActive(false)
		if !keep || s.isClosing() {
			return
		}
	}
}

// frameFailed answers a message that could not be framed, when that is
// possible at all, and the connection then closes: the stream position is
// lost.
func (c *conn) frameFailed(log *zap.Logger, h Header, err error) {
	var fe *FrameError
	switch {
	case errors.As(err, &fe):
		log.Warn("invalid message frame; closing connection", zap.Int32("msgLen", h.Length), zap.Int32("opCode", h.OpCode), zap.String("errmsg", fe.Err.Msg))
		if fe.HeaderRead {
			out := getBuf()
			defer putBuf(out)
			switch h.OpCode {
			case OpMsg:
				c.write(log, AppendOpMsgReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, marshalReply(fe.Err.Reply())))
			case OpQuery:
				c.write(log, AppendOpReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, ReplyQueryFailure, queryFailureDoc(fe.Err)))
			}
		}
	case errors.Is(err, ErrTruncated):
		log.Warn("connection closed inside a message", zap.Int32("msgLen", h.Length), zap.Int32("opCode", h.OpCode))
	default:
		logIOFailure(log, "read", &c.srv.lim, err)
	}
}

// handle decodes one framed message, runs it and writes the reply. It
// reports whether the connection should stay open.
func (c *conn) handle(ctx context.Context, log *zap.Logger, h Header, msg []byte, out *[]byte) bool {
	switch h.OpCode {
	case OpMsg:
		m, err := DecodeOpMsg(msg)
		if err != nil {
			me := mongoerr.From(err)
			log.Warn("invalid OP_MSG", zap.Int32("requestId", h.RequestID), zap.Int32("code", me.Code), zap.String("errmsg", me.Msg))
			// A client that asked for no reply is not expecting one, even
			// for a broken message; answering would desynchronise it.
			if len(msg) >= HeaderLen+4 && FlagMoreToCome&leUint32(msg[HeaderLen:]) != 0 {
				return true
			}
			*out = AppendOpMsgReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, marshalReply(me.Reply()))
			return c.write(log, *out)
		}
		req := &Request{Conn: &c.info, RequestID: h.RequestID, OpCode: OpMsg, Command: m.Command,
			MoreToCome: m.MoreToCome(), ExhaustAllowed: m.ExhaustAllowed()}
		reply := c.run(ctx, log, req)
		if req.MoreToCome {
			return true
		}
		*out = AppendOpMsgReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, reply)
		return c.write(log, *out)

	case OpQuery:
		q, err := DecodeOpQuery(msg)
		if err != nil {
			me := mongoerr.From(err)
			log.Warn("invalid OP_QUERY", zap.Int32("requestId", h.RequestID), zap.Int32("code", me.Code), zap.String("errmsg", me.Msg))
			*out = AppendOpReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, ReplyQueryFailure, queryFailureDoc(me))
			return c.write(log, *out)
		}
		if !q.IsCommand {
			log.Warn("legacy OP_QUERY on a collection refused", zap.String("ns", q.FullCollectionName))
			me := mongoerr.New(5739101, "OP_QUERY is no longer supported. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal")
			*out = AppendOpReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, ReplyQueryFailure, queryFailureDoc(me))
			return c.write(log, *out)
		}
		req := &Request{Conn: &c.info, RequestID: h.RequestID, OpCode: OpQuery, Command: q.Command}
		reply := c.run(ctx, log, req)
		*out = AppendOpReply((*out)[:0], c.srv.nextReqID.Add(1), h.RequestID, 0, reply)
		return c.write(log, *out)

	default:
		log.Warn("unsupported legacy opcode; closing connection", zap.String("opCode", opName(h.OpCode)), zap.Int32("msgLen", h.Length))
		return false
	}
}

// call runs the handler, turning a panic or an unusable reply into an
// InternalError reply so that one bad command cannot take the connection,
// let alone the process, down with it.
func (c *conn) call(ctx context.Context, log *zap.Logger, req *Request) (reply bson.Raw) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic in handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			reply = marshalReply(mongoerr.New(mongoerr.InternalError, "internal error: %v", p).Reply())
		}
	}()
	if err := c.admit(ctx); err != nil {
		return marshalReply(mongoerr.From(err).Reply())
	}
	reply = c.srv.handler.Handle(ctx, req)
	c.chargeReply(len(reply))
	// Only the frame of the reply is checked: the handler built it with
	// the bson package, and re-walking every reply would cost more than
	// it could catch.
	switch {
	case len(reply) < 5 || int(leUint32(reply)) != len(reply) || reply[len(reply)-1] != 0:
		log.Error("handler returned an invalid reply", zap.Int("bytes", len(reply)))
		return marshalReply(mongoerr.New(mongoerr.InternalError, "server produced an invalid reply").Reply())
	case len(reply) > MaxMessageSize-HeaderLen-5:
		return marshalReply(mongoerr.New(mongoerr.BSONObjectTooLarge, "reply of %d bytes exceeds the maximum message size of %d", len(reply), MaxMessageSize).Reply())
	}
	return reply
}

func (c *conn) write(log *zap.Logger, msg []byte) bool {
	if c.comp.compressed {
		msg = c.compressReply(msg)
	}
	n, err := c.bw.Write(msg)
	if err == nil {
		err = c.bw.Flush()
	}
	c.srv.bytesOut.Add(int64(n))
	if err != nil {
		logIOFailure(log, "write", &c.srv.lim, err)
		return false
	}
	return true
}

// queryFailureDoc is the legacy error document of an OP_REPLY with the
// QueryFailure flag: $err for old readers, plus the modern fields.
func queryFailureDoc(e *mongoerr.Error) []byte {
	return marshalReply(bson.D{{Key: "$err", Value: e.Msg}, {Key: "code", Value: e.Code}, {Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.Msg}, {Key: "codeName", Value: e.CodeName()}})
}

func marshalReply(d bson.D) []byte {
	b, err := bson.Marshal(d)
	if err != nil {
		panic("wire: cannot marshal an error reply: " + err.Error())
	}
	return b
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
