package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// echoHandler answers {ok: 1, echo: <command>} and panics on {panic: 1}.
// block, when set, is waited on by {block: 1}.
type echoHandler struct {
	mu     sync.Mutex
	seen   []bson.Raw
	block  chan struct{}
	inside chan struct{}
}

func (h *echoHandler) Handle(ctx context.Context, req *Request) bson.Raw {
	h.mu.Lock()
	h.seen = append(h.seen, req.Command)
	h.mu.Unlock()
	if _, err := req.Command.LookupErr("panic"); err == nil {
		panic("boom")
	}
	if _, err := req.Command.LookupErr("block"); err == nil {
		h.inside <- struct{}{}
		<-h.block
	}
	b, _ := bson.Marshal(bson.D{{Key: "echo", Value: req.Command}, {Key: "connectionId", Value: req.Conn.ID}, {Key: "ok", Value: 1.0}})
	return b
}

func startServer(t *testing.T, h Handler) (*Server, string, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	s := NewServer(h, Options{Logger: zap.New(core)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return s, ln.Addr().String(), logs
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads one reply, returning its header and body.
func roundTrip(t *testing.T, c net.Conn, msg []byte) (Header, bson.Raw) {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	return readReply(t, c)
}

func readReply(t *testing.T, c net.Conn) (Header, bson.Raw) {
	t.Helper()
	h, msg, err := ReadMessage(c, nil)
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	switch h.OpCode {
	case OpMsg:
		flags := binary.LittleEndian.Uint32(msg[16:])
		if flags != 0 || msg[20] != 0 {
			t.Fatalf("reply flags %x, section kind %d", flags, msg[20])
		}
		doc := bson.Raw(msg[21:])
		if int(binary.LittleEndian.Uint32(doc)) != len(doc) {
			t.Fatal("reply must be exactly one kind-0 section")
		}
		return h, doc
	case OpReply:
		return h, bson.Raw(msg[36:])
	}
	t.Fatalf("unexpected reply opcode %d", h.OpCode)
	return h, nil
}

func ping(t testing.TB, id int32) []byte {
	return driverOpMsg(t, id, 0, bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}})
}

func errCode(t *testing.T, reply bson.Raw) int32 {
	t.Helper()
	if ok := reply.Lookup("ok"); ok.Double() != 0 {
		t.Fatalf("expected an error reply, got %v", reply)
	}
	return reply.Lookup("code").Int32()
}

// assertServing checks the server still answers on a fresh connection.
func assertServing(t *testing.T, addr string) {
	t.Helper()
	c := dial(t, addr)
	h, reply := roundTrip(t, c, ping(t, 99))
	if h.ResponseTo != 99 || reply.Lookup("ok").Double() != 1 {
		t.Fatalf("server not serving: %v", reply)
	}
}

func TestServerRoundTrip(t *testing.T) {
	h := &echoHandler{}
	s, addr, _ := startServer(t, h)
	c := dial(t, addr)

	// Handshake: OP_QUERY on admin.$cmd answered with OP_REPLY.
	hd, reply := roundTrip(t, c, driverOpQuery(t, 5, "admin.$cmd", bson.D{{Key: "ismaster", Value: int32(1)}}))
	if hd.OpCode != OpReply || hd.ResponseTo != 5 {
		t.Fatalf("handshake reply opcode %d responseTo %d", hd.OpCode, hd.ResponseTo)
	}
	if db := reply.Lookup("echo", "$db").StringValue(); db != "admin" {
		t.Errorf("$db = %q", db)
	}
	connID := reply.Lookup("connectionId").Int64()

	// OP_MSG with a document sequence on the same connection.
	hd, reply = roundTrip(t, c, driverOpMsg(t, 6, 0, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "t"}},
		seq{"documents", []bson.D{{{Key: "a", Value: int32(1)}}, {{Key: "a", Value: int32(2)}}}}))
	if hd.OpCode != OpMsg || hd.ResponseTo != 6 {
		t.Fatalf("reply opcode %d responseTo %d", hd.OpCode, hd.ResponseTo)
	}
	if v := reply.Lookup("echo", "documents", "1", "a").Int32(); v != 2 {
		t.Errorf("documents[1].a = %d", v)
	}
	if reply.Lookup("connectionId").Int64() != connID {
		t.Error("connection id changed within a connection")
	}

	// A second connection gets a larger id.
	c2 := dial(t, addr)
	_, reply = roundTrip(t, c2, ping(t, 7))
	if id2 := reply.Lookup("connectionId").Int64(); id2 <= connID {
		t.Errorf("connection ids not increasing: %d then %d", connID, id2)
	}

	st := s.Stats()
	if st.Current != 2 || st.TotalCreated != 2 || st.NumRequests != 3 || st.BytesIn == 0 || st.BytesOut == 0 {
		t.Errorf("stats = %+v", st)
	}
	c2.Close()
	waitFor(t, func() bool { return s.Stats().Current == 1 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMoreToComeGetsNoReply(t *testing.T) {
	h := &echoHandler{}
	_, addr, _ := startServer(t, h)
	c := dial(t, addr)
	w0 := driverOpMsg(t, 10, wiremessage.MoreToCome, bson.D{{Key: "endSessions", Value: bson.A{}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: int32(0)}}}, {Key: "$db", Value: "admin"}})
	// A broken message flagged moreToCome gets no reply either.
	broken := bytes.Clone(w0)
	broken[len(broken)-1] = 7
	if _, err := c.Write(append(append(w0, broken...), ping(t, 11)...)); err != nil {
		t.Fatal(err)
	}
	hd, reply := readReply(t, c)
	if hd.ResponseTo != 11 || reply.Lookup("echo", "ping").Int32() != 1 {
		t.Fatalf("the first reply answers %d (%v): the connection is out of step", hd.ResponseTo, reply)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) != 2 {
		t.Errorf("handler saw %d commands, want 2 (endSessions and ping)", len(h.seen))
	}
}

