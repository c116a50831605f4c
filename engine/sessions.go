package engine

import (
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Logical sessions, as mongod's session cache keeps them: a session is
// created by startSession or by the first command that names it (lsid),
// every command naming it refreshes its last use, endSessions marks it
// ended (it leaves at the cache's next refresh), killSessions and friends
// drop it at once and interrupt its operations, and a session unused for
// localLogicalSessionTimeoutMinutes expires. Each session carries the
// state later features hang on it: retryable writes today (retry.go),
// transactions tomorrow.

// Session is one logical session.
type Session struct {
	// ID is the session's UUID (lsid.id).
	ID bson.Binary

	// mu is held by the command that has the session checked out: one
	// command at a time uses its state, as mongod's session catalog
	// checks a session out to one operation.
	mu sync.Mutex
	// retry is the retryable-write state (retry.go), under mu.
	retry retryState

	// lastUse and ended are under the registry's lock.
	lastUse time.Time
	ended   bool
}

// CheckOut takes the session for one command's use of its state; the
// returned function gives it back.
func (s *Session) CheckOut() (release func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// SessionRegistry is the engine's session cache.
type SessionRegistry struct {
	mu       sync.Mutex
	now      func() time.Time
	timeout  time.Duration
	sessions map[[16]byte]*Session
	// lastRefresh is when ended and timed-out sessions last left (mongod
	// does so every logicalSessionRefreshMillis).
	lastRefresh time.Time
}

const (
	// sessionRefreshInterval is mongod's logicalSessionRefreshMillis.
	sessionRefreshInterval = 5 * time.Minute
	// sessionTimeout is logicalSessionTimeoutMinutes (what hello
	// advertises and config.system.sessions' TTL index uses).
	sessionTimeout = time.Duration(sessionTimeoutMinutes) * time.Minute
)

// NewSessionRegistry returns an empty registry reading time from now (the
// engine's clock, so that tests move it) with mongod's default timeout.
func NewSessionRegistry(now func() time.Time) *SessionRegistry {
	if now == nil {
		now = time.Now
	}
	return &SessionRegistry{now: now, timeout: sessionTimeout, sessions: map[[16]byte]*Session{}}
}

// SetTimeout sets localLogicalSessionTimeoutMinutes.
func (g *SessionRegistry) SetTimeout(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timeout = d
}

// Timeout is localLogicalSessionTimeoutMinutes.
func (g *SessionRegistry) Timeout() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.timeout
}

func sessionKey(id bson.Binary) (k [16]byte) {
	copy(k[:], id.Data)
	return k
}

// expiredLocked reports whether s timed out by now.
func (g *SessionRegistry) expiredLocked(s *Session, now time.Time) bool {
	return now.Sub(s.lastUse) >= g.timeout
}

// Touch returns the session with id, created if it is not in the cache
// (or expired), and marks it used now.
func (g *SessionRegistry) Touch(id bson.Binary) *Session {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshLocked(now)
	k := sessionKey(id)
	if s := g.sessions[k]; s != nil && !g.expiredLocked(s, now) {
		s.lastUse = now
		return s
	}
	s := &Session{ID: id, lastUse: now}
	g.sessions[k] = s
	return s
}

// Get returns the live session with id, or nil when it is unknown or
// expired. It does not count as a use.
func (g *SessionRegistry) Get(id bson.Binary) *Session {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	k := sessionKey(id)
	s := g.sessions[k]
	if s == nil {
		return nil
	}
	if g.expiredLocked(s, now) {
		delete(g.sessions, k)
		return nil
	}
	return s
}

// End marks sessions ended (endSessions): as in mongod, they stay listed
// until the cache's next refresh.
func (g *SessionRegistry) End(ids ...bson.Binary) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if s := g.sessions[sessionKey(id)]; s != nil {
			s.ended = true
		}
	}
}

// Kill drops sessions at once (killSessions); nil ids drops every one
// (killAllSessions). It returns the ids dropped.
func (g *SessionRegistry) Kill(ids []bson.Binary) []bson.Binary {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []bson.Binary
	if ids == nil {
		for k, s := range g.sessions {
			out = append(out, s.ID)
			delete(g.sessions, k)
		}
		return out
	}
	for _, id := range ids {
		k := sessionKey(id)
		if s := g.sessions[k]; s != nil {
			delete(g.sessions, k)
		}
		out = append(out, id) // its operations are killed even when uncached
	}
	return out
}

