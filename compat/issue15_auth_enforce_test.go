package compat

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/server"
)

// TestIssue15AuthRequired: with --auth only the handshake and
// authentication commands run unauthenticated; the rest answer 13
// "Command X requires authentication". The localhost exception lets a
// loopback client create the first user in admin, then closes.
func TestIssue15AuthRequired(t *testing.T) {
	t.Parallel()
	s := authServer(t, server.Config{Auth: true})
	anon := authClient(t, s, nil)
	for _, c := range []bson.D{
		{{Key: "ping", Value: 1}}, {{Key: "hello", Value: 1}}, {{Key: "isMaster", Value: 1}}, {{Key: "buildInfo", Value: 1}},
		{{Key: "connectionStatus", Value: 1}}, {{Key: "logout", Value: 1}},
	} {
		authRun(t, anon, "app", c)
	}
	for _, tc := range []struct {
		db  string
		cmd bson.D
		msg string
	}{
		{"app", bson.D{{Key: "find", Value: "c"}}, "Command find requires authentication"},
		{"app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}, "Command insert requires authentication"},
		{"admin", bson.D{{Key: "listDatabases", Value: 1}}, "Command listDatabases requires authentication"},
		{"admin", bson.D{{Key: "serverStatus", Value: 1}}, "Command serverStatus requires authentication"},
		{"app", bson.D{{Key: "usersInfo", Value: 1}}, "Command usersInfo requires authentication"},
		{"app", bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{}}}, "Command createUser requires authentication"},
	} {
		err := authErr(anon, tc.db, tc.cmd)
		wantCode(t, err, 13, "Unauthorized")
		eq(t, "errmsg", errMsg(err), tc.msg)
	}
	_, err := anon.Database("app").Collection("c").InsertOne(context.Background(), bson.D{{Key: "a", Value: 1}})
	wantCode(t, err, 13, "Unauthorized")

	// The localhost exception: the first user, in admin.
	authRun(t, anon, "admin", bson.D{{Key: "createUser", Value: "boss"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}})
	err = authErr(anon, "admin", bson.D{{Key: "createUser", Value: "second"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}})
	wantCode(t, err, 13, "Unauthorized")
	eq(t, "errmsg", errMsg(err), "Command createUser requires authentication")

	root := authClient(t, s, &options.Credential{Username: "boss", Password: "pw"})
	authRun(t, root, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	n, err := root.Database("app").Collection("c").CountDocuments(context.Background(), bson.D{})
	noErr(t, err, "count")
	eq(t, "count", n, int64(1))
	authRun(t, root, "admin", bson.D{{Key: "createUser", Value: "second"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}})
	// Still refused to the anonymous connection.
	wantCode(t, authErr(anon, "app", bson.D{{Key: "find", Value: "c"}}), 13, "Unauthorized")
	opts := authRun(t, root, "admin", bson.D{{Key: "getCmdLineOpts", Value: 1}})
	valEq(t, opts, "parsed.security.authorization", "enabled")
}

