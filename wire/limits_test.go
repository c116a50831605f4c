package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func startLimited(t *testing.T, h Handler, lim Limits) (*Server, string, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	s := NewServer(h, Options{Logger: zap.New(core), Limits: lim})
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

// frameStart is a message header declaring length bytes, followed by the
// start of an OP_MSG body.
func frameStart(length int32, reqID int32, body int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(length))
	b = binary.LittleEndian.AppendUint32(b, uint32(reqID))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(OpMsg))
	return append(b, make([]byte, body)...)
}

// expectClosed reads until the server closes c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

func heapAfterGC() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// A declared 48 MB frame reserves nothing: the buffer grows only as bytes
// arrive, and the frame times out when they stop.
func TestIssue21DeclaredFrameCostsNothing(t *testing.T) {
	s, addr, logs := startLimited(t, &echoHandler{}, Limits{FrameTimeout: 500 * time.Millisecond})
	const conns = 200
	before := heapAfterGC()
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = dial(t, addr)
		if _, err := cs[i].Write(frameStart(MaxMessageSize, int32(i), 100)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return s.Stats().TotalCreated == conns })
	var peak runtime.MemStats
	runtime.ReadMemStats(&peak)
	for _, c := range cs {
		expectClosed(t, c) // by the frame timeout: every header was read
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d connections declaring %d bytes each: %.1f MB allocated in all, heap %.1f MB -> %.1f MB",
		conns, MaxMessageSize, float64(allocated)/1e6, float64(before.HeapAlloc)/1e6, float64(peak.HeapAlloc)/1e6)
	if allocated > 50<<20 {
		t.Errorf("%d bytes allocated for %d declared frames; want < 50 MB", allocated, conns)
	}
	if n := logs.FilterMessage("message not completed in time; closing connection").Len(); n != conns {
		t.Errorf("%d frame timeouts logged, want %d", n, conns)
	}
	if s.BudgetInUse() != 0 {
		t.Errorf("budget in use after the connections closed: %d", s.BudgetInUse())
	}
	assertServing(t, addr)
}

// bigReplyHandler answers {big: 1} with a reply of size bytes and
// anything else with {ok: 1}.
type bigReplyHandler struct{ size int }

func (h bigReplyHandler) Handle(ctx context.Context, req *Request) bson.Raw {
	if _, err := req.Command.LookupErr("big"); err == nil {
		b, _ := bson.Marshal(bson.D{{Key: "pad", Value: bson.Binary{Data: make([]byte, h.size)}}, {Key: "ok", Value: 1.0}})
		return b
	}
	b, _ := bson.Marshal(bson.D{{Key: "ok", Value: 1.0}})
	return b
}

// A client that never reads its replies is disconnected once a reply
// write makes no progress for the write timeout, and what its replies
// held is released; a client that reads is served all along.
func TestIssue21UnreadRepliesDisconnected(t *testing.T) {
	s, addr, logs := startLimited(t, bigReplyHandler{size: 1 << 20}, Limits{WriteTimeout: 300 * time.Millisecond})
	good := dial(t, addr)
	if _, reply := roundTrip(t, good, ping(t, 1)); reply.Lookup("ok").Double() != 1 {
		t.Fatal(reply)
	}
	before := heapAfterGC()

	// The well-behaved client keeps asking while the hostile ones pile up.
	stop := make(chan struct{})
	var served atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for id := int32(2); ; id++ {
			select {
			case <-stop:
				return
			default:
			}
			good.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := good.Write(ping(t, id)); err != nil {
				t.Errorf("well-behaved client: %v", err)
				return
			}
			h, msg, err := ReadMessage(good, nil)
			if err != nil || h.ResponseTo != id {
				t.Errorf("well-behaved client: reply %v to %d: %v", h.ResponseTo, id, err)
				return
			}
			_ = msg
			served.Add(1)
		}
	}()

	const hostile = 8
	var reqs []byte
	for i := range 64 {
		reqs = append(reqs, driverOpMsg(t, int32(i), 0, bson.D{{Key: "big", Value: int32(1)}, {Key: "$db", Value: "admin"}})...)
	}
	for range hostile {
		c := dial(t, addr)
		if _, err := c.Write(reqs); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return s.Stats().TotalCreated == hostile+1 && s.Stats().Current == 1 })
	close(stop)
	wg.Wait()
	if served.Load() == 0 {
		t.Error("the well-behaved client was not served while the others did not read")
	}
	if n := logs.FilterMessage("client did not read its reply; closing connection").Len(); n != hostile {
		t.Errorf("%d write timeouts logged, want %d", n, hostile)
	}
	if s.BudgetInUse() != 0 {
		t.Errorf("budget in use after the connections closed: %d", s.BudgetInUse())
	}
	after := heapAfterGC()
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("well-behaved requests served: %d; heap %.1f MB -> %.1f MB", served.Load(), float64(before.HeapAlloc)/1e6, float64(after.HeapAlloc)/1e6)
	if grown > 8<<20 {
		t.Errorf("heap grew by %d bytes after the hostile connections were closed", grown)
	}
}

