package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var testCompressors = []struct {
	name string
	id   byte
}{{"noop", CompressorNoop}, {"snappy", CompressorSnappy}, {"zlib", CompressorZlib}, {"zstd", CompressorZstd}}

// compressWith wraps msg in OP_COMPRESSED the way the Go driver does, with
// the driver's own codecs.
func compressWith(t testing.TB, msg []byte, id byte) []byte {
	t.Helper()
	payload, err := driver.CompressPayload(msg[HeaderLen:], driver.CompressionOpts{
		Compressor: wiremessage.CompressorID(id), ZlibLevel: 6, ZstdLevel: 6})
	if err != nil {
		t.Fatal(err)
	}
	return rawCompressed(msg, int32(len(msg)-HeaderLen), id, payload)
}

// rawCompressed builds an OP_COMPRESSED message from the header of msg
// and the given fields, consistent or not.
func rawCompressed(msg []byte, size int32, id byte, payload []byte) []byte {
	out := append([]byte{}, msg[:12]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(OpCompressed))
	out = append(out, msg[12:16]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(size))
	out = append(out, id)
	out = append(out, payload...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// readCompressedReply reads a reply, which must be OP_COMPRESSED with the
// given compressor, and returns its decompressed body document.
func readCompressedReply(t *testing.T, c net.Conn, id byte) (Header, bson.Raw) {
	t.Helper()
	h, msg, err := ReadMessage(c, nil)
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	if h.OpCode != OpCompressed {
		t.Fatalf("reply opcode %d, want OP_COMPRESSED", h.OpCode)
	}
	body := msg[HeaderLen:]
	orig, size, gotID := int32(binary.LittleEndian.Uint32(body)), int32(binary.LittleEndian.Uint32(body[4:])), body[8]
	if gotID != id || orig != OpMsg {
		t.Fatalf("reply compressor %d opcode %d, want compressor %d OP_MSG", gotID, orig, id)
	}
	plain, err := driver.DecompressPayload(body[9:], driver.CompressionOpts{Compressor: wiremessage.CompressorID(id), UncompressedSize: size})
	if err != nil || len(plain) != int(size) {
		t.Fatalf("reply does not decompress (%d bytes, want %d): %v", len(plain), size, err)
	}
	full := make([]byte, HeaderLen, HeaderLen+len(plain))
	binary.LittleEndian.PutUint32(full, uint32(HeaderLen+len(plain)))
	copy(full[4:12], msg[4:12])
	binary.LittleEndian.PutUint32(full[12:], uint32(orig))
	full = append(full, plain...)
	m, err := DecodeOpMsg(full)
	if err != nil {
		t.Fatal(err)
	}
	return h, m.Command
}

func startCompressing(t *testing.T, h Handler, compressors []string) (*Server, string, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	s := NewServer(h, Options{Logger: zap.New(core), Compressors: compressors})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String(), logs
}

// Every compressor round-trips, small and large (a reply bigger than the
// unbudgeted buffers), and the reply uses the request's compressor.
func TestIssue19CompressRoundTrip(t *testing.T) {
	s, addr, _ := startCompressing(t, &echoHandler{}, nil)
	big := strings.Repeat("mayfly compresses ", 40_000) // 720 KB
	c := dial(t, addr)
	for i, tc := range testCompressors {
		for _, payload := range []string{"x", big} {
			msg := driverOpMsg(t, int32(10+i), 0, bson.D{{Key: "ping", Value: int32(1)}, {Key: "p", Value: payload}, {Key: "$db", Value: "admin"}})
			if _, err := c.Write(compressWith(t, msg, tc.id)); err != nil {
				t.Fatal(err)
			}
			h, reply := readCompressedReply(t, c, tc.id)
			if h.ResponseTo != int32(10+i) || reply.Lookup("echo", "p").StringValue() != payload {
				t.Fatalf("%s: reply to %d, payload of %d bytes", tc.name, h.ResponseTo, len(reply.Lookup("echo", "p").StringValue()))
			}
		}
		// An uncompressed request on the same connection: uncompressed reply.
		if h, reply := roundTrip(t, c, ping(t, 7)); h.OpCode != OpMsg || reply.Lookup("ok").Double() != 1 {
			t.Fatalf("%s: plain ping answered with opcode %d: %v", tc.name, h.OpCode, reply)
		}
	}
	in, out := s.CompressedMessages()
	if in != 8 || out != 8 {
		t.Fatalf("compressed messages in %d out %d, want 8 and 8", in, out)
	}
	st := s.CompressionStats()
	for _, name := range []string{"snappy", "zlib", "zstd"} {
		cs := st[name]
		if cs.DecompressorBytesOut <= 2*cs.DecompressorBytesIn || cs.CompressorBytesIn <= 2*cs.CompressorBytesOut {
			t.Errorf("%s: %+v: the repeated payload should compress", name, cs)
		}
	}
	waitFor(t, func() bool { return s.BudgetInUse() == 0 })
}

// A request that decompresses to more than the unbudgeted buffer size
// is charged to the memory budget, which gets it all back afterwards.
func TestIssue19CompressBudget(t *testing.T) {
	held := make(chan int64, 1)
	var s *Server
	s, addr, _ := startCompressing(t, HandlerFunc(func(ctx context.Context, req *Request) bson.Raw {
		held <- s.BudgetInUse()
		r, _ := bson.Marshal(bson.D{{Key: "ok", Value: 1.0}})
		return r
	}), nil)
	msg := driverOpMsg(t, 1, 0, bson.D{{Key: "ping", Value: int32(1)}, {Key: "p", Value: strings.Repeat("a", 8<<20)}, {Key: "$db", Value: "admin"}})
	z := compressWith(t, msg, CompressorZstd)
	if len(z) > unbudgeted {
		t.Fatalf("compressed request of %d bytes: the test wants it unbudgeted", len(z))
	}
	c := dial(t, addr)
	if _, err := c.Write(z); err != nil {
		t.Fatal(err)
	}
	readCompressedReply(t, c, CompressorZstd)
	if h := <-held; h < 8<<20 {
		t.Fatalf("budget in use while the request ran: %d, want at least the 8 MB decompressed", h)
	}
	waitFor(t, func() bool { return s.BudgetInUse() == 0 })
}

// badCompressedFrames are OP_COMPRESSED messages the server must refuse.
func badCompressedFrames(t testing.TB) map[string][]byte {
	msg := ping(t, 5)
	good := compressWith(t, msg, CompressorSnappy)
	size := int32(len(msg) - HeaderLen)
	corrupt := bytes.Clone(good[:len(good)-3]) // the block ends inside a literal
	binary.LittleEndian.PutUint32(corrupt, uint32(len(corrupt)))
	zs := compressWith(t, msg, CompressorZstd)
	zl := compressWith(t, msg, CompressorZlib)
	zlBad := bytes.Clone(zl)
	zlBad[len(zlBad)-1] ^= 0xff // adler32 checksum
	return map[string][]byte{
		"unknownCompressor": rawCompressed(msg, size, 9, msg[HeaderLen:]),
		"corruptSnappy":     corrupt,
		"snappySizeLess":    rawCompressed(msg, size-1, CompressorSnappy, good[HeaderLen+9:]),
		"zstdSizeLess":      rawCompressed(msg, size-1, CompressorZstd, zs[HeaderLen+9:]),
		"zstdSizeMore":      rawCompressed(msg, size+1, CompressorZstd, zs[HeaderLen+9:]),
		"zlibSizeLess":      rawCompressed(msg, size-1, CompressorZlib, zl[HeaderLen+9:]),
		"zlibSizeMore":      rawCompressed(msg, size+1, CompressorZlib, zl[HeaderLen+9:]),
		"zlibChecksum":      zlBad,
		"noopSizeMore":      rawCompressed(msg, size+1, CompressorNoop, msg[HeaderLen:]),
		"tooLarge":          rawCompressed(msg, MaxMessageSize, CompressorZstd, zs[HeaderLen+9:]),
		"negativeSize":      rawCompressed(msg, -1, CompressorNoop, msg[HeaderLen:]),
		"nested":            compressWith(t, compressWith(t, msg, CompressorNoop), CompressorNoop),
		"shortHeader":       rawCompressed(msg, size, 0, nil)[:HeaderLen+5],
	}
}

// Bad compressed frames close their connection, are logged, and the
// server goes on serving, with its budget all returned.
func TestIssue19CompressBadFrames(t *testing.T) {
	s, addr, logs := startCompressing(t, &echoHandler{}, nil)
	for name, frame := range badCompressedFrames(t) {
		t.Run(name, func(t *testing.T) {
			if name == "shortHeader" {
				binary.LittleEndian.PutUint32(frame, uint32(len(frame)))
			}
			before := logs.FilterMessage("invalid compressed message; closing connection").Len()
			c := dial(t, addr)
			if _, err := c.Write(frame); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			if logs.FilterMessage("invalid compressed message; closing connection").Len() != before+1 {
				t.Fatalf("no log line for the bad frame")
			}
			assertServing(t, addr)
		})
	}
	waitFor(t, func() bool { return s.BudgetInUse() == 0 })
}

// hello's compression is negotiated as mongod does: the offered
// compressors the server enables, in the client's order.
func TestIssue19CompressHelloNegotiation(t *testing.T) {
	hello := func(t *testing.T, c net.Conn, name string, comp any) bson.Raw {
		d := bson.D{{Key: name, Value: int32(1)}}
		if comp != nil {
			d = append(d, bson.E{Key: "compression", Value: comp})
		}
		d = append(d, bson.E{Key: "$db", Value: "admin"})
		_, reply := roundTrip(t, c, driverOpMsg(t, 1, 0, d))
		return reply
	}
	list := func(r bson.Raw) []string {
		v, err := r.LookupErr("compression")
		if err != nil {
			return nil
		}
		vals, _ := v.Array().Values()
		out := []string{}
		for _, x := range vals {
			out = append(out, x.StringValue())
		}
		return out
	}
	eq := func(t *testing.T, got, want []string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") || (got == nil) != (want == nil) {
			t.Fatalf("compression %q, want %q", got, want)
		}
	}
	t.Run("default", func(t *testing.T) {
		_, addr, _ := startCompressing(t, &echoHandler{}, nil)
		c := dial(t, addr)
		eq(t, list(hello(t, c, "hello", nil)), nil)
		eq(t, list(hello(t, c, "isMaster", bson.A{"zlib", "lz4", "zstd", "snappy"})), []string{"zlib", "zstd", "snappy"})
		// The connection remembers what it negotiated, as mongod.
		eq(t, list(hello(t, c, "ismaster", nil)), []string{"zlib", "zstd", "snappy"})
		eq(t, list(hello(t, c, "hello", bson.A{"lz4"})), nil)
		eq(t, list(hello(t, c, "hello", nil)), nil)
		eq(t, list(hello(t, c, "hello", bson.A{})), nil)
		eq(t, list(hello(t, dial(t, addr), "ping", bson.A{"zstd"})), nil) // not hello
		r := hello(t, c, "hello", "zstd")
		if errCode(t, r) != 14 || r.Lookup("errmsg").StringValue() != "BSON field 'hello.compression' is the wrong type 'string', expected type 'array'" {
			t.Fatalf("bad compression type: %v", r)
		}
		r = hello(t, c, "isMaster", bson.A{"zstd", int32(1)})
		if errCode(t, r) != 14 || r.Lookup("errmsg").StringValue() != "BSON field 'isMaster.compression.1' is the wrong type 'int', expected type 'string'" {
			t.Fatalf("bad compression element: %v", r)
		}
	})
	t.Run("zstdOnly", func(t *testing.T) {
		cs, err := ParseCompressors("zstd")
		if err != nil {
			t.Fatal(err)
		}
		_, addr, _ := startCompressing(t, &echoHandler{}, cs)
		c := dial(t, addr)
		eq(t, list(hello(t, c, "hello", bson.A{"snappy", "zstd", "zlib"})), []string{"zstd"})
		eq(t, list(hello(t, c, "hello", bson.A{"snappy", "zlib"})), nil)
		// Any compressor the server implements is decompressed, negotiated or not.
		if _, err := c.Write(compressWith(t, ping(t, 3), CompressorSnappy)); err != nil {
			t.Fatal(err)
		}
		readCompressedReply(t, c, CompressorSnappy)
	})
	t.Run("disabled", func(t *testing.T) {
		cs, err := ParseCompressors("disabled")
		if err != nil || cs == nil || len(cs) != 0 {
			t.Fatalf("disabled parses to %q, %v", cs, err)
		}
		_, addr, _ := startCompressing(t, &echoHandler{}, cs)
		eq(t, list(hello(t, dial(t, addr), "hello", bson.A{"snappy", "zstd", "zlib"})), nil)
	})
	t.Run("failedHello", func(t *testing.T) {
		_, addr, _ := startCompressing(t, HandlerFunc(func(ctx context.Context, req *Request) bson.Raw {
			r, _ := bson.Marshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "no"}, {Key: "code", Value: int32(2)}})
			return r
		}), nil)
		eq(t, list(hello(t, dial(t, addr), "hello", bson.A{"zstd"})), nil)
	})
	if _, err := ParseCompressors("snappy,lz4"); err == nil || err.Error() != "Invalid network message compressor specified in configuration: lz4" {
		t.Fatalf("lz4: %v", err)
	}
}

