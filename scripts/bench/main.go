// Command bench measures mayfly: YCSB-style workloads, bulk load, point
// reads, indexed range queries and aggregation through the Go driver, the
// cost of TTL (query-time predicate, reaper purge rate, foreground latency
// while purging, disk after purge), the cost of authentication per
// connection and of TLS on point reads (ratios to plain), and — in the same run — the two
// ceilings the figures are divided by: the wire ceiling (the same driver and
// clients sending ping) and the engine ceiling (the same key-value work done
// directly on Pebble through storage/pebblekv).
//
//	go run ./scripts/bench                 # full run, a few minutes
//	go run ./scripts/bench --small         # ~15 s smoke run
//	go run ./scripts/bench --workloads pointread --cpuprofile cpu.out
//
// See BENCHMARKS.md for what each figure means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/server"
)

type config struct {
	uri        string
	clients    int
	records    int64
	small      bool
	duration   time.Duration
	ttlDocs    int64
	purgeCap   time.Duration
	out        string
	chart      string
	workloads  map[string]bool
	cpuprofile string
	profPhase  string
	memprofile string
	dir        string
	keep       bool
	seed       uint64
	quiet      bool
}

// phases, in run order; --workloads selects among them.
var allPhases = []string{"ping", "kv", "load", "pointread", "a", "b", "c", "f", "d", "e", "range", "agg", "compress", "ttlscan", "ttlpurge", "auth", "tls", "txn"}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	c := &config{}
	var wl string
	fs.StringVar(&c.uri, "uri", "", "benchmark a running server at this mongodb:// URI (loopback only) instead of starting one in-process; the TTL purge figures always use an in-process engine")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients")
	fs.Int64Var(&c.records, "records", 100_000, "usertable records (10 fields of 100 bytes each)")
	fs.BoolVar(&c.small, "small", false, "tiny run (~15 s) for smoke tests: fewer records, short phases")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of each timed phase")
	fs.Int64Var(&c.ttlDocs, "ttl-docs", 1_000_000, "size of the expired set purged under foreground load")
	fs.DurationVar(&c.purgeCap, "purge-cap", 60*time.Second, "longest the no-load purge of the rest of the large expired set may take")
	fs.StringVar(&c.out, "out", "bench-out/results.json", "JSON results file (the chart goes next to it as results.svg)")
	fs.StringVar(&wl, "workloads", "all", "comma-separated phases to run: "+strings.Join(allPhases, ","))
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run (client and in-process server) to this file")
	fs.StringVar(&c.profPhase, "cpuprofile-phase", "", "with --cpuprofile: profile only this phase (one of --workloads' names, e.g. load or pointread)")
	fs.StringVar(&c.memprofile, "memprofile", "", "write an allocation profile at the end of the run to this file")
	fs.StringVar(&c.dir, "dir", "", "directory for the data (default: a new temporary directory, removed afterwards)")
	fs.BoolVar(&c.keep, "keep", false, "keep the data directory")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.small {
		if !set["records"] {
			c.records = 5_000
		}
		if !set["duration"] {
			c.duration = 500 * time.Millisecond
		}
		if !set["ttl-docs"] {
			c.ttlDocs = 20_000
		}
	}
	if c.clients < 1 || c.records < 100 || c.ttlDocs < 100 || c.duration <= 0 {
		return nil, errors.New("--clients ≥ 1, --records ≥ 100, --ttl-docs ≥ 100 and --duration > 0 are required")
	}
	c.workloads = map[string]bool{}
	for _, w := range strings.Split(wl, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		if w == "" {
			continue
		}
		if w == "all" {
			for _, p := range allPhases {
				c.workloads[p] = true
			}
			continue
		}
		known := false
		for _, p := range allPhases {
			known = known || p == w
		}
		if !known {
			return nil, fmt.Errorf("unknown workload %q (know %s)", w, strings.Join(allPhases, ","))
		}
		c.workloads[w] = true
	}
	if c.uri != "" {
		if err := checkLoopback(c.uri); err != nil {
			return nil, err
		}
	}
	c.chart = strings.TrimSuffix(c.out, filepath.Ext(c.out)) + ".svg"
	return c, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	prog.quiet = cfg.quiet
	prog.run()
	defer prog.close()

	if cfg.cpuprofile != "" && cfg.profPhase == "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	dir := cfg.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mayfly-bench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if !cfg.keep {
		defer os.RemoveAll(dir)
	}

	rep := newReport(cfg)
	uri := cfg.uri
	if uri == "" && cfg.needsServer() {
		prog.note("starting mayfly")
		srv, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, DBPath: filepath.Join(dir, "main"), Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer srv.Close()
		uri = srv.URI()
		rep.Target = "in-process mayfly on " + srv.Addr() + " (on-disk Pebble in " + filepath.Join(dir, "main") + ")"
	} else if uri != "" {
		rep.Target = uri
	}

	b := &bench{cfg: cfg, rep: rep, dir: dir, uri: uri}
	if uri != "" {
		cl, err := connect(uri, cfg.clients)
		if err != nil {
			return err
		}
		defer cl.Disconnect(context.Background())
		b.client = cl
		b.coll = cl.Database("bench").Collection("usertable")
		if err := b.coll.Drop(ctx); err != nil {
			return fmt.Errorf("drop bench.usertable: %w", err)
		}
	}
	if err := b.runAll(ctx); err != nil {
		return err
	}
	rep.Finished = time.Now().UTC()
	if cfg.memprofile != "" {
		f, err := os.Create(cfg.memprofile)
		if err != nil {
			return err
		}
		runtime.GC()
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return err
		}
	}
	rep.printTable(stdout)
	if err := rep.writeJSON(cfg.out); err != nil {
		return err
	}
	if err := rep.writeSVG(cfg.chart); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s\nchart:   %s\n", cfg.out, cfg.chart)
	return nil
}