// --maxConns N: the N+1th connection is closed at once and not counted;
// the first N work, and a slot freed is reusable.
func TestIssue21MaxConns(t *testing.T) {
	s, addr, logs := startLimited(t, &echoHandler{}, Limits{MaxConns: 3})
	if s.MaxConns() != 3 {
		t.Fatalf("MaxConns() = %d", s.MaxConns())
	}
	var cs []net.Conn
	for i := range 3 {
		c := dial(t, addr)
		if _, reply := roundTrip(t, c, ping(t, int32(i))); reply.Lookup("ok").Double() != 1 {
			t.Fatal(reply)
		}
		cs = append(cs, c)
	}
	extra := dial(t, addr)
	expectClosed(t, extra)
	if st := s.Stats(); st.Current != 3 || st.TotalCreated != 3 || s.Rejected() != 1 {
		t.Errorf("current %d, totalCreated %d, rejected %d; want 3, 3, 1", st.Current, st.TotalCreated, s.Rejected())
	}
	if logs.FilterMessage("Connection refused because there are too many open connections").Len() != 1 {
		t.Error("refusal not logged")
	}
	for i, c := range cs {
		if _, reply := roundTrip(t, c, ping(t, int32(10+i))); reply.Lookup("ok").Double() != 1 {
			t.Fatal(reply)
		}
	}
	cs[0].Close()
	waitFor(t, func() bool { return s.Stats().Current == 2 })
	assertServing(t, addr)
}

// A frame that stops arriving, in its header or its body, times out; an
// idle connection does not, and a slow frame that keeps arriving is read.
func TestIssue21HalfSentFrameTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	s, addr, logs := startLimited(t, &echoHandler{}, Limits{FrameTimeout: timeout})
	idle := dial(t, addr)
	inHeader := dial(t, addr)
	inBody := dial(t, addr)
	start := time.Now()
	inHeader.Write(frameStart(1000, 1, 0)[:5])
	inBody.Write(frameStart(1000, 2, 10))
	expectClosed(t, inHeader)
	expectClosed(t, inBody)
	if n := logs.FilterMessage("message not completed in time; closing connection").Len(); n != 2 {
		t.Errorf("%d frame timeouts logged, want 2", n)
	}
	// The idle connection has now been idle longer than the timeout.
	time.Sleep(max(0, 2*timeout-time.Since(start)))
	if _, reply := roundTrip(t, idle, ping(t, 3)); reply.Lookup("ok").Double() != 1 {
		t.Fatal(reply)
	}
	// Each piece arrives within the timeout, the whole takes longer.
	msg := ping(t, 4)
	for i := 0; i < len(msg); i += len(msg)/5 + 1 {
		idle.Write(msg[i:min(len(msg), i+len(msg)/5+1)])
		time.Sleep(timeout / 4)
	}
	if h, reply := readReply(t, idle); h.ResponseTo != 4 || reply.Lookup("ok").Double() != 1 {
		t.Fatal(reply)
	}
	if s.Stats().Current != 1 {
		t.Errorf("current %d, want 1", s.Stats().Current)
	}
}

// Large frames share the budget, charged as their buffers grow: one that
// does not fit waits (without reading, which pushes back on its client),
// and a connection that holds budget while its frame has stopped arriving
// is closed to make room, without waiting for its frame timeout.
func TestIssue21BudgetBackPressure(t *testing.T) {
	s, addr, logs := startLimited(t, &echoHandler{}, Limits{MemoryBudget: MaxMessageSize, FrameTimeout: 20 * time.Second})
	a := dial(t, addr)
	if _, err := a.Write(frameStart(40<<20, 1, 30<<20)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.BudgetInUse() >= 30<<20 })

	b := dial(t, addr)
	bmsg := driverOpMsg(t, 2, 0, bson.D{{Key: "blob", Value: bson.Binary{Data: make([]byte, 15<<20)}}, {Key: "$db", Value: "admin"}})
	bdone := make(chan error, 1)
	go func() {
		_, err := b.Write(bmsg)
		bdone <- err
	}()
	waitFor(t, func() bool { return s.lim.budget.waiting() == 1 })
	// Small requests are not held up.
	assertServing(t, addr)

	// The stalled frame is given up for the waiting one.
	expectClosed(t, a)
	if err := <-bdone; err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, reply := readReply(t, b); h.ResponseTo != 2 || reply.Lookup("ok").Double() != 1 {
		t.Fatalf("reply to %d: ok %v", h.ResponseTo, reply.Lookup("ok"))
	}
	if n := logs.FilterMessage("memory budget exhausted: closing a connection stalled while holding budget").Len(); n != 1 {
		t.Errorf("%d connections shed, want 1", n)
	}
	waitFor(t, func() bool { return s.BudgetInUse() == 0 })
}

