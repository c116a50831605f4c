package compat

import (
	"context"
	"sort"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/server"
)

// rootedAuthServer starts a --auth server with a root user (made through
// the localhost exception) and returns a root client.
func rootedAuthServer(t *testing.T) (*server.Server, *mongo.Client) {
	t.Helper()
	s := authServer(t, server.Config{Auth: true})
	authRun(t, authClient(t, s, nil), "admin", bson.D{{Key: "createUser", Value: "root"}, {Key: "pwd", Value: "rootpw"}, {Key: "roles", Value: bson.A{"root"}}})
	return s, authClient(t, s, &options.Credential{Username: "root", Password: "rootpw"})
}

func userClient(t *testing.T, s *server.Server, root *mongo.Client, name, db string, roles bson.A) *mongo.Client {
	t.Helper()
	authRun(t, root, db, bson.D{{Key: "createUser", Value: name}, {Key: "pwd", Value: "pw-" + name}, {Key: "roles", Value: roles}})
	return authClient(t, s, &options.Credential{Username: name, Password: "pw-" + name, AuthSource: db})
}

// TestIssue15AuthRoleMatrix: each built-in role against a matrix of
// commands, allowed or refused with 13 and mongod's message.
func TestIssue15AuthRoleMatrix(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	authRun(t, root, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	authRun(t, root, "other", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})

	type probe struct {
		db  string
		cmd bson.D
	}
	probes := map[string]probe{
		"find":          {"app", bson.D{{Key: "find", Value: "c"}}},
		"count":         {"app", bson.D{{Key: "count", Value: "c"}}},
		"aggregate":     {"app", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}}},
		"insert":        {"app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}},
		"update":        {"app", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: -1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}}}}}},
		"delete":        {"app", bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: -1}}}, {Key: "limit", Value: 0}}}}}},
		"createIndexes": {"app", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}},
		"collMod":       {"app", bson.D{{Key: "collMod", Value: "c"}}},
		"listColls":     {"app", bson.D{{Key: "listCollections", Value: 1}}},
		"dbStats":       {"app", bson.D{{Key: "dbStats", Value: 1}}},
		"usersInfo":     {"app", bson.D{{Key: "usersInfo", Value: 1}}},
		"findOther":     {"other", bson.D{{Key: "find", Value: "c"}}},
		"insertOther":   {"other", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}},
		"serverStatus":  {"admin", bson.D{{Key: "serverStatus", Value: 1}}},
		"cmdLineOpts":   {"admin", bson.D{{Key: "getCmdLineOpts", Value: 1}}},
		"currentOp":     {"admin", bson.D{{Key: "currentOp", Value: 1}}},
		"setParameter":  {"admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: true}}},
		"collStats":     {"app", bson.D{{Key: "collStats", Value: "c"}}},
		"listIndexes":   {"app", bson.D{{Key: "listIndexes", Value: "c"}}},
		"validate":      {"app", bson.D{{Key: "validate", Value: "c"}}},
		"drop":          {"app", bson.D{{Key: "drop", Value: "nope"}}},
		"profileRead":   {"app", bson.D{{Key: "profile", Value: -1}}},
		"profileSet":    {"app", bson.D{{Key: "profile", Value: 0}}},
		"rolesInfo":     {"app", bson.D{{Key: "rolesInfo", Value: 1}}},
		"findUsers":     {"admin", bson.D{{Key: "find", Value: "system.users"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: "none"}}}}},
		"listIdxUsers":  {"admin", bson.D{{Key: "listIndexes", Value: "system.users"}}},
		"top":           {"admin", bson.D{{Key: "top", Value: 1}}},
		"hostInfo":      {"admin", bson.D{{Key: "hostInfo", Value: 1}}},
		"getLog":        {"admin", bson.D{{Key: "getLog", Value: "startupWarnings"}}},
		"fsync":         {"admin", bson.D{{Key: "fsync", Value: 1}}},
		"killOp":        {"admin", bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: 987654}}},
	}
	// As mongod 7.0's builtin_roles.yml: clusterMonitor has collStats and
	// dbStats on every normal database but not listCollections or
	// listIndexes; backup finds every normal collection, and lists and
	// collStats anything, but has no dbStats; restore writes but never
	// reads normal collections; {profile: -1} needs only find on
	// system.profile.
	read := "find count aggregate listColls dbStats collStats listIndexes"
	rw := read + " insert update delete createIndexes drop"
	dbAdmin := "createIndexes collMod listColls dbStats collStats listIndexes validate drop profileRead profileSet"
	monitor := "serverStatus cmdLineOpts currentOp dbStats collStats profileRead top hostInfo getLog"
	for _, tc := range []struct {
		role, db string
		allowed  string
	}{
		{"read", "app", read},
		{"readWrite", "app", rw},
		{"dbAdmin", "app", dbAdmin},
		{"userAdmin", "app", "usersInfo rolesInfo"},
		{"dbOwner", "app", rw + " collMod validate profileRead profileSet usersInfo rolesInfo"},
		{"readAnyDatabase", "admin", read + " findOther"},
		{"readWriteAnyDatabase", "admin", rw + " findOther insertOther"},
		{"userAdminAnyDatabase", "admin", "usersInfo rolesInfo findUsers listIdxUsers"},
		{"dbAdminAnyDatabase", "admin", dbAdmin},
		{"clusterMonitor", "admin", monitor},
		{"clusterAdmin", "admin", monitor + " setParameter fsync killOp"},
		{"backup", "admin", "find count aggregate findOther listColls collStats listIndexes profileRead findUsers listIdxUsers serverStatus"},
		{"restore", "admin", "insert insertOther createIndexes collMod listColls drop usersInfo rolesInfo findUsers"},
		{"root", "admin", strings.Join(keysOf(probes), " ")},
	} {
		name := "u_" + tc.role
		cli := userClient(t, s, root, name, "admin", bson.A{bson.D{{Key: "role", Value: tc.role}, {Key: "db", Value: tc.db}}})
		allowed := map[string]bool{}
		for _, p := range strings.Fields(tc.allowed) {
			allowed[p] = true
		}
		for _, pn := range keysOf(probes) {
			p := probes[pn]
			err := authErr(cli, p.db, p.cmd)
			if allowed[pn] {
				if err != nil {
					t.Errorf("%s: %s refused: %v", tc.role, pn, err)
				}
				continue
			}
			if c, _, _ := errCode(err); c != 13 {
				t.Errorf("%s: %s: got %v, want 13 Unauthorized", tc.role, pn, err)
				continue
			}
			want := "not authorized on " + p.db + " to execute command { " + p.cmd[0].Key + ": "
			if !strings.HasPrefix(errMsg(err), want) {
				t.Errorf("%s: %s: message %q, want it to start %q", tc.role, pn, errMsg(err), want)
			}
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestIssue15AuthCursorsAndStatus: cursors belong to the user who opened
// them; connectionStatus shows privileges; listDatabases lists only the
// user's databases.
func TestIssue15AuthCursorsAndStatus(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	authRun(t, root, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}}})
	authRun(t, root, "other", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	ann := userClient(t, s, root, "ann", "app", bson.A{"read"})
	bob := userClient(t, s, root, "bob", "app", bson.A{"read"})

	r := authRun(t, ann, "app", bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}})
	id := r.Lookup("cursor", "id").Int64()
	err := authErr(bob, "app", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
	wantCode(t, err, 13, "Unauthorized")
	wantCode(t, authErr(bob, "app", bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}}), 13, "Unauthorized")
	r = authRun(t, ann, "app", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}})
	valEq(t, r, "cursor.nextBatch", bson.A{bson.D{{Key: "_id", Value: int32(2)}}})
	authRun(t, ann, "app", bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}})

	st := authRun(t, ann, "admin", bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}})
	valEq(t, st, "authInfo.authenticatedUserRoles", bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "app"}}})
	p := st.Lookup("authInfo", "authenticatedUserPrivileges").Array().Index(0).Document()
	docEq(t, p.Lookup("resource").Document(), bson.D{{Key: "db", Value: "app"}, {Key: "collection", Value: ""}})
	if !strings.Contains(p.Lookup("actions").String(), `"find"`) {
		t.Fatalf("read's actions: %v", p.Lookup("actions"))
	}

	res, err := ann.ListDatabaseNames(context.Background(), bson.D{})
	noErr(t, err, "listDatabases")
	strsEq(t, "ann's databases", res, []string{"app"})
	all, err := root.ListDatabaseNames(context.Background(), bson.D{})
	noErr(t, err, "listDatabases")
	if len(all) < 3 {
		t.Fatalf("root's databases: %v", all)
	}
}

// TestIssue15AuthSystemUsersWrites: a direct change to admin.system.users
// (as mongorestore makes) takes effect for authorization at once.
func TestIssue15AuthSystemUsersWrites(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	ann := userClient(t, s, root, "ann", "app", bson.A{"read"})
	wantCode(t, authErr(ann, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}), 13, "Unauthorized")
	_, err := root.Database("admin").Collection("system.users").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "app.ann"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "app"}}}}}}})
	noErr(t, err, "update system.users")
	authRun(t, ann, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	_, err = root.Database("admin").Collection("system.users").DeleteOne(context.Background(), bson.D{{Key: "_id", Value: "app.ann"}})
	noErr(t, err, "delete from system.users")
	wantCode(t, authErr(ann, "app", bson.D{{Key: "find", Value: "c"}}), 13, "Unauthorized")
}
