package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// errDone ends a worker's loop early (a fixed amount of work is finished).
var errDone = errors.New("done")

// measure is what a phase did: units (operations, or documents for batch
// work), wall time, and the latency of each call.
type measure struct {
	units   int64
	calls   int64
	elapsed time.Duration
	h       hist
}

// add merges o into m (slices of one workload).
func (m *measure) add(o *measure) {
	m.units += o.units
	m.calls += o.calls
	m.elapsed += o.elapsed
	m.h.merge(&o.h)
}

func (m *measure) perSec() float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.units) / m.elapsed.Seconds()
}

// runPhase runs op on `clients` goroutines until dur has passed (dur > 0)
// or every worker returned errDone. op returns how many units the call did.
// The first other error stops the phase and is returned.
func runPhase(name string, clients int, dur time.Duration, seed uint64, op func(w int, r *rand.Rand) (int, error)) (*measure, error) {
	prog.begin(name)
	defer prog.end()
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		hs       = make([]*hist, clients)
		units    = make([]int64, clients)
	)
	start := time.Now()
	if dur > 0 {
		t := time.AfterFunc(dur, func() { stop.Store(true) })
		defer t.Stop()
	}
	for w := 0; w < clients; w++ {
		hs[w] = new(hist)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)+1))
			h := hs[w]
			for !stop.Load() {
				t0 := time.Now()
				n, err := op(w, r)
				if err == errDone {
					return
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: %w", name, err) })
					stop.Store(true)
					return
				}
				h.record(time.Since(t0))
				units[w] += int64(n)
				prog.add(int64(n))
			}
		}(w)
	}
	wg.Wait()
	m := &measure{elapsed: time.Since(start)}
	for w := range hs {
		m.h.merge(hs[w])
		m.units += units[w]
	}
	m.calls = m.h.n
	return m, firstErr
}

// progress prints one status line on stderr while a phase runs.
type progress struct {
	mu    sync.Mutex
	out   io.Writer
	tty   bool
	name  string
	start time.Time
	units atomic.Int64
	quiet bool
	stop  chan struct{}
}

var prog = &progress{out: os.Stderr}

func (p *progress) run() {
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	p.stop = make(chan struct{})
	go func() {
		every := time.Second
		if !p.tty {
			every = 5 * time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.print(false)
			}
		}
	}()
}

func (p *progress) close() {
	if p.stop != nil {
		close(p.stop)
	}
}

func (p *progress) begin(name string) {
	p.mu.Lock()
	p.name, p.start = name, time.Now()
	p.units.Store(0)
	p.mu.Unlock()
	p.print(false)
}

func (p *progress) add(n int64) { p.units.Add(n) }

func (p *progress) end() { p.print(true) }

// note reports a step that is not a measured phase (loading, compaction).
func (p *progress) note(format string, args ...any) {
	p.begin(fmt.Sprintf(format, args...))
}

func (p *progress) print(final bool) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.name == "" {
		return
	}
	el := time.Since(p.start)
	n := p.units.Load()
	line := fmt.Sprintf("[bench %s] %-28s %6.1fs", time.Now().Format("15:04:05"), p.name, el.Seconds())
	if n > 0 {
		line += fmt.Sprintf("  %10d units  %10.0f/s", n, float64(n)/el.Seconds())
	}
	switch {
	case p.tty && final:
		fmt.Fprintf(p.out, "\r%-100s\n", line)
		p.name = ""
	case p.tty:
		fmt.Fprintf(p.out, "\r%-100s", line)
	default:
		fmt.Fprintln(p.out, line)
		if final {
			p.name = ""
		}
	}
}