func TestMalformedMessages(t *testing.T) {
	_, addr, logs := startServer(t, &echoHandler{})

	t.Run("garbage body gets an error reply and the connection stays", func(t *testing.T) {
		c := dial(t, addr)
		msg := ping(t, 20)
		for i := 21; i < len(msg); i++ {
			msg[i] = 0xee
		}
		hd, reply := roundTrip(t, c, msg)
		if hd.ResponseTo != 20 || errCode(t, reply) != mongoerr.InvalidBSON {
			t.Fatalf("reply %v", reply)
		}
		if _, reply := roundTrip(t, c, ping(t, 21)); reply.Lookup("ok").Double() != 1 {
			t.Fatalf("connection unusable after an error: %v", reply)
		}
	})
	t.Run("bad checksum is a ProtocolError", func(t *testing.T) {
		c := dial(t, addr)
		msg := driverOpMsg(t, 22, wiremessage.ChecksumPresent, bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}})
		msg[len(msg)-2] ^= 0x10
		if _, reply := roundTrip(t, c, msg); errCode(t, reply) != mongoerr.ProtocolError {
			t.Fatalf("reply %v", reply)
		}
	})
	t.Run("too deep is refused", func(t *testing.T) {
		c := dial(t, addr)
		if _, reply := roundTrip(t, c, driverOpMsg(t, 23, 0, bson.D{{Key: "x", Value: nest(1000)}, {Key: "$db", Value: "a"}})); errCode(t, reply) != mongoerr.Overflow {
			t.Fatalf("reply %v", reply)
		}
	})
	t.Run("oversize length: error reply, then close", func(t *testing.T) {
		c := dial(t, addr)
		msg := ping(t, 24)
		binary.LittleEndian.PutUint32(msg, MaxMessageSize+1)
		hd, reply := roundTrip(t, c, msg)
		if hd.ResponseTo != 24 || errCode(t, reply) != mongoerr.ProtocolError {
			t.Fatalf("reply %v", reply)
		}
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("connection not closed: %v", err)
		}
	})
	t.Run("random garbage frame", func(t *testing.T) {
		c := dial(t, addr)
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		io.Copy(io.Discard, c) // the server closes it
	})
	t.Run("truncated message then hang-up", func(t *testing.T) {
		c := dial(t, addr)
		msg := ping(t, 25)
		c.Write(msg[:len(msg)-5])
		c.Close()
	})
	t.Run("legacy opcode closes the connection", func(t *testing.T) {
		c := dial(t, addr)
		msg := ping(t, 26)
		binary.LittleEndian.PutUint32(msg[12:], uint32(OpInsert))
		c.Write(msg)
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read %d, %v; want EOF", n, err)
		}
	})
	t.Run("OP_QUERY on a collection fails with QueryFailure", func(t *testing.T) {
		c := dial(t, addr)
		c.Write(driverOpQuery(t, 27, "test.coll", bson.D{}))
		_, msg, err := ReadMessage(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if flags := int32(binary.LittleEndian.Uint32(msg[16:])); flags&ReplyQueryFailure == 0 {
			t.Errorf("flags %x lack QueryFailure", flags)
		}
		if e := bson.Raw(msg[36:]).Lookup("$err").StringValue(); e == "" {
			t.Error("no $err")
		}
	})
	// Through all of that, other clients are served.
	assertServing(t, addr)
	if logs.FilterMessage("unsupported legacy opcode; closing connection").Len() != 1 {
		t.Error("legacy opcode not logged")
	}
}

