package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The binary is built once and run as a child process: exit codes,
// signals and what lands on stdout versus stderr are only real that way.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mayfly-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "mayfly")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running mayfly.
type proc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *bufio.Scanner
	logs   []string
	addr   string
}

// launch starts mayfly and waits for its "Waiting for connections" line (id 23016).
func launch(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, append([]string{"--log-format", "json", "--port", "0"}, args...)...)}
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	p.stderr = bufio.NewScanner(errPipe)
	found := make(chan string, 1)
	go func() {
		for p.stderr.Scan() {
			line := p.stderr.Text()
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil && entry["id"] == 23016.0 { // mongod's "Waiting for connections"
				found <- entry["attr"].(map[string]any)["address"].(string)
			}
		}
		close(found)
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			t.Fatal("mayfly exited before listening")
		}
		p.addr = addr
	case <-time.After(30 * time.Second):
		t.Fatal("mayfly did not start")
	}
	return p
}

// runOnce runs mayfly to completion (it must fail fast) and returns its
// exit code and output.
func runOnce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, o.String(), e.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), o.String(), e.String()
	}
	t.Fatalf("running mayfly: %v", err)
	return
}

func TestVersionAndHelp(t *testing.T) {
	code, out, _ := runOnce(t, "--version")
	if code != 0 || !strings.Contains(out, "7.0.") {
		t.Errorf("--version: %d %q", code, out)
	}
	code, out, errOut := runOnce(t, "--help")
	if code != 0 || !strings.Contains(out, "-dbpath") || errOut != "" {
		t.Errorf("--help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runOnce(t, "--log-level", "loud")
	if code != exitBadOptions || !strings.Contains(errOut, "log-level") {
		t.Errorf("bad --log-level: %d %q", code, errOut)
	}
}

func TestServeAndSignal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "data")
	p := launch(t, "--dbpath", dir, "--bind_ip", "127.0.0.1")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("dbpath not created: %v", err)
	}
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	c.Disconnect(context.Background())

	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20 s of SIGTERM")
	}
	if p.stdout.Len() != 0 {
		t.Errorf("stdout must stay empty, got %q", p.stdout.String())
	}
	// The store was closed cleanly: it opens again.
	q := launch(t, "--dbpath", dir)
	q.cmd.Process.Signal(syscall.SIGINT)
	if err := q.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGINT: %v", err)
	}
}

func TestPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	code, _, errOut := runOnce(t, "--port", itoa(port), "--dbpath", t.TempDir())
	if code == 0 || code != exitAddrInUse || !strings.Contains(errOut, "address already in use") {
		t.Errorf("port taken: exit %d, stderr %q", code, errOut)
	}
}

func TestDBPathLocked(t *testing.T) {
	dir := t.TempDir()
	launch(t, "--dbpath", dir)
	code, _, errOut := runOnce(t, "--port", "0", "--dbpath", dir)
	if code == 0 || code != exitDBPathLock || !strings.Contains(errOut, "another mayfly process") {
		t.Errorf("locked dbpath: exit %d, stderr %q", code, errOut)
	}
}

func TestDBPathUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	os.WriteFile(file, []byte("x"), 0o600)
	code, _, errOut := runOnce(t, "--port", "0", "--dbpath", file)
	if code == 0 || !strings.Contains(errOut, "data directory") {
		t.Errorf("dbpath is a file: exit %d, stderr %q", code, errOut)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
