package engine

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func init() {
	Register(&Command{Name: "profile", Help: "controls the behaviour of the performance profiler, the fraction of eligible operations which are sampled for logging/profiling, and the threshold duration at which ops become eligible. See http://docs.mongodb.org/manual/reference/command/profile", Run: cmdProfile})
}

// profileCollection is where a database's profile entries go.
const profileCollection = "system.profile"

// profileCap bounds system.profile as mongod's default capped size (1 MiB):
// the oldest entries go first.
const profileCap = 1 << 20

// dbProfile is one database's profiling setting (mongod's ProfileSettings).
type dbProfile struct {
	level  int32
	filter bson.D
	match  *query.Matcher
}

// profiler holds the profile command's settings: a level and filter per
// database, slowms and sampleRate for the whole server (mongod's
// serverGlobalParams).
type profiler struct {
	mu         sync.Mutex
	dbs        map[string]dbProfile
	slowMS     int32
	sampleRate float64
	active     atomic.Int32 // databases with a level above 0 (fast path)
	writeMu    sync.Mutex   // serialises profile writes and trimming

	// defaultLevel is the level of databases the profile command has not
	// set (mongod's serverGlobalParams.defaultProfile, from
	// operationProfiling.mode at startup). When above 0 it counts as one
	// in active, for good: active counts explicit settings plus that one.
	defaultLevel int32
}

func newProfiler() *profiler {
	return &profiler{dbs: map[string]dbProfile{}, slowMS: 100, sampleRate: 1.0}
}

func (p *profiler) get(db string) dbProfile {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lookupLocked(db)
}

// lookupLocked is db's setting, or the default level when it has none.
func (p *profiler) lookupLocked(db string) dbProfile {
	if s, ok := p.dbs[db]; ok {
		return s
	}
	return dbProfile{level: p.defaultLevel}
}

// cmdProfile follows mongod 7.0 (profile.idl, profile_common.cpp,
// profile_d.cpp): {profile: <level>, slowms, sampleRate, filter}. A level
// outside 0..2 only reads the settings. The reply holds the settings as they
// were before the command.
func cmdProfile(e *Engine, r *Request) (bson.D, error) {
	if err := ValidateDBName(r.DB); err != nil {
		return nil, err
	}
	lv := r.Cmd[0].Value
	if !bsonx.IsNumber(lv) {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'profile.profile' is the wrong type '%s', expected types '[long, int, decimal, double]'", bsonx.TypeName(lv))
	}
	level := safeNumberLong(lv)
	var slowMS *int64
	var sampleRate *float64
	var filter bson.D
	filterGiven, unset := false, false
	var match *query.Matcher
	for _, f := range r.Cmd[1:] {
		switch f.Key {
		case "slowms":
			if !bsonx.IsNumber(f.Value) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'profile.slowms' is the wrong type '%s', expected types '[long, int, decimal, double]'", bsonx.TypeName(f.Value))
			}
			n := safeNumberLong(f.Value)
			slowMS = &n
		case "sampleRate":
			d, isDouble := f.Value.(float64)
			if !isDouble {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'profile.sampleRate' is the wrong type '%s', expected type 'double'", bsonx.TypeName(f.Value))
			}
			sampleRate = &d
		case "filter":
			filterGiven = true
			switch v := f.Value.(type) {
			case bson.D:
				m, err := query.Compile(v)
				if err != nil {
					return nil, err
				}
				filter, match = v, m
			case string:
				if v != "unset" {
					return nil, mongoerr.New(mongoerr.BadValue, "Expected an object, or the string 'unset'.")
				}
				unset = true
			default:
				return nil, mongoerr.New(mongoerr.BadValue, "Expected an object, or the string 'unset'.")
			}
		}
		// Other fields are ignored: the command is not strict (profile.idl).
	}
	if sampleRate != nil && !(*sampleRate >= 0 && *sampleRate <= 1) {
		return nil, mongoerr.New(mongoerr.BadValue, "'sampleRate' must be between 0.0 and 1.0 inclusive")
	}
	p := e.prof
	readOnly := (level < 0 || level > 2) && !filterGiven
	p.mu.Lock()
	old := p.lookupLocked(r.DB)
	oldSlow, oldRate := p.slowMS, p.sampleRate
	p.mu.Unlock()
	if !readOnly {
		nw := old
		if level >= 0 && level <= 2 {
			nw.level = int32(level)
		}
		if filterGiven {
			if unset {
				nw.filter, nw.match = nil, nil
			} else {
				nw.filter, nw.match = filter, match
			}
		}
		if nw.level > 0 {
			// mongod creates the profile collection when profiling starts.
			if _, _, err := e.createCollection(r.DB, profileCollection, nil, false, 0); err != nil {
				return nil, err
			}
		}
		p.mu.Lock()
		if nw.level > 0 && p.dbs[r.DB].level == 0 {
			p.active.Add(1)
		} else if nw.level == 0 && p.dbs[r.DB].level > 0 {
			p.active.Add(-1)
		}
		p.dbs[r.DB] = nw
		p.mu.Unlock()
	}
	out := bson.D{{Key: "was", Value: old.level}, {Key: "slowms", Value: oldSlow}, {Key: "sampleRate", Value: oldRate}}
	if old.filter != nil {
		out = append(out, bson.E{Key: "filter", Value: old.filter})
	}
	if old.filter != nil || filterGiven {
		out = append(out, bson.E{Key: "note", Value: "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines."})
	}
	p.mu.Lock()
	if slowMS != nil {
		p.slowMS = int32(*slowMS)
	}
	if sampleRate != nil {
		p.sampleRate = *sampleRate
	}
	p.mu.Unlock()
	if level >= 0 && level <= 2 || slowMS != nil || sampleRate != nil || filterGiven {
		e.log.Info("Profiler settings changed", zap.String("db", r.DB), zap.Int32("from", old.level), zap.Int64("to", level))
	}
	return out, nil
}

