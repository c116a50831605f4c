package engine

import (
	"context"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/wire"
)

// Request is a command as a handler sees it: decoded, with its database
// and the connection it came from.
type Request struct {
	Ctx  context.Context
	Conn *wire.ConnInfo
	// DB is the command's database ($db).
	DB string
	// Name is the command name as the client sent it; Cmd the whole command.
	Name string
	Cmd  bson.D
	// Raw is the command as received.
	Raw bson.Raw
	// MoreToCome: the client wants no reply (w:0).
	MoreToCome bool
	// Deadline is set from maxTimeMS (zero when none).
	Deadline time.Time
	// authDBFilter, set by authorization, keeps listDatabases to the
	// databases the user has privileges on.
	authDBFilter func(db string) bool
	// txn is the storage transaction of the multi-document transaction the
	// command runs in (nil outside one): reads see its snapshot and own
	// writes, writes are staged into it and committed by commitTransaction.
	txn storage.Txn
	// txnOnCommit collects what the transaction's statements account once
	// it commits (document counters).
	txnOnCommit *[]func()
	// sessTxn is the session's transaction state while a transaction
	// command holds it.
	sessTxn *sessionTxn
	// queries are the queries the command compiled, for the slow-query
	// log's planSummary and examined counts (slowlog.go).
	queries []*compiledQuery
	// opTime is the write's time (OpClock.Next) once a write command
	// succeeded in replica-set mode: its reply's operationTime.
	opTime bson.Timestamp
	// retry is the retryable-write statement context (retry.go), nil for
	// writes without a txnNumber.
	retry *retryWrite
}

// Arg returns the value of a command field.
func (r *Request) Arg(key string) (any, bool) { return bsonx.Get(r.Cmd, key) }

// Target returns the command's first value (the collection name for most
// commands) as a string, or "".
func (r *Request) Target() string {
	if len(r.Cmd) == 0 {
		return ""
	}
	s, _ := r.Cmd[0].Value.(string)
	return s
}

// CheckDeadline returns MaxTimeMSExpired once maxTimeMS has passed.
func (r *Request) CheckDeadline() error {
	if !r.Deadline.IsZero() && time.Now().After(r.Deadline) {
		return mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit")
	}
	if r.Ctx != nil && r.Ctx.Err() != nil {
		return mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
	}
	return nil
}

// CommandFunc runs a command and returns the reply body (without ok, which
// the dispatcher appends) or an error.
type CommandFunc func(e *Engine, r *Request) (bson.D, error)

// Command is one entry of the command table.
type Command struct {
	Name      string   // canonical name, as listCommands shows it
	Aliases   []string // other spellings (isMaster, ismaster, buildinfo, …)
	Help      string
	AdminOnly bool // must run on the admin database
	// Write marks commands listCommands reports as writes (requiresAuth
	// is true except for the commands AuthFree lists).
	Write bool
	Run   CommandFunc
}

var commands = map[string]*Command{}
var canonical []*Command

// Register adds commands to the table. It is called from init functions of
// the files that implement them.
func Register(cmds ...*Command) {
	for _, c := range cmds {
		if _, dup := commands[c.Name]; dup {
			panic("engine: command registered twice: " + c.Name)
		}
		commands[c.Name] = c
		for _, a := range c.Aliases {
			commands[a] = c
		}
		canonical = append(canonical, c)
	}
	sort.Slice(canonical, func(i, j int) bool { return canonical[i].Name < canonical[j].Name })
}

// Commands returns the command table in name order.
func Commands() []*Command { return canonical }

// LookupCommand finds a command by any of its spellings.
func LookupCommand(name string) *Command { return commands[name] }

// envelope lists the generic fields every driver may send with a command;
// handlers ignore them unless they give them meaning.
var envelope = map[string]bool{
	"$db": true, "lsid": true, "$readPreference": true, "apiVersion": true, "apiStrict": true,
	"apiDeprecationErrors": true, "readConcern": true, "writeConcern": true, "maxTimeMS": true,
	"comment": true, "$clusterTime": true, "txnNumber": true, "autocommit": true, "startTransaction": true, "$audit": true, "$client": true,
	"mayBypassWriteBlocking": true,
}

// IsEnvelopeField reports whether a command field is one of the generic
// fields drivers attach to every command.
func IsEnvelopeField(name string) bool { return envelope[name] }

var opCounter = map[string]*atomic.Int64{}