func (c *config) needsServer() bool {
	for _, p := range []string{"ping", "load", "pointread", "a", "b", "c", "f", "d", "e", "range", "agg", "compress", "ttlscan"} {
		if c.workloads[p] {
			return true
		}
	}
	return false
}

// connect opens a client of clients connections, offering compressors
// (none: uncompressed).
func connect(uri string, clients int, compressors ...string) (*mongo.Client, error) {
	o := options.Client().ApplyURI(uri).SetMaxPoolSize(uint64(clients) + 4).SetTimeout(5 * time.Minute)
	if len(compressors) > 0 {
		o.SetCompressors(compressors)
	}
	if !strings.Contains(uri, "directConnection") {
		o.SetDirect(true)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx, nil); err != nil {
		cl.Disconnect(context.Background())
		return nil, fmt.Errorf("cannot reach %s: %w", uri, err)
	}
	return cl, nil
}

// checkLoopback refuses URIs whose hosts are not loopback addresses: the
// benchmark drives a server hard and must not be pointed at shared hosts.
func checkLoopback(uri string) error {
	cs, err := parseHosts(uri)
	if err != nil {
		return err
	}
	for _, h := range cs {
		if h != "localhost" && !strings.HasPrefix(h, "127.") && h != "::1" && h != "[::1]" {
			return fmt.Errorf("--uri host %q is not a loopback address", h)
		}
	}
	return nil
}

func parseHosts(uri string) ([]string, error) {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return nil, fmt.Errorf("--uri must start with mongodb:// (got %q)", uri)
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	var hosts []string
	for _, hp := range strings.Split(rest, ",") {
		h := hp
		if strings.HasPrefix(hp, "[") {
			if i := strings.Index(hp, "]"); i >= 0 {
				h = hp[1:i]
			}
		} else if i := strings.LastIndex(hp, ":"); i >= 0 {
			h = hp[:i]
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}
