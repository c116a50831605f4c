// Package server assembles a running mayfly: the Pebble store, the engine
// and the wire server, in the one order both the binary and the tests use,
// so that what the tests start is what ships.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/mlog"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
	"github.com/mayflydb/mayfly/wire"
)

// Config describes one server.
type Config struct {
	// Bind is the address to listen on (default 127.0.0.1).
	Bind string
	// Port to listen on; 0 picks a free one (see Addr).
	Port int
	// DBPath is the data directory, created if missing. Ignored with
	// InMemory.
	DBPath string
	// InMemory keeps the store in memory: nothing survives Close.
	InMemory bool
	Logger   *zap.Logger
	// Verbosity is the verbosity Logger's core follows (mlog.Verbosity.Core),
	// changed by setParameter logLevel / logComponentVerbosity; nil: those
	// parameters change nothing the logger sees.
	Verbosity *mlog.Verbosity
	// Clock decides expiry; nil means the system clock.
	Clock ttl.Clock
	// ReaperRate caps TTL deletions per second (0 = unlimited).
	ReaperRate int
	// ReaperInterval is the time between TTL reaper passes (0: 1 s).
	ReaperInterval time.Duration
	// MinFreeDisk is the free space of the data directory's filesystem
	// below which writes are refused with OutOfDiskSpace (14031) while
	// reads go on: bytes, a size such as "256MiB" or "1GB", or a
	// percentage of the filesystem such as "5%". "" means 256 MiB; "0"
	// refuses writes only once the disk is full.
	MinFreeDisk string
	// BallastSize is the size of the emergency ballast file kept in
	// <dbpath>/auxiliary/EMERGENCY_BALLAST, to delete when the disk is
	// full. "" means 1 GiB capped at 1% of the filesystem; "0" keeps none.
	BallastSize string
	// DiskStat replaces the measurement of the data directory's
	// filesystem (tests). An InMemory server watches disk space only when
	// it is set, and never keeps a ballast.
	DiskStat func(dir string) (pebblekv.DiskUsage, error)
	// Argv is the command line, for getCmdLineOpts.
	Argv []string
	// Parsed is the parsed command line, for getCmdLineOpts, with mongod's
	// dotted names ("net.port", "storage.dbPath").
	Parsed map[string]any
	// ShutdownTimeout bounds how long Close waits for requests in flight
	// (default 10 s).
	ShutdownTimeout time.Duration
	// JournalCommitInterval is how often unjournaled writes are made
	// durable: the most a crash can lose of writes acknowledged without
	// j/fsync (mongod's journalCommitInterval: 1 to 500 ms, default 100).
	JournalCommitInterval time.Duration
	// MaxConns is --maxConns: connections beyond it are closed right after
	// accept (0: mongod's default, 1000000, capped at 80% of the open-file
	// limit).
	MaxConns int
	// WireLimits are the other per-connection limits (frame and write
	// timeouts, memory budget); its MaxConns is overridden by MaxConns
	// when that is set.
	WireLimits wire.Limits
	// TLS is mongod's net.tls (see tls.go); the zero value is disabled.
	TLS TLSOptions
	// CacheSize is the Pebble block cache's size in bytes (--cacheSizeMB);
	// 0: pebblekv's default (256 MiB).
	CacheSize int64
	// NetworkMessageCompressors is --networkMessageCompressors
	// (net.compression.compressors): the compressors hello negotiates, a
	// comma-separated list of snappy, zstd and zlib, or "disabled"; ""
	// means mongod's default, "snappy,zstd,zlib".
	NetworkMessageCompressors string
	// MetricsListen is the address of the Prometheus /metrics, /healthz
	// and /readyz listener ("" = none; see metrics.go).
	MetricsListen string
	// LogRotate rotates the log file for the logRotate command (nil when
	// logging to stderr: the command then has nothing to rotate).
	LogRotate func() error
	// Setup, when set, runs once the engine is open and before the first
	// connection is accepted (startup settings: the configuration file's
	// setParameter and operationProfiling). Its error aborts Start.
	Setup func(*engine.Engine) error
	// Auth is mongod's --auth (security.authorization: enabled): every
	// command but the handshake needs an authenticated user with the
	// privileges it requires.
	Auth bool
	// AuthMechanisms is mongod's authenticationMechanisms (empty: both
	// SCRAM mechanisms).
	AuthMechanisms []string
	// InitRootUser and InitRootPassword, when set, create a root user in
	// admin at startup if no user exists (the container image's
	// MAYFLY_INITDB_ROOT_USERNAME/_PASSWORD).
	InitRootUser, InitRootPassword string
	// ReplSetName is mongod's --replSet (replication.replSetName): the
	// server runs as the primary of a one-member replica set of that name
	// (engine/repl.go). Empty: a standalone.
	ReplSetName string
	// AdvertiseHost is the host:port the replica set member calls itself
	// (hello's me, primary and hosts). Empty: the bind address and port
	// when the bind address is one concrete address, else the machine's
	// hostname and the port.
	AdvertiseHost string
	// ChangeHistory is how long the change history keeps a change
	// (--change-history-hours); 0: 24 hours.
	ChangeHistory time.Duration
}