// TestIssue15AuthUnauthenticatedCommands pins the commands mongod 7.0 runs
// without authentication (requiresAuth() false: hello/isMaster, buildInfo,
// ping, saslStart, saslContinue, authenticate, logout, connectionStatus,
// listCommands) against some it does not (whatsmyuri, startSession,
// endSessions, listDatabases: 13). getnonce was removed in 6.2
// (SERVER-71007): 59 CommandNotFound, authenticated or not, before any
// authorization check. listCommands reports requiresAuth the same way.
func TestIssue15AuthUnauthenticatedCommands(t *testing.T) {
	t.Parallel()
	s := authServer(t, server.Config{Auth: true, InitRootUser: "root", InitRootPassword: "pw"})
	anon := authClient(t, s, nil)
	free := map[string]bool{}
	for _, c := range []bson.D{
		{{Key: "hello", Value: 1}}, {{Key: "isMaster", Value: 1}}, {{Key: "buildInfo", Value: 1}}, {{Key: "ping", Value: 1}},
		{{Key: "connectionStatus", Value: 1}}, {{Key: "listCommands", Value: 1}}, {{Key: "logout", Value: 1}},
	} {
		authRun(t, anon, "admin", c)
		free[c[0].Key] = true
	}
	// The SASL commands answer, with their own errors, never 13.
	for _, c := range []bson.D{
		{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"}, {Key: "payload", Value: bson.Binary{Data: []byte("n,,n=nobody,r=abcdefgh")}}},
		{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: 7}, {Key: "payload", Value: bson.Binary{Data: []byte("x")}}},
		{{Key: "authenticate", Value: 1}, {Key: "mechanism", Value: "MONGODB-X509"}},
	} {
		if code, _, _ := errCode(authErr(anon, "admin", c)); code == 13 {
			t.Errorf("%s refused as unauthenticated", c[0].Key)
		}
		free[c[0].Key] = true
	}
	for _, c := range []bson.D{
		{{Key: "whatsmyuri", Value: 1}}, {{Key: "startSession", Value: 1}},
		{{Key: "endSessions", Value: bson.A{}}}, {{Key: "listDatabases", Value: 1}},
	} {
		err := authErr(anon, "admin", c)
		wantCode(t, err, 13, "Unauthorized")
		eq(t, "errmsg", errMsg(err), "Command "+c[0].Key+" requires authentication")
	}
	for _, cli := range []*mongo.Client{anon, authClient(t, s, &options.Credential{Username: "root", Password: "pw"})} {
		err := authErr(cli, "admin", bson.D{{Key: "getnonce", Value: 1}})
		wantCode(t, err, 59, "CommandNotFound")
		eq(t, "errmsg", errMsg(err), "no such command: 'getnonce'")
	}
	cmds := authRun(t, anon, "admin", bson.D{{Key: "listCommands", Value: 1}}).Lookup("commands").Document()
	elems, err := cmds.Elements()
	noErr(t, err, "listCommands")
	// Spellings compared case-blind: mayfly also lists the lower-case
	// aliases buildinfo and ismaster.
	seen := map[string]bool{}
	var gotFree []string
	for _, el := range elems {
		if k := strings.ToLower(el.Key()); !el.Value().Document().Lookup("requiresAuth").Boolean() && !seen[k] {
			seen[k] = true
			gotFree = append(gotFree, k)
		}
	}
	strsEq(t, "listCommands' requiresAuth: false", gotFree, []string{"authenticate", "buildinfo", "connectionstatus", "hello", "ismaster", "listcommands", "logout", "ping", "saslcontinue", "saslstart"})
}

// TestIssue15AuthMechanismsAndInitRoot: authenticationMechanisms limits
// what authenticates and what hello advertises; InitRootUser (the
// container's MAYFLY_INITDB_ROOT_*) creates the root user once.
func TestIssue15AuthMechanismsAndInitRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := authServer(t, server.Config{DBPath: dir, Auth: true, AuthMechanisms: []string{"SCRAM-SHA-256"}, InitRootUser: "boss", InitRootPassword: "pw"})
	root := authClient(t, s, &options.Credential{Username: "boss", Password: "pw", AuthMechanism: "SCRAM-SHA-256"})
	valEq(t, authRun(t, root, "admin", bson.D{{Key: "usersInfo", Value: "boss"}}), "users.0.mechanisms", bson.A{"SCRAM-SHA-256"})
	valEq(t, authRun(t, root, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "admin.boss"}}), "saslSupportedMechs", bson.A{"SCRAM-SHA-256"})
	wantCode(t, authErr(root, "app", bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{}}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}}), 2, "BadValue")
	sha1 := authClient(t, s, &options.Credential{Username: "boss", Password: "pw", AuthMechanism: "SCRAM-SHA-1"})
	if err := authErr(sha1, "admin", bson.D{{Key: "ping", Value: 1}}); err == nil {
		t.Fatal("SCRAM-SHA-1 authenticated although it is not enabled")
	}
	wantCode(t, authErr(authClient(t, s, nil), "admin", bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-1"}, {Key: "payload", Value: bson.Binary{Data: []byte("n,,n=boss,r=abc")}}}), 334, "MechanismUnavailable")
	noErr(t, s.Close(), "close")

	// A restart with the same settings keeps the user (and its password).
	s2 := authServer(t, server.Config{DBPath: dir, Auth: true, InitRootUser: "boss", InitRootPassword: "other"})
	root2 := authClient(t, s2, &options.Credential{Username: "boss", Password: "pw"})
	authRun(t, root2, "admin", bson.D{{Key: "listDatabases", Value: 1}})
}
