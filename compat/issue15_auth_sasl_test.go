package compat

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mayflydb/mayfly/server"
)

func authUsers(t *testing.T, cli *mongo.Client) {
	t.Helper()
	authRun(t, cli, "app", bson.D{{Key: "createUser", Value: "ann"}, {Key: "pwd", Value: "s3cret"}, {Key: "roles", Value: bson.A{"readWrite"}}})
	authRun(t, cli, "app", bson.D{{Key: "createUser", Value: "old"}, {Key: "pwd", Value: "pw1"}, {Key: "roles", Value: bson.A{"read"}}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}})
}

func whoAmI(t *testing.T, cli *mongo.Client) string {
	t.Helper()
	st := authRun(t, cli, "admin", bson.D{{Key: "connectionStatus", Value: 1}})
	us, _ := st.Lookup("authInfo", "authenticatedUsers").Array().Values()
	var out []string
	for _, u := range us {
		d := u.Document()
		out = append(out, d.Lookup("user").StringValue()+"@"+d.Lookup("db").StringValue())
	}
	return strings.Join(out, ",")
}

// TestIssue15AuthSCRAM: the Go driver authenticates with SCRAM-SHA-256,
// SCRAM-SHA-1 and by negotiation (saslSupportedMechs + speculative
// authentication in hello); wrong passwords and unknown users get 18
// "Authentication failed.", slowed and logged with the remote address and
// never the password.
func TestIssue15AuthSCRAM(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	s := authServer(t, server.Config{Logger: zap.New(core)})
	authUsers(t, authClient(t, s, nil))

	for _, tc := range []struct{ mech, user, pwd string }{
		{"SCRAM-SHA-256", "ann", "s3cret"}, {"SCRAM-SHA-1", "ann", "s3cret"}, {"", "ann", "s3cret"},
		{"SCRAM-SHA-1", "old", "pw1"}, {"", "old", "pw1"},
	} {
		cli := authClient(t, s, &options.Credential{AuthMechanism: tc.mech, AuthSource: "app", Username: tc.user, Password: tc.pwd})
		eq(t, tc.mech+" "+tc.user, whoAmI(t, cli), tc.user+"@app")
	}
	failStart := time.Now()
	for _, tc := range []struct{ mech, user, pwd, src string }{
		{"SCRAM-SHA-256", "ann", "wrong", "app"}, {"SCRAM-SHA-1", "ann", "wrong", "app"},
		{"SCRAM-SHA-256", "nobody", "x", "app"}, {"SCRAM-SHA-256", "ann", "s3cret", "admin"},
		{"SCRAM-SHA-256", "old", "pw1", "app"}, // no SCRAM-SHA-256 credentials
	} {
		cli := authClient(t, s, &options.Credential{AuthMechanism: tc.mech, AuthSource: tc.src, Username: tc.user, Password: tc.pwd})
		start := time.Now()
		err := authErr(cli, "app", bson.D{{Key: "ping", Value: 1}})
		if err == nil || !strings.Contains(err.Error(), "Authentication failed.") {
			t.Fatalf("%+v: got %v, want Authentication failed.", tc, err)
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Fatalf("%+v: failure answered in %v: not slowed", tc, d)
		}
	}
	// Further failures from the same address wait longer: 200, 400, 800 ms,
	// then 1 s each.
	if d := time.Since(failStart); d < 3400*time.Millisecond {
		t.Fatalf("5 failures from one address took %v, want at least 3.4 s of backoff", d)
	}
	failed := logs.FilterMessage("Authentication failed").All()
	if len(failed) < 5 {
		t.Fatalf("%d failures logged, want 5", len(failed))
	}
	for _, l := range failed {
		m := l.ContextMap()
		if r, _ := m["remote"].(string); !strings.HasPrefix(r, "127.0.0.1:") {
			t.Fatalf("failure logged without the remote address: %v", m)
		}
	}
	for _, l := range logs.All() {
		for _, f := range l.Context {
			if strings.Contains(f.String, "wrong") || strings.Contains(f.String, "s3cret") {
				t.Fatalf("a log line carries a password: %v %v", l.Message, l.ContextMap())
			}
		}
	}
}

