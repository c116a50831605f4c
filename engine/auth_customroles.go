package engine

import (
	"sort"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// User-defined roles, stored in admin.system.roles as mongod keeps them:
// {_id: "db.role", role, db, privileges: [{resource, actions}], roles}.
const rolesColl = "system.roles"

type roleRec struct {
	Role, DB string
	Privs    []privilege
	Roles    []roleRef
	Doc      bson.D
}

type roleCache struct {
	mu    sync.RWMutex
	roles map[roleRef]*roleRec
}

func (e *Engine) lookupRole(r roleRef) *roleRec {
	e.roles.mu.RLock()
	defer e.roles.mu.RUnlock()
	return e.roles.roles[r]
}

func (e *Engine) roleExists(r roleRef) bool { return builtinRoleExists(r) || e.lookupRole(r) != nil }

func (e *Engine) loadRoles() error {
	docs, err := e.authDocs(rolesColl)
	if err != nil {
		return err
	}
	m := map[roleRef]*roleRec{}
	for _, d := range docs {
		rr := &roleRec{Doc: d}
		rr.Role, _ = authStr(d, "role")
		rr.DB, _ = authStr(d, "db")
		if rr.Role == "" || rr.DB == "" {
			continue
		}
		if v, ok := bsonx.Get(d, "privileges"); ok {
			rr.Privs, _ = parsePrivileges(v, "")
		}
		if v, ok := bsonx.Get(d, "roles"); ok {
			if a, ok := v.(bson.A); ok {
				for _, x := range a {
					if xd, ok := x.(bson.D); ok {
						role, _ := authStr(xd, "role")
						db, _ := authStr(xd, "db")
						rr.Roles = append(rr.Roles, roleRef{role, db})
					}
				}
			}
		}
		m[roleRef{rr.Role, rr.DB}] = rr
	}
	e.roles.mu.Lock()
	e.roles.roles = m
	e.roles.mu.Unlock()
	return nil
}

// roleTreePrivileges: a role's privileges and those of the roles it
// inherits (each role once).
func (e *Engine) roleTreePrivileges(r roleRef, seen map[roleRef]bool) []privilege {
	if seen[r] {
		return nil
	}
	seen[r] = true
	if builtinRoleExists(r) {
		return rolePrivileges(r)
	}
	rr := e.lookupRole(r)
	if rr == nil {
		return nil
	}
	out := append([]privilege(nil), rr.Privs...)
	for _, sub := range rr.Roles {
		out = append(out, e.roleTreePrivileges(sub, seen)...)
	}
	return out
}

// inheritedRoles lists every role reachable from r's roles.
func (e *Engine) inheritedRoles(r roleRef) []roleRef {
	seen := map[roleRef]bool{r: true}
	var out []roleRef
	var walk func(x roleRef)
	walk = func(x roleRef) {
		rr := e.lookupRole(x)
		if rr == nil {
			return
		}
		for _, sub := range rr.Roles {
			if !seen[sub] {
				seen[sub] = true
				out = append(out, sub)
				walk(sub)
			}
		}
	}
	walk(r)
	return out
}

var knownActions = map[string]bool{}

// knownActions: every action a built-in role grants, and a few only
// user-defined roles do.
func init() {
	for _, r := range []string{"read", "readWrite", "dbAdmin", "userAdmin"} {
		for _, p := range rolePrivileges(roleRef{r, "x"}) {
			for _, a := range p.Actions {
				knownActions[a] = true
			}
		}
	}
	for _, ps := range adminRolePrivileges {
		for _, p := range ps {
			for _, a := range p.Actions {
				knownActions[a] = true
			}
		}
	}
	for _, a := range []string{"changeOwnPassword", "changeOwnCustomData", "anyAction", "internal", "cpuProfiler"} {
		knownActions[a] = true
	}
}

// parsePrivileges reads [{resource, actions}]. With roleDB set, the
// privileges of a role outside admin must stay on its database.
func parsePrivileges(v any, roleDB string) ([]privilege, error) {
	a, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'privileges' is the wrong type '%s', expected type 'array'", bsonx.TypeName(v))
	}
	var out []privilege
	for _, x := range a {
		d, ok := x.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of 'privileges' must be an object")
		}
		rv, _ := bsonx.Get(d, "resource")
		rd, ok := rv.(bson.D)
		if !ok {
			return nil, mongoerr.New(40414, "BSON field 'Privilege.resource' is missing but a required field")
		}
		var res resource
		if c, ok := bsonx.Get(rd, "cluster"); ok && srvTruthy(c) {
			res.Cluster = true
		} else if c, ok := bsonx.Get(rd, "anyResource"); ok && srvTruthy(c) {
			res.Any = true
		} else {
			db, ok1 := authStr(rd, "db")
			coll, ok2 := authStr(rd, "collection")
			if !ok1 || !ok2 {
				return nil, mongoerr.New(mongoerr.BadValue, "resource must have either 'cluster', 'anyResource' or both 'db' and 'collection' fields")
			}
			res = resource{DB: db, Coll: coll, Normal: db == "" && coll == ""} // {db: "", collection: ""} is anyNormalResource
		}
		if roleDB != "" && roleDB != "admin" && (res.Cluster || res.Any || res.DB != roleDB) {
			return nil, mongoerr.New(mongoerr.BadValue, "Roles on the '%s' database cannot be granted privileges that target other databases or the cluster", roleDB)
		}
		av, _ := bsonx.Get(d, "actions")
		acts, ok := av.(bson.A)
		if !ok {
			return nil, mongoerr.New(40414, "BSON field 'Privilege.actions' is missing but a required field")
		}
		p := privilege{Res: res}
		for _, y := range acts {
			s, _ := y.(string)
			if !knownActions[s] {
				return nil, mongoerr.New(mongoerr.FailedToParse, "Unrecognized action privilege string: %v", y)
			}
			if s == "anyAction" {
				s = "*"
			}
			p.Actions = append(p.Actions, s)
		}
		out = append(out, p)
	}
	return out, nil
}

