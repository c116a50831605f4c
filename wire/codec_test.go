package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// The messages in these tests are built with the driver's own wiremessage
// package, i.e. byte for byte what the Go driver puts on the wire.

type seq struct {
	id   string
	docs []bson.D
}

func mustDoc(t testing.TB, d any) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// driverOpMsg builds an OP_MSG as the driver does (operation.go's
// createMsgWireMessage): header, flags, a kind-0 body, then kind-1
// sequences, and a CRC-32C when ChecksumPresent is set.
func driverOpMsg(t testing.TB, reqID int32, flags wiremessage.MsgFlag, body any, seqs ...seq) []byte {
	t.Helper()
	idx, b := wiremessage.AppendHeaderStart(nil, reqID, 0, wiremessage.OpMsg)
	b = wiremessage.AppendMsgFlags(b, flags)
	b = wiremessage.AppendMsgSectionType(b, wiremessage.SingleDocument)
	b = append(b, mustDoc(t, body)...)
	for _, s := range seqs {
		b = wiremessage.AppendMsgSectionType(b, wiremessage.DocumentSequence)
		var sidx int32
		sidx, b = bsoncore.ReserveLength(b)
		b = append(b, s.id...)
		b = append(b, 0)
		for _, d := range s.docs {
			b = append(b, mustDoc(t, d)...)
		}
		b = bsoncore.UpdateLength(b, sidx, int32(len(b[sidx:])))
	}
	if flags&wiremessage.ChecksumPresent != 0 {
		b = binary.LittleEndian.AppendUint32(b, 0) // room, patched below
	}
	b = bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
	if flags&wiremessage.ChecksumPresent != 0 {
		sum := crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli))
		binary.LittleEndian.PutUint32(b[len(b)-4:], sum)
	}
	return b
}

// driverOpQuery builds the handshake OP_QUERY as the driver's handshake
// does (flags, namespace, skip 0, numberToReturn -1, query).
func driverOpQuery(t testing.TB, reqID int32, ns string, query any) []byte {
	t.Helper()
	idx, b := wiremessage.AppendHeaderStart(nil, reqID, 0, wiremessage.OpQuery)
	b = wiremessage.AppendQueryFlags(b, 0)
	b = wiremessage.AppendQueryFullCollectionName(b, ns)
	b = wiremessage.AppendQueryNumberToSkip(b, 0)
	b = wiremessage.AppendQueryNumberToReturn(b, -1)
	b = append(b, mustDoc(t, query)...)
	return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
}

func TestDecodeOpMsg(t *testing.T) {
	type want struct {
		cmd            bson.D
		moreToCome     bool
		exhaustAllowed bool
	}
	docs := []bson.D{{{Key: "_id", Value: int32(1)}}, {{Key: "_id", Value: int32(2)}, {Key: "x", Value: "y"}}}
	tests := []struct {
		name string
		msg  []byte
		want want
	}{
		{
			name: "body only",
			msg:  driverOpMsg(t, 7, 0, bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}),
			want: want{cmd: bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}},
		},
		{
			name: "insert with a documents sequence",
			msg: driverOpMsg(t, 8, 0, bson.D{{Key: "insert", Value: "c"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "test"}},
				seq{"documents", docs}),
			want: want{cmd: bson.D{{Key: "insert", Value: "c"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "test"},
				{Key: "documents", Value: bson.A{docs[0], docs[1]}}}},
		},
		{
			name: "two sequences, one empty",
			msg: driverOpMsg(t, 9, 0, bson.D{{Key: "x", Value: int32(1)}, {Key: "$db", Value: "d"}},
				seq{"a", docs[:1]}, seq{"b", nil}),
			want: want{cmd: bson.D{{Key: "x", Value: int32(1)}, {Key: "$db", Value: "d"},
				{Key: "a", Value: bson.A{docs[0]}}, {Key: "b", Value: bson.A{}}}},
		},
		{
			name: "checksum present and valid",
			msg:  driverOpMsg(t, 10, wiremessage.ChecksumPresent, bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}),
			want: want{cmd: bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}},
		},
		{
			name: "moreToCome (w:0 endSessions)",
			msg:  driverOpMsg(t, 11, wiremessage.MoreToCome, bson.D{{Key: "endSessions", Value: bson.A{}}, {Key: "$db", Value: "admin"}}),
			want: want{cmd: bson.D{{Key: "endSessions", Value: bson.A{}}, {Key: "$db", Value: "admin"}}, moreToCome: true},
		},
		{
			name: "exhaustAllowed is tolerated",
			msg:  driverOpMsg(t, 12, wiremessage.ExhaustAllowed, bson.D{{Key: "hello", Value: int32(1)}, {Key: "$db", Value: "admin"}}),
			want: want{cmd: bson.D{{Key: "hello", Value: int32(1)}, {Key: "$db", Value: "admin"}}, exhaustAllowed: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeOpMsg(tc.msg)
			if err != nil {
				t.Fatalf("DecodeOpMsg: %v", err)
			}
			var got bson.D
			if err := bson.Unmarshal(m.Command, &got); err != nil {
				t.Fatal(err)
			}
			wantRaw := mustDoc(t, tc.want.cmd)
			if !bytes.Equal(m.Command, wantRaw) {
				t.Errorf("command = %v, want %v", got, tc.want.cmd)
			}
			if m.MoreToCome() != tc.want.moreToCome || m.ExhaustAllowed() != tc.want.exhaustAllowed {
				t.Errorf("moreToCome=%v exhaustAllowed=%v, want %v %v", m.MoreToCome(), m.ExhaustAllowed(), tc.want.moreToCome, tc.want.exhaustAllowed)
			}
			if m.Header.RequestID != int32(binary.LittleEndian.Uint32(tc.msg[4:])) {
				t.Errorf("requestID = %d", m.Header.RequestID)
			}
			// The command must not alias the message buffer: handlers keep it.
			for i := range tc.msg {
				tc.msg[i] = 0xff
			}
			if !bytes.Equal(m.Command, wantRaw) {
				t.Error("command aliases the message buffer")
			}
		})
	}
}