// Handle implements wire.Handler: decode, dispatch, recover, encode.
func (e *Engine) Handle(ctx context.Context, wr *wire.Request) (reply bson.Raw) {
	start := time.Now()
	var name string
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("panic in command", zap.String("command", name), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			reply = mustMarshal(mongoerr.New(mongoerr.InternalError, "internal error in %s: %v", name, p).Reply())
		}
	}()
	cmd, err := bsonx.Decode(wr.Command)
	if err != nil {
		return mustMarshal(mongoerr.New(mongoerr.InvalidBSON, "invalid command document: %v", err).Reply())
	}
	if len(cmd) == 0 {
		return mustMarshal(mongoerr.New(mongoerr.FailedToParse, "empty command document").Reply())
	}
	name = cmd[0].Key
	switch lockKindOf(name, cmd) { // serverStatus.globalLock.activeClients
	case lockReader:
		e.activeReaders.Add(1)
		defer e.activeReaders.Add(-1)
	case lockWriter:
		e.activeWriters.Add(1)
		defer e.activeWriters.Add(-1)
	}
	op, ctx := e.running.begin(ctx, wr.Conn, cmd) // for currentOp and killOp (ops.go)
	defer e.running.end(op)
	if id, ok, _ := lsidOf(cmd); ok {
		e.sessions.Touch(id) // a command naming a session refreshes it (sessions.go)
	}
	r := &Request{Ctx: ctx, Conn: wr.Conn, Name: name, Cmd: cmd, Raw: wr.Command, MoreToCome: wr.MoreToCome}
	var body bson.D
	defer func() { e.logSlowOp(r, start, body, err, len(reply)) }() // slowlog.go
	body, err = e.dispatch(r)
	e.profileOp(r, start, body, err)
	took := time.Since(start)
	if m := e.cmdMetrics; m != nil {
		m.observe(name, took, body, err)
	} else if err == nil && e.docs != nil {
		e.docs.count(docKindOf(name), body)
	}
	if err != nil {
		e.status.userAsserts.Add(1)
	}
	e.recordTop(r, took)
	if err != nil {
		me := mongoerr.From(err)
		if me.Code == mongoerr.InternalError {
			e.log.Error("command failed", zap.String("command", name), zap.Error(err))
		} else {
			e.log.Debug("command error", zap.String("command", name), zap.Int32("code", me.Code), zap.String("errmsg", me.Msg))
		}
		if e.repl != nil {
			return mustMarshal(e.appendClusterTime(me.Reply(), r.opTime))
		}
		return mustMarshal(me.Reply())
	}
	e.noteCursor(op, body, e.clock.Now()) // for $currentOp's idleCursors
	body = append(body, bson.E{Key: "ok", Value: 1.0})
	if e.repl != nil {
		body = e.appendClusterTime(body, r.opTime)
	}
	return mustMarshal(body)
}

func (e *Engine) dispatch(r *Request) (bson.D, error) {
	c := commands[r.Name]
	if c == nil {
		return nil, mongoerr.New(mongoerr.CommandNotFound, "no such command: '%s'", r.Name)
	}
	db, _ := bsonx.Get(r.Cmd, "$db")
	dbs, ok := db.(string)
	if !ok || dbs == "" {
		return nil, mongoerr.New(mongoerr.FailedToParse, "OP_MSG requests require a $db argument")
	}
	r.DB = dbs
	if err := checkDatabaseName(dbs); err != nil {
		return nil, err
	}
	if err := e.checkAuth(c, r); err != nil {
		return nil, err
	}
	if err := checkAPIParameters(r, c); err != nil {
		return nil, err
	}
	if c.AdminOnly && dbs != "admin" {
		return nil, mongoerr.New(mongoerr.Unauthorized, "%s may only be run against the admin database.", c.Name)
	}
	if v, ok := bsonx.Get(r.Cmd, "maxTimeMS"); ok {
		ms, isInt := bsonx.ToInt64(v)
		if !isInt || ms < 0 {
			return nil, mongoerr.New(mongoerr.BadValue, "%v is not a valid value for maxTimeMS: must be a non-negative integer", v)
		}
		if ms > 0 {
			r.Deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
		}
	}
	finishTxn, err := e.enterTxn(r, c) // transactions.go
	if err != nil {
		return nil, err
	}
	var body bson.D
	if finishTxn != nil {
		// Release the session whatever happens, a panic included.
		defer func() {
			if p := recover(); p != nil {
				finishTxn(nil, mongoerr.New(mongoerr.InternalError, "panic"))
				panic(p)
			}
			finishTxn(body, err)
		}()
	}
	if r.sessTxn == nil || c.Name == "commitTransaction" || c.Name == "abortTransaction" {
		if _, err = parseWriteConcernIn(r.Cmd, e.repl != nil); err != nil {
			return nil, err
		}
	}
	var sc *sessionCommand
	if r.sessTxn == nil {
		if sc, err = e.beginSessionCommand(c, r); err != nil { // lsid, txnNumber, $clusterTime (retry.go)
			return nil, err
		}
	} else if err = e.gossipClusterTime(r); err != nil {
		return nil, err
	}
	stripSessionFields(r)
	if r.sessTxn == nil {
		if err = e.checkReadConcern(r, c.Name); err != nil {
			return nil, err
		}
	}
	e.countOp(c.Name)
	body, err = e.runCommand(c, r, sc)
	if err == nil {
		if wce := e.replWriteConcernError(r); wce != nil {
			body = append(body, bson.E{Key: "writeConcernError", Value: wce})
		}
	}
	if r.DB == usersDB && (r.Target() == usersColl || r.Target() == rolesColl || c.Name == "dropDatabase") && c.Name != "find" {
		// A direct change to admin.system.users (a restore, a root user's
		// update) reaches the user cache too.
		if lerr := e.loadUsers(); lerr != nil && err == nil {
			err = lerr
		}
	}
	if err == nil && e.auth.enabled {
		body = e.afterAuthorized(r, body)
	}
	return body, err
}

// SyncRequested reports whether the command's write concern asks for a
// journaled (synced) commit: j or fsync with any truthy value (true or a
// non-zero number, mongod's safeBool).
func (r *Request) SyncRequested() bool {
	wc, err := parseWriteConcernIn(r.Cmd, true) // dispatch already refused what the mode refuses
	return err == nil && wc.sync
}

func (e *Engine) countOp(name string) {
	switch strings.ToLower(name) {
	case "insert":
		e.ops.insert.Add(1)
	case "find", "aggregate", "count", "distinct":
		e.ops.query.Add(1)
	case "update", "findandmodify":
		e.ops.update.Add(1)
	case "delete":
		e.ops.delete.Add(1)
	case "getmore":
		e.ops.getmore.Add(1)
	default:
		e.ops.command.Add(1)
	}
}

func mustMarshal(d bson.D) bson.Raw {
	b, err := marshalReply(d)
	if err != nil {
		b, _ = bson.Marshal(mongoerr.New(mongoerr.InternalError, "cannot encode reply: %v", err).Reply())
	}
	return b
}
