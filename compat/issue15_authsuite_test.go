package compat

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
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
