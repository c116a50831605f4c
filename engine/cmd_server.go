package engine

import (
	"crypto/rand"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// The server commands: the handshake and the introspection commands that
// drivers, mongosh and tools send. Their reply shapes follow mongod 7.0,
// because clients read these fields by name and version-gate on them.

// Version is the MongoDB version mayfly presents. It must agree with
// maxWireVersion (21 = 7.0) and featureCompatibilityVersion.
const (
	Version              = "7.0.14"
	FCV                  = "7.0"
	MaxWireVersion int32 = 21
	// sessionTimeoutMinutes is logicalSessionTimeoutMinutes: advertising it
	// turns sessions on in drivers (lsid on commands, endSessions at exit),
	// which mongosh needs for db.getMongo().startSession().
	sessionTimeoutMinutes int32 = 30
	maxBSONObjectSize     int32 = 16 * 1024 * 1024
	maxMessageSizeBytes   int32 = 48_000_000
	maxWriteBatchSize     int32 = 100_000
	// maxIncomingConnections is what connections.available counts down from.
	maxIncomingConnections int64 = 1_000_000
)

func init() {
	Register(
		&Command{Name: "hello", Aliases: []string{"isMaster", "ismaster"}, Help: "describe this server's role and limits (the connection handshake)", Run: cmdHello},
		&Command{Name: "ping", Help: "a way to check that the server is alive; responds immediately", Run: cmdPing},
		&Command{Name: "buildInfo", Aliases: []string{"buildinfo"}, Help: "version and build details", Run: cmdBuildInfo},
		&Command{Name: "getParameter", Help: "get server parameters; {getParameter: '*'} for all", AdminOnly: true, Run: cmdGetParameter},
		&Command{Name: "getCmdLineOpts", Help: "the command line the server was started with", AdminOnly: true, Run: cmdGetCmdLineOpts},
		&Command{Name: "getLog", Help: "recent log lines: {getLog: 'global' | 'startupWarnings' | '*'}", AdminOnly: true, Run: cmdGetLog},
		&Command{Name: "hostInfo", Help: "information about the host system", Run: cmdHostInfo},
		&Command{Name: "connectionStatus", Help: "the authentication state of this connection", Run: cmdConnectionStatus},
		&Command{Name: "whatsmyuri", Help: "the client's address as the server sees it", Run: cmdWhatsMyURI},
		&Command{Name: "serverStatus", Help: "process-wide counters and figures", Run: cmdServerStatus},
		&Command{Name: "listCommands", Help: "list the commands this server supports", Run: cmdListCommands},
		&Command{Name: "startSession", Help: "start a logical session", Run: cmdStartSession},
		&Command{Name: "endSessions", Help: "end logical sessions", Run: cmdEndSessions},
		&Command{Name: "refreshSessions", Help: "keep logical sessions alive", Run: cmdRefreshSessions},
		&Command{Name: "killSessions", Help: "kill logical sessions", Run: cmdKillSessions},
		&Command{Name: "killAllSessions", Help: "kill all logical sessions", Run: cmdKillAllSessions},
		&Command{Name: "killAllSessionsByPattern", Help: "kill logical sessions matching patterns", Run: cmdKillAllSessionsByPattern},
	)
}

// cmdNoop answers commands that are accepted but need no work here:
// sessions carry no server-side state in mayfly (no transactions, no
// retryable writes on a standalone).
func cmdNoop(e *Engine, r *Request) (bson.D, error) { return bson.D{}, nil }

func cmdPing(e *Engine, r *Request) (bson.D, error) { return bson.D{}, nil }

// cmdHello is the handshake. A standalone stays plain: no setName (that
// would make drivers treat it as a replica set and send txnNumber), no
// topologyVersion (that would switch the monitor to streaming). With
// --replSet it describes the one-member set's primary (repl.go), with
// topologyVersion and the awaitable hello the streaming monitor uses.
func cmdHello(e *Engine, r *Request) (bson.D, error) {
	d := bson.D{}
	if v, ok := r.Arg("helloOk"); ok && srvTruthy(v) {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	if e.repl != nil {
		// A replica set's primary (repl.go): the set's fields first.
		rd, err := e.replHello(r)
		if err != nil {
			return nil, err
		}
		d = append(d, rd...)
	} else if r.Name == "hello" {
		// mongod names the flag after the command used: the legacy
		// spelling gets the legacy field.
		d = append(d, bson.E{Key: "isWritablePrimary", Value: true})
	} else {
		d = append(d, bson.E{Key: "ismaster", Value: true})
	}
	var connID int64
	if r.Conn != nil {
		connID = r.Conn.ID
	}
	d = append(d,
		bson.E{Key: "maxBsonObjectSize", Value: maxBSONObjectSize},
		bson.E{Key: "maxMessageSizeBytes", Value: maxMessageSizeBytes},
		bson.E{Key: "maxWriteBatchSize", Value: maxWriteBatchSize},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: sessionTimeoutMinutes},
		bson.E{Key: "connectionId", Value: srvIntValue(connID)},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: MaxWireVersion},
		bson.E{Key: "readOnly", Value: false},
	)
	if v, ok := r.Arg("saslSupportedMechs"); ok {
		if mechs := e.saslSupportedMechs(v); mechs != nil {
			d = append(d, bson.E{Key: "saslSupportedMechs", Value: mechs})
		}
	}
	if v, ok := r.Arg("speculativeAuthenticate"); ok {
		if sa := e.speculativeAuth(r, v); sa != nil {
			d = append(d, bson.E{Key: "speculativeAuthenticate", Value: sa})
		}
	}
	return d, nil
}

