package compat

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/mayflydb/mayfly/server"
)

const opCompressed, opMsg, opQuery = 2012, 2013, 2004

// frameTally counts the messages that cross a connection in one direction.
type frameTally struct {
	frames, compressed int
	bytes              int64        // every frame's length
	ids                map[byte]int // compressor ids of OP_COMPRESSED frames
	wireBytes, rawSize int64        // OP_COMPRESSED: bytes on the wire, uncompressed bytes
	plainCmds          []string     // first key of uncompressed commands
}

// frameParser follows one direction of a connection, frame by frame.
type frameParser struct {
	head []byte // the first bytes of the current frame
	left int    // bytes of the current frame not yet seen
	t    *frameTally
	mu   *sync.Mutex
}

func (p *frameParser) feed(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(b) > 0 {
		if p.left == 0 && len(p.head) < 16 {
			n := min(16-len(p.head), len(b))
			p.head = append(p.head, b[:n]...)
			b = b[n:]
			if len(p.head) == 16 {
				if p.left = int(binary.LittleEndian.Uint32(p.head)) - 16; p.left <= 0 {
					p.left = 0
					p.done()
				}
			}
			continue
		}
		n := min(p.left, len(b))
		if len(p.head) < 128 {
			p.head = append(p.head, b[:min(n, 128-len(p.head))]...)
		}
		b = b[n:]
		p.left -= n
		if p.left == 0 {
			p.done()
		}
	}
}

func (p *frameParser) done() {
	h := p.head
	p.head = p.head[:0]
	op := binary.LittleEndian.Uint32(h[12:])
	p.t.frames++
	p.t.bytes += int64(binary.LittleEndian.Uint32(h))
	switch op {
	case opCompressed:
		p.t.compressed++
		if p.t.ids == nil {
			p.t.ids = map[byte]int{}
		}
		p.t.ids[h[24]]++
		p.t.wireBytes += int64(binary.LittleEndian.Uint32(h))
		p.t.rawSize += int64(binary.LittleEndian.Uint32(h[20:])) + 16
	case opMsg:
		// flags, kind 0, document length, type: the key starts at 26.
		if len(h) > 27 {
			p.t.plainCmds = append(p.t.plainCmds, cstring(h[26:]))
		}
	case opQuery:
		// flags, then the namespace, skip, return, then the query.
		ns := cstring(h[20:])
		if q := 20 + len(ns) + 1 + 8 + 5; len(h) > q {
			p.t.plainCmds = append(p.t.plainCmds, cstring(h[q:]))
		}
	}
}

func cstring(b []byte) string {
	if i := slices.Index(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// tallyDialer counts the frames of every connection a client opens.
type tallyDialer struct {
	mu       sync.Mutex
	sent, rx frameTally
}

func (d *tallyDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &tallyConn{Conn: c, out: &frameParser{t: &d.sent, mu: &d.mu}, in: &frameParser{t: &d.rx, mu: &d.mu}}, nil
}

func (d *tallyDialer) snapshot() (sent, rx frameTally) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent, d.rx
}

type tallyConn struct {
	net.Conn
	out, in *frameParser
}

func (c *tallyConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.feed(b[:n])
	return n, err
}

func (c *tallyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.feed(b[:n])
	return n, err
}

// issue19URI is the server under test's URI.
func issue19URI() string {
	if externalURI != "" {
		return externalURI
	}
	return shared.srv.URI()
}

func issue19Client(t *testing.T, uri string, compressors ...string) (*mongo.Client, *tallyDialer) {
	t.Helper()
	d := &tallyDialer{}
	opts := options.Client().ApplyURI(uri).SetDialer(d).SetServerSelectionTimeout(10 * time.Second)
	if compressors != nil {
		opts.SetCompressors(compressors)
	}
	cli, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Disconnect(context.Background()) })
	return cli, d
}

// neverCompressed are the commands the compression specification keeps
// uncompressed.
var neverCompressed = []string{"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "getnonce", "authenticate",
	"createUser", "updateUser", "copydbSaslStart", "copydbgetnonce", "copydb"}

