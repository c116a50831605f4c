package engine

import (
	"fmt"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/wire"
)

// Authorization as mongod's: a privilege is a set of actions (mongod's
// action names) on a resource; built-in roles grant privileges
// (role_graph_builtin_roles.cpp, coarsely); each command of the table
// names the privileges it needs (its checkAuthForOperation).

// resource is {db, collection}, {cluster: true} or {anyResource: true}.
// An empty db means any database; an empty collection any collection of
// the database that is not a system collection.
// Normal (with an empty db) is mongod's anyNormalResource as the
// *AnyDatabase roles use it: every database except local and config.
type resource struct {
	Cluster, Any bool
	DB, Coll     string
	Normal       bool
}

func (r resource) doc() bson.D {
	switch {
	case r.Any:
		return bson.D{{Key: "anyResource", Value: true}}
	case r.Cluster:
		return bson.D{{Key: "cluster", Value: true}}
	}
	return bson.D{{Key: "db", Value: r.DB}, {Key: "collection", Value: r.Coll}}
}

// covers reports whether a granted resource g includes the needed one n.
func (g resource) covers(n resource) bool {
	switch {
	case g.Any:
		return true
	case g.Cluster || n.Cluster:
		return g.Cluster && n.Cluster
	}
	if g.DB != "" && g.DB != n.DB {
		return false
	}
	if g.Normal && (n.DB == "local" || n.DB == "config") {
		return false
	}
	if g.Coll != "" {
		return g.Coll == n.Coll
	}
	// A database-wide grant covers its normal collections and the
	// database itself, not system collections (system.js neither: the
	// roles that reach it name it).
	return !strings.HasPrefix(n.Coll, "system.")
}

type privilege struct {
	Res     resource
	Actions []string
}

func dbRes(db string) resource               { return resource{DB: db} }
func nsRes(db, coll string) resource         { return resource{DB: db, Coll: coll} }
func clusterRes() resource                   { return resource{Cluster: true} }
func anyNormalRes() resource                 { return resource{Normal: true} }
func priv(r resource, a ...string) privilege { return privilege{r, a} }

var (
	readActions      = []string{"changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors", "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead"}
	readWriteActions = withActions(readActions, "cleanupStructuredEncryptionData", "compactStructuredEncryptionData", "convertToCapped", "createCollection",
		"createIndex", "createSearchIndexes", "dropCollection", "dropIndex", "dropSearchIndex", "insert", "remove", "renameCollectionSameDB", "update", "updateSearchIndex")
	userAdminActions = []string{"changeCustomData", "changePassword", "createRole", "createUser", "dropRole", "dropUser", "grantRole", "revokeRole", "setAuthenticationRestriction", "viewRole", "viewUser"}
	dbAdminActions   = []string{"analyze", "bypassDocumentValidation", "collMod", "collStats", "compact", "convertToCapped", "createCollection", "createIndex", "createSearchIndexes",
		"dbStats", "dropCollection", "dropDatabase", "dropIndex", "dropSearchIndex", "enableProfiler", "listCollections", "listIndexes", "listSearchIndexes",
		"planCacheIndexFilter", "planCacheRead", "planCacheWrite", "reIndex", "renameCollectionSameDB", "storageDetails", "updateSearchIndex", "validate"}
	// dbAdmin's privilege on system.profile.
	profileActions = withActions(readActions, "convertToCapped", "createCollection", "dropCollection")
	monitorActions = []string{"connPoolStats", "getCmdLineOpts", "getDefaultRWConcern", "getLog", "getParameter", "getShardMap", "hostInfo", "inprog",
		"listDatabases", "listSampledQueries", "listSessions", "listShards", "netstat", "operationMetrics", "replSetGetConfig", "replSetGetStatus",
		"serverStatus", "shardedDataDistribution", "shardingState", "top", "useUUID"}
	monitorDBActions = []string{"collStats", "dbStats", "getDatabaseVersion", "getShardVersion", "indexStats"}
	hostMgrActions   = []string{"applicationMessage", "auditConfigure", "connPoolSync", "dropConnections", "flushRouterConfig", "fsync", "invalidateUserCache",
		"killAnyCursor", "killAnySession", "killop", "logRotate", "oidReset", "replSetResizeOplog", "resync", "rotateCertificates", "setParameter",
		"shutdown", "touch", "trafficRecord", "unlock"}
	clusterMgrActions = []string{"addShard", "appendOplogNote", "applicationMessage", "checkMetadataConsistency", "cleanupOrphaned", "flushRouterConfig",
		"getChangeStreamState", "getClusterParameter", "getDefaultRWConcern", "listSessions", "listShards", "removeShard", "replSetConfigure",
		"replSetGetConfig", "replSetGetStatus", "replSetStateChange", "resync", "runTenantMigration", "setChangeStreamState", "setClusterParameter",
		"setDefaultRWConcern", "setFeatureCompatibilityVersion"}
	clusterMgrDBActions = []string{"analyzeShardKey", "clearJumboFlag", "configureQueryAnalyzer", "enableSharding", "moveChunk", "refineCollectionShardKey",
		"reshardCollection", "splitChunk", "splitVector"}
	restoreWriteActions = []string{"bypassDocumentValidation", "collMod", "convertToCapped", "createCollection", "createIndex", "createSearchIndexes",
		"dropCollection", "insert", "updateSearchIndex"}
)

