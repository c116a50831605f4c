package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Hostile client kinds.
const (
	// bigFrame declares a 48 MB OP_MSG (the largest the server accepts)
	// and stalls: half after the header and a few bytes, half after 1 MiB
	// of the body.
	bigFrame = "declared 48 MB frame, stalled"
	// noRead sends find commands whose replies are ~4 MB each and never
	// reads a byte of them.
	noRead = "requests sent, replies never read"
)

const (
	opMsg   = 2013
	opQuery = 2004
)

// opMsgFrame builds an OP_MSG with one body section.
func opMsgFrame(reqID int32, flags uint32, cmd bson.D) []byte {
	body, err := bson.Marshal(cmd)
	if err != nil {
		panic(err)
	}
	b := make([]byte, 16, 16+5+len(body))
	binary.LittleEndian.PutUint32(b[4:], uint32(reqID))
	binary.LittleEndian.PutUint32(b[12:], opMsg)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = append(b, 0)
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

// hostile opens cfg.hostile connections of one kind, ramping up in steps
// (stopping early if the server's RSS passes the budget), holds them for a
// phase, and closes them; all along the server's RSS is sampled and a
// well-behaved client must be served.
func (s *soak) hostile(ctx context.Context, kind string) error {
	if kind == noRead {
		if err := s.seedBig(); err != nil {
			return err
		}
	}
	st := s.rep.hostileStats(kind)
	st.runs++
	baseRSS, _ := s.srv.memory()
	// Sample RSS all along.
	var peak, peakVirt atomic.Int64
	peak.Store(baseRSS)
	sampleStop := make(chan struct{})
	var sampleWG sync.WaitGroup
	sampleWG.Add(1)
	go func() {
		defer sampleWG.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sampleStop:
				return
			case <-t.C:
			}
			m := s.srv.status()
			if r := m["VmRSS:"]; r > peak.Load() {
				peak.Store(r)
			}
			if v := m["VmSize:"]; v > peakVirt.Load() {
				peakVirt.Store(v)
			}
		}
	}()
	probe := s.startProbe()

	// Ramp up to cfg.hostile connections (at most a minute), then hold
	// them for a phase.
	holdCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	limit := s.cfg.rssBudget
	if limit == 0 {
		limit = 4 << 30 // no budget to check: still protect the machine
	}
	const step = 50
	rampEnd := time.Now().Add(time.Minute)
	opened := 0
	for opened < s.cfg.hostile && ctx.Err() == nil {
		if time.Now().After(rampEnd) {
			st.notes = append(st.notes, fmt.Sprintf("only %d of %d connections opened in a minute", opened, s.cfg.hostile))
			break
		}
		for i := 0; i < step && opened < s.cfg.hostile; i++ {
			c, err := net.DialTimeout("tcp", s.srv.addr, 2*time.Second)
			if err != nil {
				st.dialErrors++
				continue
			}
			opened++
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if kind == bigFrame {
					stallBigFrame(c, int32(i), i%2 == 1)
				} else {
					neverRead(holdCtx, c, int32(i))
				}
			}(opened)
		}
		time.Sleep(100 * time.Millisecond)
		if peak.Load() > limit {
			st.notes = append(st.notes, fmt.Sprintf("stopped opening connections at %d: RSS %d MiB over %d MiB", opened, peak.Load()>>20, limit>>20))
			break
		}
	}
	st.opened = max(st.opened, opened)
	select {
	case <-time.After(s.cfg.phase):
	case <-ctx.Done():
	}
	cancel()
	ok, failed, worst := probe.stop()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	close(sampleStop)
	sampleWG.Wait()
	_, hwm := s.srv.memory()
	st.baseRSS = max(st.baseRSS, baseRSS)
	st.peakRSS = max(st.peakRSS, peak.Load())
	st.hwm = max(st.hwm, hwm)
	st.peakVirt = max(st.peakVirt, peakVirt.Load())
	st.probeOK += ok
	st.probeFailed += failed
	st.probeWorst = max(st.probeWorst, worst)
	s.logf("hostile %q: %d connections, RSS %d → %d MiB, probe %d ok %d failed (worst %v)",
		kind, st.opened, baseRSS>>20, peak.Load()>>20, ok, failed, worst.Round(time.Millisecond))
	return s.ensureUp("hostile phase " + kind)
}

// stallBigFrame declares a 48 MB message and sends only its start.
func stallBigFrame(c net.Conn, reqID int32, someBody bool) {
	hdr := make([]byte, 16, 1<<20)
	binary.LittleEndian.PutUint32(hdr, 48_000_000)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(reqID))
	binary.LittleEndian.PutUint32(hdr[12:], opMsg)
	hdr = append(hdr, 0, 0, 0, 0, 0) // flags, body section kind
	if someBody {
		// A BSON document declaring almost the whole frame, then 1 MiB of it.
		hdr = binary.LittleEndian.AppendUint32(hdr, 48_000_000-21)
		hdr = append(hdr, make([]byte, 1<<20)...)
	}
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.Write(hdr)
	// Stall: read (nothing is expected) until closed.
	c.SetReadDeadline(time.Time{})
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// neverRead pipelines find commands with large replies and reads nothing.
func neverRead(ctx context.Context, c net.Conn, reqID int32) {
	for n := int32(0); ctx.Err() == nil; n++ {
		f := opMsgFrame(reqID*1000+n, 0, bson.D{{Key: "find", Value: "big"}, {Key: "batchSize", Value: 1000}, {Key: "$db", Value: "soakbig"}})
		c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write(f); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				// Blocked: the server stopped reading (its replies are
				// not being read). Stay blocked until the phase ends.
				<-ctx.Done()
			}
			return
		}
	}
}

// seedBig stores the documents the never-reading clients ask for: 4 of
// 1 MB.
func (s *soak) seedBig() error {
	client, err := s.connect(1)
	if err != nil {
		return err
	}
	defer disconnect(client)
	coll := client.Database("soakbig").Collection("big")
	ctx := context.Background()
	if n, err := coll.CountDocuments(ctx, bson.D{}); err == nil && n >= 4 {
		return nil
	}
	coll.Drop(ctx)
	blob := strings.Repeat("b", 1<<20)
	for i := 0; i < 4; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "blob", Value: blob}}); err != nil {
			return err
		}
	}
	return nil
}

// probe is the well-behaved client: an insert and a find every 50 ms,
// each given 5 s.
type probe struct {
	stopCh chan struct{}
	done   chan struct{}
	ok     int
	failed int
	worst  time.Duration
}

func (s *soak) startProbe() *probe {
	p := &probe{stopCh: make(chan struct{}), done: make(chan struct{})}
	client, err := s.connect(2)
	go func() {
		defer close(p.done)
		if err != nil {
			p.failed++
			return
		}
		defer disconnect(client)
		coll := client.Database("soakprobe").Collection("p")
		for n := 0; ; n++ {
			select {
			case <-p.stopCh:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t0 := time.Now()
			_, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: n}})
			if err == nil {
				err = coll.FindOne(ctx, bson.D{{Key: "n", Value: n}}).Err()
			}
			cancel()
			if d := time.Since(t0); d > p.worst {
				p.worst = d
			}
			if err != nil {
				p.failed++
			} else {
				p.ok++
			}
		}
	}()
	return p
}

func (p *probe) stop() (ok, failed int, worst time.Duration) {
	close(p.stopCh)
	<-p.done
	return p.ok, p.failed, p.worst
}
