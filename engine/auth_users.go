package engine

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"sort"
	"sync"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
)

// Users live in admin.system.users as mongod keeps them: one document per
// user, _id "db.user", a random userId (UUID), the roles granted and, per
// SCRAM mechanism, the salt, iteration count, storedKey and serverKey —
// never the password (user_management_commands.cpp, scram_credentials).
const (
	usersDB   = "admin"
	usersColl = "system.users"

	mechSHA1   = "SCRAM-SHA-1"
	mechSHA256 = "SCRAM-SHA-256"

	// mongod's scramIterationCount and scramSHA256IterationCount defaults.
	scramSHA1Iterations   = 10000
	scramSHA256Iterations = 15000
	// Salt lengths mongod draws (SHA-1: 16 bytes; SHA-256: 28 bytes).
	scramSHA1SaltLen   = 16
	scramSHA256SaltLen = 28
)

var allMechanisms = []string{mechSHA1, mechSHA256}

// roleRef is a granted role, {role, db}.
type roleRef struct {
	Role string
	DB   string
}

func (r roleRef) doc() bson.D { return bson.D{{Key: "role", Value: r.Role}, {Key: "db", Value: r.DB}} }

// userRec is a user as the engine uses it: the stored document decoded.
type userRec struct {
	User, DB string
	Roles    []roleRef
	Creds    map[string]scram.StoredCredentials
	Doc      bson.D // the stored document
}

func (u *userRec) key() string { return u.DB + "." + u.User }

func (u *userRec) mechanisms() bson.A {
	out := bson.A{}
	for _, m := range allMechanisms {
		if _, ok := u.Creds[m]; ok {
			out = append(out, m)
		}
	}
	return out
}

// userCache holds every user in memory (read on each authorization check),
// reloaded from admin.system.users after each change.
type userCache struct {
	mu    sync.RWMutex
	users map[string]*userRec
}

func (e *Engine) lookupUser(db, user string) *userRec {
	e.users.mu.RLock()
	defer e.users.mu.RUnlock()
	return e.users.users[db+"."+user]
}

func (e *Engine) userCount() int {
	e.users.mu.RLock()
	defer e.users.mu.RUnlock()
	return len(e.users.users)
}

// usersOf returns the users of db ("" for all) sorted as mongod's usersInfo
// lists them (user, then db).
func (e *Engine) usersOf(db string) []*userRec {
	e.users.mu.RLock()
	var out []*userRec
	for _, u := range e.users.users {
		if db == "" || u.DB == db {
			out = append(out, u)
		}
	}
	e.users.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].DB < out[j].DB
	})
	return out
}

// loadUsers reads admin.system.users (and admin.system.roles) into the
// caches.
func (e *Engine) loadUsers() error {
	if err := e.loadRoles(); err != nil {
		return err
	}
	docs, err := e.authDocs(usersColl)
	if err != nil {
		return err
	}
	m := map[string]*userRec{}
	for _, d := range docs {
		if u := decodeUser(d); u != nil {
			m[u.key()] = u
		}
	}
	e.users.mu.Lock()
	e.users.users = m
	e.users.mu.Unlock()
	return nil
}

