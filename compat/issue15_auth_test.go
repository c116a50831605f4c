package compat

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/server"
)

// authServer starts a private in-process server (users are server-wide).
func authServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	if externalURI != "" {
		t.Skip("creates users: runs only against a private in-process server")
	}
	cfg.Bind = "127.0.0.1"
	if cfg.DBPath == "" {
		cfg.InMemory = true
	}
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// authClient connects to s, with credentials when cred is not nil.
func authClient(t *testing.T, s *server.Server, cred *options.Credential) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(s.URI()).SetServerSelectionTimeout(5 * time.Second)
	if cred != nil {
		o.SetAuth(*cred)
	}
	cli, err := mongo.Connect(o)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cli.Disconnect(context.Background()) })
	return cli
}

func authRun(t *testing.T, cli *mongo.Client, db string, cmd bson.D) bson.Raw {
	t.Helper()
	raw, err := cli.Database(db).RunCommand(context.Background(), cmd).Raw()
	if err != nil {
		t.Fatalf("%s on %s: %v", ejson(cmd), db, err)
	}
	return raw
}

func authErr(cli *mongo.Client, db string, cmd bson.D) error {
	return cli.Database(db).RunCommand(context.Background(), cmd).Err()
}

// TestIssue15AuthUserCommands: createUser/usersInfo/updateUser/grant/
// revoke/dropUser/dropAllUsersFromDatabase with mongod's reply shapes and
// credentials computed as mongod does (checked by recomputing storedKey
// from the password and the stored salt).
func TestIssue15AuthUserCommands(t *testing.T) {
	t.Parallel()
	s := authServer(t, server.Config{})
	cli := authClient(t, s, nil)
	authRun(t, cli, "app", bson.D{{Key: "createUser", Value: "ann"}, {Key: "pwd", Value: "s3cret"},
		{Key: "roles", Value: bson.A{"readWrite", bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "other"}}}},
		{Key: "customData", Value: bson.D{{Key: "team", Value: "x"}}}})

	wantCode(t, authErr(cli, "app", bson.D{{Key: "createUser", Value: "ann"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}}), 51003, "Location51003")
	wantCode(t, authErr(cli, "app", bson.D{{Key: "createUser", Value: "bob"}, {Key: "roles", Value: bson.A{}}}), 2, "BadValue")
	wantCode(t, authErr(cli, "app", bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "x"}}), 40414, "")
	wantCode(t, authErr(cli, "app", bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{"nosuch"}}}), 31, "RoleNotFound")
	wantCode(t, authErr(cli, "app", bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{"root"}}}), 31, "RoleNotFound")

	got := authRun(t, cli, "app", bson.D{{Key: "usersInfo", Value: "ann"}})
	users := got.Lookup("users").Array()
	vals, _ := users.Values()
	if len(vals) != 1 {
		t.Fatalf("usersInfo: %v", got)
	}
	u := vals[0].Document()
	keys := []string{}
	el, _ := u.Elements()
	for _, e := range el {
		keys = append(keys, e.Key())
	}
	strsEq(t, "usersInfo fields", keys, []string{"_id", "userId", "user", "db", "customData", "roles", "mechanisms"})
	eq(t, "_id", u.Lookup("_id").StringValue(), "app.ann")
	st, data := u.Lookup("userId").Binary()
	eq(t, "userId subtype", st, byte(4))
	eq(t, "userId len", len(data), 16)
	docEq(t, u.Lookup("roles").Array().Index(0).Document(), bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "app"}})
	valEq(t, u, "mechanisms", bson.A{"SCRAM-SHA-1", "SCRAM-SHA-256"})

	// showCredentials: mongod's credentials, and the stored keys are those
	// of the password (SCRAM-SHA-1 over the MD5 "user:mongo:pwd" digest).
	got = authRun(t, cli, "app", bson.D{{Key: "usersInfo", Value: bson.D{{Key: "user", Value: "ann"}, {Key: "db", Value: "app"}}}, {Key: "showCredentials", Value: true}})
	cr := got.Lookup("users").Array().Index(0).Document().Lookup("credentials").Document()
	check := func(mech string, iters int32, saltLen int, client *scram.Client) {
		c := cr.Lookup(mech).Document()
		eq(t, mech+" iterationCount", c.Lookup("iterationCount").Int32(), iters)
		salt, err := base64.StdEncoding.DecodeString(c.Lookup("salt").StringValue())
		noErr(t, err, "salt")
		eq(t, mech+" salt length", len(salt), saltLen)
		sc := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: int(iters)})
		eq(t, mech+" storedKey", c.Lookup("storedKey").StringValue(), base64.StdEncoding.EncodeToString(sc.StoredKey))
		eq(t, mech+" serverKey", c.Lookup("serverKey").StringValue(), base64.StdEncoding.EncodeToString(sc.ServerKey))
	}
	c1, _ := scram.SHA1.NewClientUnprepped("ann", md5hex("ann:mongo:s3cret"), "")
	c256, _ := scram.SHA256.NewClient("ann", "s3cret", "")
	check("SCRAM-SHA-1", 10000, 16, c1)
	check("SCRAM-SHA-256", 15000, 28, c256)
	if bytesContain(got, "s3cret") {
		t.Fatal("usersInfo shows the password")
	}

	// The document lives in admin.system.users.
	n, err := cli.Database("admin").Collection("system.users").CountDocuments(context.Background(), bson.D{{Key: "_id", Value: "app.ann"}})
	noErr(t, err, "count system.users")
	eq(t, "system.users", n, int64(1))

	// updateUser: a new password is a new salt; roles replaced.
	authRun(t, cli, "app", bson.D{{Key: "updateUser", Value: "ann"}, {Key: "pwd", Value: "n3w"}, {Key: "roles", Value: bson.A{"read"}}})
	got2 := authRun(t, cli, "app", bson.D{{Key: "usersInfo", Value: "ann"}, {Key: "showCredentials", Value: true}})
	u2 := got2.Lookup("users").Array().Index(0).Document()
	if u2.Lookup("credentials", "SCRAM-SHA-256", "salt").StringValue() == cr.Lookup("SCRAM-SHA-256", "salt").StringValue() {
		t.Fatal("updateUser kept the salt")
	}
	valEq(t, u2, "roles", bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "app"}}})
	wantCode(t, authErr(cli, "app", bson.D{{Key: "updateUser", Value: "ann"}}), 2, "BadValue")
	wantCode(t, authErr(cli, "app", bson.D{{Key: "updateUser", Value: "zed"}, {Key: "roles", Value: bson.A{}}}), 11, "UserNotFound")

	authRun(t, cli, "app", bson.D{{Key: "grantRolesToUser", Value: "ann"}, {Key: "roles", Value: bson.A{"dbAdmin", "read"}}})
	valEq(t, authRun(t, cli, "app", bson.D{{Key: "usersInfo", Value: "ann"}}).Lookup("users").Array().Index(0).Document(), "roles",
		bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "app"}}, bson.D{{Key: "role", Value: "dbAdmin"}, {Key: "db", Value: "app"}}})
	authRun(t, cli, "app", bson.D{{Key: "revokeRolesFromUser", Value: "ann"}, {Key: "roles", Value: bson.A{"read"}}})
	valEq(t, authRun(t, cli, "app", bson.D{{Key: "usersInfo", Value: "ann"}}).Lookup("users").Array().Index(0).Document(), "roles",
		bson.A{bson.D{{Key: "role", Value: "dbAdmin"}, {Key: "db", Value: "app"}}})

	// usersInfo: 1 lists the database's users sorted; forAllDBs all.
	authRun(t, cli, "app", bson.D{{Key: "createUser", Value: "abe"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{}}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-256"}}})
	authRun(t, cli, "other", bson.D{{Key: "createUser", Value: "cy"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{}}})
	list := authRun(t, cli, "app", bson.D{{Key: "usersInfo", Value: 1}}).Lookup("users").Array()
	eq(t, "first", list.Index(0).Document().Lookup("_id").StringValue(), "app.abe")
	valEq(t, list.Index(0).Document(), "mechanisms", bson.A{"SCRAM-SHA-256"})
	eq(t, "second", list.Index(1).Document().Lookup("_id").StringValue(), "app.ann")
	all, _ := authRun(t, cli, "admin", bson.D{{Key: "usersInfo", Value: bson.D{{Key: "forAllDBs", Value: true}}}}).Lookup("users").Array().Values()
	eq(t, "forAllDBs", len(all), 3)

	authRun(t, cli, "other", bson.D{{Key: "dropUser", Value: "cy"}})
	wantCode(t, authErr(cli, "other", bson.D{{Key: "dropUser", Value: "cy"}}), 11, "UserNotFound")
	valEq(t, authRun(t, cli, "app", bson.D{{Key: "dropAllUsersFromDatabase", Value: 1}}), "n", int32(2))
	all, _ = authRun(t, cli, "admin", bson.D{{Key: "usersInfo", Value: bson.D{{Key: "forAllDBs", Value: true}}}}).Lookup("users").Array().Values()
	eq(t, "after drops", len(all), 0)
}

// TestIssue15AuthUsersSurviveRestart: users are stored, not just cached.
func TestIssue15AuthUsersSurviveRestart(t *testing.T) {
	t.Parallel()
	if externalURI != "" {
		t.Skip("restarts the server")
	}
	dir := t.TempDir()
	s, err := server.Start(server.Config{Bind: "127.0.0.1", DBPath: dir})
	noErr(t, err, "start")
	cli := authClient(t, s, nil)
	authRun(t, cli, "admin", bson.D{{Key: "createUser", Value: "root1"}, {Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}})
	authRun(t, cli, "app", bson.D{{Key: "createRole", Value: "r1"}, {Key: "privileges", Value: bson.A{}}, {Key: "roles", Value: bson.A{"read"}}})
	_ = cli.Disconnect(context.Background())
	noErr(t, s.Close(), "close")
	s2 := authServer(t, server.Config{DBPath: dir})
	cli2 := authClient(t, s2, nil)
	got := authRun(t, cli2, "admin", bson.D{{Key: "usersInfo", Value: "root1"}})
	eq(t, "after restart", got.Lookup("users").Array().Index(0).Document().Lookup("_id").StringValue(), "admin.root1")
	got = authRun(t, cli2, "app", bson.D{{Key: "rolesInfo", Value: "r1"}})
	eq(t, "role after restart", got.Lookup("roles").Array().Index(0).Document().Lookup("_id").StringValue(), "app.r1")
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func bytesContain(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
