package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/ttl"
)

// Issue 19: --metrics-listen serves Prometheus metrics, /healthz and
// /readyz. These tests start private in-process servers with the listener
// on a free port, do work through the Go driver and read the text
// exposition back.

// metricsTarget starts a private server with a metrics listener.
func metricsTarget(t *testing.T) (*env, string) {
	t.Helper()
	if externalURI != "" {
		t.Skip("the metrics listener is tested in-process (MAYFLY_URI is set)")
	}
	mayflyOnly(t)
	t.Parallel()
	clk := ttl.NewFakeClock(epoch)
	srv, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, Clock: clk, MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start server with metrics: %v", err)
	}
	cli, err := connect(srv.URI())
	if err != nil {
		srv.Close()
		t.Fatalf("connect: %v", err)
	}
	e := makeEnv(t, &target{srv: srv, clock: clk, client: cli}, true)
	if srv.MetricsAddr() == "" {
		t.Fatal("MetricsAddr is empty with MetricsListen set")
	}
	return e, "http://" + srv.MetricsAddr()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// scrape is one parsed /metrics page.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, base string) scrape {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", code, body)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value is a sample's value (a histogram's sample count); labels are
// name, value pairs. A missing series reads as 0 when absentOK.
func (s scrape) get(name string, labels ...string) (float64, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// must is get for a series that has to be there.
func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.get(name, labels...)
	if !ok {
		t.Fatalf("metric %s%v missing from /metrics", name, labels)
	}
	return v
}

// delta is how much a series moved between two scrapes (absent = 0).
func delta(before, after scrape, name string, labels ...string) float64 {
	a, _ := after.get(name, labels...)
	b, _ := before.get(name, labels...)
	return a - b
}

func wantDelta(t *testing.T, before, after scrape, want float64, name string, labels ...string) {
	t.Helper()
	if got := delta(before, after, name, labels...); got != want {
		t.Errorf("%s%v moved by %v, want %v", name, labels, got, want)
	}
}

func TestIssue19MetricsHealthAndReady(t *testing.T) {
	e, base := metricsTarget(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, base+p); code != http.StatusOK {
			t.Errorf("GET %s: status %d (%q), want 200", p, code, body)
		}
	}
	s := scrapeMetrics(t, base)
	eq(t, "mayfly_ready", s.must(t, "mayfly_ready"), 1.0)
	if v := s.must(t, "mayfly_connections_current"); v < 1 {
		t.Errorf("mayfly_connections_current = %v with a driver connected", v)
	}
	if v := s.must(t, "mayfly_connections_created_total"); v < 1 {
		t.Errorf("mayfly_connections_created_total = %v with a driver connected", v)
	}
	// The Pebble figures are there from the start.
	for _, n := range []string{"mayfly_pebble_block_cache_hits_total", "mayfly_pebble_block_cache_misses_total",
		"mayfly_pebble_block_cache_hit_ratio", "mayfly_pebble_compactions_total", "mayfly_pebble_read_amplification",
		"mayfly_pebble_disk_usage_bytes", "mayfly_ttl_expired_backlog_documents", "mayfly_ttl_oldest_expired_lag_seconds",
		"mayfly_ttl_purge_rate_documents_per_second", "mayfly_ttl_deleted_documents_total", "mayfly_ttl_deleted_bytes_total",
		"mayfly_ttl_reclaimed_bytes_total", "mayfly_cursors_open", "go_goroutines"} {
		s.must(t, n)
	}
	// Once the server is closed it is no longer ready.
	srv := e.tg.srv
	if !srv.Ready() {
		t.Fatal("Ready() is false on a running server")
	}
	_ = e.cli.Disconnect(context.Background())
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if srv.Ready() {
		t.Error("Ready() is still true after Close")
	}
}

