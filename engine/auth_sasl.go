package engine

import (
	"net"
	"strings"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// SCRAM-SHA-1 and SCRAM-SHA-256 conversations through xdg-go/scram, with
// mongod's commands around them (authentication_commands.cpp,
// sasl_commands.cpp): saslStart, saslContinue, hello's
// speculativeAuthenticate and saslSupportedMechs, logout.

// AuthFailureDelay is how long a failed authentication is held before its
// reply, to slow password guessing; it doubles with each further failure
// from the same address within a minute, up to MaxAuthFailureDelay.
var (
	AuthFailureDelay    = 200 * time.Millisecond
	MaxAuthFailureDelay = time.Second
)

// failureDelay counts a failure from the client's address and returns how
// long to hold its reply.
func (e *Engine) failureDelay(remote string) time.Duration {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	now := time.Now()
	e.auth.mu.Lock()
	defer e.auth.mu.Unlock()
	if e.auth.fails == nil || len(e.auth.fails) > 10000 {
		old := e.auth.fails
		e.auth.fails = map[string]authFails{}
		for h, f := range old {
			if now.Sub(f.last) < time.Minute {
				e.auth.fails[h] = f
			}
		}
	}
	f := e.auth.fails[host]
	if now.Sub(f.last) >= time.Minute {
		f.n = 0
	}
	f.n++
	f.last = now
	e.auth.fails[host] = f
	d := AuthFailureDelay
	for i := 1; i < f.n && d < MaxAuthFailureDelay; i++ {
		d *= 2
	}
	return min(d, MaxAuthFailureDelay)
}

// saslConv is a SCRAM conversation in progress on a connection.
type saslConv struct {
	id     int32
	mech   string
	db     string
	conv   *scram.ServerConversation
	skip   bool // skipEmptyExchange: done with the server's final message
	sentV  bool // the server's final message was sent; an empty exchange remains
	user   string
	failed bool
}

func init() {
	Register(
		&Command{Name: "saslStart", Help: "begin a SASL authentication conversation", Run: cmdSaslStart},
		&Command{Name: "saslContinue", Help: "continue a SASL authentication conversation", Run: cmdSaslContinue},
		&Command{Name: "logout", Help: "log the connection's user out", Run: cmdLogout},
		&Command{Name: "authenticate", Help: "authenticate with MONGODB-X509 (not supported: use SCRAM through saslStart)", Run: cmdAuthenticate},
	)
}

func scramHash(mech string) scram.HashGeneratorFcn {
	if mech == mechSHA1 {
		return scram.SHA1
	}
	return scram.SHA256
}

func mechanismUnavailable(mech string) error {
	return mongoerr.New(mongoerr.MechanismUnavailable, "Received authentication for mechanism %s which is unknown or not enabled", mech)
}

func authFailed() error { return mongoerr.New(mongoerr.AuthenticationFailed, "Authentication failed.") }

// payloadBytes reads a SASL payload: binary, or a string as older shells
// send it.
func payloadBytes(v any) ([]byte, bool) {
	switch p := v.(type) {
	case bson.Binary:
		return p.Data, true
	case string:
		return []byte(p), true
	}
	return nil, false
}

// startConv begins a conversation for db from a saslStart document and
// returns the server's first message.
func (e *Engine) startConv(r *Request, db string, cmd bson.D, speculative bool) (*saslConv, []byte, error) {
	mv, _ := bsonx.Get(cmd, "mechanism")
	mech, _ := mv.(string)
	if !e.mechanismEnabled(mech) {
		if mv == nil {
			return nil, nil, mongoerr.New(40414, "BSON field 'saslStart.mechanism' is missing but a required field")
		}
		return nil, nil, mechanismUnavailable(mech)
	}
	pv, _ := bsonx.Get(cmd, "payload")
	payload, ok := payloadBytes(pv)
	if !ok {
		return nil, nil, mongoerr.New(40414, "BSON field 'saslStart.payload' is missing but a required field")
	}
	c := &saslConv{mech: mech, db: db}
	if o, ok := bsonx.Get(cmd, "options"); ok {
		if od, ok := o.(bson.D); ok {
			if v, ok := bsonx.Get(od, "skipEmptyExchange"); ok {
				c.skip = srvTruthy(v)
			}
		}
	}
	srv, err := scramHash(mech).NewServer(func(name string) (scram.StoredCredentials, error) {
		c.user = name
		u := e.lookupUser(db, name)
		if u == nil {
			return scram.StoredCredentials{}, errUnknownUser
		}
		sc, ok := u.Creds[mech]
		if !ok {
			return scram.StoredCredentials{}, errNoCredentials
		}
		return sc, nil
	})
	if err != nil {
		return nil, nil, err
	}
	c.conv = srv.NewConversation()
	out, err := c.conv.Step(string(payload))
	if err != nil {
		if speculative {
			// The driver falls back to saslStart, which fails, is logged
			// and held there: one attempt, one failure.
			return nil, nil, authFailed()
		}
		return nil, nil, e.authFailure(r, c, err)
	}
	return c, []byte(out), nil
}

type authErrT string

func (a authErrT) Error() string { return string(a) }

const (
	errUnknownUser   = authErrT("UserNotFound: Could not find user")
	errNoCredentials = authErrT("the user has no credentials for this mechanism")
)

// authFailure logs a failed authentication (never the password: SCRAM
// never carries it) with the client's address, waits AuthFailureDelay and
// returns mongod's uniform AuthenticationFailed.
func (e *Engine) authFailure(r *Request, c *saslConv, cause error) error {
	remote := ""
	if r.Conn != nil {
		remote = r.Conn.RemoteAddr
	}
	e.log.Warn("Authentication failed", zap.String("mechanism", c.mech), zap.String("user", c.user),
		zap.String("db", c.db), zap.String("remote", remote), zap.String("error", cause.Error()))
	if delay := e.failureDelay(remote); delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		if r.Ctx != nil {
			select {
			case <-t.C:
			case <-r.Ctx.Done():
			}
		} else {
			<-t.C
		}
	}
	return authFailed()
}

