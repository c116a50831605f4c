package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// loadConfig runs main's run in-process with args up to the point where the
// configuration file has been applied, and returns the flag set and the
// file's settings (nil when run stopped before, with its code and stderr).
func loadConfig(t *testing.T, args ...string) (*flag.FlagSet, *configFile, int, string) {
	t.Helper()
	var gotFS *flag.FlagSet
	var gotCF *configFile
	configHook = func(fs *flag.FlagSet, c *configFile) bool {
		gotFS, gotCF = fs, c
		return true
	}
	defer func() { configHook = nil }()
	var out, errOut bytes.Buffer
	code := run(append([]string{"mayfly"}, args...), &out, &errOut)
	if out.Len() != 0 {
		t.Errorf("stdout must stay empty, got %q", out.String())
	}
	if gotCF != nil && gotCF.logFile != nil {
		t.Cleanup(func() { gotCF.logFile.Close() })
	}
	return gotFS, gotCF, code, errOut.String()
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mayfly.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func flagValue(fs *flag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return "<no such flag>"
}

// TestIssue19ConfigEveryKey: every key mayfly supports, parsed into the
// flag or setting it stands for, and shown in getCmdLineOpts' parsed.
func TestIssue19ConfigEveryKey(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "mayfly.log")
	file := writeConfig(t, `
net:
  port: 27999
  bindIp: 127.0.0.2
  maxIncomingConnections: 500
  tls:
    mode: requireTLS
    certificateKeyFile: /etc/ssl/mayfly.pem
    CAFile: /etc/ssl/ca.pem
    allowInvalidCertificates: true
    allowConnectionsWithoutCertificates: true
storage:
  dbPath: `+dir+`/data
  journal:
    commitIntervalMs: 42
systemLog:
  verbosity: 2
  destination: file
  path: `+logPath+`
  logAppend: true
security:
  authorization: disabled
operationProfiling:
  mode: slowOp
  slowOpThresholdMs: 250
  slowOpSampleRate: 0.5
setParameter:
  internalQueryMaxRangeBytes: 12345
  allowDiskUseByDefault: false
mayfly:
  reaperRate: 700
  cacheSizeMB: 64
  storage: pebble
`)
	fs, cf, code, errOut := loadConfig(t, "-f", file)
	if cf == nil {
		t.Fatalf("config not loaded: exit %d, stderr %q", code, errOut)
	}
	for _, tc := range []struct{ flag, want string }{
		{"port", "27999"},
		{"bind", "127.0.0.2"},
		{"maxConns", "500"},
		{"tlsMode", "requireTLS"},
		{"tlsCertificateKeyFile", "/etc/ssl/mayfly.pem"},
		{"tlsCAFile", "/etc/ssl/ca.pem"},
		{"tlsAllowInvalidCertificates", "true"},
		{"tlsAllowConnectionsWithoutCertificates", "true"},
		{"dbpath", dir + "/data"},
		{"journalCommitInterval", "42"},
		{"reaper-rate", "700"},
		{"cacheSizeMB", "64"},
		{"storage", "pebble"},
	} {
		if got := flagValue(fs, tc.flag); got != tc.want {
			t.Errorf("--%s = %q, want %q", tc.flag, got, tc.want)
		}
	}
	if !cf.verbositySet || cf.verbosity != 2 {
		t.Errorf("systemLog.verbosity: set %v, %d", cf.verbositySet, cf.verbosity)
	}
	if cf.logDest != "file" || cf.logPath != logPath || !cf.logAppend || cf.logFile == nil {
		t.Errorf("systemLog: destination %q path %q logAppend %v open %v", cf.logDest, cf.logPath, cf.logAppend, cf.logFile != nil)
	}
	if w := cf.logWriter(os.Stderr); w != cf.logFile {
		t.Errorf("logs must go to systemLog.path, not %v", w)
	}
	if !cf.profileSet || cf.profileLevel != 1 || cf.slowMS != 250 || cf.sampleRate != 0.5 {
		t.Errorf("operationProfiling: set %v level %d slowms %d sampleRate %v", cf.profileSet, cf.profileLevel, cf.slowMS, cf.sampleRate)
	}
	wantParams := [][2]string{{"internalQueryMaxRangeBytes", "12345"}, {"allowDiskUseByDefault", "false"}}
	if !reflect.DeepEqual(cf.setParams, wantParams) {
		t.Errorf("setParameter = %v, want %v", cf.setParams, wantParams)
	}
	parsed := map[string]any{}
	cf.addParsed(parsed)
	for k, want := range map[string]any{
		"config": file, "net.port": int32(27999), "net.bindIp": "127.0.0.2", "net.maxIncomingConnections": int32(500),
		"net.tls.mode": "requireTLS", "net.tls.allowInvalidCertificates": true, "storage.dbPath": dir + "/data",
		"storage.journal.commitIntervalMs": int32(42), "systemLog.verbosity": int32(2), "systemLog.destination": "file",
		"systemLog.path": logPath, "systemLog.logAppend": true, "security.authorization": "disabled",
		"operationProfiling.mode": "slowOp", "operationProfiling.slowOpThresholdMs": int32(250),
		"operationProfiling.slowOpSampleRate": 0.5, "setParameter.internalQueryMaxRangeBytes": "12345",
		"setParameter.allowDiskUseByDefault": "false", "mayfly.reaperRate": int32(700),
		"mayfly.cacheSizeMB": int32(64), "mayfly.storage": "pebble",
	} {
		if got, ok := parsed[k]; !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("parsed[%s] = %#v, want %#v", k, got, want)
		}
	}

	// Keys whose flag comes with another part of issue 19: applied when
	// this build has the flag, refused by name when it has not.
	for _, tc := range []struct{ yaml, key, flag, want string }{
		{"net:\n  compression:\n    compressors: zstd,snappy\n", "net.compression.compressors", "networkMessageCompressors", "zstd,snappy"},
		{"mayfly:\n  metricsListen: 127.0.0.1:9216\n", "mayfly.metricsListen", "metrics-listen", "127.0.0.1:9216"},
		{"mayfly:\n  minFreeDisk: 1GB\n", "mayfly.minFreeDisk", "min-free-disk", "1GB"},
		{"mayfly:\n  ballastSize: 64MB\n", "mayfly.ballastSize", "ballast-size", "64MB"},
		{"security:\n  authorization: enabled\n", "security.authorization", "auth", "true"},
		{"setParameter:\n  authenticationMechanisms: SCRAM-SHA-256\n", "setParameter.authenticationMechanisms", "authenticationMechanisms", "SCRAM-SHA-256"},
		// mongod's WiredTiger cache size is Pebble's block cache, in MiB.
		{"storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.5\n", "storage.wiredTiger.engineConfig.cacheSizeGB", "cacheSizeMB", "512"},
		{"storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 2\n", "storage.wiredTiger.engineConfig.cacheSizeGB", "cacheSizeMB", "2048"},
	} {
		fs, cf, code, errOut := loadConfig(t, "-f", writeConfig(t, tc.yaml))
		if cf != nil {
			if got := flagValue(fs, tc.flag); got != tc.want {
				t.Errorf("%s: --%s = %q, want %q", tc.key, tc.flag, got, tc.want)
			}
			continue
		}
		if code != exitBadOptions || !strings.Contains(errOut, tc.key) || !strings.Contains(errOut, "not supported") {
			t.Errorf("%s without --%s: exit %d, stderr %q", tc.key, tc.flag, code, errOut)
		}
	}
}

