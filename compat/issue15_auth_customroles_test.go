package compat

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIssue15AuthUserDefinedRoles: createRole with privileges on
// {db, collection} and inherited roles, grant/revoke of privileges and
// roles, rolesInfo, dropRole taking the role from its users; each change
// takes effect on the next command.
func TestIssue15AuthUserDefinedRoles(t *testing.T) {
	t.Parallel()
	s, root := rootedAuthServer(t)
	res := func(db, coll string) bson.D { return bson.D{{Key: "db", Value: db}, {Key: "collection", Value: coll}} }
	pv := func(r bson.D, acts ...string) bson.D {
		a := bson.A{}
		for _, x := range acts {
			a = append(a, x)
		}
		return bson.D{{Key: "resource", Value: r}, {Key: "actions", Value: a}}
	}
	authRun(t, root, "app", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	authRun(t, root, "app", bson.D{{Key: "insert", Value: "d"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	authRun(t, root, "app", bson.D{{Key: "createRole", Value: "cReader"}, {Key: "privileges", Value: bson.A{pv(res("app", "c"), "find")}}, {Key: "roles", Value: bson.A{}}})
	authRun(t, root, "app", bson.D{{Key: "createRole", Value: "viaInherit"}, {Key: "privileges", Value: bson.A{}}, {Key: "roles", Value: bson.A{"cReader"}}})

	wantCode(t, authErr(root, "app", bson.D{{Key: "createRole", Value: "cReader"}, {Key: "privileges", Value: bson.A{}}, {Key: "roles", Value: bson.A{}}}), 51002, "")
	wantCode(t, authErr(root, "app", bson.D{{Key: "createRole", Value: "x"}, {Key: "privileges", Value: bson.A{pv(res("other", "c"), "find")}}, {Key: "roles", Value: bson.A{}}}), 2, "BadValue")
	wantCode(t, authErr(root, "app", bson.D{{Key: "createRole", Value: "x"}, {Key: "privileges", Value: bson.A{pv(res("app", "c"), "fly")}}, {Key: "roles", Value: bson.A{}}}), 9, "FailedToParse")
	wantCode(t, authErr(root, "app", bson.D{{Key: "grantRolesToRole", Value: "cReader"}, {Key: "roles", Value: bson.A{"viaInherit"}}}), 2, "BadValue")

	ann := userClient(t, s, root, "ann", "app", bson.A{"cReader"})
	bob := userClient(t, s, root, "bob", "app", bson.A{"viaInherit"})
	find := func(coll string) bson.D { return bson.D{{Key: "find", Value: coll}} }
	ins := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}
	authRun(t, ann, "app", find("c"))
	authRun(t, bob, "app", find("c"))
	wantCode(t, authErr(ann, "app", find("d")), 13, "Unauthorized")
	wantCode(t, authErr(ann, "app", ins), 13, "Unauthorized")

	authRun(t, root, "app", bson.D{{Key: "grantPrivilegesToRole", Value: "cReader"}, {Key: "privileges", Value: bson.A{pv(res("app", "c"), "insert"), pv(res("app", "d"), "find")}}})
	authRun(t, ann, "app", ins)
	authRun(t, bob, "app", find("d"))
	info := authRun(t, root, "app", bson.D{{Key: "rolesInfo", Value: "cReader"}, {Key: "showPrivileges", Value: true}})
	r0 := info.Lookup("roles").Array().Index(0).Document()
	eq(t, "_id", r0.Lookup("_id").StringValue(), "app.cReader")
	eq(t, "isBuiltin", r0.Lookup("isBuiltin").Boolean(), false)
	valEq(t, r0, "privileges", bson.A{pv(res("app", "c"), "find", "insert"), pv(res("app", "d"), "find")})
	info = authRun(t, root, "app", bson.D{{Key: "rolesInfo", Value: "viaInherit"}})
	valEq(t, info.Lookup("roles").Array().Index(0).Document(), "inheritedRoles", bson.A{bson.D{{Key: "role", Value: "cReader"}, {Key: "db", Value: "app"}}})
	info = authRun(t, root, "app", bson.D{{Key: "rolesInfo", Value: "read"}})
	eq(t, "built-in", info.Lookup("roles").Array().Index(0).Document().Lookup("isBuiltin").Boolean(), true)
	// A user sees the roles they hold without viewRole.
	authRun(t, ann, "app", bson.D{{Key: "rolesInfo", Value: "cReader"}})
	wantCode(t, authErr(ann, "app", bson.D{{Key: "rolesInfo", Value: 1}}), 13, "Unauthorized")

	authRun(t, root, "app", bson.D{{Key: "revokePrivilegesFromRole", Value: "cReader"}, {Key: "privileges", Value: bson.A{pv(res("app", "c"), "insert")}}})
	wantCode(t, authErr(ann, "app", ins), 13, "Unauthorized")
	authRun(t, root, "app", bson.D{{Key: "updateRole", Value: "viaInherit"}, {Key: "roles", Value: bson.A{}}})
	wantCode(t, authErr(bob, "app", find("c")), 13, "Unauthorized")

	authRun(t, root, "app", bson.D{{Key: "dropRole", Value: "cReader"}})
	wantCode(t, authErr(ann, "app", find("c")), 13, "Unauthorized")
	valEq(t, authRun(t, root, "app", bson.D{{Key: "usersInfo", Value: "ann"}}), "users.0.roles", bson.A{})
	wantCode(t, authErr(root, "app", bson.D{{Key: "dropRole", Value: "cReader"}}), 31, "RoleNotFound")
}