func srvIntValue(v int64) any {
	if v >= -1<<31 && v < 1<<31 {
		return int32(v)
	}
	return v
}

func srvTruthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil:
		return false
	default:
		if f, ok := srvToFloat(v); ok {
			return f != 0
		}
		return true
	}
}

func srvToFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// gitVersion is the VCS revision the binary was built from, when Go
// recorded one.
var gitVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
})

func versionArray() bson.A {
	a := bson.A{}
	for _, p := range strings.Split(Version, ".") {
		n, _ := strconv.Atoi(p)
		a = append(a, int32(n))
	}
	return append(a, int32(0))
}

// cmdBuildInfo presents mayfly as MongoDB 7.0.x, the version its wire and
// query behaviour follow. mongosh shows "Using MongoDB: <version>"; keys
// that identify other products (ferretdb) would make it print a
// "non-genuine server" banner, so none are sent.
func cmdBuildInfo(e *Engine, r *Request) (bson.D, error) {
	return bson.D{
		{Key: "version", Value: Version},
		{Key: "gitVersion", Value: gitVersion()},
		{Key: "modules", Value: bson.A{}},
		{Key: "allocator", Value: "go"},
		{Key: "javascriptEngine", Value: "none"},
		{Key: "sysInfo", Value: "deprecated"},
		{Key: "versionArray", Value: versionArray()},
		{Key: "openssl", Value: bson.D{{Key: "running", Value: "disabled"}, {Key: "compiled", Value: "disabled"}}},
		{Key: "buildEnvironment", Value: bson.D{
			{Key: "distmod", Value: "mayfly"},
			{Key: "distarch", Value: runtime.GOARCH},
			{Key: "cc", Value: runtime.Version()},
			{Key: "target_arch", Value: runtime.GOARCH},
			{Key: "target_os", Value: runtime.GOOS},
		}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: maxBSONObjectSize},
		{Key: "storageEngines", Value: bson.A{"pebble"}},
	}, nil
}

// serverParameters are the parameters getParameter knows, in the order
// {getParameter: "*"} lists them.
func serverParameters(e *Engine) bson.D {
	d := bson.D{
		{Key: "authenticationMechanisms", Value: bson.A{}},
		{Key: "cursorTimeoutMillis", Value: int64(600000)},
		{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: FCV}}},
		{Key: "logicalSessionTimeoutMinutes", Value: sessionTimeoutMinutes},
		{Key: "maxBSONDepth", Value: int32(200)},
		{Key: "quiet", Value: false},
		{Key: "ttlMonitorEnabled", Value: true},
	}
	if e == nil {
		return append(d, bson.E{Key: "localLogicalSessionTimeoutMinutes", Value: sessionTimeoutMinutes})
	}
	d = append(d, bson.E{Key: "localLogicalSessionTimeoutMinutes", Value: int32(e.sessions.Timeout() / time.Minute)})
	d = append(d, e.runtimeParams()...)
	sort.SliceStable(d, func(i, j int) bool { return d[i].Key < d[j].Key })
	return d
}