// TestIssue19ConfigFlagsOverride: a flag on the command line wins over the
// file's key, whichever spelling of the flag is used; the other keys of
// the file still apply.
func TestIssue19ConfigFlagsOverride(t *testing.T) {
	file := writeConfig(t, "net:\n  port: 1234\n  bindIp: 0.0.0.0\nstorage:\n  dbPath: /from/file\nsystemLog:\n  verbosity: 1\nmayfly:\n  reaperRate: 5\n")
	fs, cf, code, errOut := loadConfig(t, "--port", "5555", "--config", file, "--bind_ip", "127.0.0.3", "--log-level", "warn")
	if cf == nil {
		t.Fatalf("config not loaded: exit %d, stderr %q", code, errOut)
	}
	for flagName, want := range map[string]string{"port": "5555", "bind": "127.0.0.3", "log-level": "warn", "dbpath": "/from/file", "reaper-rate": "5"} {
		if got := flagValue(fs, flagName); got != want {
			t.Errorf("--%s = %q, want %q", flagName, got, want)
		}
	}
	parsed := map[string]any{"net.port": int32(5555)}
	cf.addParsed(parsed)
	if parsed["net.port"] != int32(5555) || parsed["storage.dbPath"] != "/from/file" || parsed["net.bindIp"] != nil || parsed["systemLog.verbosity"] != nil {
		t.Errorf("parsed must show the flags' values over the file's: %v", parsed)
	}
}

