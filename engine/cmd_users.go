package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// User management as mongod's user_management_commands.cpp: users are
// documents of admin.system.users (auth_users.go).
func init() {
	Register(
		&Command{Name: "usersInfo", Help: "list users", Run: cmdUsersInfo},
		&Command{Name: "createUser", Help: "create a user", Write: true, Run: cmdCreateUser},
		&Command{Name: "updateUser", Help: "change a user's password, roles, mechanisms or customData", Write: true, Run: cmdUpdateUser},
		&Command{Name: "dropUser", Help: "remove a user", Write: true, Run: cmdDropUser},
		&Command{Name: "dropAllUsersFromDatabase", Help: "remove every user of a database", Write: true, Run: cmdDropAllUsers},
		&Command{Name: "grantRolesToUser", Help: "grant roles to a user", Write: true, Run: cmdGrantRoles},
		&Command{Name: "revokeRolesFromUser", Help: "revoke roles from a user", Write: true, Run: cmdRevokeRoles},
	)
}

var userCmdFields = map[string]map[string]bool{
	"createUser":               {"pwd": true, "customData": true, "roles": true, "digestPassword": true, "mechanisms": true, "authenticationRestrictions": true},
	"updateUser":               {"pwd": true, "customData": true, "roles": true, "digestPassword": true, "mechanisms": true, "authenticationRestrictions": true},
	"dropUser":                 {},
	"dropAllUsersFromDatabase": {},
	"grantRolesToUser":         {"roles": true},
	"revokeRolesFromUser":      {"roles": true},
	"usersInfo":                {"showCredentials": true, "showCustomData": true, "showPrivileges": true, "showAuthenticationRestrictions": true, "filter": true},
}

// checkUserCmdFields refuses unknown fields as the IDL parser does.
func checkUserCmdFields(r *Request, name string) error {
	for _, f := range r.Cmd[1:] {
		if IsEnvelopeField(f.Key) || userCmdFields[name][f.Key] {
			continue
		}
		return mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", name, f.Key)
	}
	return nil
}

// userTarget reads the user name (the command's first value).
func userTarget(r *Request, name string) (string, error) {
	s, ok := r.Cmd[0].Value.(string)
	if !ok {
		return "", mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'", name, name, bsonx.TypeName(r.Cmd[0].Value))
	}
	if s == "" {
		return "", mongoerr.New(mongoerr.BadValue, "Username cannot be empty") // UserName's parser
	}
	return s, nil
}

// parseRoles reads a roles array: role names on the command's database or
// {role, db} documents; every role must exist.
func parseRoles(e *Engine, r *Request, name string, v any) ([]roleRef, error) {
	a, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.roles' is the wrong type '%s', expected type 'array'", name, bsonx.TypeName(v))
	}
	var out []roleRef
	for _, x := range a {
		var rr roleRef
		switch y := x.(type) {
		case string:
			rr = roleRef{y, r.DB}
		case bson.D:
			role, ok1 := authStr(y, "role")
			db, ok2 := authStr(y, "db")
			if !ok1 || !ok2 {
				return nil, mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects")
			}
			rr = roleRef{role, db}
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects")
		}
		if !e.roleExists(rr) {
			return nil, mongoerr.New(mongoerr.RoleNotFound, "Could not find role: %s@%s", rr.Role, rr.DB)
		}
		out = append(out, rr)
	}
	return out, nil
}

func rolesArray(rs []roleRef) bson.A {
	a := bson.A{}
	for _, r := range rs {
		a = append(a, r.doc())
	}
	return a
}

