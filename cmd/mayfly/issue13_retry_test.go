package main

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/wire"
)

// opMsg sends one command as an OP_MSG on a fresh connection and returns
// the reply: a raw client, so the command carries exactly the lsid and
// txnNumber the test gives (a driver would add its own session).
func opMsg(t *testing.T, addr string, cmd bson.D) bson.D {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	doc, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(wire.AppendOpMsgReply(nil, 1, 0, doc)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := wire.ReadMessage(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wire.DecodeOpMsg(msg)
	if err != nil {
		t.Fatal(err)
	}
	var out bson.D
	if err := bson.Unmarshal(m.Command, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// replyCore is a write reply without the fields that differ between an
// execution and its retry (times, and the retried statements named).
func replyCore(d bson.D) string {
	out := bson.D{}
	for _, f := range d {
		switch f.Key {
		case "opTime", "electionId", "operationTime", "$clusterTime", "retriedStmtIds", "retriedStmtId":
			continue
		}
		out = append(out, f)
	}
	return fmt.Sprint(out)
}

func field(d bson.D, k string) any {
	for _, f := range d {
		if f.Key == k {
			return f.Value
		}
	}
	return nil
}

// TestIssue13RetryableWritesSurviveKill9: retryable insert, update (a $inc
// and an upsert) and findAndModify with fixed lsids and txnNumbers, then
// kill -9 and a restart on the same --dbpath: the same commands sent again
// are answered from the records persisted with the writes (same n,
// nModified, upserted _id, findAndModify value, naming the retried
// statements) and change nothing.
func TestIssue13RetryableWritesSurviveKill9(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--replSet", "rs0", "--dbpath", dir, "--bind_ip", "127.0.0.1"}
	p := launch(t, args...)
	lsid := func(b byte) bson.D {
		id := make([]byte, 16)
		id[0], id[6], id[8] = b, 0x40, 0x80
		return bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id}}}
	}
	// j: true, so the acknowledged writes are on disk before the kill.
	wc := bson.D{{Key: "w", Value: 1}, {Key: "j", Value: true}}
	cmds := []bson.D{
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 0}}}},
			{Key: "lsid", Value: lsid(1)}, {Key: "txnNumber", Value: int64(7)}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}},
			bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "up"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}},
		}}, {Key: "lsid", Value: lsid(2)}, {Key: "txnNumber", Value: int64(3)}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}}},
			{Key: "new", Value: true}, {Key: "lsid", Value: lsid(3)}, {Key: "txnNumber", Value: int64(1)}},
	}
	for i := range cmds {
		cmds[i] = append(cmds[i], bson.E{Key: "writeConcern", Value: wc}, bson.E{Key: "$db", Value: "rt"})
	}
	first := make([]bson.D, len(cmds))
	for i, c := range cmds {
		first[i] = opMsg(t, p.addr, c)
		if field(first[i], "ok") != 1.0 || field(first[i], "writeErrors") != nil {
			t.Fatalf("%s: %v", c[0].Key, first[i])
		}
	}
	if up, _ := field(first[1], "upserted").(bson.A); len(up) != 1 || field(first[1], "nModified") != int32(1) {
		t.Fatalf("update reply: %v", first[1])
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()

	p2 := launch(t, args...)
	for i, c := range cmds {
		again := opMsg(t, p2.addr, c)
		if replyCore(again) != replyCore(first[i]) {
			t.Errorf("%s retried after kill -9 answered\n%v\nthe first reply was\n%v", c[0].Key, again, first[i])
		}
		if field(again, "retriedStmtIds") == nil && field(again, "retriedStmtId") == nil {
			t.Errorf("%s retried after kill -9 was executed again: %v", c[0].Key, again)
		}
	}
	found := opMsg(t, p2.addr, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "$db", Value: "rt"}})
	batch, _ := field(field(found, "cursor").(bson.D), "firstBatch").(bson.A)
	got := []string{}
	for _, d := range batch {
		got = append(got, fmt.Sprintf("%v=%v", field(d.(bson.D), "_id"), field(d.(bson.D), "n")))
	}
	upID := field(field(first[1], "upserted").(bson.A)[0].(bson.D), "_id")
	want := []string{"1=1", fmt.Sprintf("%v=1", upID), "2=10"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("documents after the retries: %v, want %v (each write applied once)", got, want)
	}
}
