package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Limits bound what connections can cost, so that no number of hostile
// clients can take the server's memory: a declared length reserves
// nothing until the bytes arrive, a frame that stops arriving and a reply
// that is never read both time out, the number of connections is capped,
// and the large request and reply buffers of all connections together
// share one budget. The zero value means the defaults below.
type Limits struct {
	// MaxConns is --maxConns (net.maxIncomingConnections): connections
	// beyond it are closed right after accept. 0 means mongod's default,
	// 1000000. As in mongod, the effective value is at most 80% of the
	// open-file limit.
	MaxConns int
	// FrameTimeout is how long a message that has started to arrive may
	// go without another byte before the connection is closed (default
	// 30 s; negative: never). An idle connection, between messages, never
	// times out, as in mongod.
	FrameTimeout time.Duration
	// WriteTimeout is how long writing a reply may go without progress,
	// because the client does not read, before the connection is closed
	// (default 30 s; negative: never).
	WriteTimeout time.Duration
	// MemoryBudget is how many bytes of request and reply buffers larger
	// than 64 KiB may be held by all connections together (default 256
	// MiB, at least MaxMessageSize). Frames are charged as their buffers
	// grow, and every request holds a reserve for its reply while it runs
	// (1 MiB, more while replies are large). A request that needs more
	// waits, and while requests wait, connections that hold budget but
	// have been stuck in a read or a write for a second (at most half a
	// timeout) are closed.
	MemoryBudget int64
	// BudgetWait is how long a request waits for the budget (default
	// 60 s): a frame still unread is then abandoned and its connection
	// closed; a framed request is answered with ExceededMemoryLimit.
	BudgetWait time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxConns     = 1_000_000 // mongod's DEFAULT_MAX_CONN
	DefaultFrameTimeout = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
	DefaultMemoryBudget = 256 << 20
	DefaultBudgetWait   = 60 * time.Second
	// MinMaxConns is mongod's lower bound for --maxConns.
	MinMaxConns = 5
)

const (
	// unbudgeted is the buffer size every connection may use without
	// asking the budget: requests and replies up to it (nearly all of
	// them) never wait, and buffers up to it are kept between messages.
	unbudgeted = 64 << 10
	// writeChunk is how much of a reply is written per deadline, so that a
	// slow reader that keeps reading is not cut off by a large reply.
	writeChunk = 256 << 10
	// replyReserve is the least every request holds while it runs: with
	// the default budget, at most 256 replies are being built at once,
	// fewer when replies have lately been large.
	replyReserve = 1 << 20
)

// serverLimits is the server's share of the limits.
type serverLimits struct {
	Limits
	budget   *budget
	rejected atomic.Int64
	shedAt   atomic.Int64 // when stalled connections were last looked for (unix ns)
	replies  replySizes
	// shedAfter is how long a connection holding budget may be stuck in a
	// read or a write before, while others wait for budget, it is closed.
	shedAfter time.Duration
}

func (s *Server) initLimits(opts Limits) {
	s.lim.init(opts, s.log)
	s.lim.budget.onPressure = s.shed
}