func privilegesArray(ps []privilege) bson.A {
	out := bson.A{}
	for _, p := range ps {
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

// mergePrivileges adds (or, with revoke, removes) actions per resource.
func mergePrivileges(cur, change []privilege, revoke bool) []privilege {
	out := append([]privilege(nil), cur...)
	for _, c := range change {
		at := -1
		for i := range out {
			if out[i].Res == c.Res {
				at = i
			}
		}
		if at < 0 {
			if !revoke {
				out = append(out, privilege{c.Res, append([]string(nil), c.Actions...)})
			}
			continue
		}
		set := map[string]bool{}
		for _, a := range out[at].Actions {
			set[a] = true
		}
		for _, a := range c.Actions {
			set[a] = !revoke
		}
		var acts []string
		for a, ok := range set {
			if ok {
				acts = append(acts, a)
			}
		}
		sort.Strings(acts)
		if len(acts) == 0 {
			out = append(out[:at], out[at+1:]...)
		} else {
			out[at].Actions = acts
		}
	}
	return out
}

func init() {
	Register(
		&Command{Name: "createRole", Help: "create a user-defined role", Write: true, Run: cmdCreateRole},
		&Command{Name: "updateRole", Help: "replace a user-defined role's privileges or roles", Write: true, Run: cmdUpdateRole},
		&Command{Name: "dropRole", Help: "remove a user-defined role", Write: true, Run: cmdDropRole},
		&Command{Name: "grantPrivilegesToRole", Help: "add privileges to a user-defined role", Write: true, Run: func(e *Engine, r *Request) (bson.D, error) {
			return changeRolePrivs(e, r, "grantPrivilegesToRole", false)
		}},
		&Command{Name: "revokePrivilegesFromRole", Help: "remove privileges from a user-defined role", Write: true, Run: func(e *Engine, r *Request) (bson.D, error) {
			return changeRolePrivs(e, r, "revokePrivilegesFromRole", true)
		}},
		&Command{Name: "grantRolesToRole", Help: "make a user-defined role inherit roles", Write: true, Run: func(e *Engine, r *Request) (bson.D, error) { return changeRoleRoles(e, r, "grantRolesToRole", true) }},
		&Command{Name: "revokeRolesFromRole", Help: "stop a user-defined role inheriting roles", Write: true, Run: func(e *Engine, r *Request) (bson.D, error) {
			return changeRoleRoles(e, r, "revokeRolesFromRole", false)
		}},
		&Command{Name: "rolesInfo", Help: "describe roles", Run: cmdRolesInfo},
	)
}

func roleTarget(r *Request, name string) (string, error) {
	s, ok := r.Cmd[0].Value.(string)
	if !ok {
		return "", mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'", name, name, bsonx.TypeName(r.Cmd[0].Value))
	}
	if s == "" {
		return "", mongoerr.New(mongoerr.BadValue, "Role name must be non-empty")
	}
	return s, nil
}

func roleNotFound(role, db string) error {
	return mongoerr.New(mongoerr.RoleNotFound, "Role %s@%s not found", role, db)
}

func roleDoc(role, db string, privs []privilege, roles []roleRef) bson.D {
	return bson.D{{Key: "_id", Value: db + "." + role}, {Key: "role", Value: role}, {Key: "db", Value: db},
		{Key: "privileges", Value: privilegesArray(privs)}, {Key: "roles", Value: rolesArray(roles)}}
}

// checkNoCycle refuses a role that would inherit itself.
func (e *Engine) checkNoCycle(self roleRef, roles []roleRef) error {
	for _, r := range roles {
		if r == self {
			return mongoerr.New(17, "%s@%s cannot inherit itself", self.Role, self.DB)
		}
		for _, sub := range e.inheritedRoles(r) {
			if sub == self {
				return mongoerr.New(mongoerr.BadValue, "Granting %s@%s to %s@%s would introduce a cycle in the role graph", r.Role, r.DB, self.Role, self.DB)
			}
		}
	}
	return nil
}

func cmdCreateRole(e *Engine, r *Request) (bson.D, error) {
	name, err := roleTarget(r, "createRole")
	if err != nil {
		return nil, err
	}
	self := roleRef{name, r.DB}
	if builtinRoleExists(self) || e.lookupRole(self) != nil {
		return nil, mongoerr.New(51002, "Role \"%s@%s\" already exists", name, r.DB)
	}
	pv, ok := r.Arg("privileges")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'createRole.privileges' is missing but a required field")
	}
	privs, err := parsePrivileges(pv, r.DB)
	if err != nil {
		return nil, err
	}
	rv, ok := r.Arg("roles")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'createRole.roles' is missing but a required field")
	}
	roles, err := parseRoles(e, r, "createRole", rv)
	if err != nil {
		return nil, err
	}
	if err := e.checkNoCycle(self, roles); err != nil {
		return nil, err
	}
	if err := e.insertAuthDoc(rolesColl, r, roleDoc(name, r.DB, privs, roles)); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

func cmdUpdateRole(e *Engine, r *Request) (bson.D, error) {
	name, err := roleTarget(r, "updateRole")
	if err != nil {
		return nil, err
	}
	pv, hasP := r.Arg("privileges")
	rv, hasR := r.Arg("roles")
	if !hasP && !hasR {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one field to update in updateRole")
	}
	self := roleRef{name, r.DB}
	cur := e.lookupRole(self)
	if cur == nil {
		return nil, roleNotFound(name, r.DB)
	}
	privs, roles := cur.Privs, cur.Roles
	if hasP {
		if privs, err = parsePrivileges(pv, r.DB); err != nil {
			return nil, err
		}
	}
	if hasR {
		if roles, err = parseRoles(e, r, "updateRole", rv); err != nil {
			return nil, err
		}
		if err := e.checkNoCycle(self, roles); err != nil {
			return nil, err
		}
	}
	return e.saveRole(r, self, privs, roles)
}

func (e *Engine) saveRole(r *Request, self roleRef, privs []privilege, roles []roleRef) (bson.D, error) {
	found, err := e.replaceAuthDoc(rolesColl, r, self.DB+"."+self.Role, roleDoc(self.Role, self.DB, privs, roles))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, roleNotFound(self.Role, self.DB)
	}
	return bson.D{}, nil
}

