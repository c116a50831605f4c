package compat

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestIssue15AuthAnyDatabaseRolesSkipLocalAndConfig: readAnyDatabase,
// readWriteAnyDatabase and dbAdminAnyDatabase grant their actions on every
// database except local and config (mongod's anyNormalResource; the
// manual's Built-In Roles: "on all databases except local and config"), and
// so does a user-defined privilege on {db: "", collection: ""}.
func TestIssue15AuthAnyDatabaseRolesSkipLocalAndConfig(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	for _, db := range []string{"app", "local", "config"} {
		authRun(t, root, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	}
	authRun(t, root, "admin", bson.D{{Key: "createRole", Value: "anyFind"}, {Key: "roles", Value: bson.A{}},
		{Key: "privileges", Value: bson.A{bson.D{{Key: "resource", Value: bson.D{{Key: "db", Value: ""}, {Key: "collection", Value: ""}}}, {Key: "actions", Value: bson.A{"find"}}}}}})
	find := bson.D{{Key: "find", Value: "c"}}
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}
	collMod := bson.D{{Key: "collMod", Value: "c"}}
	for _, c := range []struct {
		role string
		cmd  bson.D
	}{
		{"readAnyDatabase", find},
		{"readWriteAnyDatabase", insert},
		{"dbAdminAnyDatabase", collMod},
		{"anyFind", find},
	} {
		cli := userClient(t, s, root, "u_"+c.role, "admin", bson.A{c.role})
		if err := authErr(cli, "app", c.cmd); err != nil {
			t.Errorf("%s: %s on app: %v", c.role, ejson(c.cmd), err)
		}
		for _, db := range []string{"local", "config"} {
			err := authErr(cli, db, c.cmd)
			if code, _, _ := errCode(err); code != 13 {
				t.Errorf("%s: %s on %s: got %v, want 13 Unauthorized", c.role, ejson(c.cmd), db, err)
			}
		}
	}
	// root (anyResource) and read on local itself still reach local.
	if err := authErr(root, "local", find); err != nil {
		t.Errorf("root: find on local: %v", err)
	}
	cli := userClient(t, s, root, "u_readLocal", "admin", bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "local"}}})
	if err := authErr(cli, "local", find); err != nil {
		t.Errorf("read@local: find on local: %v", err)
	}
}

// TestIssue15AuthClusterRolesAsMongod: the cluster roles' database
// privileges as mongod 7.0's builtin_roles.yml: clusterMonitor reads config
// and local and finds in system.profile; hostManager kills cursors on
// normal databases; clusterManager reads config and writes config and local;
// clusterAdmin's dropDatabase stops at local and config.
func TestIssue15AuthClusterRolesAsMongod(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	for _, db := range []string{"app", "local", "config"} {
		authRun(t, root, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	}
	find := bson.D{{Key: "find", Value: "c"}}
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}
	killCursors := bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{int64(12345)}}}
	dropDB := bson.D{{Key: "dropDatabase", Value: 1}}
	clients := map[string]*mongo.Client{}
	for _, c := range []struct {
		role, db string
		cmd      bson.D
		ok       bool
	}{
		{"clusterMonitor", "config", find, true},
		{"clusterMonitor", "local", find, true},
		{"clusterMonitor", "app", bson.D{{Key: "find", Value: "system.profile"}}, true},
		{"clusterMonitor", "app", find, false},
		{"clusterMonitor", "config", insert, false},
		{"hostManager", "app", killCursors, true},
		{"hostManager", "app", find, false},
		{"clusterManager", "config", find, true},
		{"clusterManager", "config", insert, true},
		{"clusterManager", "local", insert, true},
		{"clusterManager", "app", insert, false},
		{"clusterAdmin", "local", dropDB, false},
		{"clusterAdmin", "app2", dropDB, true},
	} {
		cli := clients[c.role]
		if cli == nil {
			cli = userClient(t, s, root, "u_"+c.role, "admin", bson.A{c.role})
			clients[c.role] = cli
		}
		err := authErr(cli, c.db, c.cmd)
		code, _, _ := errCode(err)
		switch {
		case c.ok && code == 13:
			t.Errorf("%s: %s on %s: %v, want it allowed", c.role, ejson(c.cmd), c.db, err)
		case !c.ok && code != 13:
			t.Errorf("%s: %s on %s: got %v, want 13 Unauthorized", c.role, ejson(c.cmd), c.db, err)
		}
	}
}

