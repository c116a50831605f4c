package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// fuzzSeeds are real driver messages plus a few hand-broken ones; with
// plain `go test` they run as ordinary test cases.
func fuzzSeeds(t testing.TB) [][]byte {
	ping := bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}
	ins := bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "test"}}
	docs := []bson.D{{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.A{int32(1), "x", bson.D{{Key: "b", Value: nil}}}}}}
	seeds := [][]byte{
		driverOpMsg(t, 1, 0, ping),
		driverOpMsg(t, 2, wiremessage.ChecksumPresent, ping),
		driverOpMsg(t, 3, wiremessage.MoreToCome, ping),
		driverOpMsg(t, 4, 0, ins, seq{"documents", docs}),
		driverOpMsg(t, 5, 0, bson.D{{Key: "x", Value: nest(50)}}),
		driverOpQuery(t, 6, "admin.$cmd", bson.D{{Key: "ismaster", Value: int32(1)}}),
		driverOpQuery(t, 7, "admin.$cmd", bson.D{{Key: "$query", Value: bson.D{{Key: "hello", Value: int32(1)}}}}),
		{},
		{16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0},
		{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0},
	}
	// OP_COMPRESSED: every compressor, and the frames the server refuses.
	for _, id := range []byte{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd} {
		seeds = append(seeds, compressWith(t, driverOpMsg(t, 8, 0, ins, seq{"documents", docs}), id))
	}
	for _, bad := range badCompressedFrames(t) {
		seeds = append(seeds, bad)
	}
	return seeds
}

// FuzzReadMessage feeds arbitrary streams through framing and then through
// the decoder the opcode selects, as the connection loop does. Nothing may
// panic, and anything accepted must be a self-consistent document.
func FuzzReadMessage(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
		f.Add(append(bytes.Clone(s), s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		for i := 0; i < 4; i++ {
			h, msg, err := ReadMessage(r, buf)
			if err != nil {
				return
			}
			buf = msg[:0]
			if int(h.Length) != len(msg) || len(msg) < HeaderLen {
				t.Fatalf("header length %d but %d bytes", h.Length, len(msg))
			}
			switch h.OpCode {
			case OpMsg:
				if m, err := DecodeOpMsg(msg); err == nil {
					checkDoc(t, m.Command)
				}
			case OpQuery:
				if q, err := DecodeOpQuery(msg); err == nil {
					checkDoc(t, q.Command)
				}
			case OpCompressed:
				// As the connection loop: the announced size is checked
				// before the buffer for it is allocated.
				ch, err := parseCompressed(msg)
				if err != nil {
					continue
				}
				out, err := ch.decompress(h, make([]byte, 0, ch.size+HeaderLen))
				if err != nil {
					continue
				}
				if len(out) != ch.size+HeaderLen || parseHeader(out).OpCode != ch.orig {
					t.Fatalf("decompressed %d bytes, announced %d", len(out), ch.size)
				}
				if ch.orig == OpMsg {
					if m, err := DecodeOpMsg(out); err == nil {
						checkDoc(t, m.Command)
					}
				}
			}
		}
	})
}

// FuzzDecodeOpMsg mutates OP_MSG bodies (after the header, which is kept
// consistent so that the interesting code is reached).
func FuzzDecodeOpMsg(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		if len(s) > HeaderLen {
			f.Add(s[HeaderLen:])
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := make([]byte, HeaderLen, HeaderLen+len(body))
		binary.LittleEndian.PutUint32(msg, uint32(HeaderLen+len(body)))
		binary.LittleEndian.PutUint32(msg[12:], uint32(OpMsg))
		msg = append(msg, body...)
		m, err := DecodeOpMsg(msg)
		if err != nil {
			return
		}
		checkDoc(t, m.Command)
	})
}

// checkDoc asserts that an accepted command decodes fully with the driver.
func checkDoc(t *testing.T, raw bson.Raw) {
	t.Helper()
	if err := validateDoc(raw, MaxMessageSize, MaxNestingDepth+commandDepthOverhead+1); err != nil {
		t.Fatalf("accepted command fails validation: %v", err)
	}
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		t.Fatalf("accepted command does not decode: %v", err)
	}
}