func (l *serverLimits) init(opts Limits, log *zap.Logger) {
	l.Limits = opts
	l.MaxConns = EffectiveMaxConns(opts.MaxConns)
	if opts.MaxConns > l.MaxConns {
		log.Info(" --maxConns too high", zap.Int("limit", l.MaxConns))
	}
	if l.FrameTimeout == 0 {
		l.FrameTimeout = DefaultFrameTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.MemoryBudget <= 0 {
		l.MemoryBudget = DefaultMemoryBudget
	}
	l.MemoryBudget = max(l.MemoryBudget, MaxMessageSize)
	if l.BudgetWait <= 0 {
		l.BudgetWait = DefaultBudgetWait
	}
	l.budget = newBudget(l.MemoryBudget)
	l.shedAfter = time.Second
	for _, d := range []time.Duration{l.FrameTimeout, l.WriteTimeout} {
		if d > 0 {
			l.shedAfter = min(l.shedAfter, d/2)
		}
	}
}

// EffectiveMaxConns is the connection limit a server given maxConns (0:
// the default) enforces: as mongod, at most 80% of the open-file limit.
func EffectiveMaxConns(maxConns int) int {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	if supported := supportedMaxConns(); supported > 0 && supported < maxConns {
		return supported
	}
	return maxConns
}

// MaxConns is the effective connection limit: what serverStatus's
// connections.available counts down from.
func (s *Server) MaxConns() int { return s.lim.MaxConns }

// BudgetInUse is how many bytes of the memory budget are held now.
func (s *Server) BudgetInUse() int64 { return s.lim.budget.inUse() }

// Rejected is how many connections were refused for exceeding MaxConns.
func (s *Server) Rejected() int64 { return s.lim.rejected.Load() }

// refuse closes a connection accepted beyond MaxConns, as mongod does
// (log id 22942), without counting it as created.
func (s *Server) refuse(nc net.Conn, count int) {
	s.lim.rejected.Add(1)
	s.log.Info("Connection refused because there are too many open connections",
		zap.String("remote", nc.RemoteAddr().String()), zap.Int("connectionCount", count))
	nc.Close()
}

// timedConn puts the frame and write deadlines on a connection: reads
// inside a frame must make progress within the frame timeout, writes
// within the write timeout. Only the connection's goroutine uses it.
type timedConn struct {
	net.Conn
	readTimeout, writeTimeout time.Duration
	inFrame, deadlineSet      bool
	// readBy and writeBy are the deadlines last set: they are moved only
	// once a tenth of the timeout has passed, which spares a timer update
	// per call.
	readBy, writeBy time.Time
	// blockedSince is when the read inside a frame or the write now under
	// way started (unix ns), 0 when none is: how stuck the connection is.
	blockedSince atomic.Int64
}

func (t *timedConn) Read(p []byte) (int, error) {
	if !t.inFrame {
		return t.Conn.Read(p)
	}
	now := time.Now()
	if t.readTimeout > 0 && (!t.deadlineSet || t.readBy.Sub(now) < t.readTimeout-t.readTimeout/10) {
		t.readBy = now.Add(t.readTimeout)
		t.Conn.SetReadDeadline(t.readBy)
		t.deadlineSet = true
	}
	t.blockedSince.Store(now.UnixNano())
	n, err := t.Conn.Read(p)
	t.blockedSince.Store(0)
	return n, err
}

func (t *timedConn) Write(p []byte) (int, error) {
	defer t.blockedSince.Store(0)
	n := 0
	for n < len(p) {
		end := min(len(p), n+writeChunk)
		now := time.Now()
		if t.writeTimeout > 0 && t.writeBy.Sub(now) < t.writeTimeout-t.writeTimeout/10 {
			t.writeBy = now.Add(t.writeTimeout)
			t.Conn.SetWriteDeadline(t.writeBy)
		}
		t.blockedSince.Store(now.UnixNano())
		m, err := t.Conn.Write(p[n:end])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// startFrame is called once the first byte of a message has arrived.
func (t *timedConn) startFrame() { t.inFrame = true }

// endFrame lifts the read deadline: an idle connection stays open.
func (t *timedConn) endFrame() {
	t.inFrame = false
	if t.deadlineSet {
		t.Conn.SetReadDeadline(time.Time{})
		t.deadlineSet = false
	}
}

// connLimits is a connection's share of the limits.
type connLimits struct {
	tc   *timedConn
	held atomic.Int64 // budget bytes held for the current request and its reply
	// reserved is the part of held that admit reserved for the reply.
	reserved int64
	// served: a request on this connection has been answered.
	served bool
	// out is the connection's reply buffer, sized for a large reply at
	// once rather than grown by appends.
	out *[]byte
}

func (c *conn) initLimits() {
	l := &c.srv.lim
	c.lim.tc = &timedConn{Conn: c.nc, readTimeout: l.FrameTimeout, writeTimeout: l.WriteTimeout}
}

// errNoBudget ends a frame that could not get its memory in time.
type errNoBudget struct {
	length int
	wait   time.Duration
}

func (e *errNoBudget) Error() string {
	return fmt.Sprintf("no memory budget for a message of %d bytes within %v", e.length, e.wait)
}

// readMessage reads the next message, charging the budget as its buffer
// grows beyond the unbudgeted size, with the frame deadline running from
// its first byte.
func (c *conn) readMessage(ctx context.Context, buf []byte) (Header, []byte, error) {
	c.lim.tc.startFrame()
	defer c.lim.tc.endFrame()
	return readMessage(c.br, buf, func(length, oldCap, newCap int) error {
		n := int64(max(0, newCap-unbudgeted) - max(0, oldCap-unbudgeted))
		if n <= 0 {
			return nil
		}
		l := &c.srv.lim
		if !l.budget.tryAcquire(n, false) {
			wctx, cancel := context.WithTimeout(ctx, l.BudgetWait)
			defer cancel()
			if err := l.budget.acquire(wctx, n, c.lim.held.Load(), false); err != nil {
				return &errNoBudget{length: length, wait: l.BudgetWait}
			}
		}
		c.lim.held.Add(min(n, l.MemoryBudget))
		return nil
	})
}

// shed closes the connections that hold budget while stuck in a read
// inside a frame or in a reply write, so that while others wait for the
// budget, clients that stopped sending or reading give it back at once
// rather than at their timeouts. It runs at most once per pressureEvery.
func (s *Server) shed() {
	l := &s.lim
	now := time.Now()
	last := l.shedAt.Load()
	if now.UnixNano()-last < int64(pressureEvery) || !l.shedAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		since := c.lim.tc.blockedSince.Load()
		if held := c.lim.held.Load(); held > 0 && since != 0 && now.Sub(time.Unix(0, since)) >= l.shedAfter {
			s.log.Warn("memory budget exhausted: closing a connection stalled while holding budget",
				zap.Int64("connectionId", c.id), zap.String("remote", c.info.RemoteAddr), zap.Int64("bytes", held),
				zap.Duration("stalledFor", now.Sub(time.Unix(0, since))))
			c.nc.Close()
		}
	}
}

// admit lets a request run once its reply can be expected to fit: it
// holds replyReserve bytes of the budget while the handler runs, so that
// clients that do not read their replies cannot make the server build
// ever more of them, and the replies being built at once are bounded.
func (c *conn) admit(ctx context.Context) error {
	l := &c.srv.lim
	// A client that has sent its next request before reading this reply
	// (drivers never do, but a client that does not read its replies
	// does), or one that has not been answered yet (a new connection),
	// waits behind the connections already served.
	low := c.br.Buffered() > 0 || !c.lim.served
	// What a reply has cost lately (and its framed copy): when large
	// replies are being built, fewer are built at once.
	reserve := min(max(replyReserve, 2*l.replies.estimate(time.Now())), l.MemoryBudget/8)
	if !l.budget.tryAcquire(reserve, low) {
		if err := c.waitBudget(ctx, reserve, low); err != nil {
			return err
		}
	}
	c.lim.held.Add(reserve)
	c.lim.reserved = reserve
	return nil
}

// replySizes tracks the largest reply of the last 5 to 10 seconds.
type replySizes struct {
	cur, prev atomic.Int64
	rotated   atomic.Int64 // unix ns
}

const replyWindow = 5 * time.Second

func (r *replySizes) rotate(now time.Time) {
	t := r.rotated.Load()
	if now.UnixNano()-t >= int64(replyWindow) && r.rotated.CompareAndSwap(t, now.UnixNano()) {
		r.prev.Store(r.cur.Swap(0))
	}
}

func (r *replySizes) observe(n int64, now time.Time) {
	r.rotate(now)
	for {
		c := r.cur.Load()
		if n <= c || r.cur.CompareAndSwap(c, n) {
			return
		}
	}
}

func (r *replySizes) estimate(now time.Time) int64 {
	r.rotate(now)
	return max(r.cur.Load(), r.prev.Load())
}

func (c *conn) waitBudget(ctx context.Context, n int64, low bool) error {
	l := &c.srv.lim
	wctx, cancel := context.WithTimeout(ctx, l.BudgetWait)
	defer cancel()
	if err := l.budget.acquire(wctx, n, c.lim.held.Load(), low); err != nil {
		return mongoerr.New(mongoerr.ExceededMemoryLimit, "the server's memory budget for requests in flight (%d bytes) stayed exhausted for %v", l.MemoryBudget, l.BudgetWait)
	}
	return nil
}

// chargeReply trades the reserve admit took for what the reply (and the
// copy framed around it) costs until it has been written.
func (c *conn) chargeReply(n int) {
	var charge int64
	if n > unbudgeted {
		c.srv.lim.replies.observe(int64(n), time.Now())
		charge = 2 * int64(n)
		if out := c.lim.out; out != nil && cap(*out) < n+64 {
			putLarge(*out)
			*out = getLarge(n + 64)
		}
	}
	charge -= c.lim.reserved
	c.lim.reserved = 0
	switch {
	case charge > 0:
		c.srv.lim.budget.force(charge)
	case charge < 0:
		c.srv.lim.budget.release(-charge)
	}
	c.lim.held.Add(charge)
}

// afterRequest drops buffers that grew beyond what a connection keeps
// between messages and returns the budget the request held.
func (c *conn) afterRequest(in, out *[]byte) {
	if cap(*in) > unbudgeted {
		putLarge(*in)
		*in = make([]byte, 0, ioBufSize)
	}
	if cap(*out) > unbudgeted {
		putLarge(*out)
		*out = make([]byte, 0, ioBufSize)
	}
	c.releaseBudget()
	c.lim.served = true
}

func (c *conn) releaseBudget() {
	c.srv.lim.budget.release(c.lim.held.Swap(0))
	c.lim.reserved = 0
}

// logIOFailure logs a failed read or write: timeouts are the limits at
// work and are worth a warning; other failures are the client leaving.
func logIOFailure(log *zap.Logger, what string, l *serverLimits, err error) {
	var nb *errNoBudget
	switch {
	case errors.As(err, &nb):
		log.Warn(nb.Error()+"; closing connection", zap.Int64("budget", l.MemoryBudget))
	case errors.Is(err, os.ErrDeadlineExceeded):
		if what == "write" {
			log.Warn("client did not read its reply; closing connection", zap.Duration("writeTimeout", l.WriteTimeout))
		} else {
			log.Warn("message not completed in time; closing connection", zap.Duration("frameTimeout", l.FrameTimeout))
		}
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		log.Debug(what+" failed", zap.Error(err))
	}
}

// readMessage is ReadMessage with the buffer grown as the bytes arrive,
// never ahead of them, so that a declared length costs nothing until it
// is sent. grow, if set, is called with the declared length, the old and
// the new capacity before the buffer grows; its error ends the read.
func readMessage(r io.Reader, buf []byte, grow func(length, oldCap, newCap int) error) (Header, []byte, error) {
	if cap(buf) < HeaderLen {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:HeaderLen]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Header{}, buf, ErrTruncated
		}
		return Header{}, buf, err
	}
	h := parseHeader(buf)
	if h.Length < HeaderLen || h.Length > MaxMessageSize {
		return h, buf, &FrameError{Header: h, HeaderRead: true, Err: mongoerr.New(mongoerr.ProtocolError,
			"recv(): message msgLen %d is invalid. Min %d Max: %d", h.Length, HeaderLen, MaxMessageSize)}
	}
	n := int(h.Length)
	have := HeaderLen
	owned := false // buf came from getLarge here, and may go back
	for have < n {
		if have == cap(buf) {
			// Four times what arrived so far: few copies, and never more
			// than four bytes of buffer per byte received.
			want := min(n, max(4*cap(buf), 4096))
			if want > unbudgeted {
				want = largeSize(want) // what getLarge gives
			}
			if grow != nil {
				if err := grow(n, cap(buf), want); err != nil {
					return h, buf[:have], err
				}
			}
			var nb []byte
			if want > unbudgeted {
				nb = getLarge(want)[:have]
			} else {
				nb = make([]byte, have, want)
			}
			copy(nb, buf[:have])
			if owned {
				putLarge(buf)
			}
			buf, owned = nb, want > unbudgeted
		}
		m, err := r.Read(buf[have:min(cap(buf), n)])
		have += m
		if err != nil && have < n {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return h, buf[:have], ErrTruncated
			}
			return h, buf[:have], err
		}
	}
	return h, buf[:n], nil
}
