package compat

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/wire"
)

// issue21Start starts a private in-process server with the given limits
// and a driver client on it.
func issue21Start(t *testing.T, cfg server.Config) (*server.Server, *mongo.Client) {
	t.Helper()
	cfg.Bind, cfg.InMemory = "127.0.0.1", true
	srv, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cli, err := connect(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Disconnect(context.Background()) })
	return srv, cli
}

// issue21OpMsg frames cmd as an OP_MSG with one kind-0 section.
func issue21OpMsg(t *testing.T, id int32, cmd bson.D) []byte {
	t.Helper()
	doc, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(16+4+1+len(doc)))
	b = binary.LittleEndian.AppendUint32(b, uint32(id))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(wire.OpMsg))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, 0)
	return append(b, doc...)
}

// issue21Hello opens a raw connection and checks it is served.
func issue21Hello(t *testing.T, addr string, id int32) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(issue21OpMsg(t, id, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})); err != nil {
		t.Fatal(err)
	}
	h, msg, err := wire.ReadMessage(c, nil)
	if err != nil {
		t.Fatalf("hello on a raw connection: %v", err)
	}
	if h.ResponseTo != id || bson.Raw(msg[21:]).Lookup("ok").Double() != 1 {
		t.Fatalf("hello reply %v", bson.Raw(msg[21:]))
	}
	return c
}

func issue21Connections(t *testing.T, cli *mongo.Client) (current, available, totalCreated int64) {
	t.Helper()
	var st bson.Raw
	if err := cli.Database("admin").RunCommand(context.Background(), bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Lookup("connections", "current").AsInt64(), st.Lookup("connections", "available").AsInt64(),
		st.Lookup("connections", "totalCreated").AsInt64()
}

// --maxConns N: the first N connections are served, the next is closed
// right after accept and not counted; serverStatus's connections.available
// counts down from N; a freed slot can be taken again.
func TestIssue21ConnMaxConns(t *testing.T) {
	const maxConns = 6
	srv, cli := issue21Start(t, server.Config{MaxConns: maxConns})
	cur, avail, _ := issue21Connections(t, cli)
	if cur+avail != maxConns || cur < 1 {
		t.Fatalf("connections current %d + available %d, want %d in all", cur, avail, maxConns)
	}
	var raw []net.Conn
	for i := int32(0); srv.Stats().Current < maxConns; i++ {
		raw = append(raw, issue21Hello(t, srv.Addr(), 100+i))
	}
	created := srv.Stats().TotalCreated

	extra, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetDeadline(time.Now().Add(10 * time.Second))
	extra.Write(issue21OpMsg(t, 1, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}))
	// Closed unread, the connection may end in a reset rather than EOF.
	if n, err := io.Copy(io.Discard, extra); err != nil && !errors.Is(err, syscall.ECONNRESET) || n != 0 {
		t.Fatalf("connection %d: read %d bytes, %v; want it closed without a reply", maxConns+1, n, err)
	}
	if st := srv.Stats(); st.Current != maxConns || st.TotalCreated != created {
		t.Errorf("after a refused connection: current %d totalCreated %d, want %d %d", st.Current, st.TotalCreated, maxConns, created)
	}
	// The driver's own connections still work; nothing is available.
	cur, avail, total := issue21Connections(t, cli)
	if cur != maxConns || avail != 0 || total != created {
		t.Errorf("serverStatus connections {current %d available %d totalCreated %d}, want {%d 0 %d}", cur, avail, total, maxConns, created)
	}
	raw[0].Close()
	waitFor(t, 10*time.Second, "a slot to be freed", func() bool { return srv.Stats().Current == maxConns-1 })
	issue21Hello(t, srv.Addr(), 200)
}

// Hostile clients of both kinds (a declared 48 MB frame never sent; many
// requests whose large replies are never read) are disconnected by the
// frame and write timeouts, while a driver client is served all along.
func TestIssue21ConnHostileClients(t *testing.T) {
	srv, cli := issue21Start(t, server.Config{WireLimits: wire.Limits{
		FrameTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}})
	ctx := context.Background()
	coll := cli.Database(dbName(t)).Collection("big")
	pad := make([]byte, 1<<20)
	for i := range 8 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	before := srv.Stats()

	var hostile []net.Conn
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		hostile = append(hostile, c)
		return c
	}
	for range 50 {
		hdr := binary.LittleEndian.AppendUint32(nil, wire.MaxMessageSize)
		hdr = binary.LittleEndian.AppendUint32(hdr, 1)
		hdr = binary.LittleEndian.AppendUint32(hdr, 0)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(wire.OpMsg))
		dial().Write(hdr)
	}
	var finds []byte
	for i := range 32 {
		finds = append(finds, issue21OpMsg(t, int32(i), bson.D{{Key: "find", Value: "big"}, {Key: "batchSize", Value: 8}, {Key: "$db", Value: dbName(t)}})...)
	}
	for range 8 {
		dial().Write(finds)
	}

	// The driver keeps working while they are there.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 100; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
				t.Errorf("driver insert while hostile clients are connected: %v", err)
				return
			}
			if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: i}}); err != nil || n != 1 {
				t.Errorf("driver count: %d, %v", n, err)
				return
			}
			served++
		}
	}()
	waitFor(t, 20*time.Second, "the hostile connections to be closed", func() bool {
		st := srv.Stats()
		return st.TotalCreated == before.TotalCreated+int64(len(hostile)) && st.Current == before.Current
	})
	close(stop)
	wg.Wait()
	if served == 0 {
		t.Error("the driver was not served while the hostile clients were connected")
	}
	cur, _, _ := issue21Connections(t, cli)
	if cur != before.Current {
		t.Errorf("serverStatus connections.current %d, want %d", cur, before.Current)
	}
}
