// Package engine is mayfly's database: the command table and handlers,
// the catalog, planning and query execution, updates, aggregation and the
// TTL policy. It implements wire.Handler. Documents are written through
// the document store beneath it (engine/docstore: records, index and
// expiry entries, unique checks, staged into storage transactions).
package engine

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/mlog"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// Config configures an Engine.
type Config struct {
	// KV is the opened store. The engine does not close it.
	KV     storage.TxnKV
	Logger *zap.Logger
	// Verbosity is the logger's verbosity (mlog.Verbosity.Core), which the
	// logLevel and logComponentVerbosity parameters read and change; nil:
	// the engine keeps its own (the parameters work, the logger does not
	// follow them).
	Verbosity *mlog.Verbosity
	// Clock decides expiry; nil means the system clock.
	Clock ttl.Clock
	// SlowOpThreshold is no longer read: the "Slow query" log line follows
	// the profile command's server-wide slowms and sampleRate (slowlog.go).
	SlowOpThreshold time.Duration
	// ServerInfo supplies process-level figures for serverStatus and friends.
	ServerInfo ServerInfo
	// Reaper configures background TTL deletion.
	Reaper ReaperConfig
	// CommandMetrics counts commands, their latency and the documents they
	// touch, for the metrics endpoint (metrics.go).
	CommandMetrics bool
	// Auth is mongod's --auth: commands need an authenticated user with
	// the privileges they require (auth.go).
	Auth bool
	// AuthMechanisms restricts the SASL mechanisms clients may use
	// (mongod's authenticationMechanisms); empty: SCRAM-SHA-1 and
	// SCRAM-SHA-256.
	AuthMechanisms []string
	// LogRotate rotates the log file for the logRotate command; nil when
	// logging to stderr (nothing to rotate).
	LogRotate func() error
	// Repl is replica-set mode (--replSet; repl.go); its zero value is a
	// standalone.
	Repl ReplConfig
}

// ServerInfo is what the process around the engine knows: the command line,
// listening address and connection counters from the wire layer.
type ServerInfo struct {
	CmdLineArgv   []string
	CmdLineParsed map[string]any
	Host          string
	Port          int
	// ConnStats returns current and total-created connection counts and
	// network byte/request counters.
	ConnStats func() (current, totalCreated, bytesIn, bytesOut, numRequests int64)
	// MaxConns is the wire layer's effective connection limit, which
	// serverStatus's connections.available counts down from (0: mongod's
	// default).
	MaxConns int64
	// CompressionStats returns the wire layer's per-compressor byte
	// counters (serverStatus network.compression); nil: no section.
	CompressionStats func() map[string]CompressionFigures
	// InMemory: the store keeps nothing across restarts
	// (serverStatus.storageEngine.persistent is false).
	InMemory bool
}

// CompressionFigures are one compressor's byte counters.
type CompressionFigures struct {
	CompressorBytesIn, CompressorBytesOut     int64
	DecompressorBytesIn, DecompressorBytesOut int64
}