// nest returns a document nested depth levels deep: {a: {a: … {} }}.
func nest(depth int) bson.D {
	d := bson.D{}
	for i := 1; i < depth; i++ {
		d = bson.D{{Key: "a", Value: d}}
	}
	return d
}

func TestDecodeOpMsgErrors(t *testing.T) {
	ping := bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}
	good := driverOpMsg(t, 1, 0, ping)
	patch := func(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	fixLen := func(b []byte) []byte { b = bytes.Clone(b); binary.LittleEndian.PutUint32(b, uint32(len(b))); return b }

	tests := []struct {
		name string
		msg  []byte
		code int32
		text string
	}{
		{"bad checksum", patch(driverOpMsg(t, 1, wiremessage.ChecksumPresent, ping), func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), mongoerr.ProtocolError, "checksum mismatch"},
		{"unknown required flag bit", patch(good, func(b []byte) []byte { b[16] |= 1 << 3; return b }), mongoerr.ProtocolError, "Unrecognized required flags"},
		{"no body section", fixLen(good[:20]), mongoerr.ProtocolError, "exactly one body"},
		{"two body sections", fixLen(append(bytes.Clone(good), append([]byte{0}, mustDoc(t, ping)...)...)), mongoerr.ProtocolError, "Multiple body sections"},
		{"unknown section kind", fixLen(append(bytes.Clone(good), 2)), mongoerr.ProtocolError, "Unknown section kind 2"},
		{"body length past the end", patch(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[21:], 9999); return b }), mongoerr.InvalidBSON, "length"},
		{"body with a bad element type", patch(good, func(b []byte) []byte { b[25] = 0x77; return b }), mongoerr.InvalidBSON, "invalid BSON"},
		{"body missing its terminator", patch(good, func(b []byte) []byte { b[len(b)-1] = 1; return b }), mongoerr.InvalidBSON, "invalid BSON"},
		{"duplicate sequence", driverOpMsg(t, 1, 0, ping, seq{"d", nil}, seq{"d", nil}), mongoerr.ProtocolError, "Duplicate document sequence"},
		{"sequence clashes with a body field", driverOpMsg(t, 1, 0, ping, seq{"ping", nil}), mongoerr.InvalidBSON, "Duplicate field name"},
		{"too deep", driverOpMsg(t, 1, 0, bson.D{{Key: "x", Value: nest(MaxNestingDepth + commandDepthOverhead + 1)}}), mongoerr.Overflow, "nested object depth"},
		{"sequence document too deep", driverOpMsg(t, 1, 0, ping, seq{"documents", []bson.D{nest(MaxNestingDepth + 1)}}), mongoerr.Overflow, "nested object depth"},
		{"truncated sequence document", fixLen(append(bytes.Clone(good), 1, 11, 0, 0, 0, 'd', 0, 9, 0, 0, 0, 0)), mongoerr.InvalidBSON, "length"},
		{"sequence size too large", fixLen(append(bytes.Clone(good), 1, 99, 0, 0, 0, 'd', 0)), mongoerr.ProtocolError, "invalid document sequence size"},
		{"length field disagrees", patch(good, func(b []byte) []byte { b[0]++; return b }), mongoerr.ProtocolError, "not an OP_MSG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeOpMsg(tc.msg)
			var me *mongoerr.Error
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *mongoerr.Error", err)
			}
			if me.Code != tc.code || !strings.Contains(me.Msg, tc.text) {
				t.Errorf("err = %d %q, want %d containing %q", me.Code, me.Msg, tc.code, tc.text)
			}
		})
	}

	// Depth exactly at the limit is accepted (mongod's 200 for user docs).
	if _, err := DecodeOpMsg(driverOpMsg(t, 1, 0, ping, seq{"documents", []bson.D{nest(MaxNestingDepth)}})); err != nil {
		t.Errorf("document at the depth limit refused: %v", err)
	}
}

