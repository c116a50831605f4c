// Package engine is mayfly's database: the catalog, documents, indexes,
// queries, updates, aggregation and the command table. It implements
// wire.Handler and stores everything through the storage interface.
package engine

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// Config configures an Engine.
type Config struct {
	// KV is the opened store. The engine does not close it.
	KV     storage.KV
	Logger *zap.Logger
	// Clock decides expiry; nil means the system clock.
	Clock ttl.Clock
	// SlowOpThreshold logs commands slower than this (0: never).
	SlowOpThreshold time.Duration
	// ServerInfo supplies process-level figures for serverStatus and friends.
	ServerInfo ServerInfo
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
}

// Engine is one mayfly database instance.
type Engine struct {
	kv     storage.KV
	log    *zap.Logger
	clock  ttl.Clock
	slowMS time.Duration
	info   ServerInfo
	start  time.Time

	ops struct {
		insert, query, update, delete, getmore, command atomic.Int64
	}
}

// Open builds an engine over an opened store.
func Open(cfg Config) (*Engine, error) {
	e := &Engine{kv: cfg.KV, log: cfg.Logger, clock: cfg.Clock, slowMS: cfg.SlowOpThreshold, info: cfg.ServerInfo, start: time.Now()}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	if e.clock == nil {
		e.clock = ttl.SystemClock{}
	}
	return e, nil
}

// Close stops background work. It does not close the store.
func (e *Engine) Close() error { return nil }

// Logger returns the engine's logger.
func (e *Engine) Logger() *zap.Logger { return e.log }

// StartTime is when the engine opened.
func (e *Engine) StartTime() time.Time { return e.start }

// OpCounters returns mongod-style opcounters.
func (e *Engine) OpCounters() (insert, query, update, delete, getmore, command int64) {
	return e.ops.insert.Load(), e.ops.query.Load(), e.ops.update.Load(), e.ops.delete.Load(), e.ops.getmore.Load(), e.ops.command.Load()
}
