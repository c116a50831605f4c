package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSoakSmall runs the soak's --small mode (about 25 s, the binary build
// included): a few kill -9 write rounds under every write concern, one
// phase of each hostile client kind with 50 connections and one wire-fuzz
// phase. Every guarantee must hold: no journaled write lost, unjournaled
// losses only within the commit interval, no server crash, RSS under the
// 1 GiB budget, the well-behaved client served.
func TestSoakSmall(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--small"}, &out, &errOut)
	t.Logf("report:\n%s", out.String())
	if errOut.Len() > 0 {
		t.Logf("stderr:\n%s", errOut.String())
	}
	if code != 0 || !strings.Contains(out.String(), "all guarantees held") {
		t.Fatalf("soak --small exited %d", code)
	}
	for _, want := range []string{"{j:1}", "{w:0}", bigFrame, noRead, "mutated frames sent"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
