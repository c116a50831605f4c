package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/internal/testpki"
)

// needNodeDriver returns the node binary and the NODE_PATH holding the
// official Node.js driver (scripts/compat.sh installs it into
// .cache/node). Without them the test skips, unless MAYFLY_REQUIRE_NODE=1
// makes their absence a failure (compat.sh sets it).
func needNodeDriver(t *testing.T) (string, string) {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("MAYFLY_REQUIRE_NODE") == "1" {
			t.Fatalf("%s is required (MAYFLY_REQUIRE_NODE=1) but missing: run scripts/compat.sh --install-only", what)
		}
		t.Skipf("%s not available", what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	modules := os.Getenv("NODE_PATH")
	if modules == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		modules = filepath.Join(root, ".cache", "node", "node_modules")
	}
	if _, err := os.Stat(filepath.Join(modules, "mongodb", "package.json")); err != nil {
		missing("the Node.js driver (" + modules + "/mongodb)")
	}
	if testing.Short() {
		t.Skip("runs node (seconds)")
	}
	return node, modules
}

// TestIssue15TLSNode runs scripts/node/tls.js (the official Node.js driver)
// against two requireTLS servers, one without and one with --tlsCAFile,
// with a CA, server and client certificates made here at run time
// (internal/testpki) and a client certificate of another CA.
func TestIssue15TLSNode(t *testing.T) {
	node, modules := needNodeDriver(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	rogue := testpki.NewCA(t, dir, "rogue-ca")
	serverPem := ca.IssueNow(t, dir, "server", true)
	start := func(opts TLSOptions) *Server {
		s, err := Start(Config{Bind: "127.0.0.1", InMemory: true, Logger: zaptest.NewLogger(t), TLS: opts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	plainCerts := start(TLSOptions{Mode: "requireTLS", CertificateKeyFile: serverPem})
	clientCerts := start(TLSOptions{Mode: "requireTLS", CertificateKeyFile: serverPem, CAFile: ca.File})
	cmd := exec.Command(node, filepath.Join("..", "scripts", "node", "tls.js"),
		plainCerts.URI(), clientCerts.URI(), ca.File,
		ca.IssueNow(t, dir, "client", false), rogue.IssueNow(t, dir, "rogue-client", false))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("scripts/node/tls.js: %v", err)
	}
}
