package server

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/internal/testpki"
)

// TestIssue15TLSMongosh: mongosh --tls --tlsCAFile connects to a
// requireTLS server and runs a command; without --tls it cannot. Like
// TestMongoshSmoke it needs mongosh in .cache (MAYFLY_REQUIRE_MONGOSH=1
// makes its absence a failure).
func TestIssue15TLSMongosh(t *testing.T) {
	bin := needMongosh(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t), TLS: TLSOptions{Mode: "requireTLS", CertificateKeyFile: ca.IssueNow(t, dir, "server", true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mongosh := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{s.URI() + "test?serverSelectionTimeoutMS=3000", "--quiet", "--norc"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "CI=1", "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1")
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := mongosh("--tls", "--tlsCAFile", ca.File, "--eval", "db.c.insertOne({_id: 1, via: 'tls'}); db.c.findOne().via")
	if err != nil || !strings.HasSuffix(out, "tls") {
		t.Fatalf("mongosh --tls --tlsCAFile: %v\n%s", err, out)
	}
	out, err = mongosh("--eval", "db.c.findOne().via")
	if err == nil || strings.HasSuffix(out, "tls") {
		t.Fatalf("mongosh without --tls against requireTLS worked: %s", out)
	}
	t.Logf("plain mongosh refused: %s", out)
}
