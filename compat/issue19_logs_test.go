package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mayflydb/mayfly/internal/mlog"
	"github.com/mayflydb/mayfly/server"
)

// logBuf collects log output safely across goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines parses every line as one JSON object; a line that is not one fails
// the test.
func (l *logBuf) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	data := append([]byte(nil), l.b.Bytes()...)
	l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not one JSON object: %v\n%s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// byID returns the lines with mongod log id id.
func byID(lines []map[string]any, id float64) []map[string]any {
	var out []map[string]any
	for _, m := range lines {
		if m["id"] == id {
			out = append(out, m)
		}
	}
	return out
}

// checkShape asserts mongod's structured log shape: t.$date, s, c, id, ctx,
// msg and (when given) attr, in that order.
func checkShape(t *testing.T, m map[string]any, s, c, msg string) {
	t.Helper()
	tm, _ := m["t"].(map[string]any)
	d, _ := tm["$date"].(string)
	if _, err := time.Parse(mlog.DateFormat, d); err != nil {
		t.Errorf("t.$date %q: %v", d, err)
	}
	if m["s"] != s || m["c"] != c || m["msg"] != msg {
		t.Errorf("got s=%v c=%v msg=%v, want %s %s %q: %v", m["s"], m["c"], m["msg"], s, c, msg, m)
	}
	if _, ok := m["ctx"].(string); !ok {
		t.Errorf("no ctx: %v", m)
	}
}

func startLoggedServer(t *testing.T) (*server.Server, *logBuf) {
	t.Helper()
	buf := &logBuf{}
	log := zap.New(zapcore.NewCore(mlog.NewEncoder(), zapcore.AddSync(buf), zapcore.DebugLevel))
	srv, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, buf
}

func TestIssue19LogsJSONShape(t *testing.T) {
	t.Parallel()
	srv, buf := startLoggedServer(t)
	cli, err := connect(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines = buf.lines(t)
		if len(byID(lines, 22944)) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	raw := buf.String()
	if !strings.HasPrefix(raw, `{"t":{"$date":"`) || !strings.Contains(raw, `"s":"I","c":"NETWORK","id":23016,"ctx":"listener","msg":"Waiting for connections"`) {
		t.Errorf("key order or startup line differs from mongod's:\n%s", raw)
	}
	wait := byID(lines, 23016)
	if len(wait) != 1 {
		t.Fatalf("want one Waiting for connections line, got %d", len(wait))
	}
	checkShape(t, wait[0], "I", "NETWORK", "Waiting for connections")
	acc, end := byID(lines, 22943), byID(lines, 22944)
	if len(acc) == 0 || len(end) == 0 {
		t.Fatalf("connection accepted/ended lines: %d/%d\n%s", len(acc), len(end), raw)
	}
	checkShape(t, acc[0], "I", "NETWORK", "Connection accepted")
	if acc[0]["ctx"] != "listener" {
		t.Errorf("Connection accepted ctx = %v, want listener (as mongod)", acc[0]["ctx"])
	}
	attr, _ := acc[0]["attr"].(map[string]any)
	id, _ := attr["connectionId"].(float64)
	if id <= 0 || attr["remote"] == nil || attr["connectionCount"] == nil {
		t.Errorf("accepted attr = %v", attr)
	}
	found := false
	for _, e := range end {
		checkShape(t, e, "I", "NETWORK", "Connection ended")
		a, _ := e["attr"].(map[string]any)
		if a["connectionId"] == attr["connectionId"] {
			found = true
			if want := "conn" + strings.TrimSuffix(strings.TrimSuffix(jsonNum(id), ".0"), ".00"); e["ctx"] != want {
				t.Errorf("Connection ended ctx = %v, want %s", e["ctx"], want)
			}
		}
	}
	if !found {
		t.Errorf("no Connection ended for connection %v", id)
	}
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func TestIssue19LogsSlowQuery(t *testing.T) {
	t.Parallel()
	srv, buf := startLoggedServer(t)
	cli, err := connect(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect(context.Background()) //nolint:errcheck
	ctx := context.Background()
	db := cli.Database("slowlog")
	docs := make([]any, 50)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 5}, {Key: "b", Value: i}}
	}
	if _, err := db.Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "b", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	// Nothing is slow at the default 100 ms.
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	// The logger is at debug (mongod's verbosity 1): operations under
	// slowms are logged at D1, none at I.
	debugLines := 0
	for _, m := range byID(buf.lines(t), 51803) {
		if m["s"] != "D1" {
			t.Fatalf("slow query line at slowms 100 with severity %v: %v", m["s"], m)
		}
		debugLines++
	}
	if debugLines == 0 {
		t.Fatalf("no D1 slow query lines at debug verbosity")
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "profile", Value: 0}, {Key: "slowms", Value: -1}}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []bson.D{{{Key: "a", Value: 1}}, {{Key: "b", Value: 7}}, {{Key: "_id", Value: 3}}} {
		if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: f}, {Key: "comment", Value: "slowtest"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var finds []map[string]any
	for _, m := range byID(buf.lines(t), 51803) {
		a, _ := m["attr"].(map[string]any)
		if c, _ := a["command"].(map[string]any); c["comment"] == "slowtest" {
			checkShape(t, m, "I", "COMMAND", "Slow query")
			finds = append(finds, m)
		}
	}
	if len(finds) != 3 {
		t.Fatalf("want 3 slow query lines for the finds, got %d", len(finds))
	}
	want := []struct {
		plan       string
		keys, docs float64
	}{{"COLLSCAN", 0, 50}, {"IXSCAN { b: 1 }", 1, 1}, {"IDHACK", 1, 1}}
	for i, m := range finds {
		a := m["attr"].(map[string]any)
		if a["type"] != "command" || a["ns"] != "slowlog.c" || a["planSummary"] != want[i].plan ||
			a["keysExamined"] != want[i].keys || a["docsExamined"] != want[i].docs || a["numYields"] != 0.0 {
			t.Errorf("slow query %d attr = %v, want plan %q keys %v docs %v", i, a, want[i].plan, want[i].keys, want[i].docs)
		}
		if _, ok := a["durationMillis"].(float64); !ok {
			t.Errorf("no durationMillis: %v", a)
		}
		if r, _ := a["reslen"].(float64); r <= 0 {
			t.Errorf("reslen = %v", a["reslen"])
		}
		if n, _ := a["nreturned"].(float64); (i == 0 && n != 10) || (i > 0 && n != 1) {
			t.Errorf("nreturned = %v", a["nreturned"])
		}
		if ctx, _ := m["ctx"].(string); !strings.HasPrefix(ctx, "conn") {
			t.Errorf("ctx = %q, want conn<N>", ctx)
		}
	}
}
