package engine

import (
	"fmt"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"

	"github.com/mayflydb/mayfly/wire"
)

// authConfig is --auth and the authentication state of each connection.
type authConfig struct {
	enabled bool
	mu      sync.Mutex
	conns   map[*wire.ConnInfo]*connAuth
	// cursorOwners: who opened each cursor (user keys), for getMore and
	// killCursors.
	cursorOwners map[int64]string
	// mechs are the enabled SASL mechanisms (authenticationMechanisms).
	mechs map[string]bool
	// fails counts recent failed authentications per client address.
	fails map[string]authFails
}

type authFails struct {
	n    int
	last time.Time
}

// userName is an authenticated user, user@db.
type userName struct{ User, DB string }

// connAuth is what one connection has authenticated as, and its SASL
// conversation in progress.
type connAuth struct {
	mu     sync.Mutex
	users  []userName
	conv   *saslConv
	nextID int32
}

// connAuthOf returns the connection's state (nil for internal requests).
func (e *Engine) connAuthOf(c *wire.ConnInfo) *connAuth {
	if c == nil {
		return nil
	}
	e.auth.mu.Lock()
	defer e.auth.mu.Unlock()
	if e.auth.conns == nil {
		e.auth.conns = map[*wire.ConnInfo]*connAuth{}
	}
	ca := e.auth.conns[c]
	if ca == nil {
		ca = &connAuth{}
		e.auth.conns[c] = ca
	}
	return ca
}

func (e *Engine) forgetConnAuth(c *wire.ConnInfo) {
	e.auth.mu.Lock()
	delete(e.auth.conns, c)
	e.auth.mu.Unlock()
}

// authenticatedUsers returns the users the connection is authenticated as
// that still exist.
func (e *Engine) authenticatedUsers(c *wire.ConnInfo) []*userRec {
	ca := e.connAuthOf(c)
	if ca == nil {
		return nil
	}
	ca.mu.Lock()
	names := append([]userName(nil), ca.users...)
	ca.mu.Unlock()
	var out []*userRec
	for _, n := range names {
		if u := e.lookupUser(n.DB, n.User); u != nil {
			out = append(out, u)
		}
	}
	return out
}

// privilegesDoc lists the connection's privileges for connectionStatus's
// showPrivileges.
func (e *Engine) privilegesDoc(c *wire.ConnInfo) bson.A {
	out := bson.A{}
	for _, p := range mergePrivileges(nil, e.userPrivileges(e.authenticatedUsers(c)), false) {
		acts := bson.A{}
		for _, a := range p.Actions {
			if a == "*" {
				a = "anyAction"
			}
			acts = append(acts, a)
		}
		out = append(out, bson.D{{Key: "resource", Value: p.Res.doc()}, {Key: "actions", Value: acts}})
	}
	return out
}

// noAuthCommands run without an authenticated user, as mongod 7.0's
// commands whose requiresAuth() is false: the handshake and authentication
// itself. whatsmyuri, startSession and endSessions need some user;
// getnonce is gone since 6.2 (CommandNotFound, as any unknown command,
// before authorization).
var noAuthCommands = map[string]bool{
	"hello": true, "buildInfo": true, "ping": true, "saslStart": true, "saslContinue": true,
	"authenticate": true, "logout": true, "connectionStatus": true, "listCommands": true,
}

// AuthFree reports whether a command runs without authentication.
func AuthFree(name string) bool { return noAuthCommands[name] }

// checkAuth is --auth: an authenticated user with the command's privileges
// (auth_privs.go), or the localhost exception.
func (e *Engine) checkAuth(c *Command, r *Request) error {
	if !e.auth.enabled || noAuthCommands[c.Name] {
		return nil
	}
	users := e.authenticatedUsers(r.Conn)
	if len(users) == 0 {
		if e.localhostException(c, r) {
			return nil
		}
		return mongoerr.New(mongoerr.Unauthorized, "Command %s requires authentication", c.Name)
	}
	return e.authorize(c, r, users)
}

// localhostException is mongod's: with --auth and no user at all, a client
// on the loopback interface may create the first user in admin.
func (e *Engine) localhostException(c *Command, r *Request) bool {
	if c.Name != "createUser" || r.DB != "admin" || r.Conn == nil || e.userCount() != 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.Conn.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// setAuthMechanisms is mongod's authenticationMechanisms: only these SASL
// mechanisms authenticate (nil: both SCRAM mechanisms).
func (e *Engine) setAuthMechanisms(mechs []string) error {
	if len(mechs) == 0 {
		mechs = allMechanisms
	}
	m := map[string]bool{}
	for _, x := range mechs {
		if x != mechSHA1 && x != mechSHA256 {
			return fmt.Errorf("authenticationMechanisms: unsupported mechanism %q (mayfly supports SCRAM-SHA-1 and SCRAM-SHA-256)", x)
		}
		m[x] = true
	}
	e.auth.mechs = m
	return nil
}

func (e *Engine) mechanismEnabled(m string) bool {
	if e.auth.mechs == nil {
		return m == mechSHA1 || m == mechSHA256
	}
	return e.auth.mechs[m]
}

// EnsureRootUser creates user in admin with the root role when no user
// exists yet (the container image's MAYFLY_INITDB_ROOT_USERNAME and
// _PASSWORD, in the spirit of the mongo image's MONGO_INITDB_ROOT_*). It
// reports whether it created the user.
func (e *Engine) EnsureRootUser(user, pwd string) (bool, error) {
	if e.userCount() != 0 {
		return false, nil
	}
	r := &Request{DB: usersDB, Name: "createUser", Cmd: bson.D{{Key: "createUser", Value: user}, {Key: "pwd", Value: pwd},
		{Key: "roles", Value: bson.A{"root"}}, {Key: "writeConcern", Value: bson.D{{Key: "j", Value: true}}}}}
	if _, err := cmdCreateUser(e, r); err != nil {
		return false, err
	}
	return true, nil
}