// Bounds of JournalCommitInterval, as mongod's --journalCommitInterval.
const (
	MinJournalCommitInterval     = time.Millisecond
	MaxJournalCommitInterval     = 500 * time.Millisecond
	DefaultJournalCommitInterval = 100 * time.Millisecond
)

// Server is a running mayfly.
type Server struct {
	cfg    Config
	log    *zap.Logger
	store  *pebblekv.Store
	engine *engine.Engine
	wire   *wire.Server
	ln     net.Listener
	served chan error

	closeOnce sync.Once
	closeErr  error

	metrics *metricsServer // nil without Config.MetricsListen
	ready   atomic.Bool    // serving, not shutting down (for /readyz)
	// scrapeMu keeps scrapes that read the store apart from Close.
	scrapeMu sync.RWMutex
}

// errAddrInUse is the listen error for a taken port.
var errAddrInUse = syscall.EADDRINUSE

// ErrAddrInUse matches (errors.Is) Start's error when the port is taken.
var ErrAddrInUse = errors.New("address already in use")

// Start opens the store, opens the engine over it and starts serving. On
// error nothing is left open.
func Start(cfg Config) (*Server, error) {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.JournalCommitInterval == 0 {
		cfg.JournalCommitInterval = DefaultJournalCommitInterval
	}
	if cfg.JournalCommitInterval < MinJournalCommitInterval || cfg.JournalCommitInterval > MaxJournalCommitInterval {
		return nil, fmt.Errorf("journalCommitInterval must be between 1 and 500 milliseconds, got %v", cfg.JournalCommitInterval)
	}
	if cfg.Parsed == nil {
		cfg.Parsed = map[string]any{"net.bindIp": cfg.Bind, "net.port": int32(cfg.Port)}
		if !cfg.InMemory {
			cfg.Parsed["storage.dbPath"] = cfg.DBPath
		}
		cfg.TLS.AddParsed(cfg.Parsed)
		if cfg.Auth {
			cfg.Parsed["security.authorization"] = "enabled"
		}
		if cfg.ReplSetName != "" {
			cfg.Parsed["replication.replSet"] = cfg.ReplSetName
		}
	}
	log := cfg.Logger
	s := &Server{cfg: cfg, log: log, served: make(chan error, 1)}
	compressors, err := wire.ParseCompressors(cmp.Or(cfg.NetworkMessageCompressors, wire.DefaultCompressors))
	if err != nil {
		return nil, err
	}

	tlsCfg, tlsMode, err := cfg.TLS.load(time.Now())
	if err != nil {
		return nil, err
	}
	guard, err := diskGuard(cfg)
	if err != nil {
		return nil, err
	}

	dir := cfg.DBPath
	if cfg.InMemory {
		if dir == "" {
			dir = "mem"
		}
	} else {
		if dir == "" {
			return nil, errors.New("no data directory given (--dbpath)")
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("data directory %s is unusable: %w", dir, err)
		}
	}
	store, err := pebblekv.Open(dir, pebblekv.Options{InMemory: cfg.InMemory, Logger: log.Named("pebble"), WALSyncInterval: cfg.JournalCommitInterval, DiskGuard: guard,
		CacheSize: cfg.CacheSize})
	if err != nil {
		if errors.Is(err, pebblekv.ErrLocked) {
			// pebblekv's message names the directory and the held lock.
			return nil, fmt.Errorf("cannot open the data directory: %w", err)
		}
		return nil, fmt.Errorf("cannot open data directory %s: %w", dir, err)
	}
	s.store = store

	// Listen only once the store is open: a client must never be accepted
	// by a server that cannot answer it (a store that fails to open, or
	// takes long to replay, used to leave a silent open port).
	addr := net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		store.Close()
		if errors.Is(err, errAddrInUse) {
			return nil, fmt.Errorf("cannot listen on %s: %w (is another mayfly or mongod running on port %d?)", addr, ErrAddrInUse, cfg.Port)
		}
		return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	s.ln = ln

	tcp := ln.Addr().(*net.TCPAddr)
	lim := cfg.WireLimits
	if cfg.MaxConns != 0 {
		lim.MaxConns = cfg.MaxConns
	}
	eng, err := engine.Open(engine.Config{
		KV:        store,
		Logger:    log,
		Verbosity: cfg.Verbosity,
		Clock:     cfg.Clock,
		ServerInfo: engine.ServerInfo{
			CmdLineArgv:   cfg.Argv,
			CmdLineParsed: cfg.Parsed,
			Host:          cfg.Bind,
			Port:          tcp.Port,
			ConnStats: func() (int64, int64, int64, int64, int64) {
				st := s.wire.Stats()
				return st.Current, st.TotalCreated, st.BytesIn, st.BytesOut, st.NumRequests
			},
			MaxConns: int64(wire.EffectiveMaxConns(lim.MaxConns)),
			CompressionStats: func() map[string]engine.CompressionFigures {
				m := s.wire.CompressionStats()
				out := make(map[string]engine.CompressionFigures, len(m))
				for k, v := range m {
					out[k] = engine.CompressionFigures(v)
				}
				return out
			},
			InMemory: cfg.InMemory,
		},
		Reaper:         engine.ReaperConfig{Rate: cfg.ReaperRate, Interval: cfg.ReaperInterval},
		CommandMetrics: cfg.MetricsListen != "",
		LogRotate:      cfg.LogRotate,
		Auth:           cfg.Auth,
		AuthMechanisms: cfg.AuthMechanisms,
		Repl:           engine.ReplConfig{SetName: cfg.ReplSetName, Me: advertiseHost(cfg, tcp.Port), ChangeHistory: cfg.ChangeHistory},
	})
	if err != nil {
		ln.Close()
		store.Close()
		return nil, fmt.Errorf("cannot open the database in %s: %w", dir, err)
	}
	if cfg.Setup != nil {
		if err := cfg.Setup(eng); err != nil {
			ln.Close()
			eng.Close()
			store.Close()
			return nil, err
		}
	}
	s.engine = eng
	if cfg.InitRootUser != "" {
		created, err := eng.EnsureRootUser(cfg.InitRootUser, cfg.InitRootPassword)
		if err != nil {
			eng.Close()
			ln.Close()
			store.Close()
			return nil, fmt.Errorf("cannot create the root user %q: %w", cfg.InitRootUser, err)
		}
		if created {
			log.Info("created the root user", zap.String("user", cfg.InitRootUser), zap.String("db", "admin"))
		}
	}
	s.wire = wire.NewServer(eng, wire.Options{Logger: log.Named("wire"), Limits: lim, Compressors: compressors})
	if cfg.MetricsListen != "" {
		if s.metrics, err = startMetrics(s, cfg.MetricsListen); err != nil {
			ln.Close()
			eng.Close()
			store.Close()
			return nil, err
		}
	}
	go func() { s.served <- s.wire.Serve(wire.NewTLSListener(ln, tlsCfg, tlsMode, log.Named("tls"))) }()
	s.ready.Store(true)
	if !cfg.Auth {
		// mongod's startup warning; off the loopback it matters.
		if ip := net.ParseIP(cfg.Bind); ip == nil || !ip.IsLoopback() {
			log.Warn("Access control is not enabled for the database and the server is bound to a non-loopback address: anyone who can reach it can read, change and drop all data. Start with --auth and create users.", zap.String("bindIp", cfg.Bind))
		} else {
			log.Warn("Access control is not enabled for the database. Read and write access to data and configuration is unrestricted")
		}
	}
	log.Info("waiting for connections", zap.String("address", s.Addr()), zap.String("dbpath", dir), zap.Bool("inMemory", cfg.InMemory))
	return s, nil
}