// profileOp records a finished command in its database's system.profile
// when the database's profiling setting asks for it (mongod's
// CurOp::shouldDBProfile: level 2 takes every operation; level 1 those the
// filter matches or, without a filter, those at least slowms long, sampled
// at sampleRate). Operations on system.profile itself are never profiled.
func (e *Engine) profileOp(r *Request, start time.Time, body bson.D, err error) {
	p := e.prof
	if p == nil || p.active.Load() == 0 || r.DB == "" {
		return
	}
	set := p.get(r.DB)
	if set.level == 0 {
		return
	}
	coll := r.Target()
	if r.Name == "getMore" {
		v, _ := bsonx.Get(r.Cmd, "collection")
		coll, _ = v.(string)
	}
	if coll == profileCollection {
		return
	}
	millis := time.Since(start).Milliseconds()
	if set.level == 1 && set.match == nil {
		p.mu.Lock()
		slow, rate := p.slowMS, p.sampleRate
		p.mu.Unlock()
		if millis < int64(slow) || rand.Float64() >= rate {
			return
		}
	}
	for _, entry := range e.profileEntries(r, coll, millis, body, err) {
		if set.level == 1 && set.match != nil && !set.match.Matches(entry) {
			continue
		}
		e.writeProfileEntry(r.DB, entry)
	}
}

