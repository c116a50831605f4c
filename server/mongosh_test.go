package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// mongoshPath is where scripts/mongosh-smoke.sh (and scripts/compat.sh)
// install mongosh: <repo>/.cache/mongosh, unless MAYFLY_MONGOSH names
// another mongosh binary.
func mongoshPath(t *testing.T) string {
	if p := os.Getenv("MAYFLY_MONGOSH"); p != "" {
		return p
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".cache", "mongosh", "node_modules", ".bin", "mongosh")
}

// needMongosh returns the cached mongosh binary. Without it the test
// skips, unless MAYFLY_REQUIRE_MONGOSH=1 makes its absence a failure (CI);
// -short skips it too (mongosh takes seconds to start).
func needMongosh(t *testing.T) string {
	t.Helper()
	bin := mongoshPath(t)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("MAYFLY_REQUIRE_MONGOSH") == "1" {
			t.Fatalf("mongosh is required (MAYFLY_REQUIRE_MONGOSH=1) but missing at %s: run scripts/mongosh-smoke.sh once to install it", bin)
		}
		t.Skipf("mongosh not installed at %s", bin)
	}
	if testing.Short() {
		t.Skip("runs mongosh (several seconds)")
	}
	return bin
}

// TestMongoshSmoke runs scripts/mongosh-smoke.sh against an in-process
// server: db.version() over --eval, and the REPL reaching its prompt with
// no warnings. It needs mongosh in the cache; without it the test skips,
// unless MAYFLY_REQUIRE_MONGOSH=1 makes its absence a failure (CI).
func TestMongoshSmoke(t *testing.T) {
	needMongosh(t) // the script finds it in .cache itself
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "mongosh-smoke.sh"), s.URI()+"test")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("mongosh smoke test failed: %v", err)
	}
	if !strings.Contains(string(out), "ok: db.version() = 7.0.") || !strings.Contains(string(out), "ok: REPL reached the prompt") {
		t.Fatal("smoke script did not report both checks")
	}
	// mongosh ends with endSessions sent as moreToCome: it must have been
	// taken without a reply and without upsetting the server.
	if st := s.Stats(); st.NumRequests < 10 {
		t.Errorf("only %d requests seen", st.NumRequests)
	}
}