// TestIssue15AuthSaslCommands drives the conversation by hand on one
// connection: hello's saslSupportedMechs and speculativeAuthenticate,
// saslStart/saslContinue with and without skipEmptyExchange, mongod's
// reply shapes, a wrong conversationId, logout.
func TestIssue15AuthSaslCommands(t *testing.T) {
	t.Parallel()
	s := authServer(t, server.Config{})
	cli, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetMaxPoolSize(1))
	noErr(t, err, "connect")
	t.Cleanup(func() { _ = cli.Disconnect(context.Background()) })
	authUsers(t, cli)

	h := authRun(t, cli, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "app.ann"}})
	valEq(t, h, "saslSupportedMechs", bson.A{"SCRAM-SHA-1", "SCRAM-SHA-256"})
	h = authRun(t, cli, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "app.old"}})
	valEq(t, h, "saslSupportedMechs", bson.A{"SCRAM-SHA-1"})
	h = authRun(t, cli, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "app.nobody"}})
	if has(h, "saslSupportedMechs") {
		t.Fatalf("saslSupportedMechs for an unknown user: %v", h)
	}

	bin := func(s string) bson.Binary { return bson.Binary{Data: []byte(s)} }
	payload := func(r bson.Raw) string { _, d := r.Lookup("payload").Binary(); return string(d) }
	keys := func(r bson.Raw) string {
		el, _ := r.Elements()
		var k []string
		for _, e := range el {
			k = append(k, e.Key())
		}
		return strings.Join(k, ",")
	}

	// speculativeAuthenticate in hello, continued with saslContinue.
	c256, _ := scram.SHA256.NewClient("ann", "s3cret", "")
	conv := c256.NewConversation()
	first, _ := conv.Step("")
	h = authRun(t, cli, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "speculativeAuthenticate", Value: bson.D{
		{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"}, {Key: "payload", Value: bin(first)},
		{Key: "db", Value: "app"}, {Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}}}}})
	sa := h.Lookup("speculativeAuthenticate").Document()
	eq(t, "speculative fields", keys(sa), "conversationId,done,payload")
	eq(t, "done", sa.Lookup("done").Boolean(), false)
	final, err := conv.Step(payload(sa))
	noErr(t, err, "client final")
	r := authRun(t, cli, "app", bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: sa.Lookup("conversationId").Int32()}, {Key: "payload", Value: bin(final)}})
	eq(t, "saslContinue fields", keys(r), "conversationId,done,payload,ok")
	eq(t, "done with skipEmptyExchange", r.Lookup("done").Boolean(), true)
	_, err = conv.Step(payload(r))
	noErr(t, err, "server signature")
	eq(t, "authenticated", whoAmI(t, cli), "ann@app")
	authRun(t, cli, "app", bson.D{{Key: "logout", Value: 1}})
	eq(t, "after logout", whoAmI(t, cli), "")

	// saslStart without skipEmptyExchange: one more, empty, exchange.
	c1, _ := scram.SHA1.NewClientUnprepped("old", md5hex("old:mongo:pw1"), "")
	conv = c1.NewConversation()
	first, _ = conv.Step("")
	r = authRun(t, cli, "app", bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-1"}, {Key: "payload", Value: bin(first)}, {Key: "autoAuthorize", Value: 1}})
	eq(t, "saslStart fields", keys(r), "conversationId,done,payload,ok")
	id := r.Lookup("conversationId").Int32()
	final, _ = conv.Step(payload(r))
	wantCode(t, authErr(cli, "app", bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: id + 7}, {Key: "payload", Value: bin(final)}}), 17, "ProtocolError")
	r = authRun(t, cli, "app", bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: id}, {Key: "payload", Value: bin(final)}})
	eq(t, "done before the empty exchange", r.Lookup("done").Boolean(), false)
	_, err = conv.Step(payload(r))
	noErr(t, err, "server signature")
	r = authRun(t, cli, "app", bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: id}, {Key: "payload", Value: bin("")}})
	eq(t, "done", r.Lookup("done").Boolean(), true)
	eq(t, "authenticated", whoAmI(t, cli), "old@app")

	wantCode(t, authErr(cli, "app", bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "PLAIN"}, {Key: "payload", Value: bin("x")}}), 334, "MechanismUnavailable")
	wantCode(t, authErr(cli, "app", bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: 99}, {Key: "payload", Value: bin("")}}), 17, "ProtocolError")
}
