package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestIssue13ReplSetFlagAndConfigKey: --replSet and --advertise-host are
// flags, replication.replSetName and mayfly.advertiseHost their file keys,
// and the command line wins over the file.
func TestIssue13ReplSetFlagAndConfigKey(t *testing.T) {
	file := writeConfig(t, "replication:\n  replSetName: fromFile\nmayfly:\n  advertiseHost: db.example:27017\n")
	fs, cf, code, errOut := loadConfig(t, "-f", file)
	if cf == nil {
		t.Fatalf("config not loaded: exit %d, stderr %q", code, errOut)
	}
	if got := flagValue(fs, "replSet"); got != "fromFile" {
		t.Errorf("--replSet from the file = %q", got)
	}
	if got := flagValue(fs, "advertise-host"); got != "db.example:27017" {
		t.Errorf("--advertise-host from the file = %q", got)
	}
	parsed := map[string]any{}
	cf.addParsed(parsed)
	if parsed["replication.replSetName"] != "fromFile" {
		t.Errorf("parsed[replication.replSetName] = %v", parsed["replication.replSetName"])
	}
	fs, cf, _, _ = loadConfig(t, "-f", file, "--replSet", "fromFlag")
	if cf == nil || flagValue(fs, "replSet") != "fromFlag" {
		t.Errorf("the flag must override the file: %q", flagValue(fs, "replSet"))
	}
	if code, _, errOut := runOnce(t, "--advertise-host", "h:1", "--dbpath", t.TempDir()); code != exitBadOptions || !strings.Contains(errOut, "--advertise-host needs --replSet") {
		t.Errorf("--advertise-host without --replSet: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runOnce(t, "--replSet", "rs0", "--advertise-host", "nohostport", "--dbpath", t.TempDir()); code != exitBadOptions || !strings.Contains(errOut, "host:port") {
		t.Errorf("a bad --advertise-host: exit %d, %q", code, errOut)
	}
}

// TestIssue13ReplSetBinary: the binary started with --replSet (and the
// one started from a file's replication.replSetName) is discovered by a
// driver given ?replicaSet=, which then writes through it; a driver
// expecting another set name finds no server.
func TestIssue13ReplSetBinary(t *testing.T) {
	for _, args := range [][]string{
		{"--replSet", "rsFlag"},
		{"-f", writeConfig(t, "replication:\n  replSetName: rsFile\n")},
	} {
		name := "rsFlag"
		if args[0] == "-f" {
			name = "rsFile"
		}
		p := launch(t, append(args, "--dbpath", t.TempDir(), "--bind_ip", "127.0.0.1")...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.addr + "/?replicaSet=" + name).SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Database("t").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
			t.Errorf("%s: insert through the replica set: %v", name, err)
		}
		var hello bson.M
		if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil || hello["setName"] != name || hello["me"] != p.addr {
			t.Errorf("%s: hello %v %v", name, hello, err)
		}
		c.Disconnect(ctx)
		wrong, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.addr + "/?replicaSet=other").SetServerSelectionTimeout(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := wrong.Ping(ctx, nil); err == nil || !strings.Contains(err.Error(), "server selection") {
			t.Errorf("%s: a client for another set name must find no server, got %v", name, err)
		}
		wrong.Disconnect(ctx)
		cancel()
	}
}