func withActions(base []string, more ...string) []string {
	return append(append([]string{}, base...), more...)
}

// adminRolePrivileges are the privileges of the roles that exist only on
// admin, computed once.
var adminRolePrivileges = func() map[string][]privilege {
	m := map[string][]privilege{}
	for r := range adminRoles {
		m[r] = mergePrivileges(nil, builtinPrivileges(roleRef{r, "admin"}), false)
	}
	return m
}()

// rolePrivileges is what a built-in role granted on db gives, its
// privileges merged per resource as mongod lists them.
func rolePrivileges(role roleRef) []privilege {
	if dbRoles[role.Role] {
		return mergePrivileges(nil, builtinPrivileges(role), false)
	}
	if role.DB != "admin" {
		return nil
	}
	return adminRolePrivileges[role.Role]
}

// builtinPrivileges is mongod 7.0's src/mongo/db/auth/builtin_roles.yml
// (the roles a role includes expanded into their privileges): match type
// database is dbRes, exact_namespace nsRes, collection (that name in any
// database) nsRes("", name), any_normal anyNormalRes, any anyResource,
// cluster clusterRes. Its any_system_buckets privileges have no
// counterpart here (mayfly has no time-series collections).
func builtinPrivileges(role roleRef) []privilege {
	db := role.DB
	sub := func(r string, on string) []privilege { return builtinPrivileges(roleRef{r, on}) }
	anyRes := resource{Any: true}
	switch role.Role {
	case "read":
		return []privilege{priv(dbRes(db), readActions...), priv(nsRes(db, "system.js"), readActions...)}
	case "readWrite":
		return []privilege{priv(dbRes(db), readWriteActions...), priv(nsRes(db, "system.js"), readWriteActions...)}
	case "dbAdmin":
		return []privilege{priv(dbRes(db), withActions(dbAdminActions, "configureQueryAnalyzer")...), priv(nsRes(db, "system.profile"), profileActions...)}
	case "userAdmin":
		return []privilege{priv(dbRes(db), userAdminActions...)}
	case "dbOwner":
		return append(append(sub("readWrite", db), sub("dbAdmin", db)...), sub("userAdmin", db)...)
	}
	if db != "admin" {
		return nil
	}
	switch role.Role {
	case "readAnyDatabase":
		return []privilege{priv(anyNormalRes(), readActions...), priv(clusterRes(), "listDatabases"), priv(nsRes("", "system.js"), readActions...)}
	case "readWriteAnyDatabase":
		return append(sub("readAnyDatabase", db), priv(anyNormalRes(), readWriteActions...), priv(nsRes("", "system.js"), readWriteActions...))
	case "userAdminAnyDatabase":
		sysAuth := withActions(readActions, "createIndex", "createSearchIndexes", "dropIndex", "dropSearchIndex")
		return []privilege{priv(anyNormalRes(), withActions(userAdminActions, "listCachedAndActiveUsers")...),
			priv(dbRes("local"), userAdminActions...), priv(dbRes("config"), userAdminActions...),
			priv(clusterRes(), "authSchemaUpgrade", "invalidateUserCache", "listDatabases", "viewUser"),
			priv(nsRes("admin", "system.users"), sysAuth...), priv(nsRes("admin", "system.roles"), sysAuth...),
			priv(nsRes("", "system.users"), readActions...), priv(nsRes("admin", "system.version"), readActions...),
			priv(nsRes("admin", "system.backup_users"), readActions...)}
	case "dbAdminAnyDatabase":
		return []privilege{priv(clusterRes(), "applyOps", "listDatabases"), priv(anyNormalRes(), withActions(dbAdminActions, "configureQueryAnalyzer")...),
			priv(nsRes("", "system.profile"), profileActions...)}
	case "clusterMonitor":
		out := append(sub("read", "config"), sub("read", "local")...)
		return append(out, priv(clusterRes(), monitorActions...), priv(anyNormalRes(), monitorDBActions...),
			priv(dbRes("config"), monitorDBActions...), priv(nsRes("config", "system.sessions"), monitorDBActions...),
			priv(dbRes("local"), monitorDBActions...), priv(nsRes("local", "system.replset"), "find"),
			priv(nsRes("local", "replset.election"), "find"), priv(nsRes("local", "replset.minvalid"), "find"),
			priv(nsRes("", "system.profile"), "find"))
	case "hostManager":
		return []privilege{priv(clusterRes(), hostMgrActions...), priv(anyNormalRes(), "killCursors")}
	case "clusterManager":
		iur := []string{"insert", "update", "remove"}
		return append(sub("read", "config"), priv(clusterRes(), clusterMgrActions...), priv(anyNormalRes(), clusterMgrDBActions...),
			priv(dbRes("config"), clusterMgrDBActions...), priv(dbRes("local"), clusterMgrDBActions...),
			priv(nsRes("local", "system.replset"), readActions...), priv(anyRes, "dbCheck"),
			priv(nsRes("local", "system.healthlog"), readActions...), priv(dbRes("config"), iur...), priv(dbRes("local"), iur...),
			priv(nsRes("local", "replset.election"), iur...), priv(nsRes("local", "replset.minvalid"), iur...))
	case "clusterAdmin":
		out := append(append(sub("clusterMonitor", db), sub("hostManager", db)...), sub("clusterManager", db)...)
		return append(out, priv(anyNormalRes(), "dropDatabase"), priv(anyRes, "exportCollection", "importCollection"))
	case "backup":
		// __queryableBackup, then backup's own.
		return []privilege{priv(anyRes, "collStats", "listCollections", "listIndexes", "listSearchIndexes"), priv(anyNormalRes(), "find"),
			priv(clusterRes(), "getParameter", "listDatabases", "useUUID"), priv(dbRes("config"), "find"), priv(dbRes("local"), "find"),
			priv(nsRes("local", "replset.election"), "find"), priv(nsRes("local", "replset.minvalid"), "find"),
			priv(nsRes("", "system.js"), "find"), priv(nsRes("", "system.users"), "find"), priv(nsRes("", "system.profile"), "find"),
			priv(nsRes("admin", "system.backup_users"), "find"), priv(nsRes("admin", "system.roles"), "find"),
			priv(nsRes("admin", "system.version"), "find"), priv(nsRes("config", "settings"), "find"),
			priv(clusterRes(), "appendOplogNote", "serverStatus", "setUserWriteBlockMode"), priv(nsRes("config", "settings"), "insert", "update")}
	case "restore":
		w := restoreWriteActions
		return []privilege{priv(clusterRes(), "applyOps", "bypassWriteBlockingMode", "forceUUID", "getParameter", "setUserWriteBlockMode", "useUUID"),
			priv(dbRes("local"), w...), priv(dbRes("config"), w...), priv(nsRes("local", "system.replset"), w...),
			priv(nsRes("local", "replset.election"), w...), priv(nsRes("local", "replset.minvalid"), w...),
			priv(anyRes, "listCollections"), priv(anyNormalRes(), append(withActions(w), userAdminActions...)...),
			priv(nsRes("", "system.js"), w...), priv(nsRes("admin", "tempusers"), "find"), priv(nsRes("admin", "temproles"), "find"),
			priv(nsRes("admin", "system.backup_users"), w...), priv(nsRes("admin", "system.version"), withActions(w, "find")...),
			priv(nsRes("", "system.users"), withActions(w, "find", "remove", "update")...), priv(nsRes("admin", "system.roles"), "createIndex")}
	case "directShardOperations":
		return []privilege{priv(clusterRes(), "issueDirectShardOperations")}
	case "root":
		var out []privilege
		for _, r := range []string{"clusterAdmin", "userAdminAnyDatabase", "dbAdminAnyDatabase", "readWriteAnyDatabase", "backup", "restore", "directShardOperations"} {
			out = append(out, sub(r, db)...)
		}
		return append(out, priv(anyRes, "validate"), priv(clusterRes(), "useTenant"),
			priv(nsRes("config", "system.preimages"), "find", "remove"),
			priv(nsRes("config", "system.change_collection"), "find", "insert", "remove", "update"))
	}
	return nil
}