// cmdGetParameter implements {getParameter: 1, name: 1, …},
// {getParameter: "*"} and the document form {getParameter: {showDetails,
// allParameters}}. Asking for nothing known is an error, as in mongod; the
// error text matters: mongosh probes with {getParameter: "foo"} at startup
// and tells servers apart by the message.
func cmdGetParameter(e *Engine, r *Request) (bson.D, error) {
	params := serverParameters(e)
	all := false
	showDetails := false
	switch v := r.Cmd[0].Value.(type) {
	case string:
		all = v == "*"
	case bson.D:
		for _, f := range v {
			switch f.Key {
			case "allParameters":
				all = srvTruthy(f.Value)
			case "showDetails":
				showDetails = srvTruthy(f.Value)
			}
		}
	}
	runtime := e.runtimeParams()
	render := func(key string, val any) any {
		if !showDetails {
			return val
		}
		settable := false
		for _, p := range runtime {
			settable = settable || p.Key == key
		}
		return bson.D{{Key: "value", Value: val}, {Key: "settableAtRuntime", Value: settable}, {Key: "settableAtStartup", Value: settable}}
	}
	out := bson.D{}
	if all {
		for _, p := range params {
			out = append(out, bson.E{Key: p.Key, Value: render(p.Key, p.Value)})
		}
		return out, nil
	}
	for _, f := range r.Cmd[1:] {
		if IsEnvelopeField(f.Key) {
			continue
		}
		for _, p := range params {
			if p.Key == f.Key {
				out = append(out, bson.E{Key: p.Key, Value: render(p.Key, p.Value)})
			}
		}
	}
	if len(out) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to get")
	}
	return out, nil
}

func cmdGetCmdLineOpts(e *Engine, r *Request) (bson.D, error) {
	argv := bson.A{}
	for _, a := range e.info.CmdLineArgv {
		argv = append(argv, a)
	}
	return bson.D{{Key: "argv", Value: argv}, {Key: "parsed", Value: nestedOpts(e.info.CmdLineParsed)}}, nil
}

// nestedOpts renders parsed options as mongod does: dotted names
// ("net.port") become nested documents, keys in sorted order.
func nestedOpts(m map[string]any) bson.D {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := bson.D{}
	for _, k := range keys {
		out = setDotted(out, strings.Split(k, "."), m[k])
	}
	return out
}

func setDotted(d bson.D, path []string, v any) bson.D {
	if len(path) == 1 {
		return append(d, bson.E{Key: path[0], Value: v})
	}
	for i := range d {
		if d[i].Key == path[0] {
			if sub, ok := d[i].Value.(bson.D); ok {
				d[i].Value = setDotted(sub, path[1:], v)
				return d
			}
		}
	}
	return append(d, bson.E{Key: path[0], Value: setDotted(bson.D{}, path[1:], v)})
}

// cmdGetLog serves the log names mongod has. mayfly logs through zap to
// stderr and keeps no in-memory copy, so the logs are empty; an empty
// startupWarnings is what makes mongosh print no warnings.
func cmdGetLog(e *Engine, r *Request) (bson.D, error) {
	name, ok := r.Cmd[0].Value.(string)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "Argument to getLog must be of type String; found %v of type %s", r.Cmd[0].Value, srvTypeName(r.Cmd[0].Value))
	}
	switch name {
	case "*":
		return bson.D{{Key: "names", Value: bson.A{"global", "startupWarnings"}}}, nil
	case "global", "startupWarnings":
		return bson.D{{Key: "totalLinesWritten", Value: int32(0)}, {Key: "log", Value: bson.A{}}}, nil
	}
	return nil, mongoerr.New(mongoerr.OperationFailed, "No log named '%s'", name)
}

func srvTypeName(v any) string {
	switch v.(type) {
	case int32:
		return "int"
	case int64:
		return "long"
	case float64:
		return "double"
	case bool:
		return "bool"
	case bson.D:
		return "object"
	case bson.A:
		return "array"
	case nil:
		return "null"
	}
	return "unknown"
}

func srvHostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

func cmdHostInfo(e *Engine, r *Request) (bson.D, error) {
	memMB := int64(totalMemory() / (1024 * 1024))
	return bson.D{
		{Key: "system", Value: bson.D{
			{Key: "currentTime", Value: bson.NewDateTimeFromTime(time.Now())},
			{Key: "hostname", Value: srvHostname()},
			{Key: "cpuAddrSize", Value: int32(64)},
			{Key: "memSizeMB", Value: memMB},
			{Key: "memLimitMB", Value: memMB},
			{Key: "numCores", Value: int32(runtime.NumCPU())},
			{Key: "cpuArch", Value: runtime.GOARCH},
			{Key: "numaEnabled", Value: false},
		}},
		{Key: "os", Value: bson.D{
			{Key: "type", Value: osType()},
			{Key: "name", Value: osName()},
			{Key: "version", Value: osVersion()},
		}},
		{Key: "extra", Value: bson.D{
			{Key: "versionString", Value: osVersion()},
			{Key: "pageSize", Value: int64(os.Getpagesize())},
			{Key: "goVersion", Value: runtime.Version()},
		}},
	}, nil
}

