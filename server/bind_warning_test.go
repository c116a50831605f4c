package server

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestIssue15BindWarning: without --auth the server warns at startup that
// access control is off, and says more loudly when it is bound off the
// loopback interface; with --auth it does not warn.
func TestIssue15BindWarning(t *testing.T) {
	for _, tc := range []struct {
		bind     string
		auth     bool
		want     string // a warning containing this, or none when empty
		wantBind bool
	}{
		{"127.0.0.1", false, "Access control is not enabled", false},
		{"0.0.0.0", false, "bound to a non-loopback address", true},
		{"0.0.0.0", true, "", false},
	} {
		core, logs := observer.New(zapcore.WarnLevel)
		s, err := Start(Config{Bind: tc.bind, InMemory: true, Auth: tc.auth, Logger: zap.New(core)})
		if err != nil {
			t.Fatalf("bind %s: %v", tc.bind, err)
		}
		s.Close()
		var found []observer.LoggedEntry
		for _, e := range logs.All() {
			if strings.Contains(e.Message, "Access control") {
				found = append(found, e)
			}
		}
		switch {
		case tc.want == "" && len(found) > 0:
			t.Errorf("bind %s auth %v: warned %q", tc.bind, tc.auth, found[0].Message)
		case tc.want != "" && (len(found) != 1 || !strings.Contains(found[0].Message, tc.want)):
			t.Errorf("bind %s auth %v: warnings %v, want one containing %q", tc.bind, tc.auth, found, tc.want)
		case !tc.wantBind && tc.want != "" && strings.Contains(found[0].Message, "non-loopback"):
			t.Errorf("bind %s: loopback reported as non-loopback: %q", tc.bind, found[0].Message)
		case tc.wantBind && found[0].ContextMap()["bindIp"] != tc.bind:
			t.Errorf("bind %s: the warning does not name the address: %v", tc.bind, found[0].ContextMap())
		}
	}
}