// parseMechanisms reads the mechanisms option (default: both SCRAM ones).
func (e *Engine) parseMechanisms(name string, v any, ok bool) ([]string, error) {
	if !ok {
		var out []string
		for _, m := range allMechanisms {
			if e.mechanismEnabled(m) {
				out = append(out, m)
			}
		}
		return out, nil
	}
	a, isArr := v.(bson.A)
	if !isArr {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.mechanisms' is the wrong type '%s', expected type 'array'", name, bsonx.TypeName(v))
	}
	if len(a) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "mechanisms field must not be empty")
	}
	want := map[string]bool{}
	for _, x := range a {
		s, _ := x.(string)
		if s != mechSHA1 && s != mechSHA256 {
			return nil, mongoerr.New(mongoerr.BadValue, "Unknown auth mechanism '%v'", x)
		}
		if !e.mechanismEnabled(s) {
			return nil, mongoerr.New(mongoerr.BadValue, "mechanisms field must be a subset of the authenticationMechanisms parameter")
		}
		want[s] = true
	}
	var out []string
	for _, m := range allMechanisms {
		if want[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

func digestOption(r *Request) bool {
	if v, ok := r.Arg("digestPassword"); ok {
		return !srvTruthy(v)
	}
	return false
}

func userNotFound(user, db string) error {
	return mongoerr.New(mongoerr.UserNotFound, "User '%s@%s' not found", user, db)
}

func cmdCreateUser(e *Engine, r *Request) (bson.D, error) {
	if err := checkUserCmdFields(r, "createUser"); err != nil {
		return nil, err
	}
	user, err := userTarget(r, "createUser")
	if err != nil {
		return nil, err
	}
	rv, ok := r.Arg("roles")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'createUser.roles' is missing but a required field")
	}
	if r.DB == "$external" {
		return nil, mongoerr.New(mongoerr.BadValue, "Cannot create users in the $external database with a password: mayfly supports SCRAM users only")
	}
	pv, ok := r.Arg("pwd")
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
	}
	pwd, isStr := pv.(string)
	if !isStr {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'createUser.pwd' is the wrong type '%s', expected type 'string'", bsonx.TypeName(pv))
	}
	if pwd == "" {
		return nil, mongoerr.New(mongoerr.BadValue, "User passwords must not be empty")
	}
	roles, err := parseRoles(e, r, "createUser", rv)
	if err != nil {
		return nil, err
	}
	mv, mok := r.Arg("mechanisms")
	mechs, err := e.parseMechanisms("createUser", mv, mok)
	if err != nil {
		return nil, err
	}
	if e.lookupUser(r.DB, user) != nil {
		return nil, mongoerr.New(mongoerr.UserAlreadyExists, "User \"%s@%s\" already exists", user, r.DB)
	}
	creds, err := makeCredentials(user, pwd, mechs, digestOption(r))
	if err != nil {
		return nil, err
	}
	doc := bson.D{
		{Key: "_id", Value: r.DB + "." + user},
		{Key: "userId", Value: newUUID()},
		{Key: "user", Value: user},
		{Key: "db", Value: r.DB},
		{Key: "credentials", Value: creds},
	}
	if cd, ok := r.Arg("customData"); ok {
		if _, isDoc := cd.(bson.D); !isDoc {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'createUser.customData' is the wrong type '%s', expected type 'object'", bsonx.TypeName(cd))
		}
		doc = append(doc, bson.E{Key: "customData", Value: cd})
	}
	doc = append(doc, bson.E{Key: "roles", Value: rolesArray(roles)})
	if err := e.insertUserDoc(r, doc); err != nil {
		if mongoerr.From(err).Code == mongoerr.DuplicateKey {
			return nil, mongoerr.New(mongoerr.UserAlreadyExists, "User \"%s@%s\" already exists", user, r.DB)
		}
		return nil, err
	}
	return bson.D{}, nil
}

// setField replaces or appends a field of a user document, keeping the
// order mongod's $set gives.
func setField(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: key, Value: v})
}

func cmdUpdateUser(e *Engine, r *Request) (bson.D, error) {
	if err := checkUserCmdFields(r, "updateUser"); err != nil {
		return nil, err
	}
	user, err := userTarget(r, "updateUser")
	if err != nil {
		return nil, err
	}
	pv, hasPwd := r.Arg("pwd")
	rv, hasRoles := r.Arg("roles")
	cd, hasCD := r.Arg("customData")
	mv, hasMechs := r.Arg("mechanisms")
	_, hasRestr := r.Arg("authenticationRestrictions")
	if !hasPwd && !hasRoles && !hasCD && !hasRestr {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one field to update in updateUser")
	}
	if hasMechs && !hasPwd {
		return nil, mongoerr.New(mongoerr.BadValue, "Must provide a 'pwd' field when specifying 'mechanisms'")
	}
	u := e.lookupUser(r.DB, user)
	if u == nil {
		return nil, userNotFound(user, r.DB)
	}
	doc := bsonx.CloneD(u.Doc)
	if hasPwd {
		pwd, ok := pv.(string)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'updateUser.pwd' is the wrong type '%s', expected type 'string'", bsonx.TypeName(pv))
		}
		if pwd == "" {
			return nil, mongoerr.New(mongoerr.BadValue, "User passwords must not be empty")
		}
		var mechs []string
		if hasMechs {
			if mechs, err = e.parseMechanisms("updateUser", mv, true); err != nil {
				return nil, err
			}
		} else {
			for _, m := range u.mechanisms() {
				mechs = append(mechs, m.(string))
			}
		}
		creds, err := makeCredentials(user, pwd, mechs, digestOption(r))
		if err != nil {
			return nil, err
		}
		doc = setField(doc, "credentials", creds)
	}
	if hasCD {
		if _, isDoc := cd.(bson.D); !isDoc {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'updateUser.customData' is the wrong type '%s', expected type 'object'", bsonx.TypeName(cd))
		}
		doc = setField(doc, "customData", cd)
	}
	if hasRoles {
		roles, err := parseRoles(e, r, "updateUser", rv)
		if err != nil {
			return nil, err
		}
		doc = setField(doc, "roles", rolesArray(roles))
	}
	found, err := e.replaceUserDoc(r, u.key(), doc)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, userNotFound(user, r.DB)
	}
	return bson.D{}, nil
}

func cmdDropUser(e *Engine, r *Request) (bson.D, error) {
	if err := checkUserCmdFields(r, "dropUser"); err != nil {
		return nil, err
	}
	user, err := userTarget(r, "dropUser")
	if err != nil {
		return nil, err
	}
	found, err := e.deleteUserDoc(r, r.DB+"."+user)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, userNotFound(user, r.DB)
	}
	return bson.D{}, nil
}

