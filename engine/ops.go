package engine

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/wire"
)

// Operations in progress, client connections and the logical session
// cache, as a standalone mongod 7.0 reports them: $currentOp and the
// currentOp command list the operations (and, on request, idle
// connections), killOp interrupts one (it fails with 11601 Interrupted at
// its next interruption check: scans check every 1024 documents, pipelines
// at every document), and $listLocalSessions lists the sessions this
// server has seen (an lsid on any command, startSession, refreshSessions).

// opRegistry is the engine's table of them; its zero value is ready.
type opRegistry struct {
	mu       sync.Mutex
	lastOpID uint32
	ops      map[uint32]*operation
	clients  map[int64]*clientState
}

// clientState is one client connection.
type clientState struct {
	info     wire.ConnInfo
	metadata bson.D // hello's "client" document
	op       *operation
}

// operation is one command being run.
type operation struct {
	id     uint32
	conn   int64
	db     string
	cmd    bson.D
	start  time.Time
	lsid   bson.D
	killed atomic.Bool
}

// noAuthDigest is the uid of every session while there is no
// authentication: the SHA-256 of the empty user name, as mongod computes it.
var noAuthDigest = func() bson.Binary {
	h := sha256.Sum256(nil)
	return bson.Binary{Subtype: 0, Data: h[:]}
}()

// opContext is a request's context that killOp can cancel. It adds no
// goroutine and registers nothing with its parent: Err reports the kill.
type opContext struct {
	context.Context
	op *operation
}

func (c *opContext) Err() error {
	if c.op.killed.Load() {
		return context.Canceled
	}
	return c.Context.Err()
}

// begin registers a command as running on its connection and returns it
// with the context it must run under.
func (o *opRegistry) begin(ctx context.Context, conn *wire.ConnInfo, cmd bson.D) (*operation, context.Context) {
	db, _ := bsonx.Get(cmd, "$db")
	dbs, _ := db.(string)
	op := &operation{db: dbs, cmd: cmd, start: time.Now()}
	if v, ok := bsonx.Get(cmd, "lsid"); ok {
		if ld, ok := v.(bson.D); ok {
			if id, ok := bsonx.Get(ld, "id"); ok {
				if b, ok := id.(bson.Binary); ok && b.Subtype == 4 && len(b.Data) == 16 {
					op.lsid = bson.D{{Key: "id", Value: b}, {Key: "uid", Value: noAuthDigest}}
				}
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ops == nil {
		o.ops, o.clients = map[uint32]*operation{}, map[int64]*clientState{}
	}
	for {
		o.lastOpID++
		if _, used := o.ops[o.lastOpID]; !used && o.lastOpID != 0 && o.lastOpID <= 1<<31-1 {
			break
		}
		if o.lastOpID > 1<<31-1 {
			o.lastOpID = 0
		}
	}
	op.id = o.lastOpID
	o.ops[op.id] = op
	if conn != nil {
		op.conn = conn.ID
		c := o.clients[conn.ID]
		if c == nil {
			c = &clientState{info: *conn}
			o.clients[conn.ID] = c
		}
		c.op = op
		if len(cmd) > 0 {
			switch cmd[0].Key {
			case "hello", "isMaster", "ismaster":
				if md, ok := bsonx.Get(cmd, "client"); ok {
					if mdd, ok := md.(bson.D); ok && c.metadata == nil {
						c.metadata = mdd
					}
				}
			}
		}
	}
	return op, &opContext{Context: ctx, op: op}
}

// end unregisters a finished command.
func (o *opRegistry) end(op *operation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ops, op.id)
	if c := o.clients[op.conn]; c != nil && c.op == op {
		c.op = nil
	}
}

// ConnClosed implements wire.ConnObserver: the connection leaves the table.
func (e *Engine) ConnClosed(c *wire.ConnInfo) {
	e.forgetConnAuth(c)
	o := &e.running
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.clients, c.ID)
}

// kill marks an operation killed; it reports whether it was running.
func (o *opRegistry) kill(id uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	op := o.ops[id]
	if op == nil {
		return false
	}
	op.killed.Store(true)
	return true
}

// localSessions returns the cache's records ({_id: {id, uid}, lastUse})
// whose user digest is among uids (nil: all users).
func (e *Engine) localSessions(uids []bson.Binary) []bson.D {
	match := uids == nil
	for _, u := range uids {
		if string(u.Data) == string(noAuthDigest.Data) {
			match = true
		}
	}
	if !match {
		return nil
	}
	recs := e.sessions.list()
	out := make([]bson.D, 0, len(recs))
	for _, s := range recs {
		out = append(out, bson.D{{Key: "_id", Value: bson.D{{Key: "id", Value: s.id}, {Key: "uid", Value: noAuthDigest}}},
			{Key: "lastUse", Value: bson.NewDateTimeFromTime(s.lastUse)}})
	}
	return out
}

// sessionIDs reads the {id: UUID} documents of endSessions/refreshSessions.
func sessionIDs(r *Request) ([]bson.Binary, error) {
	v := r.Cmd[0].Value
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", r.Name, r.Name, bsonx.TypeName(v))
	}
	var out []bson.Binary
	for _, x := range arr {
		d, ok := x.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'", r.Name, r.Name, bsonx.TypeName(x))
		}
		id, _ := bsonx.Get(d, "id")
		b, ok := id.(bson.Binary)
		if !ok || b.Subtype != 4 || len(b.Data) != 16 {
			return nil, mongoerr.New(40414, "BSON field 'LogicalSessionFromClient.id' is missing but a required field")
		}
		out = append(out, b)
	}
	return out, nil
}