// TestIssue19ConfigRefused: unknown keys, wrong types and unsupported
// settings stop the start with exit code 2 and a message naming the key.
func TestIssue19ConfigRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"net:\n  foo: 1\n", "Unrecognized option: net.foo"},
		{"net:\n  port: 1\nmayfly:\n  nope:\n    deep: true\n", "Unrecognized option: mayfly.nope.deep"},
		{"processManagement:\n  fork: true\n", "Unrecognized option: processManagement.fork"},
		{"net:\n  port: abc\n", `Error parsing option "net.port" as int in config file: found "abc"`},
		{"net:\n  port:\n    x: 1\n", `Error parsing option "net.port" as int in config file: found a mapping`},
		{"net:\n  bindIp: [a, b]\n", `Error parsing option "net.bindIp" as string in config file: found a list`},
		{"net:\n  tls:\n    allowInvalidCertificates: \"yes\"\n", "Expected boolean but found string: yes for option: net.tls.allowInvalidCertificates"},
		{"storage:\n  journal:\n    commitIntervalMs: 1.5\n", `Error parsing option "storage.journal.commitIntervalMs" as int in config file: found "1.5"`},
		{"systemLog:\n  verbosity: 9\n", "systemLog.verbosity must be between 0 and 5"},
		{"systemLog:\n  path: /tmp/x.log\n", `systemLog.path requires systemLog.destination to be set to "file"`},
		{"systemLog:\n  destination: file\n", "systemLog.path is required if systemLog.destination is to a file"},
		{"systemLog:\n  destination: syslog\n", "syslog is not supported"},
		{"operationProfiling:\n  mode: [off]\n", `Error parsing option "operationProfiling.mode" as string in config file: found a list`},
		{"operationProfiling:\n  mode: fast\n", `operationProfiling.mode must be off, slowOp or all, got "fast"`},
		{"security:\n  authorization: maybe\n", `security.authorization must be enabled or disabled, got "maybe"`},
		{"setParameter:\n  noSuchParameter: 1\n", `Illegal --setParameter parameter: "noSuchParameter"`},
		{"setParameter:\n  cursorTimeoutMillis: 5\n", `Cannot use --setParameter to set "cursorTimeoutMillis" at startup`},
		{"setParameter:\n  internalQueryMaxRangeBytes: lots\n", `Bad value for parameter "internalQueryMaxRangeBytes"`},
		{"setParameter:\n  internalQueryMaxRangeBytes: -1\n", `Bad value for parameter "internalQueryMaxRangeBytes": Invalid value for parameter internalQueryMaxRangeBytes: -1 is not greater than 0`},
		{"net:\n  port: 1\n  port: 2\n", "net.port"},
		{"net: [\n", "Error parsing YAML config file"},
		{"setParameter: 5\n", "Option: setParameter is of type StringMap, but value in YAML config is not a map type"},
		{"setParameter:\n  allowDiskUseByDefault: [true]\n", "Option: setParameter has a map with non scalar values, which is not allowed"},
		{"net:\n  port:\n", `Error parsing option "net.port" as int in config file: found nothing`},
		{"mayfly:\n  cacheSize: 64\n", "Unrecognized option: mayfly.cacheSize"},
		{"mayfly:\n  cacheSizeMB: lots\n", `Error parsing option "mayfly.cacheSizeMB" as int in config file: found "lots"`},
		{"mayfly:\n  storage: [pebble]\n", `Error parsing option "mayfly.storage" as string in config file: found a list`},
		{"mayfly:\n  reaperRate: fast\n", `Error parsing option "mayfly.reaperRate" as int in config file: found "fast"`},
		{"mayfly:\n  metricsListen: {a: 1}\n", `Error parsing option "mayfly.metricsListen" as string in config file: found a mapping`},
		{"storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.1\n", "Bad value for storage.wiredTiger.engineConfig.cacheSizeGB: 0.1 is not between 0.25 and 10000"},
		{"storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 1\n      journalCompressor: snappy\n", "Unrecognized option: storage.wiredTiger.engineConfig.journalCompressor"},
		{"mayfly:\n  cacheSizeMB: 64\nstorage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 1\n", "mayfly.cacheSizeMB and storage.wiredTiger.engineConfig.cacheSizeGB both set the cache size"},
	} {
		file := writeConfig(t, tc.yaml)
		_, cf, code, errOut := loadConfig(t, "-f", file, "--dbpath", t.TempDir())
		if cf != nil || code != exitBadOptions || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.yaml, code, errOut, tc.want)
		}
	}
	// The binary itself exits 2 with the message, before listening.
	code, out, errOut := runOnce(t, "-f", writeConfig(t, "net:\n  foo: 1\n"), "--port", "0", "--dbpath", t.TempDir())
	if code != exitBadOptions || out != "" || !strings.Contains(errOut, "Unrecognized option: net.foo") {
		t.Errorf("binary: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Values main checks once the file is applied: mayfly.storage other
	// than pebble, and a cache size out of range.
	for _, tc := range []struct{ yaml, want string }{
		{"mayfly:\n  storage: tikv://pd:2379\n", `--storage "tikv://pd:2379" is not supported: this mayfly stores only in its embedded Pebble`},
		{"mayfly:\n  cacheSizeMB: -1\n", "invalid --cacheSizeMB -1"},
	} {
		code, _, errOut := runOnce(t, "-f", writeConfig(t, tc.yaml), "--port", "0", "--dbpath", t.TempDir())
		if code != exitBadOptions || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.yaml, code, errOut, tc.want)
		}
	}
	code, _, errOut = runOnce(t, "--storage", "rocksdb", "--port", "0", "--dbpath", t.TempDir())
	if code != exitBadOptions || !strings.Contains(errOut, `--storage "rocksdb" is not supported`) {
		t.Errorf("--storage rocksdb: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runOnce(t, "-f", filepath.Join(t.TempDir(), "missing.conf"))
	if code != exitBadOptions || !strings.Contains(errOut, "configuration file") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

// TestIssue19ConfigEndToEnd starts the binary with only -f: the port,
// dbPath, setParameter, operationProfiling and the log file come from the
// file, as the Go driver sees them.
func TestIssue19ConfigEndToEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsPort := mln.Addr().(*net.TCPAddr).Port
	mln.Close()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "db")
	logPath := filepath.Join(dir, "mayfly.log")
	os.WriteFile(logPath, []byte("an older line\n"), 0o600)
	file := writeConfig(t, "net:\n  port: "+itoa(port)+"\n  bindIp: 127.0.0.1\nstorage:\n  dbPath: "+dbPath+
		"\nsystemLog:\n  destination: file\n  path: "+logPath+"\n  logAppend: true\n"+
		"operationProfiling:\n  mode: all\n  slowOpThresholdMs: 250\n"+
		"setParameter:\n  internalQueryMaxRangeBytes: 12345\n  allowDiskUseByDefault: false\n"+
		"mayfly:\n  cacheSizeMB: 48\n  storage: pebble\n  reaperRate: 1000\n  metricsListen: 127.0.0.1:"+itoa(metricsPort)+"\n")
	argv := []string{binary, "-f", file, "--log-format", "json"}
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(logPath)
		if bytes.Contains(data, []byte(`"Waiting for connections"`)) {
			if !bytes.HasPrefix(data, []byte("an older line\n")) {
				t.Errorf("logAppend: true must keep the old lines: %q", data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mayfly did not start: log %q, stderr %q", data, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(dbPath); err != nil {
		t.Errorf("storage.dbPath not used: %v", err)
	}
	ctx := context.Background()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:" + itoa(port) + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	admin := c.Database("admin")

	raw, err := admin.RunCommand(ctx, bson.D{{Key: "getCmdLineOpts", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var gotArgv []string
	if err := raw.Lookup("argv").Unmarshal(&gotArgv); err != nil || !reflect.DeepEqual(gotArgv, argv) {
		t.Errorf("argv = %v (%v), want %v", gotArgv, err, argv)
	}
	for _, tc := range []struct {
		path []string
		want any
	}{
		{[]string{"config"}, file},
		{[]string{"net", "port"}, int32(port)},
		{[]string{"net", "bindIp"}, "127.0.0.1"},
		{[]string{"storage", "dbPath"}, dbPath},
		{[]string{"setParameter", "internalQueryMaxRangeBytes"}, "12345"},
		{[]string{"operationProfiling", "mode"}, "all"},
		{[]string{"systemLog", "destination"}, "file"},
		{[]string{"mayfly", "cacheSizeMB"}, int32(48)},
		{[]string{"mayfly", "storage"}, "pebble"},
		{[]string{"mayfly", "reaperRate"}, int32(1000)},
		{[]string{"mayfly", "metricsListen"}, "127.0.0.1:" + itoa(metricsPort)},
	} {
		var got any
		v, err := raw.LookupErr(append([]string{"parsed"}, tc.path...)...)
		if err == nil {
			err = v.Unmarshal(&got)
		}
		if err != nil || got != tc.want {
			t.Errorf("parsed.%s = %#v (%v), want %#v", strings.Join(tc.path, "."), got, err, tc.want)
		}
	}

	// mayfly.metricsListen serves /metrics, where mayfly.cacheSizeMB shows
	// as the block cache's capacity; /healthz answers on the same listener.
	metricsText := httpGet(t, "http://127.0.0.1:"+itoa(metricsPort)+"/metrics")
	if !strings.Contains(metricsText, "\nmayfly_pebble_block_cache_capacity_bytes 5.0331648e+07\n") {
		t.Errorf("/metrics does not show a 48 MiB block cache:\n%s", grepLines(metricsText, "block_cache"))
	}
	if body := httpGet(t, "http://127.0.0.1:"+itoa(metricsPort)+"/healthz"); body == "" {
		t.Error("/healthz answered nothing")
	}

	var params bson.M
	if err := admin.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "internalQueryMaxRangeBytes", Value: 1}, {Key: "allowDiskUseByDefault", Value: 1}}).Decode(&params); err != nil {
		t.Fatal(err)
	}
	if params["internalQueryMaxRangeBytes"] != int32(12345) || params["allowDiskUseByDefault"] != false {
		t.Errorf("getParameter = %v", params)
	}

	// operationProfiling.mode: all is every database's level until the
	// profile command sets one.
	var prof bson.M
	if err := c.Database("issue19").RunCommand(ctx, bson.D{{Key: "profile", Value: -1}}).Decode(&prof); err != nil {
		t.Fatal(err)
	}
	if prof["was"] != int32(2) || prof["slowms"] != int32(250) {
		t.Errorf("profile -1 = %v, want was 2, slowms 250", prof)
	}
	if _, err := c.Database("issue19").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Database("issue19").Collection("system.profile").CountDocuments(ctx, bson.D{{Key: "op", Value: "insert"}}); err != nil || n != 1 {
		t.Errorf("profiled inserts = %d, %v; want 1", n, err)
	}
	if err := c.Database("issue19").RunCommand(ctx, bson.D{{Key: "profile", Value: 0}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Database("other").RunCommand(ctx, bson.D{{Key: "profile", Value: -1}}).Decode(&prof); err != nil || prof["was"] != int32(2) {
		t.Errorf("another database keeps the default level: %v %v", prof, err)
	}
	// The explicit level 0 of one database leaves the others profiled.
	for _, db := range []string{"issue19", "other"} {
		if _, err := c.Database(db).Collection("d").InsertOne(ctx, bson.D{{Key: "y", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.Database("issue19").Collection("system.profile").CountDocuments(ctx, bson.D{{Key: "ns", Value: "issue19.d"}}); n != 0 {
		t.Errorf("issue19 has level 0 now, yet %d inserts were profiled", n)
	}
	if n, _ := c.Database("other").Collection("system.profile").CountDocuments(ctx, bson.D{{Key: "ns", Value: "other.d"}}); n != 1 {
		t.Errorf("other keeps level 2: %d inserts profiled, want 1", n)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if stdout.Len() != 0 || stderr.Len() != 0 {
		t.Errorf("with systemLog.destination: file, stdout %q and stderr %q must stay empty", stdout.String(), stderr.String())
	}
	data, _ := os.ReadFile(logPath)
	lines := 0
	for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
		lines++
	}
	if lines < 3 {
		t.Errorf("log file holds %d lines: %q", lines, data)
	}
}

// TestIssue19ConfigExampleFile: the documented example loads as it is and
// mentions every key mayfly reads.
func TestIssue19ConfigExampleFile(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "mayfly.conf.example.yaml")
	fs, cf, code, errOut := loadConfig(t, "-f", path)
	if cf == nil {
		t.Fatalf("example: exit %d, stderr %q", code, errOut)
	}
	if flagValue(fs, "dbpath") != "./data" || flagValue(fs, "log-level") != "info" || !cf.profileSet || cf.profileLevel != 0 || len(cf.setParams) != 2 {
		t.Errorf("example: dbpath %q, log-level %q, profile %v/%d, setParameter %v", flagValue(fs, "dbpath"), flagValue(fs, "log-level"), cf.profileSet, cf.profileLevel, cf.setParams)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range configKeys {
		parts := strings.Split(k.key, ".")
		if !strings.Contains(string(data), parts[len(parts)-1]+":") {
			t.Errorf("the example does not mention %s", k.key)
		}
	}
}

// httpGet fetches url and fails the test unless it answers 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %q", url, resp.StatusCode, err, body)
	}
	return string(body)
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
