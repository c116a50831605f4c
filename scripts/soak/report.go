package main

import (
	"fmt"
	"io"
	"time"
)

type wcStats struct {
	spec       wcSpec
	acked      int
	lost       int
	broken     int // lost against the guarantee
	oldestLost time.Duration
	examples   []string
}

type hostileStats struct {
	kind                     string
	runs, opened, dialErrors int
	baseRSS, peakRSS, hwm    int64
	peakVirt                 int64
	probeOK, probeFailed     int
	probeWorst               time.Duration
	notes                    []string
}

type report struct {
	cfg          *config
	elapsed      time.Duration
	rounds       int
	kills        int
	restarts     int
	crashes      []string
	laterLoss    []string
	idleRounds   []string
	wcs          []*wcStats
	hostiles     []*hostileStats
	fuzzRuns     int
	fuzzFrames   int64
	fuzzClosed   int64
	fuzzUnserved int
}

func newReport(cfg *config) *report { return &report{cfg: cfg} }

func (r *report) wc(spec wcSpec) *wcStats {
	for _, w := range r.wcs {
		if w.spec.name == spec.name {
			return w
		}
	}
	w := &wcStats{spec: spec}
	r.wcs = append(r.wcs, w)
	return w
}

func (r *report) hostileStats(kind string) *hostileStats {
	for _, h := range r.hostiles {
		if h.kind == kind {
			return h
		}
	}
	h := &hostileStats{kind: kind}
	r.hostiles = append(r.hostiles, h)
	return h
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// print writes the report and returns how many guarantees were broken.
func (r *report) print(w io.Writer, cfg *config) (broken int) {
	fail := func(format string, args ...any) {
		broken++
		fmt.Fprintf(w, "BROKEN: "+format+"\n", args...)
	}
	fmt.Fprintf(w, "mayfly soak: %v, seed %d, --journalCommitInterval %d ms (loss window %v), %d writers per write concern, %d hostile connections per kind\n",
		r.elapsed.Round(time.Second), cfg.seed, cfg.commitMS, time.Duration(cfg.commitMS)*time.Millisecond+cfg.margin, cfg.writers, cfg.hostile)
	fmt.Fprintf(w, "rounds %d, kill -9 %d, restarts %d, server crashes %d\n\n", r.rounds, r.kills, r.restarts, len(r.crashes))

	fmt.Fprintf(w, "%-24s %-11s %10s %8s %14s  %s\n", "write concern", "guarantee", "acked", "lost", "oldest lost", "verdict")
	var acked, lost int
	for _, s := range r.wcs {
		acked += s.acked
		lost += s.lost
		verdict := "ok"
		switch {
		case s.spec.class == noAck:
			verdict = "no guarantee (w:0)"
		case s.broken > 0:
			verdict = fmt.Sprintf("BROKEN (%d lost against the guarantee)", s.broken)
		case s.acked == 0:
			verdict = "NOTHING MEASURED"
		}
		oldest := "-"
		if s.lost > 0 {
			oldest = s.oldestLost.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%-24s %-11s %10d %8d %14s  %s\n", s.spec.name, s.spec.class, s.acked, s.lost, oldest, verdict)
	}
	fmt.Fprintf(w, "%-24s %-11s %10d %8d\n\n", "total", "", acked, lost)

	fmt.Fprintf(w, "%-36s %5s %6s %9s %9s %9s %10s %10s %12s\n", "hostile client kind", "runs", "conns", "RSS base", "RSS peak", "VmHWM", "VmSize pk", "probe ok", "probe worst")
	for _, h := range r.hostiles {
		fmt.Fprintf(w, "%-36s %5d %6d %9s %9s %9s %10s %6d/%-3d %12v\n", h.kind, h.runs, h.opened, mib(h.baseRSS), mib(h.peakRSS), mib(h.hwm), mib(h.peakVirt),
			h.probeOK, h.probeOK+h.probeFailed, h.probeWorst.Round(time.Millisecond))
		for _, n := range h.notes {
			fmt.Fprintf(w, "    %s\n", n)
		}
		if h.dialErrors > 0 {
			fmt.Fprintf(w, "    %d connections refused\n", h.dialErrors)
		}
	}
	fmt.Fprintf(w, "\nwire fuzz: %d phases, %d mutated frames sent, %d connections closed by the server\n\n", r.fuzzRuns, r.fuzzFrames, r.fuzzClosed)

	for _, s := range r.wcs {
		if s.broken > 0 {
			fail("%s (%s): %d acknowledged writes lost against the guarantee, e.g. %v", s.spec.name, s.spec.class, s.broken, s.examples)
		}
		if s.acked == 0 && s.spec.class != noAck {
			fail("%s: no write acknowledged, nothing measured", s.spec.name)
		}
	}
	for _, l := range r.idleRounds {
		fail("writers not served: %s", l)
	}
	for _, l := range r.laterLoss {
		fail("documents that had survived a restart were gone after a later one: %s", l)
	}
	for _, c := range r.crashes {
		fail("server crash: %s", c)
	}
	for _, h := range r.hostiles {
		if cfg.rssBudget > 0 && h.peakRSS > cfg.rssBudget {
			fail("%q: server RSS peaked at %s, over the %s budget", h.kind, mib(h.peakRSS), mib(cfg.rssBudget))
		}
		if h.probeFailed > 0 || h.probeOK == 0 {
			fail("%q: the well-behaved client failed %d of %d operations", h.kind, h.probeFailed, h.probeOK+h.probeFailed)
		}
	}
	if r.fuzzUnserved > 0 {
		fail("after %d fuzz phases the server did not answer a ping", r.fuzzUnserved)
	}
	if broken == 0 {
		fmt.Fprintln(w, "all guarantees held")
	} else {
		fmt.Fprintf(w, "%d guarantees broken\n", broken)
	}
	return broken
}
