package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// OP_COMPRESSED, as mongod serves it (the wire compression specification
// and mongod's MessageCompressorManager):
//
//   - a client offers compressors in hello/isMaster's `compression` array;
//     the reply's `compression` lists those of them that
//     --networkMessageCompressors enables, in the client's order (absent
//     when none). A hello without `compression` repeats the list the
//     connection last negotiated, as mongod does.
//   - a compressed request names its compressor in its own header, so the
//     server decompresses whatever compressor it implements, negotiated
//     or not (noop included), and compresses the reply with that same
//     compressor. Uncompressed requests get uncompressed replies. Drivers
//     never compress hello, the auth commands and the like; the server
//     needs no list of them.
//   - a compressed frame that cannot be decompressed ends the connection,
//     as mongod's session does, and is logged.
//
// The codecs are klauspost/compress's: s2 in its snappy-compatible block
// format, zstd and zlib.

// Compressor ids of the specification.
const (
	CompressorNoop   byte = 0
	CompressorSnappy byte = 1
	CompressorZlib   byte = 2
	CompressorZstd   byte = 3
)

// compressedHeaderLen is what OP_COMPRESSED adds after the standard
// header: originalOpcode, uncompressedSize and compressorId.
const compressedHeaderLen = 9

// DefaultCompressors is mongod's default --networkMessageCompressors.
const DefaultCompressors = "snappy,zstd,zlib"

var compressorIDs = map[string]byte{"noop": CompressorNoop, "snappy": CompressorSnappy, "zlib": CompressorZlib, "zstd": CompressorZstd}

var compressorNames = [...]string{CompressorNoop: "noop", CompressorSnappy: "snappy", CompressorZlib: "zlib", CompressorZstd: "zstd"}

// ParseCompressors parses --networkMessageCompressors (net.compression.compressors):
// a comma-separated list of snappy, zstd, zlib (and noop), or "disabled".
// The result is never nil: an empty list disables compression.
func ParseCompressors(s string) ([]string, error) {
	if s == "disabled" {
		return []string{}, nil
	}
	out := []string{}
	for _, name := range strings.Split(s, ",") {
		if _, ok := compressorIDs[name]; !ok {
			// mongod's startup error (MessageCompressorRegistry::finalizeSupportedCompressors).
			return nil, fmt.Errorf("Invalid network message compressor specified in configuration: %s", name)
		}
		out = append(out, name)
	}
	return out, nil
}

// compressionStats counts, per compressor, the bytes that went through it
// (mongod's serverStatus network.compression).
type compressionStats struct {
	compIn, compOut, decompIn, decompOut [4]atomic.Int64
	msgsIn, msgsOut                      atomic.Int64
}

// CompressorStats are one compressor's figures, as serverStatus's
// network.compression.<name>: the compressor's bytes in (uncompressed) and
// out (compressed), the decompressor's bytes in (compressed) and out.
type CompressorStats struct {
	CompressorBytesIn, CompressorBytesOut     int64
	DecompressorBytesIn, DecompressorBytesOut int64
}

// CompressionStats returns the figures of snappy, zstd, zlib and noop, by name.
func (s *Server) CompressionStats() map[string]CompressorStats {
	m := make(map[string]CompressorStats, len(compressorNames))
	for id, name := range compressorNames {
		m[name] = CompressorStats{
			CompressorBytesIn: s.comp.compIn[id].Load(), CompressorBytesOut: s.comp.compOut[id].Load(),
			DecompressorBytesIn: s.comp.decompIn[id].Load(), DecompressorBytesOut: s.comp.decompOut[id].Load(),
		}
	}
	return m
}

// CompressedMessages is how many OP_COMPRESSED messages were received and sent.
func (s *Server) CompressedMessages() (in, out int64) {
	return s.comp.msgsIn.Load(), s.comp.msgsOut.Load()
}

