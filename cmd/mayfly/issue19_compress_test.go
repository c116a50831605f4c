package main

import (
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/wire"
)

// issue19Command sends cmd on c and returns the reply document.
func issue19Command(t *testing.T, c net.Conn, cmd bson.D) bson.Raw {
	t.Helper()
	doc, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	b := opMsgFrame(9, doc)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	h, msg, err := wire.ReadMessage(c, nil)
	if err != nil || h.OpCode != wire.OpMsg {
		t.Fatalf("reply: opcode %d, %v", h.OpCode, err)
	}
	return bson.Raw(msg[21:])
}

// --networkMessageCompressors is mongod's: a list of snappy, zstd, zlib or
// disabled, what hello negotiates, and shown by getCmdLineOpts; an
// unknown compressor stops startup.
func TestIssue19CompressFlag(t *testing.T) {
	code, _, errOut := runOnce(t, "--networkMessageCompressors", "zstd,lz4", "--port", "0", "--dbpath", t.TempDir())
	if code != exitBadOptions || !strings.Contains(errOut, "Invalid network message compressor specified in configuration: lz4") {
		t.Errorf("lz4: exit %d, stderr %q", code, errOut)
	}
	offer := bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"snappy", "zlib", "zstd"}}, {Key: "$db", Value: "admin"}}
	for _, tc := range []struct {
		flag []string
		want []string
	}{
		{nil, []string{"snappy", "zlib", "zstd"}},
		{[]string{"--networkMessageCompressors", "zstd"}, []string{"zstd"}},
		{[]string{"--networkMessageCompressors", "zlib,snappy"}, []string{"snappy", "zlib"}},
		{[]string{"--networkMessageCompressors", "disabled"}, nil},
	} {
		p := launch(t, append(tc.flag, "--dbpath", filepath.Join(t.TempDir(), "d"))...)
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var got []string
		if v, err := issue19Command(t, c, offer).LookupErr("compression"); err == nil {
			vals, _ := v.Array().Values()
			for _, x := range vals {
				got = append(got, x.StringValue())
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: hello's compression %q, want %q", tc.flag, got, tc.want)
		}
		opts := issue19Command(t, c, bson.D{{Key: "getCmdLineOpts", Value: 1}, {Key: "$db", Value: "admin"}})
		v, err := opts.LookupErr("parsed", "net", "compression", "compressors")
		if tc.flag == nil {
			if err == nil {
				t.Errorf("getCmdLineOpts shows compressors without the flag: %v", v)
			}
		} else if v.StringValue() != tc.flag[1] {
			t.Errorf("getCmdLineOpts: %v", opts)
		}
	}
}