// TestIssue15AuthBackupRestoreAsMongod: backup and restore as mongod 7.0's
// builtin_roles.yml: backup finds admin.system.roles and every database's
// system.users, lists any collection (system ones too) and writes
// config.settings; restore reaches every database's system.users.
func TestIssue15AuthBackupRestoreAsMongod(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	authRun(t, root, "app", bson.D{{Key: "createUser", Value: "appuser"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}})
	backup := userClient(t, s, root, "u_backup", "admin", bson.A{"backup"})
	restore := userClient(t, s, root, "u_restore", "admin", bson.A{"restore"})
	for _, c := range []struct {
		who string
		cli *mongo.Client
		db  string
		cmd bson.D
		ok  bool
	}{
		{"backup", backup, "admin", bson.D{{Key: "find", Value: "system.roles"}}, true},
		{"backup", backup, "app", bson.D{{Key: "find", Value: "system.users"}}, true},
		{"backup", backup, "admin", bson.D{{Key: "listIndexes", Value: "system.users"}}, true},
		{"backup", backup, "config", bson.D{{Key: "insert", Value: "settings"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "x"}}}}}, true},
		{"backup", backup, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}, false},
		{"restore", restore, "app", bson.D{{Key: "find", Value: "system.users"}}, true},
		{"restore", restore, "app", bson.D{{Key: "find", Value: "c"}}, false},
	} {
		err := authErr(c.cli, c.db, c.cmd)
		code, _, _ := errCode(err)
		switch {
		case c.ok && code == 13:
			t.Errorf("%s: %s on %s: %v, want it allowed", c.who, ejson(c.cmd), c.db, err)
		case !c.ok && code != 13:
			t.Errorf("%s: %s on %s: got %v, want 13 Unauthorized", c.who, ejson(c.cmd), c.db, err)
		}
	}
}

// TestIssue15AuthReadAndDbAdminActionsAsMongod: read's actions include
// planCacheRead, and dbAdmin's privilege on system.profile is read's
// actions plus convertToCapped, createCollection and dropCollection
// (builtin_roles.yml), as connectionStatus showPrivileges lists them.
func TestIssue15AuthReadAndDbAdminActionsAsMongod(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	actionsOn := func(role, coll string) []string {
		cli := userClient(t, s, root, "u_"+role, "app", bson.A{role})
		st := authRun(t, cli, "admin", bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}})
		vals, err := st.Lookup("authInfo", "authenticatedUserPrivileges").Array().Values()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			d := v.Document()
			if d.Lookup("resource", "db").StringValue() == "app" && d.Lookup("resource", "collection").StringValue() == coll {
				var out []string
				av, _ := d.Lookup("actions").Array().Values()
				for _, a := range av {
					out = append(out, a.StringValue())
				}
				return out
			}
		}
		t.Fatalf("%s: no privilege on app.%s in %v", role, coll, st)
		return nil
	}
	has := func(what string, got []string, want ...string) {
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				t.Errorf("%s: %v lacks %s", what, got, w)
			}
		}
	}
	has("read on app", actionsOn("read", ""), "find", "planCacheRead", "listSearchIndexes")
	has("dbAdmin on app.system.profile", actionsOn("dbAdmin", "system.profile"), "find", "planCacheRead", "convertToCapped", "createCollection", "dropCollection")
}