func changeRolePrivs(e *Engine, r *Request, name string, revoke bool) (bson.D, error) {
	role, err := roleTarget(r, name)
	if err != nil {
		return nil, err
	}
	pv, ok := r.Arg("privileges")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field '%s.privileges' is missing but a required field", name)
	}
	privs, err := parsePrivileges(pv, r.DB)
	if err != nil {
		return nil, err
	}
	self := roleRef{role, r.DB}
	cur := e.lookupRole(self)
	if cur == nil {
		if builtinRoleExists(self) {
			return nil, mongoerr.New(mongoerr.BadValue, "Cannot grant privileges to built-in role \"%s@%s\"", role, r.DB)
		}
		return nil, roleNotFound(role, r.DB)
	}
	return e.saveRole(r, self, mergePrivileges(cur.Privs, privs, revoke), cur.Roles)
}

func changeRoleRoles(e *Engine, r *Request, name string, grant bool) (bson.D, error) {
	role, err := roleTarget(r, name)
	if err != nil {
		return nil, err
	}
	rv, ok := r.Arg("roles")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field '%s.roles' is missing but a required field", name)
	}
	change, err := parseRoles(e, r, name, rv)
	if err != nil {
		return nil, err
	}
	self := roleRef{role, r.DB}
	cur := e.lookupRole(self)
	if cur == nil {
		return nil, roleNotFound(role, r.DB)
	}
	roles := append([]roleRef(nil), cur.Roles...)
	for _, c := range change {
		at := -1
		for i, x := range roles {
			if x == c {
				at = i
			}
		}
		if grant && at < 0 {
			roles = append(roles, c)
		} else if !grant && at >= 0 {
			roles = append(roles[:at], roles[at+1:]...)
		}
	}
	if grant {
		if err := e.checkNoCycle(self, roles); err != nil {
			return nil, err
		}
	}
	return e.saveRole(r, self, cur.Privs, roles)
}

