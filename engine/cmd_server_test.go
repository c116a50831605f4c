package engine

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/wire"
)

func srvTestEngine(t *testing.T) *Engine {
	t.Helper()
	kv, err := pebblekv.Open("srvtest", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{KV: kv, Logger: zaptest.NewLogger(t), Reaper: ReaperConfig{Disabled: true},
		ServerInfo: ServerInfo{
			CmdLineArgv:   []string{"mayfly", "--port", "27017"},
			CmdLineParsed: map[string]any{"net.port": int32(27017), "net.bindIp": "127.0.0.1", "storage.dbPath": "/d"},
			Host:          "127.0.0.1", Port: 27017,
			ConnStats: func() (int64, int64, int64, int64, int64) { return 3, 7, 1000, 2000, 42 },
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); kv.Close() })
	return e
}

// srvTestRun sends cmd on db as a client on connection 12 would.
func srvTestRun(t *testing.T, e *Engine, db string, cmd bson.D) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(append(cmd, bson.E{Key: "$db", Value: db}))
	if err != nil {
		t.Fatal(err)
	}
	return e.Handle(context.Background(), &wire.Request{Conn: &wire.ConnInfo{ID: 12, RemoteAddr: "127.0.0.1:5555"}, OpCode: wire.OpMsg, Command: raw})
}

func srvTestOK(t *testing.T, e *Engine, db string, cmd bson.D) bson.Raw {
	t.Helper()
	r := srvTestRun(t, e, db, cmd)
	if r.Lookup("ok").Double() != 1 {
		t.Fatalf("%v failed: %v", cmd, r)
	}
	return r
}

func srvTestErr(t *testing.T, e *Engine, db string, cmd bson.D, code int32, msg string) {
	t.Helper()
	r := srvTestRun(t, e, db, cmd)
	if r.Lookup("ok").Double() != 0 || r.Lookup("code").Int32() != code || r.Lookup("codeName").StringValue() != mongoerr.CodeName(code) ||
		!strings.Contains(r.Lookup("errmsg").StringValue(), msg) {
		t.Fatalf("%v = %v, want code %d with %q", cmd, r, code, msg)
	}
}

func keys(r bson.Raw) []string {
	els, _ := r.Elements()
	var out []string
	for _, e := range els {
		out = append(out, e.Key())
	}
	return out
}

func TestHelloShapes(t *testing.T) {
	e := srvTestEngine(t)
	// The handshake as drivers send it: lower-case ismaster with helloOk.
	r := srvTestOK(t, e, "admin", bson.D{{Key: "ismaster", Value: int32(1)}, {Key: "helloOk", Value: true}, {Key: "client", Value: bson.D{}}})
	want := []string{"helloOk", "ismaster", "maxBsonObjectSize", "maxMessageSizeBytes", "maxWriteBatchSize", "localTime",
		"logicalSessionTimeoutMinutes", "connectionId", "minWireVersion", "maxWireVersion", "readOnly", "ok"}
	if got := keys(r); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ismaster keys = %v, want %v", got, want)
	}
	if r.Lookup("connectionId").Int32() != 12 || r.Lookup("maxWireVersion").Int32() != 21 || r.Lookup("minWireVersion").Int32() != 0 ||
		r.Lookup("maxBsonObjectSize").Int32() != 16777216 || r.Lookup("maxMessageSizeBytes").Int32() != 48000000 ||
		r.Lookup("maxWriteBatchSize").Int32() != 100000 || r.Lookup("logicalSessionTimeoutMinutes").Int32() != 30 ||
		r.Lookup("readOnly").Boolean() || !r.Lookup("ismaster").Boolean() {
		t.Errorf("ismaster values: %v", r)
	}
	// hello on any database: isWritablePrimary, and helloOk only if asked.
	r = srvTestOK(t, e, "test", bson.D{{Key: "hello", Value: int32(1)}})
	if !r.Lookup("isWritablePrimary").Boolean() || r.Lookup("ismaster").Type != 0 || r.Lookup("helloOk").Type != 0 {
		t.Errorf("hello: %v", r)
	}
	for _, k := range []string{"setName", "topologyVersion", "compression", "saslSupportedMechs", "msg", "hosts"} {
		if r.Lookup(k).Type != 0 {
			t.Errorf("hello must not carry %s", k)
		}
	}
	r = srvTestOK(t, e, "test", bson.D{{Key: "isMaster", Value: int32(1)}})
	if !r.Lookup("ismaster").Boolean() {
		t.Errorf("isMaster: %v", r)
	}
}