// TestIssue15AuthCursorsNeedNoAction: getMore and killCursors need no
// action of their own, as in mongod 7.0 (checkAuthForGetMore,
// checkAuthForKillCursors): a user with only listCollections pages its
// listCollections cursor; another user's cursor is refused with the
// "not authorized on <db> to execute command" message. system.js is not
// part of a database-wide grant: read names it, a user-defined {db, ""}
// privilege does not reach it.
func TestIssue15AuthCursorsNeedNoAction(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	for _, c := range []string{"a", "b", "c", "system.js"} {
		authRun(t, root, "app", bson.D{{Key: "insert", Value: c}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	}
	authRun(t, root, "app", bson.D{{Key: "createRole", Value: "lister"}, {Key: "roles", Value: bson.A{}},
		{Key: "privileges", Value: bson.A{bson.D{{Key: "resource", Value: bson.D{{Key: "db", Value: "app"}, {Key: "collection", Value: ""}}}, {Key: "actions", Value: bson.A{"listCollections", "find"}}}}}})
	lister := userClient(t, s, root, "lister", "app", bson.A{"lister"})
	r := authRun(t, lister, "app", bson.D{{Key: "listCollections", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1}}}})
	id := r.Lookup("cursor", "id").Int64()
	if id == 0 {
		t.Fatalf("listCollections returned everything in one batch: %v", r)
	}
	coll := r.Lookup("cursor", "ns").StringValue()[len("app."):]
	authRun(t, lister, "app", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}, {Key: "batchSize", Value: 1}})

	reader := userClient(t, s, root, "reader", "app", bson.A{"read"})
	err := authErr(reader, "app", bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{id}}})
	wantCode(t, err, 13, "Unauthorized")
	if want := "not authorized on app to execute command { killCursors: "; !strings.HasPrefix(errMsg(err), want) {
		t.Errorf("killCursors message %q, want it to start %q", errMsg(err), want)
	}
	wantCode(t, authErr(reader, "app", bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}}), 13, "Unauthorized")
	// An unknown cursor is not an authorization matter.
	wantCode(t, authErr(reader, "app", bson.D{{Key: "getMore", Value: int64(424242)}, {Key: "collection", Value: "a"}}), 43, "CursorNotFound")
	authRun(t, lister, "app", bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{id}}})

	authRun(t, reader, "app", bson.D{{Key: "find", Value: "system.js"}})
	wantCode(t, authErr(lister, "app", bson.D{{Key: "find", Value: "system.js"}}), 13, "Unauthorized")
}

// TestIssue15AuthAggregateStages: an aggregate whose first stage makes its
// own documents needs no find on the namespace, only that stage's
// privileges (mongod's getPrivilegesForAggregate): $collStats collStats,
// $indexStats indexStats; $currentOp inprog, $listSessions and
// $listLocalSessions listSessions (always, unlike mongod: see below).
func TestIssue15AuthAggregateStages(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	authRun(t, root, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	reader := userClient(t, s, root, "reader", "app", bson.A{"read"})
	monitor := userClient(t, s, root, "monitor", "admin", bson.A{"clusterMonitor"})
	agg := func(stage bson.D) bson.D {
		return bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{stage}}, {Key: "cursor", Value: bson.D{}}}
	}
	adminAgg := func(stage bson.D) bson.D {
		return bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{stage}}, {Key: "cursor", Value: bson.D{}}}
	}
	for _, c := range []struct {
		who string
		cli *mongo.Client
		db  string
		cmd bson.D
		ok  bool
	}{
		// clusterMonitor has collStats and indexStats on app, not find.
		{"clusterMonitor", monitor, "app", agg(bson.D{{Key: "$collStats", Value: bson.D{{Key: "count", Value: bson.D{}}}}}), true},
		{"clusterMonitor", monitor, "app", agg(bson.D{{Key: "$indexStats", Value: bson.D{}}}), true},
		{"clusterMonitor", monitor, "app", agg(bson.D{{Key: "$match", Value: bson.D{}}}), false},
		{"read", reader, "app", agg(bson.D{{Key: "$collStats", Value: bson.D{{Key: "count", Value: bson.D{}}}}}), true},
		{"read", reader, "app", agg(bson.D{{Key: "$indexStats", Value: bson.D{}}}), false},
		// mongod shows a user their own operations without inprog;
		// mayfly's operations do not record their user: inprog always.
		{"read", reader, "admin", adminAgg(bson.D{{Key: "$currentOp", Value: bson.D{}}}), false},
		{"read", reader, "admin", adminAgg(bson.D{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}}}}), false},
		{"clusterMonitor", monitor, "admin", adminAgg(bson.D{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}}}}), true},
		// mongod lets a user list their own sessions; mayfly's sessions do
		// not record their user yet, so it asks listSessions always.
		{"read", reader, "admin", adminAgg(bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}), false},
		{"read", reader, "admin", adminAgg(bson.D{{Key: "$listLocalSessions", Value: bson.D{{Key: "allUsers", Value: true}}}}), false},
		{"clusterMonitor", monitor, "admin", adminAgg(bson.D{{Key: "$listLocalSessions", Value: bson.D{{Key: "allUsers", Value: true}}}}), true},
	} {
		err := authErr(c.cli, c.db, c.cmd)
		code, _, _ := errCode(err)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %s on %s: %v, want it to run", c.who, ejson(c.cmd), c.db, err)
		case !c.ok && code != 13:
			t.Errorf("%s: %s on %s: got %v, want 13 Unauthorized", c.who, ejson(c.cmd), c.db, err)
		}
	}
}