// succeed marks the connection authenticated as the conversation's user.
func (e *Engine) succeed(r *Request, c *saslConv) {
	ca := e.connAuthOf(r.Conn)
	if ca == nil {
		return
	}
	ca.mu.Lock()
	ca.users = []userName{{User: c.user, DB: c.db}} // one user per connection, as mongod 5.0+
	ca.mu.Unlock()
	remote := ""
	if r.Conn != nil {
		remote = r.Conn.RemoteAddr
	}
	e.log.Info("Successfully authenticated", zap.String("mechanism", c.mech), zap.String("user", c.user), zap.String("db", c.db), zap.String("remote", remote))
}

func convReply(c *saslConv, done bool, payload []byte) bson.D {
	return bson.D{
		{Key: "conversationId", Value: c.id},
		{Key: "done", Value: done},
		{Key: "payload", Value: bson.Binary{Data: payload}},
	}
}

// install makes c the connection's conversation.
func (e *Engine) install(r *Request, c *saslConv) {
	ca := e.connAuthOf(r.Conn)
	if ca == nil {
		return
	}
	ca.mu.Lock()
	ca.nextID++
	c.id = ca.nextID
	ca.conv = c
	ca.mu.Unlock()
}

func cmdSaslStart(e *Engine, r *Request) (bson.D, error) {
	c, out, err := e.startConv(r, r.DB, r.Cmd, false)
	if err != nil {
		return nil, err
	}
	e.install(r, c)
	return convReply(c, false, out), nil
}

func cmdSaslContinue(e *Engine, r *Request) (bson.D, error) {
	ca := e.connAuthOf(r.Conn)
	if ca == nil {
		return nil, mongoerr.New(mongoerr.ProtocolError, "No SASL session state found")
	}
	ca.mu.Lock()
	c := ca.conv
	ca.mu.Unlock()
	if c == nil {
		return nil, mongoerr.New(mongoerr.ProtocolError, "No SASL session state found")
	}
	idv, _ := r.Arg("conversationId")
	if id, ok := bsonx.ToInt64(idv); !ok || id != int64(c.id) {
		return nil, mongoerr.New(mongoerr.ProtocolError, "sasl: Mismatched conversation id")
	}
	if c.db != r.DB {
		return nil, mongoerr.New(mongoerr.ProtocolError, "Attempt to switch database target during SASL authentication.")
	}
	pv, _ := r.Arg("payload")
	payload, ok := payloadBytes(pv)
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'saslContinue.payload' is missing but a required field")
	}
	end := func() {
		ca.mu.Lock()
		if ca.conv == c {
			ca.conv = nil
		}
		ca.mu.Unlock()
	}
	if c.sentV {
		// The empty exchange after the server's final message.
		end()
		if len(payload) != 0 {
			return nil, e.authFailure(r, c, authErrT("unexpected payload after the server's final message"))
		}
		e.succeed(r, c)
		return convReply(c, true, nil), nil
	}
	out, err := c.conv.Step(string(payload))
	if err != nil || !c.conv.Valid() {
		end()
		if err == nil {
			err = authErrT("conversation did not complete")
		}
		return nil, e.authFailure(r, c, err)
	}
	if c.skip {
		end()
		e.succeed(r, c)
		return convReply(c, true, []byte(out)), nil
	}
	c.sentV = true
	return convReply(c, false, []byte(out)), nil
}

// speculativeAuth answers hello's speculativeAuthenticate: the reply's
// field, or nil when the attempt failed (the driver then authenticates
// the usual way, and sees the failure there).
func (e *Engine) speculativeAuth(r *Request, v any) bson.D {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || d[0].Key != "saslStart" {
		return nil
	}
	db, _ := authStr(d, "db")
	if db == "" {
		db = r.DB
	}
	c, out, err := e.startConv(r, db, d, true)
	if err != nil {
		return nil
	}
	e.install(r, c)
	return convReply(c, false, out)
}

// saslSupportedMechs answers hello's saslSupportedMechs: "db.user".
func (e *Engine) saslSupportedMechs(v any) bson.A {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	i := strings.IndexByte(s, '.')
	if i < 0 {
		return nil
	}
	u := e.lookupUser(s[:i], s[i+1:])
	if u == nil {
		return nil
	}
	out := bson.A{}
	for _, m := range u.mechanisms() {
		if e.mechanismEnabled(m.(string)) {
			out = append(out, m)
		}
	}
	return out
}

func cmdLogout(e *Engine, r *Request) (bson.D, error) {
	if ca := e.connAuthOf(r.Conn); ca != nil {
		ca.mu.Lock()
		kept := ca.users[:0]
		for _, u := range ca.users {
			if u.DB != r.DB {
				kept = append(kept, u)
			}
		}
		ca.users = kept
		ca.mu.Unlock()
	}
	return bson.D{}, nil
}

func cmdAuthenticate(e *Engine, r *Request) (bson.D, error) {
	mech, _ := r.Arg("mechanism")
	s, _ := mech.(string)
	return nil, mechanismUnavailable(s)
}