func cmdDropAllUsers(e *Engine, r *Request) (bson.D, error) {
	if err := checkUserCmdFields(r, "dropAllUsersFromDatabase"); err != nil {
		return nil, err
	}
	var n int32
	for _, u := range e.usersOf(r.DB) {
		found, err := e.deleteUserDoc(r, u.key())
		if err != nil {
			return nil, err
		}
		if found {
			n++
		}
	}
	return bson.D{{Key: "n", Value: n}}, nil
}

func changeRoles(e *Engine, r *Request, name string, grant bool) (bson.D, error) {
	if err := checkUserCmdFields(r, name); err != nil {
		return nil, err
	}
	user, err := userTarget(r, name)
	if err != nil {
		return nil, err
	}
	rv, ok := r.Arg("roles")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field '%s.roles' is missing but a required field", name)
	}
	roles, err := parseRoles(e, r, name, rv)
	if err != nil {
		return nil, err
	}
	u := e.lookupUser(r.DB, user)
	if u == nil {
		return nil, userNotFound(user, r.DB)
	}
	cur := append([]roleRef(nil), u.Roles...)
	for _, rr := range roles {
		at := -1
		for i, c := range cur {
			if c == rr {
				at = i
			}
		}
		switch {
		case grant && at < 0:
			cur = append(cur, rr)
		case !grant && at >= 0:
			cur = append(cur[:at], cur[at+1:]...)
		}
	}
	doc := setField(bsonx.CloneD(u.Doc), "roles", rolesArray(cur))
	if _, err := e.replaceUserDoc(r, u.key(), doc); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

func cmdGrantRoles(e *Engine, r *Request) (bson.D, error) {
	return changeRoles(e, r, "grantRolesToUser", true)
}
func cmdRevokeRoles(e *Engine, r *Request) (bson.D, error) {
	return changeRoles(e, r, "revokeRolesFromUser", false)
}

// cmdUsersInfo answers as mongod's usersInfo: {usersInfo: 1} lists the
// database's users, a name or {user, db} or an array of them picks users,
// {forAllDBs: true} lists every user. Credentials appear only with
// showCredentials; mechanisms always.
func cmdUsersInfo(e *Engine, r *Request) (bson.D, error) {
	if err := checkUserCmdFields(r, "usersInfo"); err != nil {
		return nil, err
	}
	var users []*userRec
	pick := func(x any) error {
		switch y := x.(type) {
		case string:
			if u := e.lookupUser(r.DB, y); u != nil {
				users = append(users, u)
			}
		case bson.D:
			name, ok1 := authStr(y, "user")
			db, ok2 := authStr(y, "db")
			if !ok1 || !ok2 {
				return mongoerr.New(mongoerr.BadValue, "User name must contain a field named \"user\" and a field named \"db\"")
			}
			if u := e.lookupUser(db, name); u != nil {
				users = append(users, u)
			}
		default:
			return mongoerr.New(mongoerr.BadValue, "User names must be either strings or objects")
		}
		return nil
	}
	switch v := r.Cmd[0].Value.(type) {
	case bson.D:
		if fa, ok := bsonx.Get(v, "forAllDBs"); ok && len(v) == 1 {
			if srvTruthy(fa) {
				users = e.usersOf("")
			}
		} else if err := pick(v); err != nil {
			return nil, err
		}
	case bson.A:
		for _, x := range v {
			if err := pick(x); err != nil {
				return nil, err
			}
		}
	case string:
		if err := pick(v); err != nil {
			return nil, err
		}
	default:
		if n, ok := bsonx.ToInt64(v); ok && n == 1 {
			users = e.usersOf(r.DB)
		} else {
			return nil, mongoerr.New(mongoerr.BadValue, "User and role names must be either strings or objects")
		}
	}
	showCreds := false
	if v, ok := r.Arg("showCredentials"); ok {
		showCreds = srvTruthy(v)
	}
	showCustom := true
	if v, ok := r.Arg("showCustomData"); ok {
		showCustom = srvTruthy(v)
	}
	var filter bson.D
	if v, ok := r.Arg("filter"); ok {
		f, isDoc := v.(bson.D)
		if !isDoc {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'usersInfo.filter' is the wrong type '%s', expected type 'object'", bsonx.TypeName(v))
		}
		filter = f
	}
	out := bson.A{}
	for _, u := range users {
		d := bson.D{}
		for _, f := range u.Doc {
			switch {
			case f.Key == "credentials" && !showCreds:
			case f.Key == "customData" && !showCustom:
			default:
				d = append(d, f)
			}
		}
		d = append(d, bson.E{Key: "mechanisms", Value: u.mechanisms()})
		if filter != nil {
			ok, err := matchDoc(filter, d)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, d)
	}
	return bson.D{{Key: "users", Value: out}}, nil
}

func matchDoc(filter, d bson.D) (bool, error) {
	m, err := query.Compile(filter)
	if err != nil {
		return false, err
	}
	return m.Matches(d), nil
}
