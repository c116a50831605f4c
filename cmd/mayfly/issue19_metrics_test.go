package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --metrics-listen serves /metrics, /healthz and /readyz from the binary.
func TestIssue19MetricsFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := launch(t, "--dbpath", t.TempDir(), "--metrics-listen", addr)
	get := func(path string) (int, string) {
		t.Helper()
		cl := &http.Client{Timeout: 20 * time.Second}
		resp, err := cl.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(path); code != http.StatusOK {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, "mayfly_ready 1") || !strings.Contains(body, "mayfly_pebble_disk_usage_bytes") {
		t.Errorf("GET /metrics: %d\n%s", code, body)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// A metrics address that cannot be listened on fails the start.
func TestIssue19MetricsFlagBadAddress(t *testing.T) {
	code, _, errOut := runOnce(t, "--port", "0", "--dbpath", t.TempDir(), "--metrics-listen", "256.1.1.1:0")
	if code != exitFailure || !strings.Contains(errOut, "metrics") {
		t.Errorf("bad --metrics-listen: exit %d, stderr %q", code, errOut)
	}
}
