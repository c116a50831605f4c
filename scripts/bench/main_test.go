package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmallRun runs the whole tool with --small (about 15 s) so that it
// cannot rot: every phase must run and produce its figures.
func TestSmallRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmark tool for ~15 s")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "results.json")
	var stdout bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, []string{"--small", "--quiet", "--out", out, "--dir", filepath.Join(dir, "data")}, &stdout); err != nil {
		t.Fatalf("bench --small: %v\n%s", err, stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	byName := map[string]Result{}
	for _, r := range rep.Results {
		byName[r.Name] = r
	}
	for _, name := range []string{"wire ceiling (ping)", "engine ceiling: Pebble Get (1 KB)", "insertMany (batches of 1000)",
		"point read by _id (uniform)", "YCSB A: 50% read / 50% update", "YCSB E: 95% scan ≤100 / 5% insert",
		"indexed range query (10 docs)", "full scan, TTL on (nothing expired)", "ttl: point read while reaper purges",
		"point read by _id, none", "point read by _id, snappy", "point read by _id, zstd", "point read by _id, zlib",
		"find 100 docs, none", "find 100 docs, snappy", "find 100 docs, zstd", "find 100 docs, zlib",
		"new connection + ping, no authentication", "new connection + ping, SCRAM-SHA-256", "new connection + ping, SCRAM-SHA-1",
		"point read by _id, plain (1 client)", "point read by _id, TLS (1 client)", "point read by _id, TLS (8 clients)",
		"wire ceiling (ping), replica-set server", "transaction: two-document transfer"} {
		r, ok := byName[name]
		if !ok {
			t.Errorf("no %q row", name)
			continue
		}
		if r.PerSec <= 0 || r.Units <= 0 {
			t.Errorf("%q: %+v", name, r)
		}
	}
	for _, c := range []string{"snappy", "zstd", "zlib"} {
		for _, name := range []string{"point read by _id, " + c, "find 100 docs, " + c} {
			r := byName[name]
			if r.Vs != "uncompressed" || r.Ratio <= 0 {
				t.Errorf("%q: no ratio to uncompressed: %+v", name, r)
			}
			// The server's replies went compressed: the figure is there, and
			// zstd and zlib shrink 100 documents of random letters.
			w := r.Extra["replyWireBytesPerByte"]
			if !(w > 0) || (c != "snappy" && strings.HasPrefix(name, "find") && w >= 1) {
				t.Errorf("%q: reply wire bytes per byte %v", name, w)
			}
		}
	}
	if r := byName["transaction: two-document transfer"]; r.Ratio <= 0 || r.Vs == "" {
		t.Errorf("the transfer row has no ratio to ping: %+v", r)
	}
	// The security rows carry their ratio to the plain figure.
	for _, name := range []string{"new connection + ping, SCRAM-SHA-256", "new connection + ping, SCRAM-SHA-1", "point read by _id, TLS (1 client)", "point read by _id, TLS (8 clients)"} {
		if r := byName[name]; r.Ratio <= 0 || r.Vs == "" {
			t.Errorf("%q has no ratio to plain: %+v", name, r)
		}
	}
	if rep.TTL == nil || rep.TTL.LiveBytes.SST == 0 || rep.TTL.IdlePurgePerSec <= 0 {
		t.Errorf("TTL figures missing: %+v", rep.TTL)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, "results.svg")); err != nil || !strings.Contains(string(svg), "<svg") {
		t.Errorf("chart: %v", err)
	}
	if !strings.Contains(stdout.String(), "| point read by _id (uniform)") {
		t.Errorf("table missing from stdout:\n%s", stdout.String())
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.02 || d > 0.02 {
			t.Errorf("q%.2f = %v, want %v ±2%%", c.q, got, c.want)
		}
	}
}

func TestZipfianSkew(t *testing.T) {
	z := newZipfian(1000)
	r := newRand(1)
	counts := make([]int, 1000)
	for i := 0; i < 100000; i++ {
		v := z.next(r)
		if v < 0 || v >= 1000 {
			t.Fatalf("out of range: %d", v)
		}
		counts[v]++
	}
	// θ = 0.99 over 1000 items: rank 0 draws about 13 % of the samples.
	if counts[0] < 10000 || counts[0] < 5*counts[10] {
		t.Errorf("not skewed: rank 0 %d, rank 10 %d", counts[0], counts[10])
	}
}

func TestLoopbackOnly(t *testing.T) {
	for uri, ok := range map[string]bool{
		"mongodb://127.0.0.1:27017":          true,
		"mongodb://localhost/?x=1":           true,
		"mongodb://[::1]:1/":                 true,
		"mongodb://10.0.0.1:27017":           false,
		"mongodb://u:p@db.example.com:27017": false,
	} {
		if err := checkLoopback(uri); (err == nil) != ok {
			t.Errorf("%s: %v", uri, err)
		}
	}
}
