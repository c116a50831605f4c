// Package mlog renders zap log entries in mongod's structured JSON log shape
// (mongod 4.4+, src/mongo/logv2): one object per line,
//
//	{"t":{"$date":"2026-11-25T10:00:00.123+00:00"},"s":"I","c":"NETWORK","id":22943,"ctx":"listener","msg":"Connection accepted","attr":{...}}
//
// The mapping from mayfly's log sites to mongod's fields is central, so that
// log sites stay plain zap calls: the logger's name gives the component
// ("c") and the thread name ("ctx"), a connectionId field (added with With
// by the wire layer) makes the ctx "conn<N>", and a table of messages gives
// mongod's numeric ids. A site may also set them explicitly with the
// ID, Component and Ctx fields, which are not rendered as attributes.
package mlog

import (
	"encoding/json"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Field keys a log site can use to set mongod's id, c and ctx explicitly.
// The JSON encoder takes them out of attr; the console encoder shows them.
const (
	IDKey        = "logId"
	ComponentKey = "logComponent"
	CtxKey       = "logCtx"
)

// ID sets the entry's mongod log id.
func ID(id int64) zap.Field { return zap.Int64(IDKey, id) }

// Component sets the entry's mongod component (NETWORK, COMMAND, …).
func Component(c string) zap.Field { return zap.String(ComponentKey, c) }

// Ctx sets the entry's ctx (a connection name "conn12" or a thread name).
func Ctx(ctx string) zap.Field { return zap.String(CtxKey, ctx) }

// ConnCtx is the ctx of connection id.
func ConnCtx(id int64) zap.Field { return Ctx("conn" + strconv.FormatInt(id, 10)) }

// site is what a known message maps to in mongod.
type site struct {
	id        int64
	component string
	msg       string // mongod's wording
	ctx       string // fixed thread name, when mongod logs it from one
}

// sites maps mayfly's messages (lower-cased) to mongod's log ids
// (src/mongo/transport/service_entry_point_impl.cpp 22943/22944,
// src/mongo/db/mongod_main.cpp / transport_layer_asio.cpp 23016,
// src/mongo/db/curop.cpp 51803).
var sites = map[string]site{
	"connection accepted":     {id: 22943, component: "NETWORK", msg: "Connection accepted", ctx: "listener"},
	"connection ended":        {id: 22944, component: "NETWORK", msg: "Connection ended"},
	"waiting for connections": {id: 23016, component: "NETWORK", msg: "Waiting for connections", ctx: "listener"},
	"slow query":              {id: 51803, component: "COMMAND", msg: "Slow query"},
	"access control is not enabled for the database. read and write access to data and configuration is unrestricted": {id: 22120, component: "CONTROL", ctx: "initandlisten"},
	"connection refused because there are too many open connections":                                                  {id: 22942, component: "NETWORK", ctx: "listener"},
	"profiler settings changed":      {id: 48742, component: "COMMAND"},
	"shutdown complete":              {id: 23138, component: "CONTROL", msg: "Shutting down"},
	"signal received; shutting down": {id: 23377, component: "CONTROL", msg: "Received signal", ctx: "SignalHandler"},
	"log rotation initiated":         {id: 23166, component: "CONTROL", msg: "Log rotation initiated"},
}

// names maps a logger name's first segment to mongod's component and the
// thread name mongod logs such lines from.
var names = map[string]struct{ component, ctx string }{
	"":        {"CONTROL", "initandlisten"},
	"wire":    {"NETWORK", "listener"},
	"tls":     {"NETWORK", "listener"},
	"metrics": {"FTDC", "ftdc"},
	"pebble":  {"STORAGE", "Checkpointer"},
	"ttl":     {"INDEX", "TTLMonitor"},
	"command": {"COMMAND", "initandlisten"},
	"query":   {"QUERY", "initandlisten"},
	"repl":    {"REPL", "initandlisten"},
}

// Severity renders a zap level as mongod's severity letter.
func Severity(l zapcore.Level) string {
	switch {
	case l <= zapcore.DebugLevel:
		return "D" + strconv.Itoa(min(int(-l), MaxVerbosity))
	case l == zapcore.InfoLevel:
		return "I"
	case l == zapcore.WarnLevel:
		return "W"
	case l == zapcore.ErrorLevel:
		return "E"
	}
	return "F"
}

var pool = buffer.NewPool()

// encoder renders entries in mongod's shape; attrs holds the With fields.
type encoder struct {
	zapcore.Encoder // the attr encoder: a JSON encoder without entry keys
	ctx, component  string
	id              int64
}

// NewEncoder returns the mongod-shaped JSON encoder.
func NewEncoder() zapcore.Encoder {
	return &encoder{Encoder: zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		EncodeTime:     zapcore.ISO8601TimeEncoder,
		EncodeDuration: zapcore.MillisDurationEncoder,
		SkipLineEnding: true,
	})}
}