func TestBuildInfoAndVersionAgree(t *testing.T) {
	e := srvTestEngine(t)
	r := srvTestOK(t, e, "admin", bson.D{{Key: "buildinfo", Value: int32(1)}})
	if v := r.Lookup("version").StringValue(); v != Version || !strings.HasPrefix(v, FCV+".") {
		t.Errorf("version %q vs FCV %q", v, FCV)
	}
	va := r.Lookup("versionArray").Array()
	vals, _ := va.Values()
	if len(vals) != 4 || vals[0].Int32() != 7 || vals[1].Int32() != 0 {
		t.Errorf("versionArray %v", va)
	}
	for _, k := range []string{"gitVersion", "modules", "bits", "maxBsonObjectSize", "storageEngines", "openssl", "buildEnvironment", "allocator"} {
		if r.Lookup(k).Type == 0 {
			t.Errorf("buildInfo lacks %s", k)
		}
	}
	if r.Lookup("javascriptEngine").StringValue() != "none" || r.Lookup("sysInfo").StringValue() != "deprecated" {
		t.Errorf("buildInfo: %v", r)
	}
	if r.Lookup("ferretdb").Type != 0 {
		t.Error("ferretdb key present")
	}
}

func TestGetParameter(t *testing.T) {
	e := srvTestEngine(t)
	// mongosh's server-identification probe must fail plainly.
	srvTestErr(t, e, "admin", bson.D{{Key: "getParameter", Value: "foo"}}, mongoerr.InvalidOptions, "no option found to get")
	srvTestErr(t, e, "admin", bson.D{{Key: "getParameter", Value: int32(1)}, {Key: "noSuchParameter", Value: int32(1)}}, mongoerr.InvalidOptions, "no option found to get")
	r := srvTestOK(t, e, "admin", bson.D{{Key: "getParameter", Value: int32(1)}, {Key: "featureCompatibilityVersion", Value: int32(1)}})
	if r.Lookup("featureCompatibilityVersion", "version").StringValue() != FCV || len(keys(r)) != 2 {
		t.Errorf("FCV: %v", r)
	}
	r = srvTestOK(t, e, "admin", bson.D{{Key: "getParameter", Value: "*"}})
	if r.Lookup("featureCompatibilityVersion", "version").StringValue() != FCV || r.Lookup("maxBSONDepth").Int32() != 200 {
		t.Errorf("getParameter *: %v", r)
	}
	r = srvTestOK(t, e, "admin", bson.D{{Key: "getParameter", Value: bson.D{{Key: "showDetails", Value: true}}}, {Key: "cursorTimeoutMillis", Value: int32(1)}})
	if r.Lookup("cursorTimeoutMillis", "value").Int64() != 600000 {
		t.Errorf("showDetails: %v", r)
	}
	srvTestErr(t, e, "test", bson.D{{Key: "getParameter", Value: "*"}}, mongoerr.Unauthorized, "admin")
}

func TestGetLogCmdLineAndFriends(t *testing.T) {
	e := srvTestEngine(t)
	r := srvTestOK(t, e, "admin", bson.D{{Key: "getLog", Value: "startupWarnings"}})
	if vals, _ := r.Lookup("log").Array().Values(); len(vals) != 0 || r.Lookup("totalLinesWritten").Type == 0 {
		t.Errorf("startupWarnings: %v", r)
	}
	r = srvTestOK(t, e, "admin", bson.D{{Key: "getLog", Value: "*"}})
	if names, _ := r.Lookup("names").Array().Values(); len(names) != 2 || names[0].StringValue() != "global" {
		t.Errorf("getLog *: %v", r)
	}
	srvTestErr(t, e, "admin", bson.D{{Key: "getLog", Value: "butty"}}, mongoerr.OperationFailed, "No log named 'butty'")
	srvTestErr(t, e, "admin", bson.D{{Key: "getLog", Value: int32(1)}}, mongoerr.TypeMismatch, "must be of type String")

	r = srvTestOK(t, e, "admin", bson.D{{Key: "getCmdLineOpts", Value: int32(1)}})
	if r.Lookup("parsed", "net", "port").Int32() != 27017 || r.Lookup("parsed", "storage", "dbPath").StringValue() != "/d" {
		t.Errorf("getCmdLineOpts: %v", r)
	}
	if argv, _ := r.Lookup("argv").Array().Values(); len(argv) != 3 {
		t.Errorf("argv: %v", r)
	}

	r = srvTestOK(t, e, "admin", bson.D{{Key: "hostInfo", Value: int32(1)}})
	if r.Lookup("system", "numCores").Int32() < 1 || r.Lookup("os", "type").StringValue() == "" {
		t.Errorf("hostInfo: %v", r)
	}
	r = srvTestOK(t, e, "test", bson.D{{Key: "whatsmyuri", Value: int32(1)}})
	if r.Lookup("you").StringValue() != "127.0.0.1:5555" {
		t.Errorf("whatsmyuri: %v", r)
	}
	r = srvTestOK(t, e, "test", bson.D{{Key: "connectionStatus", Value: int32(1)}, {Key: "showPrivileges", Value: true}})
	if r.Lookup("authInfo", "authenticatedUsers").Type != bson.TypeArray || r.Lookup("authInfo", "authenticatedUserPrivileges").Type != bson.TypeArray {
		t.Errorf("connectionStatus: %v", r)
	}
	srvTestErr(t, e, "admin", bson.D{{Key: "atlasVersion", Value: int32(1)}}, mongoerr.CommandNotFound, "no such command: 'atlasVersion'")
}