// cmdDropRole removes the role and takes it from every user and role that
// had it, as mongod does.
func cmdDropRole(e *Engine, r *Request) (bson.D, error) {
	name, err := roleTarget(r, "dropRole")
	if err != nil {
		return nil, err
	}
	self := roleRef{name, r.DB}
	if builtinRoleExists(self) {
		return nil, mongoerr.New(mongoerr.BadValue, "Cannot drop built-in role \"%s@%s\"", name, r.DB)
	}
	found, err := e.deleteAuthDoc(rolesColl, r, r.DB+"."+name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, roleNotFound(name, r.DB)
	}
	for _, u := range e.usersOf("") {
		var kept []roleRef
		for _, x := range u.Roles {
			if x != self {
				kept = append(kept, x)
			}
		}
		if len(kept) != len(u.Roles) {
			if _, err := e.replaceUserDoc(r, u.key(), setField(bsonx.CloneD(u.Doc), "roles", rolesArray(kept))); err != nil {
				return nil, err
			}
		}
	}
	e.roles.mu.RLock()
	var others []*roleRec
	for _, rr := range e.roles.roles {
		others = append(others, rr)
	}
	e.roles.mu.RUnlock()
	for _, rr := range others {
		var kept []roleRef
		for _, x := range rr.Roles {
			if x != self {
				kept = append(kept, x)
			}
		}
		if len(kept) != len(rr.Roles) {
			if _, err := e.saveRole(r, roleRef{rr.Role, rr.DB}, rr.Privs, kept); err != nil {
				return nil, err
			}
		}
	}
	return bson.D{}, nil
}