// Engine is one mayfly database instance.
type Engine struct {
	kv     storage.TxnKV
	ds     *docstore.Store // the document store over kv
	log    *zap.Logger
	verb   *mlog.Verbosity
	clock  ttl.Clock
	slowMS time.Duration
	info   ServerInfo
	start  time.Time

	cat        *Catalog
	cursors    *cursorTable
	prof       *profiler
	nextCollID atomic.Uint64
	metaMu     sync.Mutex

	// hwm is the expiry clock's high-water mark (Unix ms): now never runs
	// backwards, across restarts too (spec §6.5).
	hwm      atomic.Int64
	savedHWM atomic.Int64 // the persisted lease (Unix ms)
	leaseMu  sync.Mutex
	inflight atomic.Int64
	// activeReaders and activeWriters are the commands in flight that
	// read or write collections (status_metrics.go lockKindOf).
	activeReaders, activeWriters atomic.Int64
	// writeConflicts counts storage transactions retried after a
	// conflict (serverStatus metrics.operation.writeConflicts).
	writeConflicts atomic.Int64
	// txns is the sessions' multi-document transaction state.
	txns      txnTable
	fgOps     atomic.Int64
	reaper    *reaper
	compactCh chan [2][]byte

	ops struct {
		insert, query, update, delete, getmore, command atomic.Int64
	}
	running opRegistry // operations in progress, connections and sessions (ops.go)

	params serverParams // runtime server parameters (setParameter)

	// docs counts documents written and returned (serverStatus
	// metrics.document and the Prometheus figures): cmdMetrics' counters
	// when metrics are on, its own otherwise (status_metrics.go).
	docs *docCounters
	// status holds serverStatus's engine-wide counters (status_metrics.go).
	status statusCounters

	cmdMetrics *commandMetrics // nil unless Config.CommandMetrics (metrics.go)
	users      userCache       // admin.system.users in memory (auth_users.go)
	roles      roleCache       // admin.system.roles in memory (auth_customroles.go)
	auth       authConfig      // --auth and per-connection authentication state (auth.go)
	top        topTable        // per-collection usage for the top command (cmd_top.go)
	logRotate  func() error    // Config.LogRotate (cmd_compact.go)

	opTime   *OpClock         // times writes: operationTime, $clusterTime (optime.go)
	repl     *replState       // nil on a standalone (repl.go)
	hist     *changeHistory   // the change history; nil on a standalone (changes.go)
	sessions *SessionRegistry // logical sessions and their retryable-write state (sessions.go)
	retry    RetryStore       // executed statements of retryable writes (retry.go)

	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
}

// Open builds an engine over an opened store: it loads the catalog and the
// clock's high-water mark and starts the background workers (TTL reaper,
// idle-cursor reaper, requested compactions).
func Open(cfg Config) (*Engine, error) {
	e := &Engine{kv: cfg.KV, log: cfg.Logger, clock: cfg.Clock, slowMS: cfg.SlowOpThreshold, info: cfg.ServerInfo,
		start: time.Now(), cursors: newCursorTable(), stop: make(chan struct{}), compactCh: make(chan [2][]byte, 64)}
	e.ds = docstore.New(e.kv, e.nowMS)
	if e.log == nil {
		e.log = zap.NewNop()
	}
	e.verb = cfg.Verbosity
	if e.verb == nil {
		e.verb = mlog.NewVerbosity(0)
	}
	if e.clock == nil {
		e.clock = ttl.SystemClock{}
	}
	e.nextCollID.Store(1)
	if v, err := e.kv.Get(docstore.MetaKey("nextCollID")); err == nil && len(v) == 8 {
		e.nextCollID.Store(binary.BigEndian.Uint64(v))
	}
	if v, err := e.kv.Get(docstore.MetaKey("clockHWM")); err == nil && len(v) == 8 {
		e.hwm.Store(int64(binary.BigEndian.Uint64(v)))
		e.savedHWM.Store(e.hwm.Load())
	}
	if err := e.loadCatalog(); err != nil {
		return nil, err
	}
	for _, c := range e.cat.All() {
		c.ensureStats()
	}
	e.prof = newProfiler()
	// Optimes follow the expiry clock, which never runs backwards, across
	// restarts too: past the persisted lease's second, a restarted server
	// times its writes after every write it timed before.
	e.opTime = NewOpClock(e.Now)
	if hwm := e.savedHWM.Load(); hwm > 0 {
		e.opTime.seed(bson.Timestamp{T: uint32(hwm / 1000), I: math.MaxUint32})
	}
	e.sessions = NewSessionRegistry(e.clock.Now)
	if err := e.openRetryStore(); err != nil {
		return nil, err
	}
	if cfg.Repl.SetName != "" {
		// The set is initiated at startup; its election is the first optime.
		e.repl = newReplState(cfg.Repl, e.opTime.Next())
		e.hist = newChangeHistory(cfg.Repl.ChangeHistory)
		e.loadChangeHistory()
	}
	e.logRotate = cfg.LogRotate
	if cfg.CommandMetrics {
		e.cmdMetrics = newCommandMetrics()
		e.docs = &e.cmdMetrics.docCounters
	} else {
		e.docs = &docCounters{}
	}
	if err := e.seedSystemVersion(); err != nil {
		return nil, err
	}
	if err := e.loadUsers(); err != nil {
		return nil, err
	}
	e.auth.enabled = cfg.Auth
	if err := e.setAuthMechanisms(cfg.AuthMechanisms); err != nil {
		return nil, err
	}
	e.reaper = newReaper(e, cfg.Reaper)
	e.wg.Add(3)
	go e.clockLoop()
	go e.cursorLoop()
	go e.compactLoop()
	e.reaper.start()
	return e, nil
}