// refreshLocked is the cache's periodic refresh: ended sessions and those
// unused for the timeout leave it.
func (g *SessionRegistry) refreshLocked(now time.Time) {
	if now.Sub(g.lastRefresh) < sessionRefreshInterval {
		return
	}
	g.sweepLocked(now)
}

// sweepLocked drops ended and timed-out sessions now, returning the live
// ones and the ended ones (for config.system.sessions).
func (g *SessionRegistry) sweepLocked(now time.Time) (live, ended []bson.Binary) {
	g.lastRefresh = now
	for k, s := range g.sessions {
		switch {
		case s.ended:
			ended = append(ended, s.ID)
			delete(g.sessions, k)
		case g.expiredLocked(s, now):
			delete(g.sessions, k)
		default:
			live = append(live, s.ID)
		}
	}
	return live, ended
}

// sweep is sweepLocked under the lock.
func (g *SessionRegistry) sweep() (live, ended []bson.Binary) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sweepLocked(now)
}

// sessionListing is one session of $listLocalSessions.
type sessionListing struct {
	id      bson.Binary
	lastUse time.Time
}

// list returns the cached sessions, most recently used first, after a
// due refresh.
func (g *SessionRegistry) list() []sessionListing {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshLocked(now)
	out := make([]sessionListing, 0, len(g.sessions))
	for _, s := range g.sessions {
		if g.expiredLocked(s, now) {
			continue
		}
		out = append(out, sessionListing{id: s.ID, lastUse: s.lastUse})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lastUse.After(out[j].lastUse) })
	return out
}

// lsidOf returns the session id of a command's lsid ({id: UUID}), or
// false when there is none.
func lsidOf(cmd bson.D) (bson.Binary, bool, error) {
	v, ok := bsonx.Get(cmd, "lsid")
	if !ok {
		return bson.Binary{}, false, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return bson.Binary{}, false, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.lsid' is the wrong type '%s', expected type 'object'", bsonx.TypeName(v))
	}
	id, ok := bsonx.Get(d, "id")
	if !ok {
		return bson.Binary{}, false, mongoerr.New(40414, "BSON field 'OperationSessionInfo.lsid.id' is missing but a required field")
	}
	b, ok := id.(bson.Binary)
	if !ok || b.Subtype != 4 || len(b.Data) != 16 {
		return bson.Binary{}, false, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'OperationSessionInfo.lsid.id' is the wrong type '%s', expected type 'uuid'", bsonx.TypeName(id))
	}
	return b, true, nil
}

// ---- the session commands

// killSessionOps interrupts the operations running under the sessions
// and closes their idle cursors, as mongod's killSessions does.
func (e *Engine) killSessionOps(ids []bson.Binary, all bool) {
	want := map[[16]byte]bool{}
	for _, id := range ids {
		want[sessionKey(id)] = true
	}
	e.killSessionCursors(want, all)
	o := &e.running
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, op := range o.ops {
		if op.lsid == nil {
			continue
		}
		id, _ := bsonx.Get(op.lsid, "id")
		b, _ := id.(bson.Binary)
		if all || want[sessionKey(b)] {
			op.killed.Store(true)
		}
	}
}

func cmdEndSessions(e *Engine, r *Request) (bson.D, error) {
	ids, err := sessionIDs(r)
	if err != nil {
		return nil, err
	}
	e.sessions.End(ids...)
	e.endSessionTxns(ids, false) // their transactions abort (transactions.go)
	return bson.D{}, nil
}

func cmdRefreshSessions(e *Engine, r *Request) (bson.D, error) {
	ids, err := sessionIDs(r)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		e.sessions.Touch(id)
	}
	return bson.D{}, nil
}