func TestIssue19MetricsMoveWithWork(t *testing.T) {
	e, base := metricsTarget(t)
	c := e.coll("m")
	before := scrapeMetrics(t, base)

	// 4 insert commands writing 8 documents.
	docs := []any{}
	for i := 0; i < 5; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}})
	}
	if _, err := c.InsertMany(e.ctx, docs); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 8; i++ {
		if _, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	// A duplicate key: one more insert command, no document; the command
	// itself succeeds (ok: 1 with writeErrors), so it is no command error.
	if _, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 0}}); err == nil {
		t.Fatal("duplicate _id inserted")
	}
	// A command that fails (ok: 0) counts as a command and as an error.
	if err := e.runErr(bson.D{{Key: "find", Value: "m"}, {Key: "filter", Value: bson.D{{Key: "$bogus", Value: 1}}}}); err == nil {
		t.Fatal("find with an unknown top-level operator succeeded")
	}
	// find with batchSize 3 over 8 documents: find + 2 getMores, 8 returned.
	cur, err := c.Find(e.ctx, bson.D{}, options.Find().SetBatchSize(3))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.Raw
	if err := cur.All(e.ctx, &got); err != nil {
		t.Fatal(err)
	}
	eq(t, "documents found", len(got), 8)
	if _, err := c.UpdateMany(e.ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$lt", Value: 3}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMany(e.ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$gte", Value: 6}}}}); err != nil {
		t.Fatal(err)
	}
	// An open cursor shows in mayfly_cursors_open.
	open, err := c.Find(e.ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	mid := scrapeMetrics(t, base)
	eq(t, "mayfly_cursors_open", mid.must(t, "mayfly_cursors_open"), 1.0)
	if err := open.Close(e.ctx); err != nil {
		t.Fatal(err)
	}

	after := scrapeMetrics(t, base)
	wantDelta(t, before, after, 5, "mayfly_commands_total", "command", "insert")
	wantDelta(t, before, after, 0, "mayfly_command_errors_total", "command", "insert")
	wantDelta(t, before, after, 5, "mayfly_command_duration_seconds", "command", "insert")
	wantDelta(t, before, after, 3, "mayfly_commands_total", "command", "find")
	wantDelta(t, before, after, 1, "mayfly_command_errors_total", "command", "find")
	wantDelta(t, before, after, 3, "mayfly_command_duration_seconds", "command", "find")
	wantDelta(t, before, after, 2, "mayfly_commands_total", "command", "getMore")
	wantDelta(t, before, after, 1, "mayfly_commands_total", "command", "update")
	wantDelta(t, before, after, 1, "mayfly_commands_total", "command", "delete")
	wantDelta(t, before, after, 1, "mayfly_commands_total", "command", "killCursors")
	wantDelta(t, before, after, 5, "mayfly_opcounters_total", "type", "insert")
	wantDelta(t, before, after, 8, "mayfly_documents_total", "op", "inserted")
	wantDelta(t, before, after, 3, "mayfly_documents_total", "op", "updated")
	wantDelta(t, before, after, 2, "mayfly_documents_total", "op", "deleted")
	// 8 from the first find, 2 in the open cursor's first batch.
	wantDelta(t, before, after, 10, "mayfly_documents_total", "op", "returned")
	eq(t, "mayfly_cursors_open after close", after.must(t, "mayfly_cursors_open"), 0.0)

	// The histogram is a real one: buckets, sum and count agree.
	for _, m := range after["mayfly_command_duration_seconds"].Metric {
		h := m.Histogram
		if h == nil || len(h.Bucket) == 0 {
			t.Fatalf("mayfly_command_duration_seconds is not a histogram: %v", m)
		}
		last := h.Bucket[len(h.Bucket)-1].GetCumulativeCount()
		if last > h.GetSampleCount() || h.GetSampleSum() < 0 {
			t.Errorf("histogram %v: last bucket %d, count %d, sum %v", m.Label, last, h.GetSampleCount(), h.GetSampleSum())
		}
	}
	if v := after.must(t, "mayfly_network_requests_total"); v < 10 {
		t.Errorf("mayfly_network_requests_total = %v after a dozen commands", v)
	}
}