func osType() string {
	if runtime.GOOS == "" {
		return "unknown"
	}
	return strings.ToUpper(runtime.GOOS[:1]) + runtime.GOOS[1:]
}

// osName reads the distribution's pretty name, as mongod does on Linux.
func osName() string {
	b, err := os.ReadFile("/etc/os-release")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				return strings.Trim(v, `"`)
			}
		}
	}
	return runtime.GOOS
}

func osVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// totalMemory is the machine's memory in bytes (0 when unknown).
func totalMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cmdConnectionStatus reports the connection's user, its roles and (showPrivileges)
// its privileges (auth.go).
func cmdConnectionStatus(e *Engine, r *Request) (bson.D, error) {
	users, roles := bson.A{}, bson.A{}
	for _, u := range e.authenticatedUsers(r.Conn) {
		users = append(users, bson.D{{Key: "user", Value: u.User}, {Key: "db", Value: u.DB}})
		for _, rr := range u.Roles {
			roles = append(roles, rr.doc())
		}
	}
	auth := bson.D{{Key: "authenticatedUsers", Value: users}, {Key: "authenticatedUserRoles", Value: roles}}
	if v, ok := r.Arg("showPrivileges"); ok && srvTruthy(v) {
		auth = append(auth, bson.E{Key: "authenticatedUserPrivileges", Value: e.privilegesDoc(r.Conn)})
	}
	return bson.D{{Key: "authInfo", Value: auth}}, nil
}

func cmdWhatsMyURI(e *Engine, r *Request) (bson.D, error) {
	you := ""
	if r.Conn != nil {
		you = r.Conn.RemoteAddr
	}
	return bson.D{{Key: "you", Value: you}}, nil
}

// statusSection is one optional part of serverStatus, contributed by the
// file that owns the figures (storage, TTL, cursors, …).
type statusSection struct {
	name string
	f    func(e *Engine) any
}

var (
	statusMu       sync.Mutex
	statusSections []statusSection
)

// RegisterStatusSection adds a section to serverStatus: f's result appears
// under name, after the built-in sections, in registration order (a nil
// result leaves the section out). Call it from init. Clients can leave a section out with {serverStatus: 1, name: 0}.
func RegisterStatusSection(name string, f func(e *Engine) any) {
	statusMu.Lock()
	defer statusMu.Unlock()
	for _, s := range statusSections {
		if s.name == name {
			panic("engine: status section registered twice: " + name)
		}
	}
	statusSections = append(statusSections, statusSection{name, f})
}

func (e *Engine) connStats() (current, totalCreated, bytesIn, bytesOut, numRequests int64) {
	if e.info.ConnStats == nil {
		return 0, 0, 0, 0, 0
	}
	return e.info.ConnStats()
}

// maxConns is what connections.available counts down from.
func (e *Engine) maxConns() int64 {
	if e.info.MaxConns > 0 {
		return e.info.MaxConns
	}
	return maxIncomingConnections
}

// hostPort is serverStatus.host: the machine's name and the port, as
// mongod reports it (not the bind address, which may be 0.0.0.0).
func (e *Engine) hostPort() string {
	if e.info.Port == 0 {
		return srvHostname()
	}
	return srvHostname() + ":" + strconv.Itoa(e.info.Port)
}