// cmdKillSessions is {killSessions: [{id: UUID}, …]}: the sessions end at
// once and their operations are interrupted.
func cmdKillSessions(e *Engine, r *Request) (bson.D, error) {
	ids, err := sessionIDs(r)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return bson.D{}, nil
	}
	killed := e.sessions.Kill(ids)
	e.killSessionOps(killed, false)
	e.endSessionTxns(killed, false)
	return bson.D{}, nil
}

// cmdKillAllSessions is {killAllSessions: [{user, db}, …]}: an empty list
// kills every session; otherwise the sessions of those users. Without
// authentication sessions belong to no user, so a user list matches none.
func cmdKillAllSessions(e *Engine, r *Request) (bson.D, error) {
	arr, ok := r.Cmd[0].Value.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'KillAllSessionsCmd.killAllSessions' is the wrong type '%s', expected type 'array'", bsonx.TypeName(r.Cmd[0].Value))
	}
	for _, u := range arr {
		d, ok := u.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'KillAllSessionsCmd.killAllSessions' is the wrong type '%s', expected type 'object'", bsonx.TypeName(u))
		}
		for _, f := range []string{"user", "db"} {
			if _, ok := bsonx.Get(d, f); !ok {
				return nil, mongoerr.New(40414, "BSON field 'KillAllSessionsUser.%s' is missing but a required field", f)
			}
		}
	}
	if len(arr) == 0 {
		e.sessions.Kill(nil)
		e.killSessionOps(nil, true)
		e.endSessionTxns(nil, true)
	}
	return bson.D{}, nil
}

// cmdKillAllSessionsByPattern is {killAllSessionsByPattern: [{lsid} |
// {uid} | {users} | {roles} | {}, …]}: an empty list or an empty pattern
// kills every session; an lsid pattern that session; a uid pattern every
// session of that user (all of them for the unauthenticated user's
// digest).
func cmdKillAllSessionsByPattern(e *Engine, r *Request) (bson.D, error) {
	arr, ok := r.Cmd[0].Value.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'KillAllSessionsByPatternCmd.killAllSessionsByPattern' is the wrong type '%s', expected type 'array'", bsonx.TypeName(r.Cmd[0].Value))
	}
	all := len(arr) == 0
	var ids []bson.Binary
	for _, p := range arr {
		d, ok := p.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'KillAllSessionsByPatternCmd.killAllSessionsByPattern' is the wrong type '%s', expected type 'object'", bsonx.TypeName(p))
		}
		if len(d) == 0 {
			all = true
		}
		for _, f := range d {
			switch f.Key {
			case "lsid":
				ld, _ := f.Value.(bson.D)
				id, ok, err := lsidOf(bson.D{{Key: "lsid", Value: ld}})
				if err != nil || !ok {
					return nil, mongoerr.New(40414, "BSON field 'KillAllSessionsByPattern.lsid.id' is missing but a required field")
				}
				ids = append(ids, id)
			case "uid":
				if b, ok := f.Value.(bson.Binary); ok && string(b.Data) == string(noAuthDigest.Data) {
					all = true
				}
			case "users", "roles":
			default:
				return nil, mongoerr.New(40415, "BSON field 'KillAllSessionsByPattern.%s' is an unknown field.", f.Key)
			}
		}
	}
	if all {
		e.sessions.Kill(nil)
		e.killSessionOps(nil, true)
		e.endSessionTxns(nil, true)
		return bson.D{}, nil
	}
	if len(ids) > 0 {
		killed := e.sessions.Kill(ids)
		e.killSessionOps(killed, false)
		e.endSessionTxns(killed, false)
	}
	return bson.D{}, nil
}

// killSessionCursors closes the idle cursors opened under the sessions (a
// cursor in use belongs to an operation killSessionOps interrupts).
func (e *Engine) killSessionCursors(want map[[16]byte]bool, all bool) {
	t := e.cursors
	t.mu.Lock()
	var dead []*cursor
	for id, c := range t.cursors {
		if c.busy || c.info == nil || c.info.lsid == nil {
			continue
		}
		v, _ := bsonx.Get(c.info.lsid, "id")
		b, _ := v.(bson.Binary)
		if all || want[sessionKey(b)] {
			delete(t.cursors, id)
			dead = append(dead, c)
		}
	}
	t.mu.Unlock()
	for _, c := range dead {
		c.src.close()
	}
}
