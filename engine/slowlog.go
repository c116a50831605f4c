package engine

import (
	"encoding/json"
	"math/rand"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mlog"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// maxLoggedCommand bounds the command document in a slow-query line
// (mongod truncates attributes over maxLogSizeKB, 10 KB by default).
const maxLoggedCommand = 10 * 1024

// logSlowOp writes mongod's "Slow query" line (id 51803, src/mongo/db/curop.cpp
// completeAndLogOperation/OpDebug::report) for a command at least slowms
// long, sampled at sampleRate: the server-wide values the profile command
// sets.
func (e *Engine) logSlowOp(r *Request, start time.Time, body bson.D, err error, reslen int) {
	p := e.prof
	if p == nil || r == nil {
		return
	}
	p.mu.Lock()
	slow, rate := p.slowMS, p.sampleRate
	p.mu.Unlock()
	millis := time.Since(start).Milliseconds()
	// mongod (curop.cpp shouldLogSlowOpWithSampling): sampled and
	// opDuration >= slowMS; at command verbosity 1 (--log-level debug)
	// every operation, those under slowms at debug severity.
	isSlow := millis >= int64(slow) && rand.Float64() < rate
	// The COMMAND component's verbosity decides (logComponentVerbosity).
	verbose := e.log.Core().Enabled(zap.DebugLevel) && e.log.Check(zap.DebugLevel, "Slow query") != nil
	if !isSlow && !verbose {
		return
	}
	coll := r.Target()
	if r.Name == "getMore" {
		v, _ := bsonx.Get(r.Cmd, "collection")
		coll, _ = v.(string)
	}
	ns := r.DB + ".$cmd"
	if coll != "" {
		ns = r.DB + "." + coll
	}
	fields := []zap.Field{zap.String("type", "command"), zap.String("ns", ns), zap.Any("command", loggedCommand(r.Cmd))}
	if len(r.queries) > 0 {
		var plans []string
		var keys, docs int64
		for _, cq := range r.queries {
			if cq.plan != nil {
				plans = append(plans, cq.plan.summary())
			}
			keys += cq.stats.keysExamined
			docs += cq.stats.docsExamined
		}
		if len(plans) > 0 {
			fields = append(fields, zap.String("planSummary", strings.Join(plans, ", ")))
		}
		fields = append(fields, zap.Int64("keysExamined", keys), zap.Int64("docsExamined", docs))
	}
	for _, c := range cursorCounters(body) {
		switch c.Key {
		case "cursorExhausted":
			fields = append(fields, zap.Bool("cursorExhausted", true))
		case "cursorid":
			n, _ := bsonx.ToInt64(c.Value)
			fields = append(fields, zap.Int64("cursorid", n))
		}
	}
	fields = append(fields, zap.Int64("numYields", 0))
	if err != nil {
		me := mongoerr.From(err)
		fields = append(fields, zap.Int("ok", 0), zap.String("errMsg", me.Msg), zap.String("errName", me.CodeName()), zap.Int32("errCode", me.Code))
	}
	for _, c := range cursorCounters(body) {
		if c.Key == "nreturned" {
			n, _ := bsonx.ToInt64(c.Value)
			fields = append(fields, zap.Int64("nreturned", n))
		}
	}
	fields = append(fields, zap.Int("reslen", reslen), zap.String("protocol", "op_msg"), zap.Int64("durationMillis", millis))
	if r.Conn != nil {
		fields = append(fields, mlog.ConnCtx(r.Conn.ID))
	}
	if !isSlow {
		e.log.Debug("Slow query", fields...)
		return
	}
	e.log.Info("Slow query", fields...)
}

// loggedCommand renders the command as relaxed extended JSON for the log,
// replaced by {"$truncated": prefix} when over maxLoggedCommand.
func loggedCommand(cmd bson.D) json.RawMessage {
	b, err := bson.MarshalExtJSON(cmd, false, false)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"$unrenderable": err.Error()})
	}
	if len(b) > maxLoggedCommand {
		b, _ = json.Marshal(map[string]string{"$truncated": string(b[:maxLoggedCommand])})
	}
	return json.RawMessage(b)
}

// summary is mongod's planSummary for the plan: "COLLSCAN", "IDHACK",
// "IXSCAN { a: 1 }", "EOF"; an $or lists its branches.
func (p *plan) summary() string {
	switch p.kind {
	case planIxScan:
		if p.ix != nil {
			return "IXSCAN " + objString(p.ix.Key)
		}
	case planOr:
		var parts []string
		for _, s := range p.subs {
			parts = append(parts, s.summary())
		}
		return strings.Join(parts, ", ")
	}
	return p.stageName()
}
