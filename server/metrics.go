package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine"
)

// The metrics listener (Config.MetricsListen) serves Prometheus' /metrics,
// /healthz (the process is up) and /readyz (the store is open and the
// server is serving). Each Server has its own registry, so that several
// servers in one process (the tests) do not collide. Every figure is read
// from the engine, the wire layer and Pebble at scrape time: nothing is
// counted twice.

type metricsServer struct {
	ln   net.Listener
	http *http.Server
	done chan struct{}
}

// startMetrics listens on addr and serves the metrics endpoints for s.
func startMetrics(s *Server, addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for metrics on %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		&mayflyCollector{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: zap.NewStdLog(s.log.Named("metrics")), ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	m := &metricsServer{ln: ln, done: make(chan struct{}),
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	s.log.Info("serving metrics", zap.String("address", ln.Addr().String()), zap.Strings("paths", []string{"/metrics", "/healthz", "/readyz"}))
	go func() {
		defer close(m.done)
		if err := m.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics listener failed", zap.Error(err))
		}
	}()
	return m, nil
}

func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.http.Shutdown(ctx); err != nil {
		m.http.Close()
	}
	<-m.done
}

// MetricsAddr is the metrics listener's address, host:port ("" when
// Config.MetricsListen is empty).
func (s *Server) MetricsAddr() string {
	if s.metrics == nil {
		return ""
	}
	return s.metrics.ln.Addr().String()
}

// Ready reports whether the server is serving over an open store: what
// /readyz answers.
func (s *Server) Ready() bool {
	return s.ready.Load() && s.engine.IsOpen() && s.store.IsOpen()
}

// waitScrapes waits for scrapes reading the store; Close calls it once
// Ready is false, before closing the engine and the store, so that later
// scrapes leave the store alone.
func (s *Server) waitScrapes() {
	s.scrapeMu.Lock()
	defer s.scrapeMu.Unlock()
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("mayfly_"+name, help, labels, nil)
}

var (
	descCommands        = desc("commands_total", "Commands run, by command name.", "command")
	descCommandErrors   = desc("command_errors_total", "Commands that failed, by command name.", "command")
	descCommandDuration = desc("command_duration_seconds", "Command latency, by command name.", "command")
	descOpcounters      = desc("opcounters_total", "Operations by type, as serverStatus.opcounters.", "type")
	descDocuments       = desc("documents_total", "Documents inserted, updated, deleted and returned by commands (TTL deletions apart), as serverStatus.metrics.document.", "op")
	descConnsCurrent    = desc("connections_current", "Open client connections.")
	descConnsCreated    = desc("connections_created_total", "Client connections accepted since start.")
	descNetBytesIn      = desc("network_bytes_in_total", "Bytes received from clients.")
	descNetBytesOut     = desc("network_bytes_out_total", "Bytes sent to clients.")
	descNetRequests     = desc("network_requests_total", "Requests received from clients.")
	descCursorsOpen     = desc("cursors_open", "Open cursors.")
	descReady           = desc("ready", "1 while the store is open and the server serving, else 0.")

	descCacheHits    = desc("pebble_block_cache_hits_total", "Pebble block cache hits.")
	descCacheMisses  = desc("pebble_block_cache_misses_total", "Pebble block cache misses.")
	descCacheHitRate = desc("pebble_block_cache_hit_ratio", "Pebble block cache hits / (hits + misses) since start.")
	descCacheSize    = desc("pebble_block_cache_size_bytes", "Bytes in the Pebble block cache.")
	descCacheCap     = desc("pebble_block_cache_capacity_bytes", "The Pebble block cache's configured size (--cacheSizeMB).")
	descCompactions  = desc("pebble_compactions_total", "Pebble compactions since start.")
	descFlushes      = desc("pebble_flushes_total", "Pebble memtable flushes since start.")
	descReadAmp      = desc("pebble_read_amplification", "Pebble read amplification (sublevels in L0 plus non-empty levels below).")
	descDiskUsage    = desc("pebble_disk_usage_bytes", "Disk space used by the store (tables, WAL, manifests).")
	descLiveTables   = desc("pebble_live_tables_bytes", "Bytes in Pebble's live tables.")
	descMemtable     = desc("pebble_memtable_size_bytes", "Bytes in Pebble's memtables.")
	descL0Files      = desc("pebble_l0_files", "Tables in Pebble's level 0.")

	descTTLCollections = desc("ttl_collections", "Collections with a TTL policy.")
	descTTLBacklog     = desc("ttl_expired_backlog_documents", "Documents expired but not yet purged.")
	descTTLBacklogB    = desc("ttl_expired_backlog_bytes", "Bytes of the documents expired but not yet purged.")
	descTTLLag         = desc("ttl_oldest_expired_lag_seconds", "How long ago the oldest unpurged document expired.")
	descTTLRate        = desc("ttl_purge_rate_documents_per_second", "Documents per second purged by the last reaper pass that deleted.")
	descTTLDeleted     = desc("ttl_deleted_documents_total", "Documents purged by the TTL reaper.")
	descTTLDeletedB    = desc("ttl_deleted_bytes_total", "Bytes of the documents purged by the TTL reaper.")
	descTTLReclaimed   = desc("ttl_reclaimed_bytes_total", "Disk bytes reclaimed by compacting purged ranges.")
	descTTLPasses      = desc("ttl_passes_total", "TTL reaper passes.")
	descTTLBackoffs    = desc("ttl_backoffs_total", "Times the TTL reaper backed off for foreground load.")
)