// ---- currentOp

// currentOpOptions are $currentOp's settings.
type currentOpOptions struct {
	idleConnections bool
	idleSessions    bool
	allUsers        bool
	localOps        bool
	truncateOps     bool
	idleCursors     bool
	backtrace       bool
}

// logicalOp is the "op" of currentOp for a command (mongod's
// Command::getLogicalOp).
func logicalOp(name string) string {
	switch strings.ToLower(name) {
	case "find":
		return "query"
	case "getmore":
		return "getmore"
	case "insert":
		return "insert"
	case "update":
		return "update"
	case "delete":
		return "remove"
	}
	return "command"
}

// opNamespace is the namespace currentOp shows for a command: the
// collection of a CRUD or aggregate command, <db>.$cmd.aggregate for
// {aggregate: 1}, <db>.$cmd otherwise.
func opNamespace(db string, cmd bson.D) string {
	if len(cmd) == 0 {
		return db + ".$cmd"
	}
	switch strings.ToLower(cmd[0].Key) {
	case "find", "insert", "update", "delete", "aggregate", "count", "distinct", "findandmodify",
		"createindexes", "listindexes", "dropindexes", "create", "drop", "collmod", "collstats", "validate":
		if s, ok := cmd[0].Value.(string); ok {
			return db + "." + s
		}
		if strings.EqualFold(cmd[0].Key, "aggregate") {
			return db + ".$cmd.aggregate"
		}
	case "getmore":
		if c, ok := bsonx.Get(cmd, "collection"); ok {
			if s, ok := c.(string); ok {
				return db + "." + s
			}
		}
	}
	return db + ".$cmd"
}