// BenchmarkIssue19Compress measures a point read (a 300-byte reply) and
// a 100-document batch (100 documents of ~1 KB, as a find returns them)
// through the wire layer with each compressor, against uncompressed.
// wireB/op is what crossed the socket per round trip.
func BenchmarkIssue19Compress(b *testing.B) {
	doc := func(i int) bson.D {
		return bson.D{{Key: "_id", Value: int32(i)}, {Key: "name", Value: "user" + strings.Repeat("x", i%7)},
			{Key: "email", Value: "someone@example.com"}, {Key: "tags", Value: bson.A{"red", "green", "blue"}},
			{Key: "bio", Value: strings.Repeat("lorem ipsum dolor sit amet ", 4+i%3)},
			{Key: "score", Value: float64(i) * 1.5}, {Key: "ts", Value: bson.DateTime(1700000000000 + int64(i))}}
	}
	point, _ := bson.Marshal(bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{doc(1)}}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "test.c"}}}, {Key: "ok", Value: 1.0}})
	batch := bson.A{}
	for i := 0; i < 100; i++ {
		d := doc(i)
		d = append(d, bson.E{Key: "body", Value: strings.Repeat("payload text of a document ", 30)})
		batch = append(batch, d)
	}
	hundred, _ := bson.Marshal(bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: batch}, {Key: "id", Value: int64(0)}, {Key: "ns", Value: "test.c"}}}, {Key: "ok", Value: 1.0}})
	for _, shape := range []struct {
		name  string
		reply []byte
	}{{"point", point}, {"find100", hundred}} {
		for _, comp := range []struct {
			name string
			id   int
		}{{"none", -1}, {"snappy", 1}, {"zstd", 3}, {"zlib", 2}} {
			b.Run(shape.name+"/"+comp.name, func(b *testing.B) {
				s := NewServer(HandlerFunc(func(ctx context.Context, req *Request) bson.Raw { return shape.reply }), Options{})
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				go s.Serve(ln)
				defer s.Close()
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				msg := driverOpMsg(b, 1, 0, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "$db", Value: "test"}})
				if comp.id >= 0 {
					msg = compressWith(b, msg, byte(comp.id))
				}
				var buf []byte
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := c.Write(msg); err != nil {
						b.Fatal(err)
					}
					_, reply, err := ReadMessage(c, buf)
					if err != nil {
						b.Fatal(err)
					}
					buf = reply[:0]
				}
				b.StopTimer()
				st := s.Stats()
				b.ReportMetric(float64(st.BytesIn+st.BytesOut)/float64(b.N), "wireB/op")
				b.ReportMetric(float64(len(shape.reply)), "replyB")
			})
		}
	}
}
