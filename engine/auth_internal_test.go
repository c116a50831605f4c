package engine

import (
	"testing"

	"github.com/mayflydb/mayfly/wire"
)

// TestIssue15AuthLocalhostExceptionLoopbackOnly: the exception is for
// loopback clients creating a user in admin while no user exists.
func TestIssue15AuthLocalhostExceptionLoopbackOnly(t *testing.T) {
	e := &Engine{}
	create := &Command{Name: "createUser"}
	for _, tc := range []struct {
		cmd    *Command
		db     string
		remote string
		want   bool
	}{
		{create, "admin", "127.0.0.1:5000", true},
		{create, "admin", "[::1]:5000", true},
		{create, "admin", "10.1.2.3:5000", false},
		{create, "admin", "192.168.0.7:5000", false},
		{create, "app", "127.0.0.1:5000", false},
		{&Command{Name: "find"}, "admin", "127.0.0.1:5000", false},
	} {
		r := &Request{DB: tc.db, Conn: &wire.ConnInfo{RemoteAddr: tc.remote}}
		if got := e.localhostException(tc.cmd, r); got != tc.want {
			t.Errorf("%s on %s from %s: exception %v, want %v", tc.cmd.Name, tc.db, tc.remote, got, tc.want)
		}
	}
	e.users.users = map[string]*userRec{"admin.root": {User: "root", DB: "admin"}}
	if e.localhostException(create, &Request{DB: "admin", Conn: &wire.ConnInfo{RemoteAddr: "127.0.0.1:1"}}) {
		t.Error("the exception stays open once a user exists")
	}
}

// TestIssue15BuiltinRolesAsYml spot-checks the built-in roles against
// mongod 7.0's builtin_roles.yml, where the coarser earlier table differed:
// a database-wide grant stops at system collections (system.js too),
// backup has no dbStats or dbHash, clusterMonitor no listCollections,
// root is its roles expanded (no anyAction) yet reaches local and config.
func TestIssue15BuiltinRolesAsYml(t *testing.T) {
	has := func(role, db string, need privilege) bool {
		return hasPrivilege(rolePrivileges(roleRef{role, db}), need)
	}
	for _, tc := range []struct {
		role, db string
		need     privilege
		want     bool
	}{
		{"read", "app", priv(nsRes("app", "system.js"), "find"), true},
		{"read", "app", priv(nsRes("app", "system.views"), "find"), false},
		{"read", "app", priv(nsRes("other", "c"), "find"), false},
		{"readWrite", "app", priv(nsRes("app", "system.js"), "insert", "remove"), true},
		{"dbAdmin", "app", priv(nsRes("app", "system.js"), "find"), false},
		{"dbAdmin", "app", priv(dbRes("app"), "analyze", "storageDetails", "validate"), true},
		{"dbAdmin", "app", priv(nsRes("app", "system.profile"), "find", "dropCollection"), true},
		{"backup", "admin", priv(dbRes("app"), "dbStats"), false},
		{"backup", "admin", priv(dbRes("app"), "dbHash"), false},
		{"backup", "admin", priv(nsRes("app", "c"), "find", "collStats", "listIndexes"), true},
		{"backup", "admin", priv(nsRes("local", "oplog.rs"), "find"), true},
		{"backup", "admin", priv(clusterRes(), "listDatabases", "serverStatus", "getParameter"), true},
		{"restore", "admin", priv(clusterRes(), "listDatabases"), false},
		{"restore", "admin", priv(nsRes("app", "c"), "insert", "createIndex", "createUser"), true},
		{"restore", "admin", priv(nsRes("app", "c"), "find"), false},
		{"clusterMonitor", "admin", priv(dbRes("app"), "listCollections"), false},
		{"clusterMonitor", "admin", priv(dbRes("app"), "dbStats"), true},
		{"clusterMonitor", "admin", priv(dbRes("local"), "listCollections"), true},
		{"readAnyDatabase", "admin", priv(nsRes("local", "c"), "find"), false},
		{"readAnyDatabase", "admin", priv(nsRes("app", "system.js"), "find"), true},
		{"userAdminAnyDatabase", "admin", priv(nsRes("admin", "system.roles"), "find", "createIndex"), true},
		{"root", "admin", priv(nsRes("local", "oplog.rs"), "find", "insert"), true},
		{"root", "admin", priv(clusterRes(), "shutdown", "killAnySession", "setParameter"), true},
		{"root", "admin", priv(nsRes("app", "c"), "find", "insert", "update", "remove", "validate", "compact"), true},
		{"root", "admin", priv(clusterRes(), "anyAction"), false},
		{"root", "app", priv(nsRes("app", "c"), "find"), false}, // root exists only on admin
	} {
		if got := has(tc.role, tc.db, tc.need); got != tc.want {
			t.Errorf("%s@%s %v on %+v: got %v, want %v", tc.role, tc.db, tc.need.Actions, tc.need.Res, got, tc.want)
		}
	}
	for _, p := range rolePrivileges(roleRef{"root", "admin"}) {
		for _, a := range p.Actions {
			if a == "*" {
				t.Errorf("root grants anyAction on %+v; mongod's root is its roles' privileges", p.Res)
			}
		}
	}
}