// compressState is a connection's compression state.
type compressState struct {
	// reply is the compressor of the request being served, if it came
	// compressed: its reply goes out compressed with it.
	reply      byte
	compressed bool
	// negotiated is what the last hello with `compression` agreed on.
	negotiated []string
	// zin holds a decompressed request, zout a compressed reply.
	zin, zout []byte
}

// badCompressed is a compressed frame that cannot be served.
type badCompressed struct{ msg string }

func (e *badCompressed) Error() string { return e.msg }

var (
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxMessageSize), zstd.WithDecoderMaxWindow(MaxMessageSize))
		if err != nil {
			panic(err)
		}
		return d
	})
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(8<<20))
		if err != nil {
			panic(err)
		}
		return e
	})
	zlibReaders sync.Pool // io.ReadCloser implementing zlib.Resetter
	zlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}
)

// decompress turns the OP_COMPRESSED message msg into the message it
// wraps, in the connection's zin buffer. The decompressed size is bounded
// by maxMessageSizeBytes and charged to the memory budget before anything
// is allocated.
func (c *conn) decompress(ctx context.Context, h Header, msg []byte) (Header, []byte, error) {
	ch, err := parseCompressed(msg)
	if err != nil {
		return h, nil, err
	}
	n := ch.size + HeaderLen
	buf := c.comp.zin
	if cap(buf) < n {
		if n > unbudgeted {
			if err := c.chargeBudget(ctx, int64(largeSize(n)), n); err != nil {
				return h, nil, err
			}
			buf = getLarge(n)
		} else {
			buf = make([]byte, 0, smallBuf(cap(buf), n))
		}
		c.comp.zin = buf
	}
	out, err := ch.decompress(h, buf)
	if err != nil {
		return h, nil, err
	}
	c.srv.comp.msgsIn.Add(1)
	c.srv.comp.decompIn[ch.id].Add(int64(len(ch.src)))
	c.srv.comp.decompOut[ch.id].Add(int64(ch.size))
	c.comp.compressed, c.comp.reply = true, ch.id
	return parseHeader(out), out, nil
}

// compressedMsg is the OP_COMPRESSED header after the standard one.
type compressedMsg struct {
	orig int32 // originalOpcode
	size int   // uncompressedSize
	id   byte  // compressorId
	src  []byte
}

// parseCompressed checks an OP_COMPRESSED message's own header with
// mongod's messages: what it announces must be servable before anything
// is allocated for it.
func parseCompressed(msg []byte) (compressedMsg, error) {
	body := msg[HeaderLen:]
	if len(body) < compressedHeaderLen {
		return compressedMsg{}, &badCompressed{"Invalid compressed message header"}
	}
	ch := compressedMsg{
		orig: int32(binary.LittleEndian.Uint32(body)),
		size: int(int32(binary.LittleEndian.Uint32(body[4:]))),
		id:   body[8],
		src:  body[compressedHeaderLen:],
	}
	switch {
	case int(ch.id) >= len(compressorNames):
		return ch, &badCompressed{"Compression algorithm specified in message is not available"}
	case ch.size < 0 || ch.size+HeaderLen > MaxMessageSize:
		return ch, &badCompressed{"Decompressed message would be larger than maximum message size"}
	case ch.orig == OpCompressed:
		return ch, &badCompressed{"OP_COMPRESSED message wraps another OP_COMPRESSED message"}
	}
	return ch, nil
}

// decompress writes the wrapped message, with h's ids and the original
// opcode in its header, into buf (whose capacity must hold it).
func (ch compressedMsg) decompress(h Header, buf []byte) ([]byte, error) {
	n := ch.size + HeaderLen
	buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(n))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(h.RequestID))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(h.ResponseTo))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(ch.orig))
	out, err := decodeBody(ch.id, buf[:HeaderLen:n], ch.src, ch.size)
	if err != nil {
		return nil, &badCompressed{fmt.Sprintf("%s decompression failed: %v", compressorNames[ch.id], err)}
	}
	if len(out) != n {
		return nil, &badCompressed{"Decompressing message returned less data than expected"}
	}
	return out, nil
}

