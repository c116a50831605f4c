package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestIssue21OpenBeforeListen: the store is opened before the port is
// bound, as mongod does, so a store that cannot be opened never leaves a
// silent open port. With the port taken and the data directory locked,
// the lock is what is reported (exit 100), not the port (48).
func TestIssue21OpenBeforeListen(t *testing.T) {
	dir := t.TempDir()
	launch(t, "--dbpath", dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runOnce(t, "--port", itoa(ln.Addr().(*net.TCPAddr).Port), "--dbpath", dir)
	if code != exitDBPathLock || !strings.Contains(errOut, "another mayfly process") {
		t.Errorf("locked dbpath and taken port: exit %d, stderr %q", code, errOut)
	}

	// A store that fails to open: a clear message, a non-zero exit.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "CURRENT"), []byte("MANIFEST-000042\n"), 0o600)
	code, _, errOut = runOnce(t, "--port", "0", "--dbpath", bad)
	if code != exitFailure || !strings.Contains(errOut, "cannot open data directory "+bad) {
		t.Errorf("unopenable store: exit %d, stderr %q", code, errOut)
	}
	// A dbpath below a file cannot even be created.
	file := filepath.Join(t.TempDir(), "afile")
	os.WriteFile(file, []byte("x"), 0o600)
	code, _, errOut = runOnce(t, "--port", "0", "--dbpath", filepath.Join(file, "db"))
	if code != exitFailure || !strings.Contains(errOut, "data directory") || !strings.Contains(errOut, "not a directory") {
		t.Errorf("dbpath below a file: exit %d, stderr %q", code, errOut)
	}
}

// TestIssue21DiskFlags: --ballast-size keeps an emergency ballast of that
// size in <dbpath>/auxiliary; a restart with less free space than
// --min-free-disk (100% of the disk here: never met) comes up, answers
// reads and refuses writes with OutOfDiskSpace (14031) instead of exiting
// or hanging; bad sizes are refused as bad options.
func TestIssue21DiskFlags(t *testing.T) {
	for _, bad := range [][]string{{"--min-free-disk", "12XB"}, {"--ballast-size", "-1"}, {"--min-free-disk", "150%"}} {
		code, _, errOut := runOnce(t, append([]string{"--port", "0", "--dbpath", t.TempDir()}, bad...)...)
		if code != exitBadOptions || !strings.Contains(errOut, "invalid "+bad[0]) {
			t.Errorf("%v: exit %d, stderr %q", bad, code, errOut)
		}
	}

	dir := t.TempDir()
	p := launch(t, "--dbpath", dir, "--ballast-size", "8MiB")
	ballast := filepath.Join(dir, "auxiliary", "EMERGENCY_BALLAST")
	if fi, err := os.Stat(ballast); err != nil || fi.Size() != 8<<20 {
		t.Fatalf("ballast: %v, %v", fi, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	coll := c.Database("d").Collection("c")
	for i := 0; i < 10; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	c.Disconnect(ctx)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}

	q := launch(t, "--dbpath", dir, "--min-free-disk", "100%", "--ballast-size", "0")
	if _, err := os.Stat(ballast); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--ballast-size 0 leaves the ballast: %v", err)
	}
	c, err = mongo.Connect(options.Client().ApplyURI("mongodb://" + q.addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll = c.Database("d").Collection("c")
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil || n != 10 {
		t.Fatalf("reads with the disk short of space: %d, %v", n, err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 99}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 14031 ||
		!strings.Contains(we.WriteErrors[0].Message, "is less than required minimum of") {
		t.Fatalf("insert with the disk short of space: %v", err)
	}
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after a refused write: %v", err)
	}
	if q.cmd.ProcessState != nil {
		t.Fatal("the server exited")
	}
}