// mayflyCollector reads the server's figures at scrape time.
type mayflyCollector struct{ s *Server }

func (c *mayflyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descCommands, descCommandErrors, descCommandDuration, descOpcounters, descDocuments,
		descConnsCurrent, descConnsCreated, descNetBytesIn, descNetBytesOut, descNetRequests, descCursorsOpen, descReady,
		descCacheHits, descCacheMisses, descCacheHitRate, descCacheSize, descCacheCap, descCompactions, descFlushes, descReadAmp,
		descDiskUsage, descLiveTables, descMemtable, descL0Files,
		descTTLCollections, descTTLBacklog, descTTLBacklogB, descTTLLag, descTTLRate, descTTLDeleted, descTTLDeletedB,
		descTTLReclaimed, descTTLPasses, descTTLBackoffs,
	} {
		ch <- d
	}
}

func (c *mayflyCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	e := s.engine
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	for _, cs := range e.CommandStats() {
		counter(descCommands, float64(cs.Count), cs.Name)
		counter(descCommandErrors, float64(cs.Errors), cs.Name)
		buckets := make(map[float64]uint64, len(engine.LatencyBounds))
		for i, b := range engine.LatencyBounds {
			buckets[b] = cs.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(descCommandDuration, uint64(cs.Count), cs.Sum.Seconds(), buckets, cs.Name)
	}
	ins, qry, upd, del, gm, cmd := e.OpCounters()
	for _, oc := range []struct {
		t string
		v int64
	}{{"insert", ins}, {"query", qry}, {"update", upd}, {"delete", del}, {"getmore", gm}, {"command", cmd}} {
		counter(descOpcounters, float64(oc.v), oc.t)
	}
	dc := e.DocumentCounts()
	counter(descDocuments, float64(dc.Inserted), "inserted")
	counter(descDocuments, float64(dc.Updated), "updated")
	counter(descDocuments, float64(dc.Deleted), "deleted")
	counter(descDocuments, float64(dc.Returned), "returned")

	ws := s.wire.Stats()
	gauge(descConnsCurrent, float64(ws.Current))
	counter(descConnsCreated, float64(ws.TotalCreated))
	counter(descNetBytesIn, float64(ws.BytesIn))
	counter(descNetBytesOut, float64(ws.BytesOut))
	counter(descNetRequests, float64(ws.NumRequests))
	gauge(descCursorsOpen, float64(e.OpenCursors()))
	ready := 0.0
	if s.Ready() {
		ready = 1
	}
	gauge(descReady, ready)

	if pm, ok := s.store.Metrics(); ok {
		counter(descCacheHits, float64(pm.BlockCacheHits))
		counter(descCacheMisses, float64(pm.BlockCacheMisses))
		ratio := 0.0
		if n := pm.BlockCacheHits + pm.BlockCacheMisses; n > 0 {
			ratio = float64(pm.BlockCacheHits) / float64(n)
		}
		gauge(descCacheHitRate, ratio)
		gauge(descCacheSize, float64(pm.BlockCacheSizeBytes))
		gauge(descCacheCap, float64(pm.BlockCacheCapacityBytes))
		counter(descCompactions, float64(pm.Compactions))
		counter(descFlushes, float64(pm.Flushes))
		gauge(descReadAmp, float64(pm.ReadAmplification))
		gauge(descDiskUsage, float64(pm.DiskUsageBytes))
		gauge(descLiveTables, float64(pm.LiveTablesBytes))
		gauge(descMemtable, float64(pm.MemtableSizeBytes))
		gauge(descL0Files, float64(pm.L0Files))
	}

	// The TTL backlog is counted from the store's expiry index: only while
	// the server is ready, and Close waits for such a scrape (waitScrapes).
	s.scrapeMu.RLock()
	defer s.scrapeMu.RUnlock()
	if s.Ready() {
		tf := e.TTLFigures()
		gauge(descTTLCollections, float64(tf.CollectionsWithTTL))
		gauge(descTTLBacklog, float64(tf.ExpiredBacklog))
		gauge(descTTLBacklogB, float64(tf.ExpiredBacklogBytes))
		gauge(descTTLLag, tf.OldestExpiredLagSeconds)
		gauge(descTTLRate, tf.PurgeRatePerSecond)
		counter(descTTLDeleted, float64(tf.DeletedDocuments))
		counter(descTTLDeletedB, float64(tf.DeletedBytes))
		counter(descTTLReclaimed, float64(tf.ReclaimedBytes))
		counter(descTTLPasses, float64(tf.Passes))
		counter(descTTLBackoffs, float64(tf.Backoffs))
	}
}
