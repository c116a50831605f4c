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

// The replica-set pass of scripts/compat.sh (transactions and retryable
// writes through the Node.js driver, Mongoose and mongosh) against an
// in-process server started with --replSet rs0. Each skips without its
// client in the cache (needNodeDriver, needMongosh).

func startReplSet(t *testing.T) (*Server, string) {
	t.Helper()
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t), ReplSetName: "rs0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.URI() + "?replicaSet=rs0"
}

// runClientScript runs a script and fails the test unless it exits 0 and
// reports "N checks passed, 0 failed".
func runClientScript(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s (%s)\n%s", strings.Join(cmd.Args, " "), time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(cmd.Args[len(cmd.Args)-1]), err)
	}
	if !strings.Contains(string(out), "checks passed, 0 failed") {
		t.Fatal("the script did not report its checks")
	}
}

// TestIssue13TxnNode: scripts/node/txn.js (withTransaction over two
// collections, abort, concurrent bank transfers for 3 s, WriteConflict with
// TransientTransactionError, retryable writes).
func TestIssue13TxnNode(t *testing.T) {
	node, modules := needNodeDriver(t)
	_, uri := startReplSet(t)
	cmd := exec.Command(node, filepath.Join("..", "scripts", "node", "txn.js"), uri, "3")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	runClientScript(t, cmd)
}

// TestIssue13TxnMongoose: scripts/node/mongoose.js (connection.transaction(),
// session.withTransaction() with models, rollback on a throw,
// Model.create([...], {session})).
func TestIssue13TxnMongoose(t *testing.T) {
	node, modules := needNodeDriver(t)
	if _, err := os.Stat(filepath.Join(modules, "mongoose", "package.json")); err != nil {
		if os.Getenv("MAYFLY_REQUIRE_NODE") == "1" {
			t.Fatalf("mongoose is required (MAYFLY_REQUIRE_NODE=1) but missing in %s: run scripts/compat.sh --install-only", modules)
		}
		t.Skipf("mongoose not installed in %s", modules)
	}
	_, uri := startReplSet(t)
	cmd := exec.Command(node, filepath.Join("..", "scripts", "node", "mongoose.js"), uri)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	runClientScript(t, cmd)
}

// TestIssue13TxnMongosh: scripts/mongosh/txn.js (rs.status(), rs.conf(),
// db.hello(), startTransaction / commitTransaction / abortTransaction).
func TestIssue13TxnMongosh(t *testing.T) {
	bin := needMongosh(t)
	_, uri := startReplSet(t)
	cmd := exec.Command(bin, uri, "--quiet", "--norc", filepath.Join("..", "scripts", "mongosh", "txn.js"))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "CI=1", "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1")
	runClientScript(t, cmd)
}