// issue19Workload writes and reads large documents through cli and checks
// the results.
func issue19Workload(t *testing.T, ctx context.Context, coll *mongo.Collection) {
	t.Helper()
	const n = 30
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "n", Value: int32(i)},
			{Key: "text", Value: strings.Repeat(fmt.Sprintf("document %d says hello to the compressor. ", i), 5000)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(7))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.Raw
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("find returned %d documents, want %d", len(got), n)
	}
	for i, g := range got {
		want := strings.Repeat(fmt.Sprintf("document %d says hello to the compressor. ", i), 5000)
		if g.Lookup("text").StringValue() != want || g.Lookup("n").Int32() != int32(i) {
			t.Fatalf("document %d came back different", i)
		}
	}
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 10}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "bytes", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$strLenBytes", Value: "$text"}}}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var agg []bson.Raw
	if err := cur.All(ctx, &agg); err != nil {
		t.Fatal(err)
	}
	wantBytes := 0
	for i := 10; i < n; i++ {
		wantBytes += 5000 * len(fmt.Sprintf("document %d says hello to the compressor. ", i))
	}
	if len(agg) != 1 || agg[0].Lookup("count").AsInt64() != n-10 || agg[0].Lookup("bytes").AsInt64() != int64(wantBytes) {
		t.Fatalf("aggregate: %v, want count %d bytes %d", agg, n-10, wantBytes)
	}
}

// The Go driver with compressors=snappy, zstd or zlib: every command after
// the handshake goes compressed both ways with the chosen compressor, the
// handshake stays uncompressed, and the results are right.
func TestIssue19CompressDrivers(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name string
		id   byte
	}{{"snappy", 1}, {"zlib", 2}, {"zstd", 3}} {
		t.Run(c.name, func(t *testing.T) {
			cli, d := issue19Client(t, issue19URI(), c.name)
			issue19Workload(t, e.ctx, cli.Database(e.db.Name()).Collection(c.name))
			if err := cli.Disconnect(e.ctx); err != nil {
				t.Fatal(err)
			}
			sent, rx := d.snapshot()
			if sent.compressed < 5 || rx.compressed < 5 {
				t.Fatalf("OP_COMPRESSED frames sent %d received %d (of %d and %d)", sent.compressed, rx.compressed, sent.frames, rx.frames)
			}
			if len(sent.ids) != 1 || sent.ids[c.id] == 0 || len(rx.ids) != 1 || rx.ids[c.id] == 0 {
				t.Fatalf("compressor ids sent %v received %v, want only %d", sent.ids, rx.ids, c.id)
			}
			for _, cmd := range sent.plainCmds {
				if !slices.Contains(neverCompressed, cmd) {
					t.Fatalf("%s went uncompressed (uncompressed commands: %v)", cmd, sent.plainCmds)
				}
			}
			if len(sent.plainCmds) == 0 {
				t.Fatal("the handshake should have gone uncompressed")
			}
			// The documents repeat one sentence: the wire carries a
			// fraction of what it would uncompressed.
			for dir, tally := range map[string]frameTally{"sent": sent, "received": rx} {
				if tally.wireBytes*4 > tally.rawSize {
					t.Errorf("%s: %d bytes on the wire for %d uncompressed", dir, tally.wireBytes, tally.rawSize)
				}
				t.Logf("%s %s: %d compressed frames, %d wire bytes for %d uncompressed (%.1f%%)", c.name, dir,
					tally.compressed, tally.wireBytes, tally.rawSize, 100*float64(tally.wireBytes)/float64(tally.rawSize))
			}
		})
	}
}