func cmdServerStatus(e *Engine, r *Request) (bson.D, error) {
	// {serverStatus: 1, <section>: 0} leaves a section out.
	excluded := map[string]bool{}
	for _, f := range r.Cmd[1:] {
		if !IsEnvelopeField(f.Key) && !srvTruthy(f.Value) {
			excluded[f.Key] = true
		}
	}
	now := time.Now()
	up := now.Sub(e.start)
	cur, total, bin, bout, nreq := e.connStats()
	ins, qry, upd, del, gm, cmd := e.OpCounters()
	resident, virtual := processMemory()
	d := bson.D{
		{Key: "host", Value: e.hostPort()},
		{Key: "version", Value: Version},
		{Key: "process", Value: "mayfly"},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: up.Seconds()},
		{Key: "uptimeMillis", Value: up.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(up.Seconds())},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
	}
	add := func(name string, v any) {
		if !excluded[name] {
			d = append(d, bson.E{Key: name, Value: v})
		}
	}
	add("asserts", e.assertsStatus())
	add("connections", bson.D{
		{Key: "current", Value: srvIntValue(cur)},
		{Key: "available", Value: srvIntValue(e.maxConns() - cur)},
		{Key: "totalCreated", Value: srvIntValue(total)},
	})
	add("extra_info", extraInfoStatus())
	add("globalLock", e.globalLockStatus(up))
	add("mem", bson.D{
		{Key: "bits", Value: int32(64)},
		{Key: "resident", Value: srvIntValue(int64(resident >> 20))},
		{Key: "virtual", Value: srvIntValue(int64(virtual >> 20))},
		{Key: "supported", Value: true},
	})
	network := bson.D{
		{Key: "bytesIn", Value: bin},
		{Key: "bytesOut", Value: bout},
		{Key: "numRequests", Value: nreq},
	}
	if comp := e.compressionStatus(); comp != nil {
		network = append(network, bson.E{Key: "compression", Value: comp})
	}
	add("network", network)
	add("opcounters", bson.D{
		{Key: "insert", Value: ins},
		{Key: "query", Value: qry},
		{Key: "update", Value: upd},
		{Key: "delete", Value: del},
		{Key: "getmore", Value: gm},
		{Key: "command", Value: cmd},
	})
	// mongod reports opcountersRepl on a standalone too, all zero
	// (replication_info.cpp registers it unconditionally).
	add("opcountersRepl", opcountersReplStatus())
	add("storageEngine", e.storageEngineStatus())
	statusMu.Lock()
	sections := append([]statusSection(nil), statusSections...)
	statusMu.Unlock()
	for _, s := range sections {
		if !excluded[s.name] {
			if v := s.f(e); v != nil { // nil: no such section here
				d = append(d, bson.E{Key: s.name, Value: v})
			}
		}
	}
	return d, nil
}

// processMemory returns resident and virtual bytes from /proc/self/statm,
// falling back to the Go runtime's view where /proc is unavailable.
func processMemory() (resident, virtual uint64) {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 2 {
			vp, _ := strconv.ParseUint(f[0], 10, 64)
			rp, _ := strconv.ParseUint(f[1], 10, 64)
			ps := uint64(os.Getpagesize())
			return rp * ps, vp * ps
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Sys, ms.Sys
}

// cmdListCommands lists every spelling in the command table, as mongod
// lists its aliases too.
func cmdListCommands(e *Engine, r *Request) (bson.D, error) {
	type entry struct {
		name string
		c    *Command
	}
	var all []entry
	for _, c := range Commands() {
		all = append(all, entry{c.Name, c})
		for _, a := range c.Aliases {
			all = append(all, entry{a, c})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	cmds := bson.D{}
	for _, en := range all {
		cmds = append(cmds, bson.E{Key: en.name, Value: bson.D{
			{Key: "help", Value: en.c.Help},
			{Key: "requiresAuth", Value: !AuthFree(en.c.Name)},
			{Key: "secondaryOk", Value: true},
			{Key: "adminOnly", Value: en.c.AdminOnly},
			{Key: "apiVersions", Value: apiVersionsOf(en.name)},
			{Key: "deprecatedApiVersions", Value: bson.A{}},
		}})
	}
	return bson.D{{Key: "commands", Value: cmds}}, nil
}

// cmdStartSession hands out a session id. Sessions hold no server state
// here, so the id only has to be a fresh UUID.
func cmdStartSession(e *Engine, r *Request) (bson.D, error) {
	id, err := srvNewUUID()
	if err != nil {
		return nil, err
	}
	e.sessions.Touch(id)
	return bson.D{
		{Key: "id", Value: bson.D{{Key: "id", Value: id}}},
		{Key: "timeoutMinutes", Value: int32(e.sessions.Timeout() / time.Minute)},
	}, nil
}

// srvNewUUID returns a random (version 4) UUID as BSON binary subtype 4.
func srvNewUUID() (bson.Binary, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return bson.Binary{}, mongoerr.New(mongoerr.InternalError, "cannot generate a session id: %v", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: 4, Data: b}, nil
}