func TestSessions(t *testing.T) {
	e := srvTestEngine(t)
	r := srvTestOK(t, e, "admin", bson.D{{Key: "startSession", Value: int32(1)}})
	st, data := r.Lookup("id", "id").Binary()
	if st != 4 || len(data) != 16 || r.Lookup("timeoutMinutes").Int32() != 30 {
		t.Errorf("startSession: %v", r)
	}
	r2 := srvTestOK(t, e, "admin", bson.D{{Key: "startSession", Value: int32(1)}})
	if _, d2 := r2.Lookup("id", "id").Binary(); string(d2) == string(data) {
		t.Error("two sessions share an id")
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: data}}}
	for _, c := range []string{"endSessions", "refreshSessions", "killSessions"} {
		srvTestOK(t, e, "admin", bson.D{{Key: c, Value: bson.A{lsid}}})
	}
	srvTestOK(t, e, "admin", bson.D{{Key: "killAllSessions", Value: bson.A{}}})
}

func TestServerStatusAndSections(t *testing.T) {
	RegisterStatusSection("srvTestSection", func(e *Engine) any { return bson.D{{Key: "answer", Value: int32(42)}} })
	defer func() {
		statusMu.Lock()
		statusSections = statusSections[:len(statusSections)-1]
		statusMu.Unlock()
	}()
	e := srvTestEngine(t)
	srvTestOK(t, e, "admin", bson.D{{Key: "ping", Value: int32(1)}})
	r := srvTestOK(t, e, "admin", bson.D{{Key: "serverStatus", Value: int32(1)}})
	if !strings.HasSuffix(r.Lookup("host").StringValue(), ":27017") || r.Lookup("version").StringValue() != Version || r.Lookup("pid").Int64() == 0 {
		t.Errorf("serverStatus header: %v", r)
	}
	if r.Lookup("connections", "current").Int32() != 3 || r.Lookup("connections", "totalCreated").Int32() != 7 ||
		r.Lookup("connections", "available").Int32() < 1 {
		t.Errorf("connections: %v", r.Lookup("connections"))
	}
	if r.Lookup("network", "bytesIn").Int64() != 1000 || r.Lookup("network", "bytesOut").Int64() != 2000 || r.Lookup("network", "numRequests").Int64() != 42 {
		t.Errorf("network: %v", r.Lookup("network"))
	}
	if r.Lookup("opcounters", "command").Int64() < 2 {
		t.Errorf("opcounters: %v", r.Lookup("opcounters"))
	}
	if r.Lookup("mem", "bits").Int32() != 64 || r.Lookup("mem", "resident").Type == 0 {
		t.Errorf("mem: %v", r.Lookup("mem"))
	}
	if r.Lookup("srvTestSection", "answer").Int32() != 42 {
		t.Errorf("registered section missing: %v", keys(r))
	}
	r = srvTestOK(t, e, "admin", bson.D{{Key: "serverStatus", Value: int32(1)}, {Key: "mem", Value: int32(0)}, {Key: "srvTestSection", Value: false}})
	if r.Lookup("mem").Type != 0 || r.Lookup("srvTestSection").Type != 0 || r.Lookup("network").Type == 0 {
		t.Errorf("exclusions not honoured: %v", keys(r))
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("registering a section twice did not panic")
			}
		}()
		RegisterStatusSection("srvTestSection", nil)
	}()
}

func TestListCommands(t *testing.T) {
	e := srvTestEngine(t)
	r := srvTestOK(t, e, "admin", bson.D{{Key: "listCommands", Value: int32(1)}})
	cmds := r.Lookup("commands").Document()
	for _, c := range Commands() {
		for _, name := range append([]string{c.Name}, c.Aliases...) {
			entry, ok := cmds.Lookup(name).DocumentOK()
			if !ok {
				t.Errorf("listCommands lacks %s", name)
				continue
			}
			if entry.Lookup("help").StringValue() != c.Help || entry.Lookup("adminOnly").Boolean() != c.AdminOnly ||
				!entry.Lookup("secondaryOk").Boolean() || entry.Lookup("requiresAuth").Boolean() != !AuthFree(c.Name) || entry.Lookup("apiVersions").Type != bson.TypeArray {
				t.Errorf("listCommands %s = %v", name, entry)
			}
		}
	}
	names := keys(cmds)
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("listCommands not sorted at %s, %s", names[i-1], names[i])
		}
	}
}
