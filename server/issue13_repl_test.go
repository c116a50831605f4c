package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"
)

// TestIssue13MongoshReplSet: mongosh's replica-set helpers against a
// server started with --replSet: rs.status(), rs.conf(), rs.isMaster(),
// db.hello() and rs.initiate() on an initiated set.
func TestIssue13MongoshReplSet(t *testing.T) {
	bin := needMongosh(t)
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t), ReplSetName: "rs0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	script := `
let init;
try { rs.initiate(); init = "no error"; } catch (e) { init = e.codeName; }
const st = rs.status(), conf = rs.conf(), im = rs.isMaster(), h = db.hello();
db.getSiblingDB("t").c.insertOne({x: 1});
print(JSON.stringify({set: st.set, state: st.members[0].stateStr, confId: conf._id, host: conf.members[0].host,
  ismaster: im.ismaster, setName: h.setName, primary: h.primary, init: init,
  count: db.getSiblingDB("t").c.countDocuments({})}));
`
	cmd := exec.Command(bin, "--quiet", "--norc", s.URI()+"test?replicaSet=rs0", "--eval", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mongosh: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("mongosh output %q: %v", out, err)
	}
	want := map[string]any{"set": "rs0", "state": "PRIMARY", "confId": "rs0", "host": s.Addr(), "ismaster": true,
		"setName": "rs0", "primary": s.Addr(), "init": "AlreadyInitialized", "count": 1.0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (output %s)", k, got[k], v, out)
		}
	}
}

// TestIssue13LegacyIsMasterReplSet: the legacy OP_QUERY isMaster (the first
// message of old drivers) describes the set too.
func TestIssue13LegacyIsMasterReplSet(t *testing.T) {
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t), ReplSetName: "rs0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	doc, _ := bson.Marshal(bson.D{{Key: "isMaster", Value: 1}})
	var body bytes.Buffer
	binary.Write(&body, binary.LittleEndian, int32(0)) // flags
	body.WriteString("admin.$cmd\x00")
	binary.Write(&body, binary.LittleEndian, int32(0))  // numberToSkip
	binary.Write(&body, binary.LittleEndian, int32(-1)) // numberToReturn
	body.Write(doc)
	var msg bytes.Buffer
	binary.Write(&msg, binary.LittleEndian, int32(16+body.Len()))
	binary.Write(&msg, binary.LittleEndian, int32(1))    // requestID
	binary.Write(&msg, binary.LittleEndian, int32(0))    // responseTo
	binary.Write(&msg, binary.LittleEndian, int32(2004)) // OP_QUERY
	msg.Write(body.Bytes())
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(msg.Bytes()); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(conn, hdr); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, int(binary.LittleEndian.Uint32(hdr))-16)
	if _, err := io.ReadFull(conn, rest); err != nil {
		t.Fatal(err)
	}
	if op := binary.LittleEndian.Uint32(hdr[12:]); op != 1 { // OP_REPLY
		t.Fatalf("reply opcode %d", op)
	}
	reply := bson.Raw(rest[20:])
	for k, want := range map[string]any{"ismaster": true, "secondary": false, "setName": "rs0", "me": s.Addr(), "primary": s.Addr()} {
		v, err := reply.LookupErr(k)
		if err != nil {
			t.Errorf("%s missing in %s", k, reply)
			continue
		}
		var got any
		switch v.Type {
		case bson.TypeBoolean:
			got = v.Boolean()
		case bson.TypeString:
			got = v.StringValue()
		}
		if got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if _, err := reply.LookupErr("$clusterTime", "clusterTime"); err != nil {
		t.Errorf("no $clusterTime in %s", reply)
	}
}