// cmdRolesInfo: {rolesInfo: 1} the database's user-defined roles (and
// built-in ones with showBuiltinRoles), a name, {role, db} or an array.
func cmdRolesInfo(e *Engine, r *Request) (bson.D, error) {
	showPrivs := false
	if v, ok := r.Arg("showPrivileges"); ok {
		showPrivs = srvTruthy(v)
	}
	var refs []roleRef
	pick := func(x any) error {
		switch y := x.(type) {
		case string:
			refs = append(refs, roleRef{y, r.DB})
		case bson.D:
			role, ok1 := authStr(y, "role")
			db, ok2 := authStr(y, "db")
			if !ok1 || !ok2 {
				return mongoerr.New(mongoerr.BadValue, "Role name must contain a field named \"role\" and a field named \"db\"")
			}
			refs = append(refs, roleRef{role, db})
		default:
			return mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects")
		}
		return nil
	}
	switch v := r.Cmd[0].Value.(type) {
	case bson.A:
		for _, x := range v {
			if err := pick(x); err != nil {
				return nil, err
			}
		}
	case string, bson.D:
		if err := pick(v); err != nil {
			return nil, err
		}
	default:
		if n, ok := bsonx.ToInt64(v); !ok || n != 1 {
			return nil, mongoerr.New(mongoerr.BadValue, "User and role names must be either strings or objects")
		}
		e.roles.mu.RLock()
		for k := range e.roles.roles {
			if k.DB == r.DB {
				refs = append(refs, k)
			}
		}
		e.roles.mu.RUnlock()
		if v, ok := r.Arg("showBuiltinRoles"); ok && srvTruthy(v) {
			for n := range dbRoles {
				refs = append(refs, roleRef{n, r.DB})
			}
			if r.DB == "admin" {
				for n := range adminRoles {
					refs = append(refs, roleRef{n, r.DB})
				}
			}
		}
		sort.Slice(refs, func(i, j int) bool { return refs[i].Role < refs[j].Role })
	}
	out := bson.A{}
	for _, ref := range refs {
		builtin := builtinRoleExists(ref)
		rr := e.lookupRole(ref)
		if !builtin && rr == nil {
			continue
		}
		d := bson.D{{Key: "_id", Value: ref.DB + "." + ref.Role}, {Key: "role", Value: ref.Role}, {Key: "db", Value: ref.DB}}
		var privs []privilege
		roles := []roleRef{}
		if builtin {
			privs = rolePrivileges(ref)
		} else {
			privs, roles = rr.Privs, rr.Roles
		}
		if showPrivs {
			d = append(d, bson.E{Key: "privileges", Value: privilegesArray(privs)})
		}
		inh := e.inheritedRoles(ref)
		d = append(d, bson.E{Key: "roles", Value: rolesArray(roles)}, bson.E{Key: "isBuiltin", Value: builtin},
			bson.E{Key: "inheritedRoles", Value: rolesArray(inh)})
		if showPrivs {
			d = append(d, bson.E{Key: "inheritedPrivileges", Value: privilegesArray(e.roleTreePrivileges(ref, map[roleRef]bool{}))})
		}
		out = append(out, d)
	}
	return bson.D{{Key: "roles", Value: out}}, nil
}

// needRolesInfo: viewRole on the database, except for roles the user holds.
func needRolesInfo(e *Engine, r *Request) ([]privilege, error) {
	held := map[roleRef]bool{}
	for _, u := range e.authenticatedUsers(r.Conn) {
		for _, x := range u.Roles {
			held[x] = true
		}
	}
	var asked []roleRef
	switch v := r.Cmd[0].Value.(type) {
	case string:
		asked = []roleRef{{v, r.DB}}
	case bson.D:
		role, _ := authStr(v, "role")
		db, _ := authStr(v, "db")
		asked = []roleRef{{role, db}}
	}
	if len(asked) > 0 && held[asked[0]] {
		return nil, nil
	}
	return []privilege{priv(dbRes(r.DB), "viewRole")}, nil
}