// userPrivileges merges the privileges of the users' roles, built-in and
// user-defined (with the roles those inherit).
func (e *Engine) userPrivileges(users []*userRec) []privilege {
	var out []privilege
	seen := map[roleRef]bool{}
	for _, u := range users {
		for _, r := range u.Roles {
			out = append(out, e.roleTreePrivileges(r, seen)...)
		}
	}
	return out
}

func hasPrivilege(ps []privilege, need privilege) bool {
	for _, a := range need.Actions {
		ok := false
		for _, p := range ps {
			if !p.Res.covers(need.Res) {
				continue
			}
			for _, g := range p.Actions {
				if g == a || g == "*" {
					ok = true
					break
				}
			}
			if ok {
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// authNeed is a command's authorization entry: the privileges it needs
// for a request (none: any authenticated user may run it).
type authNeed func(e *Engine, r *Request) ([]privilege, error)

func onColl(actions ...string) authNeed {
	return func(e *Engine, r *Request) ([]privilege, error) {
		return []privilege{priv(nsRes(r.DB, r.Target()), actions...)}, nil
	}
}

func onDB(actions ...string) authNeed {
	return func(e *Engine, r *Request) ([]privilege, error) {
		return []privilege{priv(dbRes(r.DB), actions...)}, nil
	}
}

func onCluster(actions ...string) authNeed {
	return func(e *Engine, r *Request) ([]privilege, error) {
		return []privilege{priv(clusterRes(), actions...)}, nil
	}
}

func anyUser(e *Engine, r *Request) ([]privilege, error) { return nil, nil }

// cmdAuth is the authorization table: every command of the command table
// has an entry (TestIssue15AuthEveryCommandHasACheck); a command without
// one is refused.
var cmdAuth = map[string]authNeed{
	"find": onColl("find"), "count": onColl("find"), "distinct": onColl("find"),
	"insert": onColl("insert"), "delete": onColl("remove"),
	"update":        needUpdate,
	"findAndModify": needFindAndModify,
	"aggregate":     needAggregate,
	// getMore and killCursors need no action: a user may use the cursors
	// they opened (authorize checks the owner; killAnyCursor kills others').
	"getMore": anyUser, "killCursors": anyUser,
	"create": onColl("createCollection"), "createIndexes": onColl("createIndex"),
	"drop": onColl("dropCollection"), "dropIndexes": onColl("dropIndex"), "collMod": onColl("collMod"),
	"listIndexes": onColl("listIndexes"), "collStats": onColl("collStats"),
	"dropDatabase": onDB("dropDatabase"), "listCollections": onDB("listCollections"), "dbStats": onDB("dbStats"),
	"profile":          needProfile,
	"renameCollection": needRename,
	"listDatabases":    anyUser, // filtered to the user's databases (filterDatabases)
	"serverStatus":     onCluster("serverStatus"), "hostInfo": onCluster("hostInfo"),
	"getCmdLineOpts": onCluster("getCmdLineOpts"), "getLog": onCluster("getLog"),
	"getParameter": onCluster("getParameter"), "setParameter": onCluster("setParameter"),
	"currentOp": onCluster("inprog"), "killOp": onCluster("killop"), "fsync": onCluster("fsync"),
	"createUser": needUserRoles("createUser", "grantRole"), "updateUser": needUpdateUser,
	"dropUser": onDB("dropUser"), "dropAllUsersFromDatabase": onDB("dropUser"),
	"grantRolesToUser": needUserRoles("", "grantRole"), "revokeRolesFromUser": needUserRoles("", "revokeRole"),
	"usersInfo": needUsersInfo, "rolesInfo": needRolesInfo,
	"createRole": needUserRoles("createRole", "grantRole"), "updateRole": needUserRoles("createRole", "grantRole"),
	"dropRole": onDB("dropRole"), "grantPrivilegesToRole": onDB("grantRole"), "revokePrivilegesFromRole": onDB("revokeRole"),
	"grantRolesToRole": needUserRoles("", "grantRole"), "revokeRolesFromRole": needUserRoles("", "revokeRole"),
	"killAllSessions": onCluster("killAnySession"), "killAllSessionsByPattern": onCluster("killAnySession"),
	// Replication (cmd_repl.go), as mongod's repl_set_commands.cpp.
	"replSetGetStatus": onCluster("replSetGetStatus"), "replSetGetConfig": onCluster("replSetGetConfig"),
	"replSetInitiate": onCluster("replSetConfigure"), "replSetReconfig": onCluster("replSetConfigure"),
	"replSetStepDown": onCluster("replSetStateChange"), "replSetFreeze": onCluster("replSetStateChange"),
	// Any authenticated user: their own sessions and connection.
	"startSession": anyUser, "endSessions": anyUser, "refreshSessions": anyUser, "killSessions": anyUser,
	"whatsmyuri": anyUser,
	// The statements of a transaction were checked one by one; ending it
	// needs only an authenticated user (mongod: no privileges required).
	"commitTransaction": anyUser, "abortTransaction": anyUser,
	// Admin commands (cmd_validate.go, cmd_top.go, cmd_compact.go), as
	// mongod: validate and compact are actions on the collection, top and
	// logRotate on the cluster.
	"validate": onColl("validate"), "compact": onColl("compact"),
	"top": onCluster("top"), "logRotate": onCluster("logRotate"),
}

func init() { cmdAuth["explain"] = needExplain }

func needUpdate(e *Engine, r *Request) ([]privilege, error) {
	acts := []string{"update"}
	if v, ok := r.Arg("updates"); ok {
		if a, ok := v.(bson.A); ok {
			for _, u := range a {
				if d, ok := u.(bson.D); ok {
					if up, ok := bsonx.Get(d, "upsert"); ok && srvTruthy(up) {
						acts = append(acts, "insert")
						break
					}
				}
			}
		}
	}
	return []privilege{priv(nsRes(r.DB, r.Target()), acts...)}, nil
}

func needFindAndModify(e *Engine, r *Request) ([]privilege, error) {
	acts := []string{"find"}
	if v, ok := r.Arg("remove"); ok && srvTruthy(v) {
		acts = append(acts, "remove")
	} else {
		acts = append(acts, "update")
		if v, ok := r.Arg("upsert"); ok && srvTruthy(v) {
			acts = append(acts, "insert")
		}
	}
	return []privilege{priv(nsRes(r.DB, r.Target()), acts...)}, nil
}

// initialSources are the stages that produce their own documents: an
// aggregate starting with one needs no find on its namespace (mongod's
// getPrivilegesForAggregate asks find only when the first stage is not an
// initial source), only the stage's own privileges.
var initialSources = map[string]bool{
	"$collStats": true, "$indexStats": true, "$currentOp": true, "$listSessions": true, "$listLocalSessions": true,
	"$documents": true, "$changeStream": true,
}

func needAggregate(e *Engine, r *Request) ([]privilege, error) {
	var out []privilege
	pv, _ := r.Arg("pipeline")
	stages, _ := pv.(bson.A)
	first := ""
	if len(stages) > 0 {
		if d, ok := stages[0].(bson.D); ok && len(d) > 0 {
			first = d[0].Key
		}
	}
	if r.Target() != "" && !initialSources[first] {
		out = append(out, priv(nsRes(r.DB, r.Target()), "find"))
	}
	for _, s := range stages {
		d, ok := s.(bson.D)
		if !ok || len(d) == 0 {
			continue
		}
		switch d[0].Key {
		case "$currentOp":
			// mongod asks inprog only for allUsers; mayfly's operations do
			// not record their user (allUsers: false shows them all), so
			// it fails closed.
			out = append(out, priv(clusterRes(), "inprog"))
		case "$listSessions", "$listLocalSessions":
			// mongod asks listSessions only for allUsers or other users'
			// sessions; mayfly's sessions do not record their user yet
			// (every one has the unauthenticated uid), so it cannot show a
			// user only their own: it fails closed.
			out = append(out, priv(clusterRes(), "listSessions"))
		case "$changeStream":
			res := nsRes(r.DB, r.Target())
			if spec, ok := d[0].Value.(bson.D); ok {
				if all, _ := bsonx.Get(spec, "allChangesForCluster"); all == true {
					// A whole-deployment stream reads every database
					// (mongod: anyNormalResource).
					res = anyNormalRes()
				}
			}
			out = append(out, priv(res, "changeStream", "find"))
		case "$out", "$merge":
			db, coll := r.DB, ""
			switch t := d[0].Value.(type) {
			case string:
				coll = t
			case bson.D:
				into := t
				if d[0].Key == "$merge" {
					if v, ok := bsonx.Get(t, "into"); ok {
						if s, ok := v.(string); ok {
							coll = s
						} else if dd, ok := v.(bson.D); ok {
							into = dd
						}
					}
				}
				if s, ok := authStr(into, "db"); ok {
					db = s
				}
				if s, ok := authStr(into, "coll"); ok {
					coll = s
				}
			}
			out = append(out, priv(nsRes(db, coll), "insert", "remove", "update"))
		case "$lookup", "$graphLookup", "$unionWith":
			if sd, ok := d[0].Value.(bson.D); ok {
				if from, ok := authStr(sd, "from"); ok {
					out = append(out, priv(nsRes(r.DB, from), "find"))
				} else if from, ok := authStr(sd, "coll"); ok {
					out = append(out, priv(nsRes(r.DB, from), "find"))
				}
			} else if s, ok := d[0].Value.(string); ok {
				out = append(out, priv(nsRes(r.DB, s), "find"))
			}
		case "$collStats":
			out = append(out, priv(nsRes(r.DB, r.Target()), "collStats"))
		case "$indexStats":
			out = append(out, priv(nsRes(r.DB, r.Target()), "indexStats"))
		}
	}
	return out, nil
}

// needProfile: reading the profiling settings ({profile: -1} alone) needs
// only find on the database's system.profile; anything else enableProfiler
// on the database (mongod's ProfileCmdBase::checkAuthForOperation).
func needProfile(e *Engine, r *Request) ([]privilege, error) {
	enable := []privilege{priv(dbRes(r.DB), "enableProfiler")}
	if lv, ok := bsonx.ToInt64(r.Cmd[0].Value); !ok || lv >= 0 {
		return enable, nil
	}
	for _, f := range r.Cmd[1:] {
		if f.Key == "slowms" || f.Key == "sampleRate" {
			return enable, nil
		}
	}
	granted := e.userPrivileges(e.authenticatedUsers(r.Conn))
	if view := priv(nsRes(r.DB, "system.profile"), "find"); hasPrivilege(granted, view) {
		return []privilege{view}, nil
	}
	return enable, nil
}

func needExplain(e *Engine, r *Request) ([]privilege, error) {
	inner, ok := r.Cmd[0].Value.(bson.D)
	if !ok || len(inner) == 0 {
		return nil, nil // the command itself refuses it
	}
	c := LookupCommand(inner[0].Key)
	if c == nil || c.Name == "explain" {
		return nil, nil
	}
	need := cmdAuth[c.Name]
	if need == nil {
		return nil, mongoerr.New(mongoerr.Unauthorized, "not authorized on %s to execute command %s", r.DB, cmdString(r.Cmd))
	}
	return need(e, &Request{Ctx: r.Ctx, Conn: r.Conn, DB: r.DB, Name: c.Name, Cmd: inner})
}

func needRename(e *Engine, r *Request) ([]privilege, error) {
	from, _ := r.Cmd[0].Value.(string)
	to, _ := authStr(r.Cmd, "to")
	fdb, fcoll, _ := strings.Cut(from, ".")
	tdb, tcoll, _ := strings.Cut(to, ".")
	if fdb == tdb {
		return []privilege{priv(nsRes(fdb, fcoll), "renameCollectionSameDB"), priv(nsRes(tdb, tcoll), "renameCollectionSameDB")}, nil
	}
	return []privilege{priv(nsRes(fdb, fcoll), "find", "dropCollection"), priv(nsRes(tdb, tcoll), "insert", "createIndex", "createCollection")}, nil
}

// needUserRoles: own action on the database (when given) and grant/revoke
// on the database of every role named.
func needUserRoles(own, roleAction string) authNeed {
	return func(e *Engine, r *Request) ([]privilege, error) {
		var out []privilege
		if own != "" {
			out = append(out, priv(dbRes(r.DB), own))
		}
		rv, _ := r.Arg("roles")
		a, _ := rv.(bson.A)
		for _, x := range a {
			switch y := x.(type) {
			case string:
				out = append(out, priv(dbRes(r.DB), roleAction))
			case bson.D:
				if db, ok := authStr(y, "db"); ok {
					out = append(out, priv(dbRes(db), roleAction))
				}
			}
		}
		return out, nil
	}
}

func needUpdateUser(e *Engine, r *Request) ([]privilege, error) {
	var out []privilege
	if _, ok := r.Arg("pwd"); ok {
		out = append(out, priv(dbRes(r.DB), "changePassword"))
	}
	if _, ok := r.Arg("customData"); ok {
		out = append(out, priv(dbRes(r.DB), "changeCustomData"))
	}
	if _, ok := r.Arg("roles"); ok {
		rs, _ := needUserRoles("", "grantRole")(e, r)
		out = append(out, rs...)
		out = append(out, priv(dbRes(r.DB), "revokeRole"))
	}
	return out, nil
}

// needUsersInfo: viewUser on the database, except for a user asking about
// themselves (mongod lets users see their own user document).
func needUsersInfo(e *Engine, r *Request) ([]privilege, error) {
	self := false
	switch v := r.Cmd[0].Value.(type) {
	case string:
		self = e.isCurrentUser(r.Conn, v, r.DB)
	case bson.D:
		u, _ := authStr(v, "user")
		db, _ := authStr(v, "db")
		self = u != "" && e.isCurrentUser(r.Conn, u, db)
	}
	if self {
		return nil, nil
	}
	if v, ok := r.Cmd[0].Value.(bson.D); ok {
		if fa, ok := bsonx.Get(v, "forAllDBs"); ok && srvTruthy(fa) {
			return []privilege{priv(clusterRes(), "viewUser")}, nil
		}
	}
	return []privilege{priv(dbRes(r.DB), "viewUser")}, nil
}

func (e *Engine) isCurrentUser(c *wire.ConnInfo, user, db string) bool {
	for _, u := range e.authenticatedUsers(c) {
		if u.User == user && u.DB == db {
			return true
		}
	}
	return false
}

// authorize checks that users hold the privileges c needs on r, and that
// cursors are used by the user who opened them.
func (e *Engine) authorize(c *Command, r *Request, users []*userRec) error {
	need := cmdAuth[c.Name]
	if need == nil {
		return e.notAuthorized(r)
	}
	ps, err := need(e, r)
	if err != nil {
		return err
	}
	granted := e.userPrivileges(users)
	for _, p := range ps {
		if !hasPrivilege(granted, p) {
			return e.notAuthorized(r)
		}
	}
	switch c.Name {
	case "getMore":
		id, _ := bsonx.ToInt64(r.Cmd[0].Value)
		if !e.cursorOwnedBy(id, users) {
			return mongoerr.New(mongoerr.Unauthorized, "cursor id %d was not created by the authenticated user", id)
		}
	case "killCursors":
		v, _ := r.Arg("cursors")
		a, _ := v.(bson.A)
		for _, x := range a {
			id, _ := bsonx.ToInt64(x)
			if !e.cursorOwnedBy(id, users) && !hasPrivilege(granted, priv(nsRes(r.DB, r.Target()), "killAnyCursor")) &&
				!hasPrivilege(granted, priv(clusterRes(), "killAnyCursor")) {
				return e.notAuthorized(r)
			}
		}
	case "listDatabases":
		if !hasPrivilege(granted, priv(clusterRes(), "listDatabases")) {
			r.authDBFilter = func(db string) bool { return hasDBPrivilege(granted, db) }
		}
	}
	return nil
}

// hasDBPrivilege: any privilege on the database or one of its collections
// (listDatabases's authorizedDatabases).
func hasDBPrivilege(ps []privilege, db string) bool {
	for _, p := range ps {
		if p.Res.Any || (!p.Res.Cluster && p.Res.DB == db) {
			return true
		}
	}
	return false
}

func (e *Engine) notAuthorized(r *Request) error {
	return mongoerr.New(mongoerr.Unauthorized, "not authorized on %s to execute command %s", r.DB, cmdString(r.Cmd))
}

func ownerKey(users []*userRec) string {
	var ks []string
	for _, u := range users {
		ks = append(ks, u.key())
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// noteCursorOwner records who opened the cursor of a command's reply.
func (e *Engine) noteCursorOwner(r *Request, body bson.D) {
	if !e.auth.enabled {
		return
	}
	cv, ok := bsonx.Get(body, "cursor")
	if !ok {
		return
	}
	cd, ok := cv.(bson.D)
	if !ok {
		return
	}
	idv, _ := bsonx.Get(cd, "id")
	id, _ := bsonx.ToInt64(idv)
	if id == 0 {
		return
	}
	owner := ownerKey(e.authenticatedUsers(r.Conn))
	e.auth.mu.Lock()
	defer e.auth.mu.Unlock()
	if e.auth.cursorOwners == nil {
		e.auth.cursorOwners = map[int64]string{}
	}
	if len(e.auth.cursorOwners) > 1<<14 {
		// Forget owners of cursors that are gone.
		for cid := range e.auth.cursorOwners {
			if !e.cursors.exists(cid) {
				delete(e.auth.cursorOwners, cid)
			}
		}
	}
	e.auth.cursorOwners[id] = owner
}

// cursorOwnedBy: an unknown cursor passes (the command answers
// CursorNotFound as usual).
func (e *Engine) cursorOwnedBy(id int64, users []*userRec) bool {
	e.auth.mu.Lock()
	owner, ok := e.auth.cursorOwners[id]
	e.auth.mu.Unlock()
	return !ok || owner == ownerKey(users)
}

// cmdString renders a command as mongod's BSONObj::toString does in its
// "not authorized" message, with passwords redacted.
func cmdString(d bson.D) string {
	var b strings.Builder
	writeDoc(&b, d, true)
	return b.String()
}

func writeDoc(b *strings.Builder, d bson.D, top bool) {
	if len(d) == 0 {
		b.WriteString("{}")
		return
	}
	b.WriteString("{ ")
	for i, f := range d {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Key)
		b.WriteString(": ")
		if top && f.Key == "pwd" {
			b.WriteString(`"xxx"`)
			continue
		}
		writeVal(b, f.Value)
	}
	b.WriteString(" }")
}

func writeVal(b *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		fmt.Fprintf(b, "%q", x)
	case bson.D:
		writeDoc(b, x, false)
	case bson.A:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[ ")
		for i, y := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeVal(b, y)
		}
		b.WriteString(" ]")
	case bson.Binary:
		if x.Subtype == bson.TypeBinaryUUID && len(x.Data) == 16 {
			d := x.Data
			fmt.Fprintf(b, "UUID(\"%x-%x-%x-%x-%x\")", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16])
		} else {
			fmt.Fprintf(b, "BinData(%d, %X)", x.Subtype, x.Data)
		}
	case int32:
		fmt.Fprintf(b, "%d", x)
	case int64:
		fmt.Fprintf(b, "%d", x)
	case float64:
		if x == float64(int64(x)) {
			fmt.Fprintf(b, "%d.0", int64(x))
		} else {
			fmt.Fprintf(b, "%v", x)
		}
	case bool:
		fmt.Fprintf(b, "%v", x)
	case nil:
		b.WriteString("null")
	case bson.ObjectID:
		fmt.Fprintf(b, "ObjectId('%s')", x.Hex())
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

// afterAuthorized records cursor owners and filters listDatabases.
func (e *Engine) afterAuthorized(r *Request, body bson.D) bson.D {
	e.noteCursorOwner(r, body)
	if r.authDBFilter == nil {
		return body
	}
	for i, f := range body {
		if f.Key != "databases" {
			continue
		}
		a, _ := f.Value.(bson.A)
		kept := bson.A{}
		var total int64
		for _, x := range a {
			d, _ := x.(bson.D)
			name, _ := authStr(d, "name")
			if r.authDBFilter(name) {
				kept = append(kept, x)
				if v, ok := bsonx.Get(d, "sizeOnDisk"); ok {
					n, _ := bsonx.ToInt64(v)
					total += n
				}
			}
		}
		body[i].Value = kept
		for j := range body {
			if body[j].Key == "totalSize" {
				body[j].Value = total
			}
		}
	}
	return body
}