// currentOps returns the $currentOp documents.
func (e *Engine) currentOps(opts currentOpOptions) []bson.D {
	o := &e.running
	now := time.Now()
	host := hostName(e)
	nowStr := e.clock.Now().Format("2006-01-02T15:04:05.000-07:00")
	o.mu.Lock()
	ids := make([]int64, 0, len(o.clients))
	for id := range o.clients {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []bson.D
	for _, id := range ids {
		c := o.clients[id]
		if c.op == nil && !opts.idleConnections {
			continue
		}
		d := bson.D{{Key: "type", Value: "op"}, {Key: "host", Value: host},
			{Key: "desc", Value: fmt.Sprintf("conn%d", c.info.ID)}, {Key: "connectionId", Value: srvIntValue(c.info.ID)},
			{Key: "client", Value: c.info.RemoteAddr}}
		if c.metadata != nil {
			if app, ok := bsonx.Get(c.metadata, "application"); ok {
				if ad, ok := app.(bson.D); ok {
					if name, ok := bsonx.Get(ad, "name"); ok {
						if s, ok := name.(string); ok && s != "" {
							d = append(d, bson.E{Key: "appName", Value: s})
						}
					}
				}
			}
			d = append(d, bson.E{Key: "clientMetadata", Value: c.metadata})
		}
		d = append(d, bson.E{Key: "active", Value: c.op != nil}, bson.E{Key: "currentOpTime", Value: nowStr},
			bson.E{Key: "threaded", Value: true})
		if op := c.op; op != nil {
			d = append(d, bson.E{Key: "opid", Value: int32(op.id)})
			if op.killed.Load() {
				d = append(d, bson.E{Key: "killPending", Value: true})
			}
			if op.lsid != nil {
				d = append(d, bson.E{Key: "lsid", Value: op.lsid})
			}
			running := now.Sub(op.start)
			command := op.cmd
			if opts.truncateOps {
				command = truncateOpCommand(command)
			}
			d = append(d, bson.E{Key: "secs_running", Value: int64(running / time.Second)},
				bson.E{Key: "microsecs_running", Value: int64(running / time.Microsecond)},
				bson.E{Key: "op", Value: logicalOp(command[0].Key)},
				bson.E{Key: "ns", Value: opNamespace(op.db, op.cmd)},
				bson.E{Key: "redacted", Value: false},
				bson.E{Key: "command", Value: command},
				bson.E{Key: "numYields", Value: int32(0)},
				bson.E{Key: "locks", Value: bson.D{}},
				bson.E{Key: "waitingForLock", Value: false},
				bson.E{Key: "lockStats", Value: bson.D{}},
				bson.E{Key: "waitingForFlowControl", Value: false},
				bson.E{Key: "flowControlStats", Value: bson.D{}})
		}
		out = append(out, d)
	}
	o.mu.Unlock()
	if opts.idleCursors {
		out = append(out, e.idleCursorDocs(host)...)
	}
	return out
}

// truncateOpCommand is mongod's truncation of a command over 1000 bytes
// in currentOp's reply (CurOp's appendAsObjOrString): {$truncated: <its
// text, cut to 1000 characters ending in "...">, comment?}.
func truncateOpCommand(cmd bson.D) bson.D {
	b, err := bson.Marshal(cmd)
	if err != nil || len(b) <= 1000 {
		return cmd
	}
	js, _ := bson.MarshalExtJSON(cmd, false, false)
	s := string(js)
	if len(s) > 1000 {
		s = s[:997] + "..."
	}
	out := bson.D{{Key: "$truncated", Value: s}}
	if c, ok := bsonx.Get(cmd, "comment"); ok {
		out = append(out, bson.E{Key: "comment", Value: c})
	}
	return out
}

// cmdCurrentOp is mongod's currentOp command: an aggregation
// [{$currentOp: {idleConnections: $all, allUsers: !$ownOps, truncateOps:
// true}}, {$match: <the other fields>}, {$group: {_id: 0, inprog: {$push:
// $$ROOT}}}] whose result is {inprog: [...]}.
func cmdCurrentOp(e *Engine, r *Request) (bson.D, error) {
	filter := bson.D{}
	all, ownOps := false, false
	for i, f := range r.Cmd {
		switch {
		case i == 0:
		case f.Key == "$all":
			all = truthy(f.Value)
		case f.Key == "$ownOps":
			ownOps = truthy(f.Value)
		case f.Key == "$truncateOps" || IsEnvelopeField(f.Key):
		default:
			filter = append(filter, f)
		}
	}
	pipeline := bson.A{
		bson.D{{Key: "$currentOp", Value: bson.D{{Key: "idleConnections", Value: all}, {Key: "allUsers", Value: !ownOps}, {Key: "truncateOps", Value: true}}}},
		bson.D{{Key: "$match", Value: filter}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: int32(0)}, {Key: "inprog", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}},
	}
	agg := &Request{Ctx: r.Ctx, Conn: r.Conn, DB: "admin", Name: "aggregate", Deadline: r.Deadline,
		Cmd: bson.D{{Key: "aggregate", Value: int32(1)}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}, {Key: "$db", Value: "admin"}}}
	reply, err := cmdAggregate(e, agg)
	if err != nil {
		return nil, err
	}
	inprog := bson.A{}
	if c, ok := bsonx.Get(reply, "cursor"); ok {
		if fb, ok := bsonx.Get(c.(bson.D), "firstBatch"); ok {
			if arr, ok := fb.(bson.A); ok && len(arr) > 0 {
				if first, ok := arr[0].(bson.Raw); ok {
					if v, err := first.LookupErr("inprog"); err == nil {
						var a bson.A
						if err := v.Unmarshal(&a); err == nil {
							inprog = a
						}
					}
				}
			}
		}
	}
	return bson.D{{Key: "inprog", Value: inprog}}, nil
}