func TestIssue19MetricsTTL(t *testing.T) {
	e, base := metricsTarget(t)
	e.create("t", dttl(int32(10)))
	docs := []any{}
	for i := 0; i < 4; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("p", 100)}})
	}
	if _, err := e.coll("t").InsertMany(e.ctx, docs); err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t, base)
	eq(t, "mayfly_ttl_collections", before.must(t, "mayfly_ttl_collections"), 1.0)
	eq(t, "backlog before expiry", before.must(t, "mayfly_ttl_expired_backlog_documents"), 0.0)

	e.advance(25 * sec) // expired 15 s ago
	mid := scrapeMetrics(t, base)
	// The background reaper may already have purged some: what is not in
	// the backlog has been deleted.
	backlog := mid.must(t, "mayfly_ttl_expired_backlog_documents")
	deleted := delta(before, mid, "mayfly_ttl_deleted_documents_total")
	eq(t, "backlog + deleted after expiry", backlog+deleted, 4.0)
	if backlog > 0 {
		if lag := mid.must(t, "mayfly_ttl_oldest_expired_lag_seconds"); lag < 14 || lag > 16 {
			t.Errorf("mayfly_ttl_oldest_expired_lag_seconds = %v, want 15", lag)
		}
		if b := mid.must(t, "mayfly_ttl_expired_backlog_bytes"); b < 100*backlog {
			t.Errorf("mayfly_ttl_expired_backlog_bytes = %v for %v documents of over 100 bytes", b, backlog)
		}
	}

	if _, err := e.tg.srv.Engine().RunTTLPass(e.ctx); err != nil {
		t.Fatal(err)
	}
	after := scrapeMetrics(t, base)
	wantDelta(t, before, after, 4, "mayfly_ttl_deleted_documents_total")
	eq(t, "backlog after the purge", after.must(t, "mayfly_ttl_expired_backlog_documents"), 0.0)
	eq(t, "lag after the purge", after.must(t, "mayfly_ttl_oldest_expired_lag_seconds"), 0.0)
	if b := delta(before, after, "mayfly_ttl_deleted_bytes_total"); b < 400 {
		t.Errorf("mayfly_ttl_deleted_bytes_total moved by %v for 4 documents of over 100 bytes", b)
	}
	if v := after.must(t, "mayfly_ttl_passes_total"); v < 1 {
		t.Errorf("mayfly_ttl_passes_total = %v after a pass", v)
	}
	// TTL deletions are not command deletions.
	wantDelta(t, before, after, 0, "mayfly_documents_total", "op", "deleted")
	if n, _ := e.coll("t").CountDocuments(e.ctx, bson.D{}); n != 0 {
		t.Errorf("%d documents left after the purge", n)
	}
}

// Two servers with metrics in one process each have their own registry.
func TestIssue19MetricsTwoServers(t *testing.T) {
	e1, base1 := metricsTarget(t)
	clk := ttl.NewFakeClock(epoch)
	srv2, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, Clock: clk, MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("second server: %v", err)
	}
	defer srv2.Close()
	e1.insert("a", bson.D{{Key: "_id", Value: 1}})
	s1 := scrapeMetrics(t, base1)
	s2 := scrapeMetrics(t, "http://"+srv2.MetricsAddr())
	eq(t, "server 1 inserts", s1.must(t, "mayfly_documents_total", "op", "inserted"), 1.0)
	if v, _ := s2.get("mayfly_commands_total", "command", "insert"); v != 0 {
		t.Errorf("server 2 counted %v inserts done on server 1", v)
	}
	// A taken metrics address fails the start, leaving nothing open.
	_, err = server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, MetricsListen: srv2.MetricsAddr()})
	if err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("start on a taken metrics address: %v, want an error naming the metrics listener", err)
	}
}

// Every series the Grafana dashboard plots is one the server exports.
func TestIssue19MetricsDashboard(t *testing.T) {
	e, base := metricsTarget(t)
	e.insert("d", bson.D{{Key: "_id", Value: 1}})
	_ = e.runErr(bson.D{{Key: "find", Value: "d"}, {Key: "filter", Value: bson.D{{Key: "$bogus", Value: 1}}}})
	s := scrapeMetrics(t, base)
	b, err := os.ReadFile("../scripts/grafana/mayfly-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if len(dash.Panels) < 5 {
		t.Fatalf("dashboard has %d panels", len(dash.Panels))
	}
	names := regexp.MustCompile(`mayfly_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range names.FindAllString(tg.Expr, -1) {
				fam := strings.TrimSuffix(n, "_bucket")
				if s[fam] == nil {
					t.Errorf("panel %q plots %s, which /metrics does not export", p.Title, n)
				}
			}
		}
	}
}

// Scrapes racing with Close neither crash the server nor read a closed
// store (run with -race), and /metrics keeps answering 200 until the
// listener closes.
func TestIssue19MetricsScrapeDuringClose(t *testing.T) {
	e, base := metricsTarget(t)
	e.create("t", dttl(int32(10)))
	e.insert("t", bson.D{{Key: "_id", Value: 1}})
	e.advance(20 * sec)
	srv := e.tg.srv
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		cl := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			for _, p := range []string{"/metrics", "/readyz"} {
				resp, err := cl.Get(base + p)
				if err != nil {
					continue // the listener closes at the end of Close
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if p == "/metrics" && resp.StatusCode != http.StatusOK {
					done <- fmt.Errorf("/metrics answered %d", resp.StatusCode)
					return
				}
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	_ = e.cli.Disconnect(context.Background())
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Error(err)
	}
}
