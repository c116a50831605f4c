package mlog

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Debug lines are written at their component's verbosity: the global
// level unless the component has its own; the severity shows D1…D5.
func TestIssue19VerbosityCore(t *testing.T) {
	var buf bytes.Buffer
	v := NewVerbosity(0)
	log := zap.New(v.Core(zapcore.NewCore(NewEncoder(), zapcore.AddSync(&buf), Debug(MaxVerbosity))))
	lines := func() string { s := buf.String(); buf.Reset(); return s }

	log.Named("wire").Debug("d1 network")
	log.Info("info line")
	if got := lines(); strings.Contains(got, "d1 network") || !strings.Contains(got, `"s":"I"`) {
		t.Fatalf("verbosity 0: %s", got)
	}
	v.SetLevel(2)
	log.Named("wire").Log(Debug(2), "d2 network")
	log.Named("wire").Log(Debug(3), "d3 network")
	if got := lines(); !strings.Contains(got, `"s":"D2","c":"NETWORK"`) || strings.Contains(got, "d3 network") {
		t.Fatalf("verbosity 2: %s", got)
	}
	v.SetComponentLevel("network", 0)
	v.SetComponentLevel("storage", 5)
	log.Named("wire").Debug("d1 network")
	log.Named("pebble").Log(Debug(5), "d5 storage")
	log.Debug("Slow query") // COMMAND, through the message table: the global 2
	if got := lines(); strings.Contains(got, "d1 network") || !strings.Contains(got, `"s":"D5","c":"STORAGE"`) || !strings.Contains(got, `"s":"D1","c":"COMMAND"`) {
		t.Fatalf("network 0, storage 5, global 2: %s", got)
	}
	if ok := v.SetComponentLevel("nosuch", 1); ok {
		t.Fatal("an unknown component was accepted")
	}
	v.SetLevel(0)
	v.SetComponentLevel("storage", -1)
	if log.Core().Enabled(zapcore.DebugLevel) {
		t.Fatal("Enabled(debug) with every verbosity at 0")
	}
}
