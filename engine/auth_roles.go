package engine

// Built-in roles (mongod's role_graph_builtin_roles.cpp): the database
// roles exist on every database, the others only on admin.
var dbRoles = map[string]bool{
	"read": true, "readWrite": true, "dbAdmin": true, "userAdmin": true, "dbOwner": true,
}

var adminRoles = map[string]bool{
	"readAnyDatabase": true, "readWriteAnyDatabase": true, "userAdminAnyDatabase": true,
	"dbAdminAnyDatabase": true, "clusterMonitor": true, "clusterManager": true, "hostManager": true,
	"clusterAdmin": true, "backup": true, "restore": true, "root": true, "directShardOperations": true,
}

func builtinRoleExists(r roleRef) bool {
	return dbRoles[r.Role] || (r.DB == "admin" && adminRoles[r.Role])
}