func TestDecodeOpQuery(t *testing.T) {
	handshake := bson.D{{Key: "ismaster", Value: int32(1)}, {Key: "helloOk", Value: true}, {Key: "client", Value: bson.D{{Key: "driver", Value: bson.D{{Key: "name", Value: "nodejs"}}}}}}
	tests := []struct {
		name   string
		msg    []byte
		db     string
		isCmd  bool
		cmd    bson.D
		errHas string
	}{
		{"handshake on admin.$cmd", driverOpQuery(t, 3, "admin.$cmd", handshake), "admin", true,
			append(bson.D{}, append(handshake, bson.E{Key: "$db", Value: "admin"})...), ""},
		{"$query wrapper with read preference", driverOpQuery(t, 4, "test.$cmd", bson.D{
			{Key: "$query", Value: bson.D{{Key: "isMaster", Value: int32(1)}}},
			{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}},
		}), "test", true, bson.D{{Key: "isMaster", Value: int32(1)},
			{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}, {Key: "$db", Value: "test"}}, ""},
		{"collection query is not a command", driverOpQuery(t, 5, "test.coll", bson.D{}), "", false, bson.D{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := DecodeOpQuery(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if q.DB != tc.db || q.IsCommand != tc.isCmd || q.NumberToReturn != -1 {
				t.Errorf("db=%q isCommand=%v ntr=%d", q.DB, q.IsCommand, q.NumberToReturn)
			}
			if !bytes.Equal(q.Command, mustDoc(t, tc.cmd)) {
				t.Errorf("command = %v, want %v", q.Command, tc.cmd)
			}
		})
	}
	bad := driverOpQuery(t, 6, "admin.$cmd", handshake)
	if _, err := DecodeOpQuery(bad[:len(bad)-3]); err == nil {
		t.Error("truncated OP_QUERY accepted")
	}
}

func TestReplyEncoding(t *testing.T) {
	doc := mustDoc(t, bson.D{{Key: "ok", Value: 1.0}})
	msg := AppendOpMsgReply(nil, 42, 7, doc)
	length, reqID, respTo, op, rem, ok := wiremessage.ReadHeader(msg)
	if !ok || int(length) != len(msg) || reqID != 42 || respTo != 7 || op != wiremessage.OpMsg {
		t.Fatalf("header: %d %d %d %v", length, reqID, respTo, op)
	}
	flags, rem, _ := wiremessage.ReadMsgFlags(rem)
	st, rem, _ := wiremessage.ReadMsgSectionType(rem)
	body, rem, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
	if flags != 0 || st != wiremessage.SingleDocument || !ok || !bytes.Equal(body, doc) || len(rem) != 0 {
		t.Errorf("OP_MSG reply: flags=%v section=%v body=%v rest=%d", flags, st, body, len(rem))
	}

	msg = AppendOpReply(nil, 43, 8, 0, doc)
	length, _, respTo, op, rem, ok = wiremessage.ReadHeader(msg)
	if !ok || int(length) != len(msg) || respTo != 8 || op != wiremessage.OpReply {
		t.Fatalf("OP_REPLY header: %d %d %v", length, respTo, op)
	}
	rflags, rem, _ := wiremessage.ReadReplyFlags(rem)
	cursorID, rem, _ := wiremessage.ReadReplyCursorID(rem)
	from, rem, _ := wiremessage.ReadReplyStartingFrom(rem)
	n, rem, _ := wiremessage.ReadReplyNumberReturned(rem)
	docs, _, ok := wiremessage.ReadReplyDocuments(rem)
	if rflags != 0 || cursorID != 0 || from != 0 || n != 1 || !ok || len(docs) != 1 || !bytes.Equal(docs[0], doc) {
		t.Errorf("OP_REPLY: flags=%v cursor=%d from=%d n=%d docs=%d", rflags, cursorID, from, n, len(docs))
	}
}

func TestReadMessage(t *testing.T) {
	good := driverOpMsg(t, 1, 0, bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}})
	// Two messages back to back come out one at a time.
	r := bytes.NewReader(append(bytes.Clone(good), good...))
	for i := 0; i < 2; i++ {
		h, msg, err := ReadMessage(r, nil)
		if err != nil || !bytes.Equal(msg, good) || h.OpCode != OpMsg {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, _, err := ReadMessage(r, nil); err != io.EOF {
		t.Errorf("at end: %v, want io.EOF", err)
	}
	if _, _, err := ReadMessage(bytes.NewReader(good[:len(good)-1]), nil); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated body: %v", err)
	}
	if _, _, err := ReadMessage(bytes.NewReader(good[:7]), nil); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated header: %v", err)
	}
	for _, n := range []uint32{0, 15, MaxMessageSize + 1, 0xffffffff} {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b, n)
		var fe *FrameError
		if _, _, err := ReadMessage(bytes.NewReader(b), nil); !errors.As(err, &fe) || fe.Err.Code != mongoerr.ProtocolError {
			t.Errorf("length %d: %v, want a ProtocolError FrameError", n, err)
		}
	}
}