func TestIssue21BudgetOrderAndOverdraft(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if err := b.acquire(ctx, 60, 0, false); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 4)
	go func() { b.acquire(ctx, 50, 0, false); got <- 50 }()
	for b.waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	// A zero-byte request does not queue behind the large waiter.
	if err := b.acquire(ctx, 0, 0, false); err != nil {
		t.Fatal(err)
	}
	b.force(50) // a reply: 110 of 100 in use
	go func() { b.acquire(ctx, 0, 0, false); got <- 0 }()
	for b.waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.acquire(short, 10, 0, false); err == nil {
		t.Fatal("acquire over budget did not time out")
	}
	if b.waiting() != 2 {
		t.Fatalf("a timed-out waiter was left queued: %d", b.waiting())
	}
	b.release(60) // 50 in use: the 50-byte waiter fits, then the overdraft is gone
	if a, c := <-got, <-got; a+c != 50 {
		t.Fatalf("woken %d and %d", a, c)
	}
	if u := b.inUse(); u != 100 {
		t.Fatalf("in use %d, want 100", u)
	}
	// A request larger than the whole budget is clamped, not refused.
	b.release(100)
	if err := b.acquire(ctx, 1000, 0, false); err != nil || b.inUse() != 100 {
		t.Fatalf("acquire(1000): %v, in use %d", err, b.inUse())
	}

	// Two frames growing at once, each holding part of the budget: when
	// all that is in use is held by waiters, the first goes on over the
	// budget instead of both waiting forever.
	b = newBudget(100)
	b.acquire(ctx, 60, 0, false) // x
	b.acquire(ctx, 30, 0, false) // y
	xDone := make(chan struct{})
	go func() { b.acquire(ctx, 40, 60, false); close(xDone) }()
	for b.waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	yDone := make(chan struct{})
	go func() { b.acquire(ctx, 40, 30, false); close(yDone) }()
	<-xDone
	if u := b.inUse(); u != 130 {
		t.Fatalf("in use %d after the deadlock was broken, want 130", u)
	}
	b.release(100) // x is done
	<-yDone
	if u := b.inUse(); u != 70 {
		t.Fatalf("in use %d, want 70", u)
	}

	// A low waiter (a client pipelining requests it does not read the
	// replies of) is served after the others, whatever the order.
	b = newBudget(10)
	b.acquire(ctx, 10, 0, false)
	order := make(chan string, 2)
	go func() { b.acquire(ctx, 5, 0, true); order <- "low" }()
	for b.waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	go func() { b.acquire(ctx, 5, 0, false); order <- "normal" }()
	for b.waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	b.release(5)
	if first := <-order; first != "normal" {
		t.Fatalf("%s waiter served first", first)
	}
	b.release(5)
	<-order
}

// A request that cannot get its reply reserve within BudgetWait is
// answered with ExceededMemoryLimit, and its connection stays usable.
func TestIssue21BudgetWaitExceeded(t *testing.T) {
	s, addr, _ := startLimited(t, &echoHandler{}, Limits{MemoryBudget: MaxMessageSize, BudgetWait: 300 * time.Millisecond, FrameTimeout: 20 * time.Second})
	b := dial(t, addr)
	// A 4 MB reply makes the reserve for the next requests 6 MB (the
	// budget's eighth).
	big := driverOpMsg(t, 1, 0, bson.D{{Key: "blob", Value: bson.Binary{Data: make([]byte, 4<<20)}}, {Key: "$db", Value: "admin"}})
	if _, reply := roundTrip(t, b, big); reply.Lookup("ok").Double() != 1 {
		t.Fatal(reply)
	}
	// Another connection's frame takes all but about 2 MB of the budget.
	a := dial(t, addr)
	if _, err := a.Write(frameStart(44<<20, 2, 20<<20)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.BudgetInUse() >= 44<<20-unbudgeted })
	_, reply := roundTrip(t, b, ping(t, 3))
	if code := errCode(t, reply); code != 146 || reply.Lookup("codeName").StringValue() != "ExceededMemoryLimit" {
		t.Fatalf("reply %v", reply)
	}
	a.Close()
	waitFor(t, func() bool { return s.BudgetInUse() == 0 })
	if _, reply := roundTrip(t, b, ping(t, 4)); reply.Lookup("ok").Double() != 1 {
		t.Fatal(reply)
	}
}
