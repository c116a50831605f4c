package compat

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/wire"
)

// dropProxy is a TCP proxy between a driver and a server that can lose a
// write's reply: armed for a command name, it forwards the next such
// command to the server, waits for the server's reply (so the write did
// run), and then closes the client's connection instead of passing the
// reply on — a connection cut between a write and its reply, which a
// driver with retryWrites answers by retrying on a new connection.
type dropProxy struct {
	ln       net.Listener
	upstream atomic.Value // string: the server's address
	mu       sync.Mutex
	armed    map[string]int    // command name → replies still to drop
	seen     map[string]int    // command name → times forwarded
	dropped  map[string]int    // command name → replies dropped
	conns    map[net.Conn]bool // open connections (closed by close)
	wg       sync.WaitGroup
}

func newDropProxy(t *testing.T) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, armed: map[string]int{}, seen: map[string]int{}, dropped: map[string]int{}, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients connect to.
func (p *dropProxy) Addr() string { return p.ln.Addr().String() }

// arm makes the proxy drop the replies of the next n commands named cmd.
func (p *dropProxy) arm(cmd string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed[cmd] += n
}

// counts returns how often cmd was forwarded and how many of its replies
// were dropped.
func (p *dropProxy) counts(cmd string) (seen, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[cmd], p.dropped[cmd]
}

func (p *dropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *dropProxy) track(c net.Conn, open bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *dropProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, _ := p.upstream.Load().(string)
		s, err := net.Dial("tcp", up)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, true)
		p.track(s, true)
		p.wg.Add(1)
		go p.pipe(c, s)
	}
}

// pipe relays one client connection, message by message.
func (p *dropProxy) pipe(client, server net.Conn) {
	defer p.wg.Done()
	var dropFor atomic.Int32 // request id whose reply is dropped (0: none)
	var cmdOf sync.Map       // request id → command name, for the armed ones
	done := make(chan struct{})
	go func() { // server → client
		defer close(done)
		var buf []byte
		for {
			h, msg, err := wire.ReadMessage(server, buf)
			if err != nil {
				client.Close()
				return
			}
			buf = msg[:0]
			if id := dropFor.Load(); id != 0 && h.ResponseTo == id {
				// The write ran; its reply never reaches the client.
				name, _ := cmdOf.Load(id)
				p.mu.Lock()
				p.dropped[name.(string)]++
				p.mu.Unlock()
				client.Close()
				server.Close()
				return
			}
			if _, err := client.Write(msg); err != nil {
				server.Close()
				return
			}
		}
	}()
	var buf []byte
	for {
		h, msg, err := wire.ReadMessage(client, buf)
		if err != nil {
			break
		}
		if h.OpCode == wire.OpMsg {
			if m, err := wire.DecodeOpMsg(bytes.Clone(msg)); err == nil && len(m.Command) > 5 {
				if el, err := m.Command.IndexErr(0); err == nil {
					name := el.Key()
					p.mu.Lock()
					p.seen[name]++
					if p.armed[name] > 0 && dropFor.Load() == 0 {
						p.armed[name]--
						cmdOf.Store(h.RequestID, name)
						dropFor.Store(h.RequestID)
					}
					p.mu.Unlock()
				}
			}
		}
		if _, err := server.Write(msg); err != nil {
			break
		}
		buf = msg[:0]
	}
	server.Close()
	client.Close()
	<-done
	p.track(client, false)
	p.track(server, false)
}
