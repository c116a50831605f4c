package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// verboseServer starts mayfly with args, logging JSON to a file, and
// returns a client and the log's path.
func verboseServer(t *testing.T, args ...string) (*mongo.Client, string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "mayfly.log")
	cmd := exec.Command(binary, append([]string{"--port", "0", "--dbpath", filepath.Join(dir, "db"), "--ballast-size", "0",
		"--log-format", "json", "--logpath", logPath}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr string
	waitFor(t, "Waiting for connections", func() bool { _, addr = logIDs(t, logPath); return addr != "" })
	cli, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Disconnect(context.Background()) })
	return cli, logPath
}

// findLogged runs a fast find tagged with comment and returns the
// severity ("s") of its "Slow query" line, or "" when none was written.
// The line is written before the reply, so it is in the file once the
// find returns.
func findLogged(t *testing.T, cli *mongo.Client, logPath, comment string) string {
	t.Helper()
	ctx := context.Background()
	if err := cli.Database("v").Collection("c").FindOne(ctx, bson.D{}, options.FindOne().SetComment(comment)).Err(); err != nil && err != mongo.ErrNoDocuments {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(comment)) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if m["msg"] == "Slow query" {
			if m["c"] != "COMMAND" {
				t.Errorf("Slow query logged under %v, want COMMAND", m["c"])
			}
			return m["s"].(string)
		}
	}
	return ""
}

func adminCmd(t *testing.T, cli *mongo.Client, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := cli.Database("admin").RunCommand(context.Background(), cmd).Raw()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

// TestIssue19LogsVerbosity: mongod's verbosity. At 0 an operation under
// slowms is not logged; at verbosity 1 or more (-v…-vvvvv,
// systemLog.verbosity, setParameter logLevel, logComponentVerbosity for
// the command component) it is, as a D1 "Slow query" line; a component
// set to 0 silences it whatever the global level.
func TestIssue19LogsVerbosity(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		cli, logPath := verboseServer(t)
		if s := findLogged(t, cli, logPath, "quiet-0"); s != "" {
			t.Fatalf("verbosity 0 logged a fast find at %s", s)
		}
		if v := adminCmd(t, cli, bson.D{{Key: "getParameter", Value: 1}, {Key: "logLevel", Value: 1}}).Lookup("logLevel"); v.Int32() != 0 {
			t.Fatalf("logLevel %v", v)
		}
		// setParameter logLevel turns it on at runtime, and reports the old level.
		r := adminCmd(t, cli, bson.D{{Key: "setParameter", Value: 1}, {Key: "logLevel", Value: 1}})
		if r.Lookup("was").Int32() != 0 {
			t.Fatalf("setParameter logLevel: %v", r)
		}
		if s := findLogged(t, cli, logPath, "loud-1"); s != "D1" {
			t.Fatalf("logLevel 1: fast find logged at %q, want D1", s)
		}
		// The command component at 0 silences it while the global level is 1.
		adminCmd(t, cli, bson.D{{Key: "setParameter", Value: 1}, {Key: "logComponentVerbosity", Value: bson.D{{Key: "command", Value: bson.D{{Key: "verbosity", Value: 0}}}}}})
		if s := findLogged(t, cli, logPath, "quiet-2"); s != "" {
			t.Fatalf("command verbosity 0 still logged at %s", s)
		}
		lcv := adminCmd(t, cli, bson.D{{Key: "getParameter", Value: 1}, {Key: "logComponentVerbosity", Value: 1}}).Lookup("logComponentVerbosity").Document()
		if lcv.Lookup("verbosity").Int32() != 1 || lcv.Lookup("command", "verbosity").Int32() != 0 || lcv.Lookup("query", "verbosity").Int32() != -1 {
			t.Fatalf("logComponentVerbosity: %v", lcv)
		}
		// Global 0, command 2: logged again; -1 makes command inherit 0.
		adminCmd(t, cli, bson.D{{Key: "setParameter", Value: 1}, {Key: "logComponentVerbosity", Value: bson.D{{Key: "verbosity", Value: 0}, {Key: "command", Value: 2}}}})
		if s := findLogged(t, cli, logPath, "loud-3"); s != "D1" {
			t.Fatalf("command verbosity 2: fast find logged at %q, want D1", s)
		}
		adminCmd(t, cli, bson.D{{Key: "setParameter", Value: 1}, {Key: "logComponentVerbosity", Value: bson.D{{Key: "command", Value: -1}}}})
		if s := findLogged(t, cli, logPath, "quiet-4"); s != "" {
			t.Fatalf("command verbosity -1 (inherit 0) still logged at %s", s)
		}
		// Bad settings change nothing and say why, as mongod.
		for _, bad := range []struct {
			v    bson.D
			code int32
		}{
			{bson.D{{Key: "nosuch", Value: 1}}, 2},
			{bson.D{{Key: "verbosity", Value: 2}, {Key: "command", Value: "x"}}, 2},
		} {
			err := cli.Database("admin").RunCommand(context.Background(), bson.D{{Key: "setParameter", Value: 1}, {Key: "logComponentVerbosity", Value: bad.v}}).Err()
			var ce mongo.CommandError
			if !errors.As(err, &ce) || ce.Code != bad.code {
				t.Fatalf("logComponentVerbosity %v: %v", bad.v, err)
			}
		}
		if v := adminCmd(t, cli, bson.D{{Key: "getParameter", Value: 1}, {Key: "logLevel", Value: 1}}).Lookup("logLevel"); v.Int32() != 0 {
			t.Fatalf("a refused setting changed logLevel to %v", v)
		}
	})
	for _, tc := range []struct {
		name  string
		args  []string
		level int32
	}{
		{"-v", []string{"-v"}, 1},
		{"-vvv", []string{"-vvv"}, 3},
		{"systemLog.verbosity", []string{"-f", writeConfig(t, "systemLog:\n  verbosity: 2\n")}, 2},
		{"--log-level debug", []string{"--log-level", "debug"}, 1},
		{"setParameter logLevel", []string{"-f", writeConfig(t, "setParameter:\n  logLevel: 2\n")}, 2},
		{"setParameter logComponentVerbosity", []string{"-f", writeConfig(t, "setParameter:\n  logComponentVerbosity: '{\"command\": {\"verbosity\": 1}}'\n")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, logPath := verboseServer(t, tc.args...)
			if s := findLogged(t, cli, logPath, "loud-"+tc.name); s != "D1" {
				t.Fatalf("%v: fast find logged at %q, want D1", tc.args, s)
			}
			if v := adminCmd(t, cli, bson.D{{Key: "getParameter", Value: 1}, {Key: "logLevel", Value: 1}}).Lookup("logLevel"); v.Int32() != tc.level {
				t.Fatalf("%v: logLevel %v, want %d", tc.args, v, tc.level)
			}
			parsed := adminCmd(t, cli, bson.D{{Key: "getCmdLineOpts", Value: 1}}).Lookup("parsed").Document()
			if v, err := parsed.LookupErr("systemLog", "verbosity"); tc.args[0] != "--log-level" && !strings.HasPrefix(tc.name, "setParameter") && (err != nil || v.Int32() != tc.level) {
				t.Fatalf("%v: getCmdLineOpts parsed.systemLog.verbosity %v (%v)", tc.args, v, err)
			}
		})
	}
}
