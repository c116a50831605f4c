package mlog

import (
	"strconv"
	"strings"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// mongod's debug severities D1…D5 are zap levels below Info: D1 is zap's
// DebugLevel (-1), Dn is -n. A site logs at Dn with
// logger.Log(mlog.Debug(n), msg, fields...).
func Debug(n int) zapcore.Level { return zapcore.Level(-min(max(n, 1), MaxVerbosity)) }

// MaxVerbosity is mongod's highest debug level (D5, -vvvvv).
const MaxVerbosity = 5

// ComponentName is one of mongod's log components as logComponentVerbosity
// names them (Param) and as the "c" field shows them (Name). mayfly logs
// under some of them only; the others are kept so that settings written
// for mongod apply unchanged.
type ComponentName struct{ Param, Name string }

// Components are mongod's top-level log components (src/mongo/logv2/
// log_component.h), in the order getParameter lists them. Subcomponents
// (storage.journal, replication.heartbeats…) are not kept.
var Components = []ComponentName{
	{"accessControl", "ACCESS"}, {"assert", "ASSERT"}, {"command", "COMMAND"}, {"control", "CONTROL"},
	{"executor", "EXECUTOR"}, {"geo", "GEO"}, {"index", "INDEX"}, {"network", "NETWORK"},
	{"query", "QUERY"}, {"replication", "REPL"}, {"sharding", "SHARDING"}, {"storage", "STORAGE"},
	{"write", "WRITE"}, {"ftdc", "FTDC"}, {"transaction", "TXN"},
}

// Verbosity holds mongod's log verbosity: the global level (logLevel,
// systemLog.verbosity, -v…-vvvvv) and each component's (-1: the global
// one). It is safe for concurrent use; setParameter changes it while the
// server logs.
type Verbosity struct {
	global atomic.Int32
	comps  []atomic.Int32 // by index in Components; -1 inherits
	// most is the highest level in effect anywhere, for the cheap
	// Enabled check.
	most atomic.Int32
}

// NewVerbosity returns a Verbosity at the global level (0: info only).
func NewVerbosity(level int) *Verbosity {
	v := &Verbosity{comps: make([]atomic.Int32, len(Components))}
	for i := range v.comps {
		v.comps[i].Store(-1)
	}
	v.SetLevel(level)
	return v
}

// Level is the global verbosity.
func (v *Verbosity) Level() int { return int(v.global.Load()) }

// SetLevel sets the global verbosity (negative: 0).
func (v *Verbosity) SetLevel(level int) {
	v.global.Store(int32(max(level, 0)))
	v.recompute()
}

// ComponentLevel is the component's own verbosity (-1: inherits the
// global one); ok is false for a name mongod does not have.
func (v *Verbosity) ComponentLevel(param string) (level int, ok bool) {
	i := componentIndex(param)
	if i < 0 {
		return 0, false
	}
	return int(v.comps[i].Load()), true
}

// SetComponentLevel sets a component's verbosity; a negative level
// makes it inherit the global one again. It reports whether the
// component exists.
func (v *Verbosity) SetComponentLevel(param string, level int) bool {
	i := componentIndex(param)
	if i < 0 {
		return false
	}
	v.comps[i].Store(int32(max(level, -1)))
	v.recompute()
	return true
}

func componentIndex(param string) int {
	for i, c := range Components {
		if c.Param == param {
			return i
		}
	}
	return -1
}

func (v *Verbosity) recompute() {
	m := v.global.Load()
	for i := range v.comps {
		m = max(m, v.comps[i].Load())
	}
	v.most.Store(m)
}

// effective is the verbosity in force for the component shown as name.
func (v *Verbosity) effective(name string) int32 {
	for i, c := range Components {
		if c.Name == name {
			if l := v.comps[i].Load(); l >= 0 {
				return l
			}
			break
		}
	}
	return v.global.Load()
}

// Enabled reports whether an entry at level l, logged under the
// component shown as name (COMMAND, NETWORK…), is written.
func (v *Verbosity) Enabled(name string, l zapcore.Level) bool {
	return l > zapcore.DebugLevel || int32(-l) <= v.effective(name)
}

// Core wraps inner (built to write every level) so that debug entries
// are written only at the verbosity of their component: the component
// is the one the "c" field shows (from the message table, else the
// logger's name).
func (v *Verbosity) Core(inner zapcore.Core) zapcore.Core { return &verbosityCore{inner, v} }

type verbosityCore struct {
	zapcore.Core
	v *Verbosity
}

func (c *verbosityCore) Enabled(l zapcore.Level) bool {
	return (l > zapcore.DebugLevel || int32(-l) <= c.v.most.Load()) && c.Core.Enabled(l)
}

func (c *verbosityCore) With(fields []zapcore.Field) zapcore.Core {
	return &verbosityCore{c.Core.With(fields), c.v}
}

func (c *verbosityCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Level <= zapcore.DebugLevel && !c.v.Enabled(ComponentOf(ent), ent.Level) {
		return ce
	}
	return c.Core.Check(ent, ce)
}

// ComponentOf is the component ("c") an entry is shown under, as the
// JSON encoder picks it (fields set with Component are not seen here).
func ComponentOf(ent zapcore.Entry) string {
	if s, ok := sites[strings.ToLower(ent.Message)]; ok {
		return s.component
	}
	first := ent.LoggerName
	if i := strings.IndexByte(first, '.'); i >= 0 {
		first = first[:i]
	}
	if n, ok := names[first]; ok {
		return n.component
	}
	return names[""].component
}

// LevelEncoder renders levels for the console format: mongod's D1…D5
// for debug levels, zap's capital names otherwise.
func LevelEncoder(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	if l <= zapcore.DebugLevel {
		enc.AppendString("D" + strconv.Itoa(int(-l)))
		return
	}
	zapcore.CapitalLevelEncoder(l, enc)
}
