package wire

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// rssBytes is the process's resident set size (Linux), or 0.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "VmRSS:" {
			kb, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakSampler records the peak heap and RSS until stopped.
type peakSampler struct {
	heap, rss atomic.Uint64
	stop      chan struct{}
	done      chan struct{}
}

func samplePeaks() *peakSampler {
	p := &peakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			p.heap.Store(max(p.heap.Load(), ms.HeapAlloc))
			p.rss.Store(max(p.rss.Load(), rssBytes()))
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *peakSampler) end() (heap, rss uint64) {
	close(p.stop)
	<-p.done
	return p.heap.Load(), p.rss.Load()
}

// BenchmarkIssue21HostileConnections measures the peak heap and RSS of the
// process while 1000 hostile connections of one kind are open with the
// default limits (run with -benchtime=1x):
//   - bigframe: each declares a 48 MB frame, sends 64 KiB of it and stops;
//   - unread:   each sends 64 requests whose replies are 1 MB and never
//     reads one;
//   - unread8MB: each sends one request whose reply is 8 MB and does not
//     read it.
//
// A well-behaved connection must be served while they are there.
func BenchmarkIssue21HostileConnections(b *testing.B) {
	const conns = 1000
	for _, kind := range []string{"bigframe", "unread", "unread8MB"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				size := 1 << 20
				if kind == "unread8MB" {
					size = 8 << 20
				}
				s, addr, _ := startLimited(&testing.T{}, bigReplyHandler{size: size}, Limits{})
				_ = s
				// The well-behaved client is connected before the flood, as a
				// driver's pooled connection would be.
				good, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				good.Write(ping(b, 1))
				if _, _, err := ReadMessage(good, nil); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				p := samplePeaks()
				var reqs []byte
				for i := range 64 {
					reqs = append(reqs, driverOpMsg(b, int32(i), 0, bson.D{{Key: "big", Value: int32(1)}, {Key: "$db", Value: "admin"}})...)
				}
				var cs []net.Conn
				for i := range conns {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					cs = append(cs, c)
					switch kind {
					case "bigframe":
						c.Write(frameStart(MaxMessageSize, int32(i), 64<<10))
					case "unread":
						go c.Write(reqs)
					case "unread8MB": // one request each, not pipelined
						go c.Write(reqs[:len(reqs)/64])
					}
				}
				// Let the server take in everything it will take.
				time.Sleep(3 * time.Second)
				start := time.Now()
				good.SetDeadline(time.Now().Add(60 * time.Second))
				good.Write(ping(b, 2))
				_, _, err = ReadMessage(good, nil)
				served := time.Since(start)
				heap, rss := p.end()
				b.ReportMetric(float64(heap)/1e6, "peak-heap-MB")
				b.ReportMetric(float64(rss)/1e6, "peak-RSS-MB")
				b.ReportMetric(float64(served.Milliseconds()), "ping-ms")
				fmt.Fprintf(os.Stderr, "%s: %d connections, peak heap %.0f MB, peak RSS %.0f MB, budget in use %d MB, ping served in %v (err %v)\n",
					kind, conns, float64(heap)/1e6, float64(rss)/1e6, s.BudgetInUse()>>20, served, err)
				good.Close()
				for _, c := range cs {
					c.Close()
				}
				s.Close()
			}
		})
	}
}

// BenchmarkIssue21LargeRoundTrip is a 1 MB command echoed back: the cost
// of growing frame buffers as bytes arrive, and of the budget.
func BenchmarkIssue21LargeRoundTrip(b *testing.B) {
	s := NewServer(&echoHandler{}, Options{})
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
	msg := driverOpMsg(b, 1, 0, bson.D{{Key: "blob", Value: bson.Binary{Data: make([]byte, 1<<20)}}, {Key: "$db", Value: "admin"}})
	var buf []byte
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		_, m, err := ReadMessage(c, buf)
		if err != nil {
			b.Fatal(err)
		}
		buf = m[:0]
	}
}