// advertiseHost is the address a replica set member gives as its own:
// Config.AdvertiseHost, else the bind address when it is one concrete
// address, else the hostname, with the port listened on.
func advertiseHost(cfg Config, port int) string {
	if cfg.ReplSetName == "" {
		return ""
	}
	if cfg.AdvertiseHost != "" {
		return cfg.AdvertiseHost
	}
	host := cfg.Bind
	if ip := net.ParseIP(host); strings.Contains(host, ",") || ip != nil && ip.IsUnspecified() || host == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "localhost"
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Addr is the listening address, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URI is a connection string for the server.
func (s *Server) URI() string { return "mongodb://" + s.Addr() + "/" }

// Engine is the database behind the server.
func (s *Server) Engine() *engine.Engine { return s.engine }

// Stats are the wire layer's connection and network counters.
func (s *Server) Stats() wire.Stats { return s.wire.Stats() }

// Close shuts down gracefully: stop accepting, let requests in flight
// finish (up to Config.ShutdownTimeout), close the engine, then the store,
// so that nothing is written to a closed store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	s.ready.Store(false)
	s.engine.Quiesce() // awaitable hellos answer now instead of holding the shutdown up
	if err := s.wire.Shutdown(ctx); err != nil {
		s.log.Warn("requests still running at shutdown were cut off", zap.Error(err))
	}
	if err := <-s.served; err != nil && !errors.Is(err, wire.ErrServerClosed) {
		errs = append(errs, err)
	}
	s.waitScrapes()
	if err := s.engine.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the engine: %w", err))
	}
	if err := s.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the store: %w", err))
	}
	if s.metrics != nil {
		s.metrics.close()
	}
	s.log.Info("shutdown complete")
	return errors.Join(errs...)
}