func (e *Engine) authDocs(coll string) ([]bson.D, error) {
	c := e.cat.Get(usersDB, coll)
	if c == nil {
		return nil, nil
	}
	r := &Request{DB: usersDB, Name: "find"}
	cq, err := c.compileQuery(r, &querySpec{})
	if err != nil {
		return nil, err
	}
	ids, err := cq.matchedIDs(r, 0)
	if err != nil {
		return nil, err
	}
	var out []bson.D
	for _, id := range ids {
		rec, err := c.getRecord(e.kv, id)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			continue
		}
		d, err := rec.Doc()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func decodeUser(d bson.D) *userRec {
	u := &userRec{Doc: d, Creds: map[string]scram.StoredCredentials{}}
	u.User, _ = authStr(d, "user")
	u.DB, _ = authStr(d, "db")
	if u.User == "" || u.DB == "" {
		return nil
	}
	if roles, ok := bsonx.Get(d, "roles"); ok {
		if a, ok := roles.(bson.A); ok {
			for _, x := range a {
				if rd, ok := x.(bson.D); ok {
					role, _ := authStr(rd, "role")
					db, _ := authStr(rd, "db")
					u.Roles = append(u.Roles, roleRef{role, db})
				}
			}
		}
	}
	if cv, ok := bsonx.Get(d, "credentials"); ok {
		if cd, ok := cv.(bson.D); ok {
			for _, m := range cd {
				md, ok := m.Value.(bson.D)
				if !ok {
					continue
				}
				var sc scram.StoredCredentials
				it, _ := bsonx.Get(md, "iterationCount")
				n, _ := bsonx.ToInt64(it)
				sc.Iters = int(n)
				for _, f := range []struct {
					k   string
					dst *[]byte
				}{{"storedKey", &sc.StoredKey}, {"serverKey", &sc.ServerKey}} {
					s, _ := authStr(md, f.k)
					*f.dst, _ = base64.StdEncoding.DecodeString(s)
				}
				s, _ := authStr(md, "salt")
				salt, _ := base64.StdEncoding.DecodeString(s)
				sc.Salt = string(salt)
				u.Creds[m.Key] = sc
			}
		}
	}
	return u
}

// mongoPasswordDigest is the MONGODB-CR digest SCRAM-SHA-1 uses as its
// password (mongod's createPasswordDigest: hex md5 of "user:mongo:pwd").
func mongoPasswordDigest(user, pwd string) string {
	h := md5.Sum([]byte(user + ":mongo:" + pwd))
	return hex.EncodeToString(h[:])
}

// makeCredentials computes the stored SCRAM credentials of mechs. With
// digested, pwd is already the SCRAM-SHA-1 digest (digestPassword: false).
func makeCredentials(user, pwd string, mechs []string, digested bool) (bson.D, error) {
	creds := bson.D{}
	for _, m := range mechs {
		var cl *scram.Client
		var err error
		var saltLen, iters int
		switch m {
		case mechSHA1:
			digest := pwd
			if !digested {
				digest = mongoPasswordDigest(user, pwd)
			}
			cl, err = scram.SHA1.NewClientUnprepped(user, digest, "")
			saltLen, iters = scramSHA1SaltLen, scramSHA1Iterations
		case mechSHA256:
			if digested {
				return nil, mongoerr.New(mongoerr.BadValue, "Use of SCRAM-SHA-256 requires undigested passwords")
			}
			cl, err = scram.SHA256.NewClient(user, pwd, "")
			if err != nil {
				return nil, mongoerr.New(mongoerr.BadValue, "Error preflighting SCRAM-SHA-256 credentials: could not SASLprep the password")
			}
			saltLen, iters = scramSHA256SaltLen, scramSHA256Iterations
		}
		if err != nil {
			return nil, err
		}
		salt := make([]byte, saltLen)
		if _, err := rand.Read(salt); err != nil {
			return nil, err
		}
		sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iters})
		if err != nil {
			return nil, err
		}
		creds = append(creds, bson.E{Key: m, Value: bson.D{
			{Key: "iterationCount", Value: int32(iters)},
			{Key: "salt", Value: base64.StdEncoding.EncodeToString(salt)},
			{Key: "storedKey", Value: base64.StdEncoding.EncodeToString(sc.StoredKey)},
			{Key: "serverKey", Value: base64.StdEncoding.EncodeToString(sc.ServerKey)},
		}})
	}
	return creds, nil
}

// newUUID is a random RFC 4122 version 4 UUID as BSON binary subtype 4.
func newUUID() bson.Binary {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: bson.TypeBinaryUUID, Data: b}
}

// insertUserDoc, replaceUserDoc and deleteUserDoc change admin.system.users
// (the authDoc forms admin.system.roles too) and reload the caches.
func (e *Engine) insertUserDoc(r *Request, d bson.D) error { return e.insertAuthDoc(usersColl, r, d) }

func (e *Engine) insertAuthDoc(coll string, r *Request, d bson.D) error {
	c, _, err := e.collectionForWrite(usersDB, coll)
	if err != nil {
		return err
	}
	if err := c.insertOne(r, d); err != nil {
		return err
	}
	return e.loadUsers()
}

func (e *Engine) replaceUserDoc(r *Request, id string, d bson.D) (bool, error) {
	return e.replaceAuthDoc(usersColl, r, id, d)
}

func (e *Engine) replaceAuthDoc(coll string, r *Request, id string, d bson.D) (bool, error) {
	return e.changeAuthDoc(coll, r, id, func(c *Collection, tx storage.Txn, s *collState, rec *docstore.Record) (func(), error) {
		return c.stageDoc(tx, s, rec, d, e.nowTS(), "-")
	})
}

func (e *Engine) deleteUserDoc(r *Request, id string) (bool, error) {
	return e.deleteAuthDoc(usersColl, r, id)
}

func (e *Engine) deleteAuthDoc(coll string, r *Request, id string) (bool, error) {
	return e.changeAuthDoc(coll, r, id, func(c *Collection, tx storage.Txn, s *collState, rec *docstore.Record) (func(), error) {
		return c.stageDelete(tx, s, rec)
	})
}

func (e *Engine) changeAuthDoc(coll string, r *Request, id string, fn func(c *Collection, tx storage.Txn, s *collState, rec *docstore.Record) (func(), error)) (bool, error) {
	c := e.cat.Get(usersDB, coll)
	if c == nil {
		return false, nil
	}
	cq, err := c.compileQuery(r, &querySpec{filter: bson.D{{Key: "_id", Value: id}}})
	if err != nil {
		return false, err
	}
	found, err := c.withDoc(r, cq, docstore.IDKeyOf(id), false, func(tx storage.Txn, s *collState, rec *docstore.Record, _ bson.D, _ int) (func(), error) {
		return fn(c, tx, s, rec)
	})
	if err != nil {
		return found, err
	}
	return found, e.loadUsers()
}

// authStr returns a string field of d ("" and false otherwise).
func authStr(d bson.D, key string) (string, bool) {
	v, ok := bsonx.Get(d, key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}