func (e *encoder) Clone() zapcore.Encoder {
	c := *e
	c.Encoder = e.Encoder.Clone()
	return &c
}

// special takes the fields that set id, c and ctx; it reports whether the
// field was one (connectionId sets ctx and stays an attribute).
func (e *encoder) special(key string, s string, i int64, isInt bool) bool {
	switch key {
	case IDKey:
		if isInt {
			e.id = i
			return true
		}
	case ComponentKey:
		e.component = s
		return !isInt
	case CtxKey:
		e.ctx = s
		return !isInt
	case "connectionId":
		if isInt {
			e.ctx = "conn" + strconv.FormatInt(i, 10)
		}
	}
	return false
}

func (e *encoder) AddString(key, v string) {
	if !e.special(key, v, 0, false) {
		e.Encoder.AddString(key, v)
	}
}

func (e *encoder) AddInt64(key string, v int64) {
	if !e.special(key, "", v, true) {
		e.Encoder.AddInt64(key, v)
	}
}

func (e *encoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	st := *e // per-entry copy of id, c and ctx
	kept := fields[:0:0]
	for _, f := range fields {
		switch {
		case f.Type == zapcore.StringType && st.special(f.Key, f.String, 0, false):
		case (f.Type == zapcore.Int64Type || f.Type == zapcore.Int32Type) && st.special(f.Key, "", f.Integer, true):
		default:
			kept = append(kept, f)
		}
	}
	first := ent.LoggerName
	if i := strings.IndexByte(first, '.'); i >= 0 {
		first = first[:i]
	}
	byName, ok := names[first]
	if !ok {
		byName = names[""]
	}
	component, ctx, id, msg, fixedCtx := byName.component, byName.ctx, int64(0), ent.Message, false
	if s, ok := sites[strings.ToLower(ent.Message)]; ok {
		id, component = s.id, s.component
		if s.msg != "" {
			msg = s.msg
		}
		if s.ctx != "" {
			ctx, fixedCtx = s.ctx, true
		}
	}
	if st.component != "" {
		component = st.component
	}
	if st.ctx != "" && !fixedCtx {
		ctx = st.ctx
	}
	if st.id != 0 {
		id = st.id
	}
	attrs, err := st.Encoder.EncodeEntry(zapcore.Entry{}, kept)
	if err != nil {
		return nil, err
	}
	defer attrs.Free()
	b := pool.Get()
	b.AppendString(`{"t":{"$date":"`)
	b.AppendTime(ent.Time, DateFormat)
	b.AppendString(`"},"s":"`)
	b.AppendString(Severity(ent.Level))
	b.AppendString(`","c":`)
	appendJSONString(b, component)
	b.AppendString(`,"id":`)
	b.AppendInt(id)
	b.AppendString(`,"ctx":`)
	appendJSONString(b, ctx)
	b.AppendString(`,"msg":`)
	appendJSONString(b, msg)
	if a := attrs.Bytes(); len(a) > 2 {
		b.AppendString(`,"attr":`)
		b.Write(a) //nolint:errcheck // buffer writes do not fail
	}
	if ent.Stack != "" {
		b.AppendString(`,"stack":`)
		appendJSONString(b, ent.Stack)
	}
	b.AppendString("}\n")
	return b, nil
}

func appendJSONString(b *buffer.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q) //nolint:errcheck // buffer writes do not fail
}

// DateFormat is the layout of mongod's "$date" timestamps (iso8601-local).
const DateFormat = "2006-01-02T15:04:05.000-07:00"