// cmdKillOp marks an operation killed; it fails with Interrupted at its
// next check. As in mongod, the reply does not say whether it existed.
func cmdKillOp(e *Engine, r *Request) (bson.D, error) {
	v, ok := r.Arg("op")
	if !ok {
		return nil, mongoerr.New(mongoerr.NoSuchKey, "Missing expected field \"op\"")
	}
	switch v.(type) {
	case int32, int64, float64, bson.Decimal128:
	default:
		return nil, mongoerr.New(mongoerr.TypeMismatch, "Expected field \"op\" to have numeric type, but found %s", bsonx.TypeName(v))
	}
	id, isInt := bsonx.ToInt64(v)
	if !isInt {
		return nil, mongoerr.New(mongoerr.BadValue, "Expected field \"op\" to have a value exactly representable as a 64-bit integer, but found op: %v", v)
	}
	// opids are unsigned 32-bit; BSON shows those above 2^31-1 negative.
	if id >= -1<<31 && id < 0 {
		id += 1 << 32
	}
	if id < 0 || id > 1<<32-1 {
		return nil, mongoerr.New(26823, "invalid op : %d. Op ID cannot be represented with 32 bits", id)
	}
	if e.running.kill(uint32(id)) {
		e.log.Info("going to kill op")
	}
	return bson.D{{Key: "info", Value: "attempting to kill op"}}, nil
}

func init() {
	Register(
		&Command{Name: "currentOp", Help: "operations in progress (filter with any currentOp fields)", AdminOnly: true, Run: cmdCurrentOp},
		&Command{Name: "killOp", Help: "interrupt an operation by its opid", AdminOnly: true, Run: cmdKillOp},
	)
}

// CurrentOp implements agg.OpsEnv. Without authentication every operation
// is the caller's own, so allUsers changes nothing; sessions stash no
// transactions, so idleSessions adds nothing; there are no idle-cursor
// entries (idleCursors) and no backtraces.
func (a *aggEnv) CurrentOp(ctx context.Context, opts agg.CurrentOpOptions) ([]bson.D, error) {
	return a.e.currentOps(currentOpOptions{idleConnections: opts.IdleConnections, idleSessions: opts.IdleSessions,
		allUsers: opts.AllUsers, localOps: opts.LocalOps, truncateOps: opts.TruncateOps, idleCursors: opts.IdleCursors,
		backtrace: opts.Backtrace}), nil
}

// LocalSessions implements agg.OpsEnv.
func (a *aggEnv) LocalSessions(ctx context.Context, uids []bson.Binary) ([]bson.D, error) {
	return a.e.localSessions(uids), nil
}

// ---- config.system.sessions

// sessionsTTLIndex is the index mongod's session refresh keeps on
// config.system.sessions (SessionsCollection::kSessionsTTLIndex).
var sessionsTTLIndex = bson.D{{Key: "key", Value: bson.D{{Key: "lastUse", Value: int32(1)}}}, {Key: "name", Value: "lsidTTLIndex"},
	{Key: "expireAfterSeconds", Value: int32(sessionTimeout / time.Second)}}

// refreshSessionsCollection is the session cache's refresh as mongod runs
// it (LogicalSessionCacheImpl::_refresh): config.system.sessions is created
// with its TTL index, the cache's live sessions are upserted with lastUse
// set to now, and ended ones are removed from both. mongod runs it every
// logicalSessionRefreshMillis; mayfly runs it when $listSessions reads the
// collection, so that it lists the sessions as of now.
func (e *Engine) refreshSessionsCollection(ctx context.Context) error {
	live, ended := e.sessions.sweep()
	run := func(f CommandFunc, cmd bson.D) error {
		_, err := f(e, &Request{Ctx: ctx, DB: "config", Name: cmd[0].Key, Cmd: append(cmd, bson.E{Key: "$db", Value: "config"})})
		return err
	}
	if err := run(cmdCreateIndexes, bson.D{{Key: "createIndexes", Value: "system.sessions"}, {Key: "indexes", Value: bson.A{sessionsTTLIndex}}}); err != nil {
		return err
	}
	lsid := func(id bson.Binary) bson.D { return bson.D{{Key: "id", Value: id}, {Key: "uid", Value: noAuthDigest}} }
	if len(live) > 0 {
		ups := bson.A{}
		for _, id := range live {
			ups = append(ups, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: lsid(id)}}},
				{Key: "u", Value: bson.D{{Key: "$currentDate", Value: bson.D{{Key: "lastUse", Value: true}}}}}, {Key: "upsert", Value: true}})
		}
		if err := run(cmdUpdate, bson.D{{Key: "update", Value: "system.sessions"}, {Key: "updates", Value: ups}, {Key: "ordered", Value: false}}); err != nil {
			return err
		}
	}
	if len(ended) > 0 {
		dels := bson.A{}
		for _, id := range ended {
			dels = append(dels, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: lsid(id)}}}, {Key: "limit", Value: int32(1)}})
		}
		if err := run(cmdDelete, bson.D{{Key: "delete", Value: "system.sessions"}, {Key: "deletes", Value: dels}, {Key: "ordered", Value: false}}); err != nil {
			return err
		}
	}
	return nil
}