func TestHandlerPanicBecomesInternalError(t *testing.T) {
	_, addr, logs := startServer(t, &echoHandler{})
	c := dial(t, addr)
	_, reply := roundTrip(t, c, driverOpMsg(t, 30, 0, bson.D{{Key: "panic", Value: int32(1)}, {Key: "$db", Value: "a"}}))
	if errCode(t, reply) != mongoerr.InternalError || reply.Lookup("codeName").StringValue() != "InternalError" {
		t.Fatalf("reply %v", reply)
	}
	entries := logs.FilterMessage("panic in handler").All()
	if len(entries) != 1 || !bytes.Contains([]byte(entries[0].ContextMap()["stack"].(string)), []byte("echoHandler")) {
		t.Errorf("panic not logged with its stack: %v", entries)
	}
	if _, reply := roundTrip(t, c, ping(t, 31)); reply.Lookup("ok").Double() != 1 {
		t.Fatal("connection unusable after a panic")
	}
}

func TestInvalidHandlerReply(t *testing.T) {
	_, addr, _ := startServer(t, HandlerFunc(func(ctx context.Context, req *Request) bson.Raw { return nil }))
	c := dial(t, addr)
	if _, reply := roundTrip(t, c, ping(t, 40)); errCode(t, reply) != mongoerr.InternalError {
		t.Fatalf("reply %v", reply)
	}
}

func TestGracefulShutdown(t *testing.T) {
	h := &echoHandler{block: make(chan struct{}), inside: make(chan struct{}, 1)}
	s, addr, _ := startServer(t, h)
	idle := dial(t, addr)
	roundTrip(t, idle, ping(t, 1))
	busy := dial(t, addr)
	busy.Write(driverOpMsg(t, 2, 0, bson.D{{Key: "block", Value: int32(1)}, {Key: "$db", Value: "a"}}))
	<-h.inside

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()

	// The idle connection is closed, new connections are refused...
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF", err)
	}
	waitFor(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	// ...and the request in flight still gets its answer.
	close(h.block)
	if hd, reply := readReply(t, busy); hd.ResponseTo != 2 || reply.Lookup("ok").Double() != 1 {
		t.Fatalf("in-flight reply %v", reply)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := busy.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("busy connection after its reply: %v, want EOF", err)
	}
	if s.Stats().Current != 0 {
		t.Errorf("current = %d after shutdown", s.Stats().Current)
	}
}

func TestShutdownDeadline(t *testing.T) {
	h := &echoHandler{block: make(chan struct{}), inside: make(chan struct{}, 1)}
	s, addr, _ := startServer(t, h)
	busy := dial(t, addr)
	busy.Write(driverOpMsg(t, 2, 0, bson.D{{Key: "block", Value: int32(1)}, {Key: "$db", Value: "a"}}))
	<-h.inside
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if _, err := busy.Read(make([]byte, 1)); err == nil {
		t.Error("connection still open after a forced shutdown")
	}
	close(h.block)
}

// BenchmarkPingRoundTrip measures one request/reply on one connection
// through the whole loop (framing, decode, handler, encode, flush).
func BenchmarkPingRoundTrip(b *testing.B) {
	s := NewServer(HandlerFunc(func(ctx context.Context, req *Request) bson.Raw {
		r, _ := bson.Marshal(bson.D{{Key: "ok", Value: 1.0}})
		return r
	}), Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := ping(b, 1)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		_, reply, err := ReadMessage(c, buf)
		if err != nil {
			b.Fatal(err)
		}
		buf = reply[:0]
	}
}