// profileEntries renders what a command adds to system.profile: one entry,
// or one per statement for update and delete, as mongod writes them.
func (e *Engine) profileEntries(r *Request, coll string, millis int64, body bson.D, err error) []bson.D {
	ns := r.DB + ".$cmd"
	if coll != "" {
		ns = r.DB + "." + coll
	}
	tail := bson.D{}
	if err != nil {
		me := mongoerr.From(err)
		tail = append(tail, bson.E{Key: "ok", Value: 0.0}, bson.E{Key: "errMsg", Value: me.Msg},
			bson.E{Key: "errName", Value: me.CodeName()}, bson.E{Key: "errCode", Value: me.Code})
	}
	client := ""
	if r.Conn != nil {
		client = r.Conn.RemoteAddr
		if h, _, splitErr := net.SplitHostPort(client); splitErr == nil {
			client = h
		}
	}
	tail = append(tail, bson.E{Key: "protocol", Value: "op_msg"}, bson.E{Key: "millis", Value: int32(millis)},
		bson.E{Key: "ts", Value: bson.DateTime(e.clock.Now().UnixMilli())}, bson.E{Key: "client", Value: client},
		bson.E{Key: "allUsers", Value: bson.A{}}, bson.E{Key: "user", Value: ""})
	n, _ := bsonx.Get(body, "n")
	one := func(op string, cmd bson.D, counters ...bson.E) bson.D {
		d := bson.D{{Key: "op", Value: op}, {Key: "ns", Value: ns}, {Key: "command", Value: cmd}}
		d = append(d, counters...)
		return append(d, tail...)
	}
	stmts := func(key string) []bson.D {
		v, _ := bsonx.Get(r.Cmd, key)
		a, _ := v.(bson.A)
		var out []bson.D
		for _, s := range a {
			if d, ok := s.(bson.D); ok {
				out = append(out, d)
			}
		}
		return out
	}
	switch r.Name {
	case "find":
		return []bson.D{one("query", r.Cmd, cursorCounters(body)...)}
	case "getMore":
		return []bson.D{one("getmore", r.Cmd, cursorCounters(body)...)}
	case "insert":
		var c []bson.E
		if err == nil {
			c = append(c, bson.E{Key: "ninserted", Value: n})
		}
		return []bson.D{one("insert", r.Cmd, c...)}
	case "update":
		var out []bson.D
		ss := stmts("updates")
		for _, st := range ss {
			var c []bson.E
			if len(ss) == 1 && err == nil {
				nm, _ := bsonx.Get(body, "nModified")
				c = append(c, bson.E{Key: "nMatched", Value: n}, bson.E{Key: "nModified", Value: nm})
			}
			out = append(out, one("update", st, c...))
		}
		return out
	case "delete":
		var out []bson.D
		ss := stmts("deletes")
		for _, st := range ss {
			var c []bson.E
			if len(ss) == 1 && err == nil {
				c = append(c, bson.E{Key: "ndeleted", Value: n})
			}
			out = append(out, one("remove", st, c...))
		}
		return out
	case "aggregate":
		return []bson.D{one("command", r.Cmd, cursorCounters(body)...)}
	}
	return []bson.D{one("command", r.Cmd)}
}

// cursorCounters are a read's nreturned and cursor state from its reply.
func cursorCounters(body bson.D) []bson.E {
	cur, _ := bsonx.Get(body, "cursor")
	cd, ok := cur.(bson.D)
	if !ok {
		return nil
	}
	var out []bson.E
	id, _ := bsonx.Get(cd, "id")
	if n, _ := bsonx.ToInt64(id); n != 0 {
		out = append(out, bson.E{Key: "cursorid", Value: n})
	} else {
		out = append(out, bson.E{Key: "cursorExhausted", Value: true})
	}
	for _, k := range []string{"firstBatch", "nextBatch"} {
		if b, ok := bsonx.Get(cd, k); ok {
			a, _ := b.(bson.A)
			out = append(out, bson.E{Key: "nreturned", Value: int32(len(a))})
		}
	}
	return out
}

// writeProfileEntry stores one entry and keeps system.profile within
// profileCap by dropping the oldest entries, as a capped collection would.
func (e *Engine) writeProfileEntry(db string, entry bson.D) {
	p := e.prof
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	c, _, err := e.collectionForWrite(db, profileCollection)
	if err == nil {
		ir := &Request{DB: db, Name: "insert"}
		err = c.insertOne(ir, entry)
		for err == nil && c.size.Load() > profileCap {
			var n int64
			n, err = c.deleteMatching(ir, &querySpec{sort: bson.D{{Key: "_id", Value: int32(1)}}}, true, nil)
			if n == 0 {
				break
			}
		}
	}
	if err != nil {
		e.log.Warn("cannot write a profile entry", zap.String("db", db), zap.Error(err))
	}
}

// fcvIDKey is the _id key of the featureCompatibilityVersion document.
var fcvIDKey = docstore.IDKeyOf("featureCompatibilityVersion")

// seedSystemVersion makes admin.system.version hold the
// featureCompatibilityVersion document, as every mongod has it (the same
// version getParameter reports).
func (e *Engine) seedSystemVersion() error {
	c, _, err := e.collectionForWrite("admin", "system.version")
	if err != nil {
		return err
	}
	r := &Request{DB: "admin", Name: "insert"}
	cq, err := c.compileQuery(r, &querySpec{filter: bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}}})
	if err != nil {
		return err
	}
	ids, err := cq.matchedIDs(r, 1)
	if err != nil || len(ids) > 0 {
		return err
	}
	return c.insertOne(r, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}, {Key: "version", Value: FCV}})
}
