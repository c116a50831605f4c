package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
	"go.uber.org/zap/zaptest"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func init() {
	// A command that panics, to prove a handler bug costs one reply, not
	// the connection or the process.
	engine.Register(&engine.Command{Name: "mayflyTestPanic", Help: "test only", Run: func(*engine.Engine, *engine.Request) (bson.D, error) {
		panic("deliberate test panic")
	}})
}

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t), Argv: []string{"mayfly", "--port", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func connect(t *testing.T, s *Server, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(s.URI()).SetServerSelectionTimeout(5 * time.Second)
	c, err := mongo.Connect(append([]*options.ClientOptions{o}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c
}

func run(t *testing.T, c *mongo.Client, db string, cmd bson.D) (bson.M, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bson.M
	err := c.Database(db).RunCommand(ctx, cmd).Decode(&out)
	return out, err
}

func mustRun(t *testing.T, c *mongo.Client, db string, cmd bson.D) bson.M {
	t.Helper()
	out, err := run(t, c, db, cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return out
}

// sub returns the embedded document m[key] as a map (nil if absent).
func sub(m bson.M, key string) bson.M {
	switch v := m[key].(type) {
	case bson.M:
		return v
	case bson.D:
		out := bson.M{}
		for _, e := range v {
			out[e.Key] = e.Value
		}
		return out
	}
	return nil
}

func wantCode(t *testing.T, err error, code int32) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("err = %v, want code %d", err, code)
	}
}

func TestDriverHandshakeAndServerCommands(t *testing.T) {
	s := start(t)
	if !strings.HasPrefix(s.URI(), "mongodb://127.0.0.1:") || s.Engine() == nil {
		t.Fatalf("URI %q", s.URI())
	}
	c := connect(t, s)
	if err := c.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping: %v", err)
	}

	bi := mustRun(t, c, "admin", bson.D{{Key: "buildInfo", Value: 1}})
	if v, _ := bi["version"].(string); !strings.HasPrefix(v, "7.0.") {
		t.Errorf("buildInfo version %q", v)
	}
	if _, ok := bi["ferretdb"]; ok {
		t.Error("buildInfo has a ferretdb key")
	}

	hello := mustRun(t, c, "admin", bson.D{{Key: "hello", Value: 1}})
	for _, k := range []string{"isWritablePrimary", "maxBsonObjectSize", "maxMessageSizeBytes", "maxWriteBatchSize", "localTime", "logicalSessionTimeoutMinutes", "connectionId", "minWireVersion", "maxWireVersion", "readOnly"} {
		if _, ok := hello[k]; !ok {
			t.Errorf("hello lacks %s", k)
		}
	}
	for _, k := range []string{"setName", "topologyVersion", "compression", "saslSupportedMechs", "msg"} {
		if _, ok := hello[k]; ok {
			t.Errorf("hello has %s", k)
		}
	}
	if hello["maxWireVersion"] != int32(21) || hello["maxBsonObjectSize"] != int32(16777216) {
		t.Errorf("hello limits: %v", hello)
	}

	lc := mustRun(t, c, "admin", bson.D{{Key: "listCommands", Value: 1}})
	cmds := sub(lc, "commands")
	for _, name := range []string{"hello", "isMaster", "ismaster", "ping", "buildInfo", "serverStatus", "listCommands"} {
		entry := sub(cmds, name)
		if entry == nil {
			t.Errorf("listCommands lacks %s", name)
			continue
		}
		// As mongod: the handshake runs without authentication.
		if entry["secondaryOk"] != true || entry["requiresAuth"] != (name == "serverStatus") {
			t.Errorf("listCommands %s = %v", name, entry)
		}
	}
	if _, ok := cmds["atlasVersion"]; ok {
		t.Error("atlasVersion must not exist")
	}

	_, err := run(t, c, "admin", bson.D{{Key: "atlasVersion", Value: 1}})
	wantCode(t, err, mongoerr.CommandNotFound)
	_, err = run(t, c, "test", bson.D{{Key: "noSuchCommand", Value: 1}})
	wantCode(t, err, mongoerr.CommandNotFound)
	if err := c.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping after an unknown command: %v", err)
	}

	ss := mustRun(t, c, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	conns := sub(ss, "connections")
	network := sub(ss, "network")
	if cur, _ := conns["current"].(int32); cur < 1 {
		t.Errorf("serverStatus connections %v", conns)
	}
	if n, _ := network["numRequests"].(int64); n < 5 {
		t.Errorf("serverStatus network %v", network)
	}
	if ss["version"] != engine.Version || ss["host"] == "" {
		t.Errorf("serverStatus header %v %v", ss["version"], ss["host"])
	}

	opts := mustRun(t, c, "admin", bson.D{{Key: "getCmdLineOpts", Value: 1}})
	if argv, _ := opts["argv"].(bson.A); len(argv) != 3 || argv[0] != "mayfly" {
		t.Errorf("getCmdLineOpts argv %v", opts["argv"])
	}

	_, err = run(t, c, "admin", bson.D{{Key: "mayflyTestPanic", Value: 1}})
	wantCode(t, err, mongoerr.InternalError)
	if err := c.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping after a panic: %v", err)
	}
}