// decodeBody appends the decompression of src to dst, whose capacity is
// exactly what size allows: nothing may decode to more.
func decodeBody(id byte, dst, src []byte, size int) ([]byte, error) {
	switch id {
	case CompressorNoop:
		if len(src) != size {
			return dst, nil // the length check reports it
		}
		return append(dst, src...), nil
	case CompressorSnappy:
		dl, err := s2.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if dl != size {
			return dst, nil
		}
		out, err := s2.Decode(dst[len(dst):cap(dst)], src)
		if err != nil {
			return nil, err
		}
		return dst[:len(dst)+len(out)], nil
	case CompressorZstd:
		// A frame that declares its size must declare the announced one:
		// refused before decoding (and before the decoder would complain
		// on stderr about the capacity it was given).
		var zh zstd.Header
		if err := zh.Decode(src); err != nil {
			return nil, err
		}
		if zh.HasFCS && zh.FrameContentSize != uint64(size) {
			return dst, nil
		}
		return zstdDecoder().DecodeAll(src, dst)
	case CompressorZlib:
		r, _ := zlibReaders.Get().(io.ReadCloser)
		br := bytes.NewReader(src)
		var err error
		if r == nil {
			r, err = zlib.NewReader(br)
		} else {
			err = r.(zlib.Resetter).Reset(br, nil)
		}
		if err != nil {
			return nil, err
		}
		defer zlibReaders.Put(r)
		m, err := io.ReadFull(r, dst[len(dst):cap(dst)])
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return nil, err
		}
		// The stream must end here, and its checksum must match.
		var one [1]byte
		if k, err := r.Read(one[:]); k != 0 {
			return dst, nil // longer than declared
		} else if err != io.EOF {
			if err == nil {
				err = io.ErrNoProgress
			}
			return nil, err
		}
		return dst[:len(dst)+m], nil
	}
	return nil, fmt.Errorf("unknown compressor %d", id)
}

// chargeBudget takes n bytes of the memory budget for a buffer of a
// message of length bytes, waiting as a frame's growth does.
func (c *conn) chargeBudget(ctx context.Context, n int64, length int) error {
	l := &c.srv.lim
	if !l.budget.tryAcquire(n, false) {
		wctx, cancel := context.WithTimeout(ctx, l.BudgetWait)
		defer cancel()
		if err := l.budget.acquire(wctx, n, c.lim.held.Load(), false); err != nil {
			return &errNoBudget{length: length, wait: l.BudgetWait}
		}
	}
	c.lim.held.Add(min(n, l.MemoryBudget))
	return nil
}

// smallBuf is the capacity of a buffer, kept for the connection's life,
// that must grow from old to hold n <= unbudgeted bytes: idle
// connections keep no more than they have needed.
func smallBuf(old, n int) int {
	return min(unbudgeted, max(n, 2*old, 4096))
}

// maxCompressedLen bounds what compressing n bytes can produce.
func maxCompressedLen(id byte, n int) int {
	switch id {
	case CompressorSnappy:
		return s2.MaxEncodedLen(n)
	case CompressorNoop:
		return n
	}
	return n + n>>6 + 1024 // above zstd's and zlib's bounds
}