// helloCompression runs hello (under name) with the given compression
// offer and returns the reply's compression list (nil when absent).
func helloCompression(t *testing.T, ctx context.Context, cli *mongo.Client, name string, offer any) []string {
	t.Helper()
	cmd := bson.D{{Key: name, Value: 1}}
	if offer != nil {
		cmd = append(cmd, bson.E{Key: "compression", Value: offer})
	}
	r, err := cli.Database("admin").RunCommand(ctx, cmd).Raw()
	if err != nil {
		t.Fatalf("%s %v: %v", name, offer, err)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("hello reply is not valid BSON: %v", err)
	}
	v, err := r.LookupErr("compression")
	if err != nil {
		return nil
	}
	// mongod's hello has compression last, before ok.
	if elems, _ := r.Elements(); len(elems) < 2 || elems[len(elems)-2].Key() != "compression" || elems[len(elems)-1].Key() != "ok" {
		t.Fatalf("compression should come last before ok: %v", r)
	}
	vals, err := v.Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, x := range vals {
		out = append(out, x.StringValue())
	}
	return out
}

func compressionEq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%s: compression %q, want %q", what, got, want)
	}
}

// hello's reply lists the offered compressors the server enables, in the
// client's order; the connection repeats its list to a hello without an
// offer; a malformed offer is a TypeMismatch.
func TestIssue19CompressHello(t *testing.T) {
	e := newEnv(t)
	cli, _ := issue19Client(t, issue19URI())
	// One connection, so that what it negotiated carries over.
	cli2, err := mongo.Connect(options.Client().ApplyURI(issue19URI()).SetMaxPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cli2.Disconnect(e.ctx)
	compressionEq(t, "no offer", helloCompression(t, e.ctx, cli2, "hello", nil), nil)
	compressionEq(t, "zstd,lz4,snappy", helloCompression(t, e.ctx, cli2, "hello", bson.A{"zstd", "lz4", "snappy"}), []string{"zstd", "snappy"})
	compressionEq(t, "then no offer", helloCompression(t, e.ctx, cli2, "hello", nil), []string{"zstd", "snappy"})
	compressionEq(t, "isMaster zlib,zstd", helloCompression(t, e.ctx, cli2, "isMaster", bson.A{"zlib", "zstd"}), []string{"zlib", "zstd"})
	compressionEq(t, "unknown only", helloCompression(t, e.ctx, cli2, "ismaster", bson.A{"lz4"}), nil)
	compressionEq(t, "then no offer again", helloCompression(t, e.ctx, cli2, "hello", nil), nil)
	compressionEq(t, "empty offer", helloCompression(t, e.ctx, cli, "hello", bson.A{}), nil)
	compressionEq(t, "all three", helloCompression(t, e.ctx, cli, "hello", bson.A{"snappy", "zlib", "zstd"}), []string{"snappy", "zlib", "zstd"})

	err = cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: "zstd"}}).Err()
	wantCode(t, err, 14, "TypeMismatch")
	if !strings.Contains(errMsg(err), "BSON field 'hello.compression' is the wrong type 'string', expected type 'array'") {
		t.Fatalf("errmsg: %v", err)
	}
	err = cli.Database("admin").RunCommand(e.ctx, bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"zstd", 1}}}).Err()
	wantCode(t, err, 14, "TypeMismatch")
}

