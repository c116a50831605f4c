package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// /readyz answers 503 (and mayfly_ready is 0) while the server is not
// serving, as during shutdown; /healthz stays 200.
func TestIssue19MetricsReadyz503(t *testing.T) {
	s, err := Start(Config{Port: 0, InMemory: true, MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(path string) (int, string) {
		t.Helper()
		cl := &http.Client{Timeout: 20 * time.Second}
		resp, err := cl.Get("http://" + s.MetricsAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz on a serving server: %d", code)
	}
	s.ready.Store(false) // what Close does first
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while not serving: %d, want 503", code)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while not serving: %d, want 200", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "\nmayfly_ready 0\n") {
		t.Errorf("/metrics while not serving: %d, mayfly_ready not 0", code)
	}
	s.ready.Store(true)
	// Without MetricsListen there is no listener and no command counting.
	plain, err := Start(Config{Port: 0, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.MetricsAddr() != "" || plain.Engine().CommandStats() != nil {
		t.Errorf("metrics are on without MetricsListen: %q", plain.MetricsAddr())
	}
}