// compressReply wraps the reply message msg in OP_COMPRESSED with the
// request's compressor. As mongod, a reply whose compressed form could
// exceed maxMessageSizeBytes is sent as it is.
func (c *conn) compressReply(msg []byte) []byte {
	id := c.comp.reply
	src := msg[HeaderLen:]
	bound := HeaderLen + compressedHeaderLen + maxCompressedLen(id, len(src))
	if bound > MaxMessageSize || len(msg) < HeaderLen {
		return msg
	}
	buf := c.comp.zout
	if cap(buf) < bound {
		if bound > unbudgeted {
			// The reply exists already: its compressed copy is counted,
			// over the budget if need be, as replies are.
			n := int64(largeSize(bound))
			c.srv.lim.budget.force(n)
			c.lim.held.Add(n)
			buf = getLarge(bound)
		} else {
			buf = make([]byte, 0, smallBuf(cap(buf), bound))
		}
		c.comp.zout = buf
	}
	buf = append(buf[:0], msg[:12]...) // length is patched below
	buf = binary.LittleEndian.AppendUint32(buf, uint32(OpCompressed))
	buf = append(buf, msg[12:16]...) // originalOpcode
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(src)))
	buf = append(buf, id)
	switch id {
	case CompressorNoop:
		buf = append(buf, src...)
	case CompressorSnappy:
		enc := s2.EncodeSnappy(buf[len(buf):cap(buf)], src)
		buf = buf[:len(buf)+len(enc)]
	case CompressorZstd:
		buf = zstdEncoder().EncodeAll(src, buf)
	case CompressorZlib:
		w := zlibWriters.Get().(*zlib.Writer)
		aw := appendWriter{buf}
		w.Reset(&aw)
		_, err1 := w.Write(src)
		err2 := w.Close()
		w.Reset(nil)
		zlibWriters.Put(w)
		if err1 != nil || err2 != nil {
			return msg
		}
		buf = aw.b
	}
	binary.LittleEndian.PutUint32(buf, uint32(len(buf)))
	c.comp.zout = buf[:0]
	s := &c.srv.comp
	s.msgsOut.Add(1)
	s.compIn[id].Add(int64(len(src)))
	s.compOut[id].Add(int64(len(buf) - HeaderLen - compressedHeaderLen))
	return buf
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// endCompressed forgets the request's compressor and drops large buffers
// after a request, as afterRequest does for the frame buffers (the budget
// they held is returned with the rest).
func (c *conn) endCompressed() {
	c.comp.compressed = false
	if cap(c.comp.zin) > unbudgeted {
		putLarge(c.comp.zin)
		c.comp.zin = nil
	}
	if cap(c.comp.zout) > unbudgeted {
		putLarge(c.comp.zout)
		c.comp.zout = nil
	}
}

// badCompressedFrame logs a compressed frame that cannot be served; the
// connection then closes, as mongod ends the session.
func (c *conn) badCompressedFrame(log *zap.Logger, h Header, err error) {
	if bc, ok := err.(*badCompressed); ok {
		log.Warn("invalid compressed message; closing connection", zap.Int32("msgLen", h.Length), zap.Int32("requestId", h.RequestID), zap.String("errmsg", bc.msg))
		return
	}
	logIOFailure(log, "read", &c.srv.lim, err)
}

// helloCommand reports whether a command is hello under one of its names.
func helloCommand(cmd bson.Raw) (string, bool) {
	el, err := cmd.IndexErr(0)
	if err != nil {
		return "", false
	}
	switch k := el.Key(); k {
	case "hello", "isMaster", "ismaster":
		return k, true
	}
	return "", false
}

// checkHelloCompression validates hello's `compression` as mongod's IDL
// parser does (an array of strings): the returned error is the reply.
func checkHelloCompression(name string, cmd bson.Raw) ([]string, bool, *mongoerr.Error) {
	v, err := cmd.LookupErr("compression")
	if err != nil {
		return nil, false, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, true, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.compression' is the wrong type '%s', expected type 'array'", name, typeName(v.Type))
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, true, mongoerr.New(mongoerr.InvalidBSON, "invalid compression array: %v", err)
	}
	names := make([]string, 0, len(vals))
	for i, e := range vals {
		s, ok := e.StringValueOK()
		if !ok {
			return nil, true, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.compression.%d' is the wrong type '%s', expected type 'string'", name, i, typeName(e.Type))
		}
		names = append(names, s)
	}
	return names, true, nil
}