// --networkMessageCompressors: disabled turns compression off (drivers
// that offer it talk uncompressed), a single compressor is the only one
// negotiated, an unknown one is refused at startup.
func TestIssue19CompressServerConfig(t *testing.T) {
	if externalURI != "" {
		t.Skip("starts private servers with their own --networkMessageCompressors")
	}
	start := func(t *testing.T, comps string) *server.Server {
		srv, err := server.Start(server.Config{Bind: "127.0.0.1", InMemory: true, NetworkMessageCompressors: comps})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		return srv
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("disabled", func(t *testing.T) {
		srv := start(t, "disabled")
		cli, d := issue19Client(t, srv.URI(), "zstd", "snappy", "zlib")
		compressionEq(t, "offer", helloCompression(t, ctx, cli, "hello", bson.A{"snappy", "zstd", "zlib"}), nil)
		issue19Workload(t, ctx, cli.Database("t").Collection("c"))
		cli.Disconnect(ctx)
		if sent, rx := d.snapshot(); sent.compressed != 0 || rx.compressed != 0 || sent.frames < 5 {
			t.Fatalf("compressed frames sent %d received %d (of %d)", sent.compressed, rx.compressed, sent.frames)
		}
	})
	t.Run("zstdOnly", func(t *testing.T) {
		srv := start(t, "zstd")
		cli, d := issue19Client(t, srv.URI(), "snappy", "zstd")
		compressionEq(t, "offer", helloCompression(t, ctx, cli, "hello", bson.A{"snappy", "zstd", "zlib"}), []string{"zstd"})
		issue19Workload(t, ctx, cli.Database("t").Collection("c"))
		cli.Disconnect(ctx)
		if sent, rx := d.snapshot(); sent.ids[3] == 0 || len(sent.ids) != 1 || rx.ids[3] == 0 || len(rx.ids) != 1 {
			t.Fatalf("compressor ids sent %v received %v, want zstd only", sent.ids, rx.ids)
		}
		cli2, d2 := issue19Client(t, srv.URI(), "snappy")
		if err := cli2.Ping(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := cli2.Database("t").Collection("c").CountDocuments(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
		cli2.Disconnect(ctx)
		if sent, rx := d2.snapshot(); sent.compressed != 0 || rx.compressed != 0 {
			t.Fatalf("snappy-only client against a zstd-only server: compressed frames %d/%d", sent.compressed, rx.compressed)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := server.Start(server.Config{Bind: "127.0.0.1", InMemory: true, NetworkMessageCompressors: "zstd,lz4"})
		if err == nil || err.Error() != "Invalid network message compressor specified in configuration: lz4" {
			t.Fatalf("Start with lz4: %v", err)
		}
	})
}

// issue19Frame is an OP_MSG for cmd, compressed with id unless id < 0.
func issue19Frame(t *testing.T, reqID int32, cmd bson.D, id int) []byte {
	t.Helper()
	doc, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(16+5+len(doc)))
	b = binary.LittleEndian.AppendUint32(b, uint32(reqID))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, opMsg)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(append(b, 0), doc...)
	if id < 0 {
		return b
	}
	payload, err := driver.CompressPayload(b[16:], driver.CompressionOpts{Compressor: wiremessage.CompressorID(id), ZlibLevel: 6, ZstdLevel: 6})
	if err != nil {
		t.Fatal(err)
	}
	return issue19Wrap(b, int32(len(b)-16), byte(id), payload)
}

func issue19Wrap(msg []byte, size int32, id byte, payload []byte) []byte {
	out := append([]byte{}, msg[:12]...)
	out = binary.LittleEndian.AppendUint32(out, opCompressed)
	out = append(out, msg[12:16]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(size))
	out = append(append(out, id), payload...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

func issue19Addr(t *testing.T) string {
	t.Helper()
	cs, err := connstring.ParseAndValidate(issue19URI())
	if err != nil || len(cs.Hosts) == 0 {
		t.Fatalf("uri: %v", err)
	}
	return cs.Hosts[0]
}

// A raw compressed request is answered with the same compressor (noop
// included); broken compressed frames close their connection only.
func TestIssue19CompressRawFrames(t *testing.T) {
	e := newEnv(t)
	addr := issue19Addr(t)
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		t.Cleanup(func() { c.Close() })
		return c
	}
	ping := bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}
	c := dial()
	for _, id := range []int{0, 1, 2, 3} {
		if _, err := c.Write(issue19Frame(t, int32(100+id), ping, id)); err != nil {
			t.Fatal(err)
		}
		var hdr [25]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if op := binary.LittleEndian.Uint32(hdr[12:]); op != opCompressed || hdr[24] != byte(id) ||
			binary.LittleEndian.Uint32(hdr[8:]) != uint32(100+id) || binary.LittleEndian.Uint32(hdr[16:]) != opMsg {
			t.Fatalf("compressor %d: reply opcode %d compressor %d", id, op, hdr[24])
		}
		payload := make([]byte, n-25)
		if _, err := io.ReadFull(c, payload); err != nil {
			t.Fatal(err)
		}
		body, err := driver.DecompressPayload(payload, driver.CompressionOpts{Compressor: wiremessage.CompressorID(id), UncompressedSize: int32(binary.LittleEndian.Uint32(hdr[20:]))})
		if err != nil {
			t.Fatal(err)
		}
		if r := bson.Raw(body[5:]); r.Lookup("ok").AsFloat64() != 1 {
			t.Fatalf("compressor %d: %v", id, r)
		}
	}
	good := issue19Frame(t, 7, ping, 1)
	plain := issue19Frame(t, 7, ping, -1)
	bad := map[string][]byte{
		"unknown compressor": issue19Wrap(plain, int32(len(plain)-16), 9, plain[16:]),
		"size mismatch":      issue19Wrap(plain, int32(len(plain)-16)+5, 1, good[25:]),
		"too large":          issue19Wrap(plain, 60_000_000, 0, plain[16:]),
		"nested":             issue19Wrap(good, int32(len(good)-16), 0, good[16:]),
		"corrupt":            issue19Wrap(plain, int32(len(plain)-16), 3, []byte("definitely not zstd")),
	}
	for name, frame := range bad {
		c := dial()
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("%s: connection not closed: %v (%d bytes read)", name, err, n)
		}
		if err := e.cli.Ping(e.ctx, nil); err != nil {
			t.Fatalf("after %s: %v", name, err)
		}
	}
}

// BenchmarkIssue19Compress measures, through the Go driver and the whole
// server, a point read by _id and a find returning 100 documents (~1 KB
// each), uncompressed and with each compressor. wireB/op counts the bytes
// on the client's sockets per operation, handshakes excluded.
func BenchmarkIssue19Compress(b *testing.B) {
	uri := externalURI
	if uri == "" {
		srv, err := server.Start(server.Config{Bind: "127.0.0.1", InMemory: true})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		uri = srv.URI()
	}
	ctx := context.Background()
	setup, err := connect(uri)
	if err != nil {
		b.Fatal(err)
	}
	defer setup.Disconnect(ctx)
	coll := setup.Database("cx_bench_issue19").Collection("c")
	_ = coll.Drop(ctx)
	docs := make([]any, 1000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "name", Value: fmt.Sprintf("user%04d", i)},
			{Key: "email", Value: fmt.Sprintf("user%04d@example.com", i)}, {Key: "tags", Value: bson.A{"red", "green", "blue"}},
			{Key: "group", Value: int32(i % 10)}, {Key: "score", Value: float64(i) * 1.5},
			{Key: "bio", Value: strings.Repeat(fmt.Sprintf("member %d of the benchmark population. ", i), 20)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	defer coll.Drop(ctx)
	for _, shape := range []string{"point", "find100"} {
		for _, comp := range []string{"none", "snappy", "zstd", "zlib"} {
			b.Run(shape+"/"+comp, func(b *testing.B) {
				d := &tallyDialer{}
				opts := options.Client().ApplyURI(uri).SetDialer(d).SetMaxPoolSize(1)
				if comp != "none" {
					opts.SetCompressors([]string{comp})
				}
				cli, err := mongo.Connect(opts)
				if err != nil {
					b.Fatal(err)
				}
				defer cli.Disconnect(ctx)
				c := cli.Database("cx_bench_issue19").Collection("c")
				op := func(i int) {
					if shape == "point" {
						var out bson.Raw
						if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: int32(i % 1000)}}).Decode(&out); err != nil {
							b.Fatal(err)
						}
						return
					}
					cur, err := c.Find(ctx, bson.D{{Key: "group", Value: int32(i % 10)}}, options.Find().SetLimit(100).SetBatchSize(100))
					if err != nil {
						b.Fatal(err)
					}
					var out []bson.Raw
					if err := cur.All(ctx, &out); err != nil || len(out) != 100 {
						b.Fatalf("%d documents: %v", len(out), err)
					}
				}
				op(0) // connect and handshake before the clock starts
				d.mu.Lock()
				d.sent, d.rx = frameTally{}, frameTally{}
				d.mu.Unlock()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					op(i)
				}
				b.StopTimer()
				sent, rx := d.snapshot()
				b.ReportMetric(float64(sent.bytes+rx.bytes)/float64(b.N), "wireB/op")
			})
		}
	}
}
