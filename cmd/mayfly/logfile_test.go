package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// logIDs parses a JSON log file and returns its lines' mongod ids, and the
// address of its "Waiting for connections" line if any.
func logIDs(t *testing.T, path string) (ids []float64, addr string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, ""
	} else if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line is not JSON: %q", path, sc.Text())
		}
		id, _ := m["id"].(float64)
		ids = append(ids, id)
		if id == 23016 {
			addr, _ = m["attr"].(map[string]any)["address"].(string)
		}
	}
	return ids, addr
}

func hasID(ids []float64, id float64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// rotated lists the renamed-aside files of logPath.
func rotated(t *testing.T, logPath string) []string {
	t.Helper()
	m, err := filepath.Glob(logPath + ".????-??-??T??-??-??")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func TestIssue19LogsRotation(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "mayfly.log")
	// Without --logappend an existing log is renamed aside at startup.
	if err := os.WriteFile(logPath, []byte("an older line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--port", "0", "--dbpath", filepath.Join(dir, "db"), "--ballast-size", "0",
		"--log-format", "json", "--logpath", logPath)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr string
	waitFor(t, "Waiting for connections in the log file", func() bool {
		if len(rotated(t, logPath)) == 0 {
			return false // not yet renamed aside
		}
		_, addr = logIDs(t, logPath)
		return addr != ""
	})
	startAside := rotated(t, logPath)
	if len(startAside) != 1 {
		t.Fatalf("the existing log was not renamed aside at startup: %v", startAside)
	} else if data, _ := os.ReadFile(startAside[0]); string(data) != "an older line\n" {
		t.Fatalf("renamed-aside startup file holds %q", data)
	}
	if stderr.Len() != 0 {
		t.Errorf("with --logpath nothing goes to stderr: %q", stderr.String())
	}

	// SIGUSR1 renames the file to FILE.<UTC timestamp> and opens a new one.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "rotation on SIGUSR1", func() bool { return len(rotated(t, logPath)) == 2 })
	var first string
	for _, r := range rotated(t, logPath) {
		if r == startAside[0] {
			continue
		}
		if ids, _ := logIDs(t, r); hasID(ids, 23016) {
			first = r
		}
	}
	if first == "" {
		t.Fatalf("no rotated file holds the startup lines: %v", rotated(t, logPath))
	}
	ctx := context.Background()
	cli, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "new connections logged to the new file", func() bool { ids, _ := logIDs(t, logPath); return hasID(ids, 22943) })
	if ids, _ := logIDs(t, logPath); hasID(ids, 23016) {
		t.Errorf("the new file holds the old lines")
	}
	if ids, _ := logIDs(t, first); hasID(ids, 22943) {
		t.Errorf("the rotated file got lines written after the rotation")
	}

	// The logRotate command does the same.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	if err := cli.Database("admin").RunCommand(ctx, bson.D{{Key: "logRotate", Value: 1}}).Err(); err != nil {
		t.Fatalf("logRotate: %v", err)
	}
	if r := rotated(t, logPath); len(r) != 3 {
		t.Fatalf("logRotate did not rename the file: %v", r)
	}
	if err := cli.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lines after logRotate in the new file", func() bool { ids, _ := logIDs(t, logPath); return hasID(ids, 22944) })
	if ids, _ := logIDs(t, logPath); hasID(ids, 22943) {
		t.Errorf("the file opened by logRotate holds lines from before it")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
}

func TestIssue19LogsRotateOptions(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runOnce(t, "--port", "0", "--dbpath", filepath.Join(dir, "db"), "--logpath", filepath.Join(dir, "l.log"), "--logRotate", "reopen")
	if code != exitBadOptions || !strings.Contains(stderr, "logRotate param 'reopen' requires logAppend to be set") {
		t.Errorf("reopen without logappend: exit %d, %q", code, stderr)
	}
	code, _, stderr = runOnce(t, "--port", "0", "--dbpath", filepath.Join(dir, "db"), "--logRotate", "sideways")
	if code != exitBadOptions || !strings.Contains(stderr, "Unsupported value for logRotate option: sideways") {
		t.Errorf("bad --logRotate: exit %d, %q", code, stderr)
	}
}

// lockedBuffer is a bytes.Buffer a child process's output goroutine writes
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