// typeName is the $type alias of a BSON type, as mongod's messages name it.
func typeName(t bson.Type) string {
	switch t {
	case bson.TypeDouble:
		return "double"
	case bson.TypeString:
		return "string"
	case bson.TypeEmbeddedDocument:
		return "object"
	case bson.TypeArray:
		return "array"
	case bson.TypeBinary:
		return "binData"
	case bson.TypeObjectID:
		return "objectId"
	case bson.TypeBoolean:
		return "bool"
	case bson.TypeDateTime:
		return "date"
	case bson.TypeNull:
		return "null"
	case bson.TypeRegex:
		return "regex"
	case bson.TypeInt32:
		return "int"
	case bson.TypeTimestamp:
		return "timestamp"
	case bson.TypeInt64:
		return "long"
	case bson.TypeDecimal128:
		return "decimal"
	}
	return t.String()
}

// negotiate runs hello's compression negotiation for req, when it is a
// hello: a refused `compression` field is answered with its error
// without running the command (ok is false); otherwise after is called on
// the command's reply to append `compression` to a successful one.
func (c *conn) negotiate(req *Request) (after func(bson.Raw) bson.Raw, errReply bson.Raw) {
	name, ok := helloCommand(req.Command)
	if !ok {
		return nil, nil
	}
	offered, present, me := checkHelloCompression(name, req.Command)
	if me != nil {
		return nil, marshalReply(me.Reply())
	}
	return func(reply bson.Raw) bson.Raw {
		if ok, err := reply.LookupErr("ok"); err != nil || !truthy(ok) {
			return reply
		}
		if present {
			c.comp.negotiated = c.comp.negotiated[:0]
			for _, o := range offered {
				if c.srv.compressorEnabled(o) {
					c.comp.negotiated = append(c.comp.negotiated, o)
				}
			}
		}
		if len(c.comp.negotiated) == 0 {
			return reply
		}
		return appendStringArray(reply, "compression", c.comp.negotiated)
	}, nil
}

func (s *Server) compressorEnabled(name string) bool {
	for _, n := range s.compressors {
		if n == name {
			return true
		}
	}
	return false
}

func truthy(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeDouble:
		return v.Double() != 0
	case bson.TypeInt32:
		return v.Int32() != 0
	case bson.TypeInt64:
		return v.Int64() != 0
	case bson.TypeBoolean:
		return v.Boolean()
	}
	return false
}

// appendStringArray adds the field key: [vals...] to the document doc,
// before its ok field (where mongod's hello has compression), or at its end.
func appendStringArray(doc bson.Raw, key string, vals []string) bson.Raw {
	at := len(doc) - 1
	if elems, err := doc.Elements(); err == nil {
		off := 4
		for _, e := range elems {
			if e.Key() == "ok" {
				at = off
				break
			}
			off += len(e)
		}
	}
	field := []byte{byte(bson.TypeArray)}
	field = append(field, key...)
	field = append(field, 0)
	start := len(field)
	field = append(field, 0, 0, 0, 0)
	for i, v := range vals {
		field = append(field, byte(bson.TypeString))
		field = fmt.Appendf(field, "%d", i)
		field = append(field, 0)
		field = binary.LittleEndian.AppendUint32(field, uint32(len(v)+1))
		field = append(field, v...)
		field = append(field, 0)
	}
	field = append(field, 0)
	binary.LittleEndian.PutUint32(field[start:], uint32(len(field)-start))
	out := make([]byte, 0, len(doc)+len(field))
	out = append(out, doc[:at]...)
	out = append(out, field...)
	out = append(out, doc[at:]...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// run is call with hello's compression negotiation around it.
func (c *conn) run(ctx context.Context, log *zap.Logger, req *Request) bson.Raw {
	after, errReply := c.negotiate(req)
	if errReply != nil {
		return errReply
	}
	reply := c.call(ctx, log, req)
	if after != nil {
		reply = after(reply)
	}
	return reply
}