// beforeAggregate runs what an aggregation needs first: $listSessions
// reads config.system.sessions as of a refresh.
func (e *Engine) beforeAggregate(r *Request, coll string, pipeline bson.A) error {
	if r.DB != "config" || coll != "system.sessions" || len(pipeline) == 0 {
		return nil
	}
	if d, ok := pipeline[0].(bson.D); ok && len(d) == 1 && d[0].Key == "$listSessions" {
		return e.refreshSessionsCollection(r.Ctx)
	}
	return nil
}

// ---- idle cursors

// cursorInfo is what $currentOp's idleCursors shows of an open cursor.
type cursorInfo struct {
	ns          string
	originating bson.D
	lsid        bson.D
	created     time.Time
	lastAccess  time.Time
	nDocs       int64
	nBatches    int64
	noTimeout   bool
}

// noteCursor follows the cursors a command's reply opens or reads from
// (the cursor table drops its record with the cursor).
func (e *Engine) noteCursor(op *operation, reply bson.D, now time.Time) {
	cv, ok := bsonx.Get(reply, "cursor")
	if !ok {
		return
	}
	cd, ok := cv.(bson.D)
	if !ok {
		return
	}
	idv, _ := bsonx.Get(cd, "id")
	id, _ := idv.(int64)
	if id == 0 {
		return
	}
	t := e.cursors
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cursors[id]
	if c == nil {
		return
	}
	if ci := c.info; ci != nil {
		nb, _ := bsonx.Get(cd, "nextBatch")
		arr, _ := nb.(bson.A)
		ci.nDocs += int64(len(arr))
		ci.nBatches++
		ci.lastAccess = now
		return
	}
	nsv, _ := bsonx.Get(cd, "ns")
	ns, _ := nsv.(string)
	fb, _ := bsonx.Get(cd, "firstBatch")
	arr, _ := fb.(bson.A)
	nt, _ := bsonx.Get(op.cmd, "noCursorTimeout")
	c.info = &cursorInfo{ns: ns, originating: op.cmd, lsid: op.lsid, created: now, lastAccess: now,
		nDocs: int64(len(arr)), nBatches: 1, noTimeout: truthy(nt)}
}

// idleCursorDocs are $currentOp's {type: "idleCursor"} entries: open
// cursors no operation is using.
func (e *Engine) idleCursorDocs(host string) []bson.D {
	t := e.cursors
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]int64, 0, len(t.cursors))
	for id, c := range t.cursors {
		if !c.busy && c.info != nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []bson.D
	for _, id := range ids {
		ci := t.cursors[id].info
		d := bson.D{{Key: "type", Value: "idleCursor"}, {Key: "host", Value: host}, {Key: "ns", Value: ci.ns}}
		if ci.lsid != nil {
			d = append(d, bson.E{Key: "lsid", Value: ci.lsid})
		}
		d = append(d, bson.E{Key: "cursor", Value: bson.D{
			{Key: "cursorId", Value: id},
			{Key: "createdDate", Value: bson.NewDateTimeFromTime(ci.created)},
			{Key: "lastAccessDate", Value: bson.NewDateTimeFromTime(ci.lastAccess)},
			{Key: "nDocsReturned", Value: ci.nDocs},
			{Key: "nBatchesReturned", Value: ci.nBatches},
			{Key: "noCursorTimeout", Value: ci.noTimeout},
			{Key: "tailable", Value: false},
			{Key: "awaitData", Value: false},
			{Key: "originatingCommand", Value: ci.originating},
		}})
		out = append(out, d)
	}
	return out
}
