package main

import (
	le "encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/wire"
)

// opMsgFrame is an OP_MSG frame (flags 0, one kind-0 section) carrying doc.
func opMsgFrame(requestID uint32, doc []byte) []byte {
	b := le.LittleEndian.AppendUint32(nil, uint32(21+len(doc)))
	b = le.LittleEndian.AppendUint32(b, requestID)
	b = le.LittleEndian.AppendUint32(b, 0)
	b = le.LittleEndian.AppendUint32(b, uint32(wire.OpMsg))
	b = le.LittleEndian.AppendUint32(b, 0)
	return append(append(b, 0), doc...)
}

// issue21Hello sends hello on c and reports whether a reply came back.
func issue21Hello(t *testing.T, c net.Conn) bool {
	t.Helper()
	doc, err := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	b := opMsgFrame(7, doc)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		return false
	}
	h, _, err := wire.ReadMessage(c, nil)
	return err == nil && h.ResponseTo == 7
}

// --maxConns is mongod's: at least 5, and connections beyond it are
// closed right after accept.
func TestIssue21MaxConnsFlag(t *testing.T) {
	code, _, errOut := runOnce(t, "--maxConns", "4", "--port", "0", "--dbpath", t.TempDir())
	if code != exitBadOptions || !strings.Contains(errOut, "maxConns has to be at least 5") {
		t.Errorf("--maxConns 4: exit %d, stderr %q", code, errOut)
	}
	p := launch(t, "--maxConns", "5", "--dbpath", filepath.Join(t.TempDir(), "d"))
	for i := range 6 {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i < 5 {
			if !issue21Hello(t, c) {
				t.Fatalf("connection %d not served", i+1)
			}
			continue
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if n, err := io.Copy(io.Discard, c); n != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection 6: read %d bytes, %v; want it closed", n, err)
		}
	}
}