// Close stops background work. It does not close the store.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	close(e.stop)
	e.reaper.wait()
	e.wg.Wait()
	return nil
}

// Logger returns the engine's logger.
func (e *Engine) Logger() *zap.Logger { return e.log }

// StartTime is when the engine opened.
func (e *Engine) StartTime() time.Time { return e.start }

// OpCounters returns mongod-style opcounters.
func (e *Engine) OpCounters() (insert, query, update, delete, getmore, command int64) {
	return e.ops.insert.Load(), e.ops.query.Load(), e.ops.update.Load(), e.ops.delete.Load(), e.ops.getmore.Load(), e.ops.command.Load()
}

// nowMS is the expiry clock: the injected clock, never below the
// high-water mark, across crashes too (spec §6.5, §8.3). Before an instant
// past the persisted lease is used, the lease — the end of that instant's
// second — is written with a WAL sync, so after a crash the clock resumes
// at or after every instant any request saw. Rounding to the second keeps
// this to one synced write per second of activity, and never makes a
// Cosmos-style deadline (whole seconds) pass early after a restart.
func (e *Engine) nowMS() int64 {
	now := e.clock.Now().UnixMilli()
	if now > e.savedHWM.Load() {
		e.leaseMu.Lock()
		if now > e.savedHWM.Load() {
			lease := now - now%1000 + 999
			if err := e.saveHWM(lease); err != nil {
				e.log.Error("cannot persist the expiry clock high-water mark", zap.Error(err))
			} else {
				e.savedHWM.Store(lease)
			}
		}
		e.leaseMu.Unlock()
	}
	for {
		h := e.hwm.Load()
		if now <= h {
			return h
		}
		if e.hwm.CompareAndSwap(h, now) {
			return now
		}
	}
}

// Now is the engine's expiry clock as a time.
func (e *Engine) Now() time.Time { return time.UnixMilli(e.nowMS()) }

func (e *Engine) saveHWM(v int64) error {
	b := e.kv.NewBatch()
	defer b.Close()
	if err := b.Set(docstore.MetaKey("clockHWM"), binary.BigEndian.AppendUint64(nil, uint64(v))); err != nil {
		return err
	}
	// The lease may use the store's disk-space reserve: refusing it would
	// fail every request instead of only the writes.
	if m, ok := b.(interface{ MarkEssential() }); ok {
		m.MarkEssential()
	}
	return b.Commit(true)
}

// clockLoop records the passage of time once a second even when no request
// asks for it, so a restart resumes the expiry clock where it was.
func (e *Engine) clockLoop() {
	defer e.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.nowMS()
			e.sweepTxns(e.clock.Now()) // transactionLifetimeLimitSeconds
		}
	}
}

func (e *Engine) cursorLoop() {
	defer e.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			if n := e.cursors.reapIdle(now); n > 0 {
				e.log.Info("killed idle cursors", zap.Int("count", n))
			}
			e.sweepRetryRecords()
			e.trimChanges()
		}
	}
}

// compactSoon asks the background worker to compact a key range (dropped
// collections, reaped ranges) so disk space comes back on a quiet server.
func (e *Engine) compactSoon(lo, hi []byte) {
	select {
	case e.compactCh <- [2][]byte{lo, hi}:
	default:
	}
}

func (e *Engine) compactLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.stop:
			return
		case r := <-e.compactCh:
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-e.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			start := time.Now()
			if err := e.kv.Compact(ctx, r[0], r[1]); err != nil && ctx.Err() == nil {
				e.log.Warn("requested compaction failed", zap.Error(err))
			} else {
				e.log.Debug("requested compaction done", zap.Duration("took", time.Since(start)))
			}
			cancel()
		}
	}
}

// Catalog returns the catalog.
func (e *Engine) Catalog() *Catalog { return e.cat }