// rawConn is a bare TCP connection speaking the wire protocol by hand, for
// what drivers will not send.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	id int32
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) msg(flags wiremessage.MsgFlag, cmd bson.D) []byte {
	r.id++
	body, err := bson.Marshal(cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	idx, b := wiremessage.AppendHeaderStart(nil, r.id, 0, wiremessage.OpMsg)
	b = wiremessage.AppendMsgFlags(b, flags)
	b = wiremessage.AppendMsgSectionType(b, wiremessage.SingleDocument)
	b = append(b, body...)
	return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
}

func (r *rawConn) send(b []byte) {
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// reply reads one OP_MSG reply and checks it answers request want.
func (r *rawConn) reply(want int32) bson.Raw {
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(r.nc, hdr); err != nil {
		r.t.Fatalf("reading reply header: %v", err)
	}
	n := binary.LittleEndian.Uint32(hdr)
	rest := make([]byte, n-16)
	if _, err := io.ReadFull(r.nc, rest); err != nil {
		r.t.Fatal(err)
	}
	if got := int32(binary.LittleEndian.Uint32(hdr[8:])); got != want {
		r.t.Fatalf("reply answers request %d, want %d", got, want)
	}
	if op := binary.LittleEndian.Uint32(hdr[12:]); op != 2013 {
		r.t.Fatalf("reply opcode %d", op)
	}
	return bson.Raw(rest[5:])
}

func TestMoreToComeThenCommandSameConnection(t *testing.T) {
	s := start(t)
	r := dialRaw(t, s)
	r.send(r.msg(wiremessage.MoreToCome, bson.D{{Key: "ping", Value: 1}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}, {Key: "$db", Value: "admin"}}))
	r.send(r.msg(wiremessage.MoreToCome, bson.D{{Key: "endSessions", Value: bson.A{}}, {Key: "$db", Value: "admin"}}))
	r.send(r.msg(0, bson.D{{Key: "buildInfo", Value: 1}, {Key: "$db", Value: "admin"}}))
	if v := r.reply(3).Lookup("version").StringValue(); !strings.HasPrefix(v, "7.0.") {
		t.Fatalf("buildInfo after w:0 commands: %q", v)
	}
	// An unknown command leaves the same connection usable.
	r.send(r.msg(0, bson.D{{Key: "bogus", Value: 1}, {Key: "$db", Value: "admin"}}))
	if code := r.reply(4).Lookup("code").Int32(); code != mongoerr.CommandNotFound {
		t.Fatalf("code %d", code)
	}
	r.send(r.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}))
	if ok := r.reply(5).Lookup("ok").Double(); ok != 1 {
		t.Fatal("ping failed")
	}
}

func TestThousandConcurrentConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 connections")
	}
	s := start(t)
	const n = 1000
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, s)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	ready := make(chan struct{})
	for _, r := range conns {
		wg.Add(1)
		go func(r *rawConn) {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					failures = append(failures, p.(string))
					mu.Unlock()
				}
			}()
			<-ready
			m := r.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
			if _, err := r.nc.Write(m); err != nil {
				panic(err.Error())
			}
			hdr := make([]byte, 16)
			if _, err := io.ReadFull(r.nc, hdr); err != nil {
				panic(err.Error())
			}
			body := make([]byte, binary.LittleEndian.Uint32(hdr)-16)
			if _, err := io.ReadFull(r.nc, body); err != nil {
				panic(err.Error())
			}
			if bson.Raw(body[5:]).Lookup("ok").Double() != 1 {
				panic("ping not ok")
			}
		}(r)
	}
	close(ready)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d pings failed, e.g. %s", len(failures), n, failures[0])
	}
	if st := s.Stats(); st.Current != n || st.TotalCreated != n || st.NumRequests != n {
		t.Errorf("stats with %d connections open: %+v", n, st)
	}
	// And the official driver, with a pool sized for it, in parallel.
	c := connect(t, s, options.Client().SetMaxPoolSize(200).SetMaxConnecting(50).SetTimeout(30*time.Second))
	var dwg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			errs <- c.Ping(context.Background(), nil)
		}()
	}
	dwg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("driver ping: %v", err)
		}
	}
}

func TestBadClientsDoNotDisturbOthers(t *testing.T) {
	s := start(t)
	c := connect(t, s)
	if err := c.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	other := dialRaw(t, s)
	other.send(other.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}))
	other.reply(1)

	cases := map[string]func(r *rawConn){
		"garbage frame": func(r *rawConn) {
			r.send([]byte("\x20\x00\x00\x00garbage garbage garbage garb"))
		},
		"oversize length": func(r *rawConn) {
			b := r.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
			binary.LittleEndian.PutUint32(b, 0x7fffffff)
			r.send(b)
		},
		"truncated message": func(r *rawConn) {
			b := r.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
			r.send(b[:len(b)-7])
			r.nc.Close()
		},
		"bad BSON": func(r *rawConn) {
			b := r.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
			b[len(b)-1] = 0x42
			r.send(b)
			if code := r.reply(r.id).Lookup("code").Int32(); code != mongoerr.InvalidBSON {
				r.t.Errorf("bad BSON answered with code %d", code)
			}
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			f(dialRaw(t, s))
			if err := c.Ping(context.Background(), nil); err != nil {
				t.Fatalf("driver ping after %s: %v", name, err)
			}
			other.send(other.msg(0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}))
			other.reply(other.id)
		})
	}
}

func TestCloseIsGraceful(t *testing.T) {
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, s)
	if err := c.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not finish with only idle connections")
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("still accepting after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	s := start(t)
	port := s.ln.Addr().(*net.TCPAddr).Port
	_, err := Start(Config{InMemory: true, Port: port})
	if !errors.Is(err, ErrAddrInUse) {
		t.Errorf("port taken: %v", err)
	}

	dir := t.TempDir()
	a, err := Start(Config{DBPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = Start(Config{DBPath: dir})
	if err == nil || !strings.Contains(err.Error(), "another mayfly") {
		t.Errorf("locked dbpath: %v", err)
	}
}

// TestDriverDocumentSequences sends real kind-1 document sequences: the
// driver puts insertMany's documents in one, split by maxWriteBatchSize and
// maxMessageSizeBytes.
func TestDriverDocumentSequences(t *testing.T) {
	s := start(t)
	c := connect(t, s)
	coll := c.Database("test").Collection("seq")
	ctx := context.Background()
	docs := make([]any, 3000)
	pad := strings.Repeat("x", 20000) // 60 MB in all: more than one message
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: pad}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatalf("insertMany: %v", err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil || n != int64(len(docs)) {
		t.Fatalf("count = %d, %v; want %d", n, err, len(docs))
	}
	if st := s.Stats(); st.BytesIn < 60_000_000 {
		t.Errorf("bytesIn = %d after 60 MB of inserts", st.BytesIn)
	}
	// A document nested deeper than mongod's 200 levels is refused with
	// Overflow, and the connection goes on.
	deep := bson.D{}
	for i := 0; i < 250; i++ {
		deep = bson.D{{Key: "a", Value: deep}}
	}
	_, err = coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "deep"}, {Key: "d", Value: deep}}, bson.D{}})
	wantCode(t, err, mongoerr.Overflow)
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
