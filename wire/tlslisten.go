package wire

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// TLSMode is how a listener treats TLS, with mongod's --tlsMode names.
type TLSMode int

const (
	// TLSDisabled serves plain connections only (no wrapping at all).
	TLSDisabled TLSMode = iota
	// TLSAllow accepts TLS and plain connections on the same port.
	TLSAllow
	// TLSPrefer accepts both too (mongod's preferTLS differs from allowTLS
	// only for the connections it makes itself, which mayfly does not),
	// but logs each plain connection, as mongod does.
	TLSPrefer
	// TLSRequire accepts TLS connections only; a plain one is closed.
	TLSRequire
)

// ParseTLSMode reads mongod's --tlsMode values.
func ParseTLSMode(s string) (TLSMode, bool) {
	switch s {
	case "disabled", "":
		return TLSDisabled, true
	case "allowTLS":
		return TLSAllow, true
	case "preferTLS":
		return TLSPrefer, true
	case "requireTLS":
		return TLSRequire, true
	}
	return TLSDisabled, false
}

func (m TLSMode) String() string {
	switch m {
	case TLSAllow:
		return "allowTLS"
	case TLSPrefer:
		return "preferTLS"
	case TLSRequire:
		return "requireTLS"
	}
	return "disabled"
}

// ErrTLSRequired is what reading a plain connection returns under
// requireTLS; the connection is closed.
var ErrTLSRequired = errors.New("SSLHandshakeFailed: The server is configured to only allow SSL connections")

// NewTLSListener wraps ln so that each accepted connection is TLS or plain
// according to what the client sends first, as mongod does on one port:
// the first 16 bytes are read as a message header, and a responseTo of 0
// or -1 (what every first request carries) means plain; anything else is a
// TLS ClientHello, handed to crypto/tls. The decision is taken on the
// connection's first read, in its own goroutine, so a slow client never
// holds up Accept. With mode TLSDisabled ln is returned as it is.
func NewTLSListener(ln net.Listener, cfg *tls.Config, mode TLSMode, log *zap.Logger) net.Listener {
	if mode == TLSDisabled || cfg == nil {
		return ln
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &tlsListener{Listener: ln, cfg: cfg, mode: mode, log: log}
}

type tlsListener struct {
	net.Listener
	cfg  *tls.Config
	mode TLSMode
	log  *zap.Logger
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: nc, l: l}, nil
}

// sniffConn is an accepted connection whose kind (TLS or plain) is decided
// on its first Read or Write.
type sniffConn struct {
	net.Conn // the raw TCP connection
	l        *tlsListener

	once    sync.Once
	err     error                    // set when the connection was refused
	tlsConn atomic.Pointer[tls.Conn] // set when the client speaks TLS
	pre     []byte                   // plain: header bytes already read, replayed first
	preErr  error                    // plain: the error that cut the header short
}

// headerLen is a message header's size: what mongod reads to decide.
const sniffLen = HeaderLen

func (c *sniffConn) detect() {
	buf := make([]byte, sniffLen)
	n, err := io.ReadFull(c.Conn, buf)
	buf = buf[:n]
	if err == nil {
		responseTo := int32(binary.LittleEndian.Uint32(buf[8:12]))
		if responseTo != 0 && responseTo != -1 {
			tc := tls.Server(&replayConn{Conn: c.Conn, pre: buf}, c.l.cfg)
			if herr := tc.Handshake(); herr != nil {
				c.l.log.Warn("TLS handshake failed; closing connection", zap.String("remote", c.RemoteAddr().String()), zap.Error(herr))
				c.err = herr
				c.Conn.Close()
				return
			}
			c.tlsConn.Store(tc)
			return
		}
	}
	// Plain (or cut short before a whole header arrived).
	if c.l.mode == TLSRequire {
		if n > 0 {
			c.l.log.Warn("plain connection refused: the server is configured to only allow TLS connections",
				zap.String("remote", c.RemoteAddr().String()), zap.String("code", "SSLHandshakeFailed"))
		}
		c.err = ErrTLSRequired
		c.Conn.Close()
		return
	}
	if c.l.mode == TLSPrefer && n > 0 {
		c.l.log.Info("TLS mode is set to 'preferred' and connection to remote is not using TLS", zap.String("remote", c.RemoteAddr().String()))
	}
	c.pre = buf
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.preErr = err
	} else if err != nil {
		c.preErr = io.EOF
	}
}

func (c *sniffConn) Read(p []byte) (int, error) {
	c.once.Do(c.detect)
	if c.err != nil {
		return 0, c.err
	}
	if tc := c.tlsConn.Load(); tc != nil {
		return tc.Read(p)
	}
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	if c.preErr != nil {
		return 0, c.preErr
	}
	return c.Conn.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	c.once.Do(c.detect) // the server never speaks first; this only orders things
	if c.err != nil {
		return 0, c.err
	}
	if tc := c.tlsConn.Load(); tc != nil {
		return tc.Write(p)
	}
	return c.Conn.Write(p)
}

// Close may come from another goroutine (shutdown) while Read waits.
func (c *sniffConn) Close() error {
	if tc := c.tlsConn.Load(); tc != nil {
		// Bound the close_notify write: a client that stopped reading
		// must not hold shutdown up.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		return tc.Close()
	}
	return c.Conn.Close()
}

// ConnectionState is the TLS state of the connection, ok false when it is
// plain (or not yet decided).
func (c *sniffConn) ConnectionState() (tls.ConnectionState, bool) {
	if tc := c.tlsConn.Load(); tc != nil {
		return tc.ConnectionState(), true
	}
	return tls.ConnectionState{}, false
}

// replayConn gives crypto/tls the bytes already read, then the rest.
type replayConn struct {
	net.Conn
	pre []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.pre) > 0 {
		n := copy(p, r.pre)
		r.pre = r.pre[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
