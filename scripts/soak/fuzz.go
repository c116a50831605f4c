package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// fuzzSeeds are well-formed frames of the kinds drivers send (the same
// families as wire/fuzz_test.go's seeds): OP_MSG commands with and without
// document sequences, checksum and moreToCome flags, deep nesting, and
// OP_QUERY handshakes.
func fuzzSeeds() [][]byte {
	ping := bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}}
	nest := bson.D{{Key: "v", Value: int32(1)}}
	for i := 0; i < 40; i++ {
		nest = bson.D{{Key: "x", Value: nest}}
	}
	seeds := [][]byte{
		opMsgFrame(1, 0, ping),
		opMsgFrame(3, 2, ping), // moreToCome
		opMsgFrame(4, 0, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.A{"x", 1.5, nil}}}}}, {Key: "$db", Value: "fuzz"}}),
		opMsgFrame(5, 0, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: int32(0)}}}}}, {Key: "$db", Value: "fuzz"}}),
		opMsgFrame(6, 0, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}}}}}}, {Key: "cursor", Value: bson.D{}}, {Key: "$db", Value: "fuzz"}}),
		opMsgFrame(7, 0, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}}}, {Key: "$db", Value: "fuzz"}}),
		opMsgFrame(8, 0, bson.D{{Key: "hello", Value: int32(1)}, {Key: "x", Value: nest}, {Key: "$db", Value: "admin"}}),
	}
	// OP_MSG with a checksum flag and a trailing CRC-sized tail.
	ck := opMsgFrame(2, 1, ping)
	ck = append(ck, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(ck, uint32(len(ck)))
	seeds = append(seeds, ck)
	// OP_MSG insert with a kind-1 document sequence.
	ins := opMsgFrame(9, 0, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "fuzz"}})
	doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: "s"}, {Key: "v", Value: int64(7)}})
	seq := []byte{1, 0, 0, 0, 0}
	seq = append(seq, "documents\x00"...)
	seq = append(seq, doc...)
	binary.LittleEndian.PutUint32(seq[1:], uint32(len(seq)-1))
	ins = append(ins, seq...)
	binary.LittleEndian.PutUint32(ins, uint32(len(ins)))
	seeds = append(seeds, ins)
	// OP_QUERY handshakes, as old drivers and mongosh's first message.
	for i, q := range []bson.D{{{Key: "isMaster", Value: int32(1)}}, {{Key: "$query", Value: bson.D{{Key: "hello", Value: int32(1)}}}}} {
		body, _ := bson.Marshal(q)
		b := make([]byte, 16, 64+len(body))
		binary.LittleEndian.PutUint32(b[4:], uint32(10+i))
		binary.LittleEndian.PutUint32(b[12:], opQuery)
		b = append(b, 0, 0, 0, 0)
		b = append(b, "admin.$cmd\x00"...)
		b = append(b, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
		b = append(b, body...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		seeds = append(seeds, b)
	}
	return seeds
}

var interesting32 = []uint32{0, 1, 4, 5, 15, 16, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff, 16 << 20, 16<<20 + 1, 48_000_000, 48_000_001}

// mutate returns a mutated copy of a seed.
func mutate(rng *rand.Rand, seeds [][]byte) []byte {
	b := bytes.Clone(seeds[rng.IntN(len(seeds))])
	for k := 1 + rng.IntN(4); k > 0; k-- {
		switch rng.IntN(7) {
		case 0: // flip bits
			if len(b) > 0 {
				i := rng.IntN(len(b))
				b[i] ^= 1 << rng.IntN(8)
			}
		case 1: // an interesting byte
			if len(b) > 0 {
				b[rng.IntN(len(b))] = []byte{0, 1, 0x7f, 0x80, 0xff, 0x03, 0x04, 0x10}[rng.IntN(8)]
			}
		case 2: // an interesting int32 (lengths, counts, flags)
			if len(b) >= 4 {
				i := rng.IntN(len(b) - 3)
				binary.LittleEndian.PutUint32(b[i:], interesting32[rng.IntN(len(interesting32))])
			}
		case 3: // truncate
			if len(b) > 1 {
				b = b[:rng.IntN(len(b))]
			}
		case 4: // append random bytes
			extra := make([]byte, rng.IntN(64))
			for i := range extra {
				extra[i] = byte(rng.IntN(256))
			}
			b = append(b, extra...)
		case 5: // splice with another seed
			o := seeds[rng.IntN(len(seeds))]
			if len(b) > 0 && len(o) > 0 {
				b = append(b[:rng.IntN(len(b))], o[rng.IntN(len(o)):]...)
			}
		case 6: // duplicate a slice
			if len(b) > 2 {
				i := rng.IntN(len(b) - 1)
				j := i + 1 + rng.IntN(len(b)-i-1)
				b = append(b[:j], append(bytes.Clone(b[i:j]), b[j:]...)...)
			}
		}
	}
	// Mostly keep the length field honest, so that the decoders behind
	// framing get the bytes.
	if len(b) >= 4 && rng.IntN(10) < 8 {
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
	}
	return b
}

// fuzz sends mutated frames from a few connections for a phase. The
// server may refuse anything and close connections; it must not exit.
func (s *soak) fuzz(ctx context.Context) error {
	seeds := fuzzSeeds()
	phaseCtx, cancel := context.WithTimeout(ctx, s.cfg.phase)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		rng := rand.New(rand.NewPCG(s.rng.Uint64(), uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sent, closed int64
			defer func() {
				mu.Lock()
				s.rep.fuzzFrames += sent
				s.rep.fuzzClosed += closed
				mu.Unlock()
			}()
			buf := make([]byte, 64<<10)
			var c net.Conn
			silent := 0
			for phaseCtx.Err() == nil && s.srv.alive() {
				if c == nil {
					var err error
					if c, err = net.DialTimeout("tcp", s.srv.addr, time.Second); err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					silent = 0
				}
				f := mutate(rng, seeds)
				c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write(f); err != nil {
					c.Close()
					c, closed = nil, closed+1
					continue
				}
				sent++
				c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
				_, err := c.Read(buf)
				switch {
				case err == nil:
					silent = 0
				case errors.Is(err, os.ErrDeadlineExceeded):
					// No reply (moreToCome, or the server waits for the
					// rest of a frame whose length was inflated): a few of
					// those and the stream is given up.
					if silent++; silent > 4 {
						c.Close()
						c = nil
					}
				default:
					c.Close()
					c, closed = nil, closed+1
				}
			}
			if c != nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	s.rep.fuzzRuns++
	// The server is still up and serving.
	if s.srv.alive() {
		client, err := s.connect(1)
		if err == nil {
			pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = client.Database("admin").RunCommand(pctx, bson.D{{Key: "ping", Value: 1}}).Err()
			pcancel()
			disconnect(client)
		}
		if err != nil {
			s.rep.fuzzUnserved++
		}
	}
	s.logf("fuzz: %d frames sent so far, %d connections closed by the server", s.rep.fuzzFrames, s.rep.fuzzClosed)
	return s.ensureUp("fuzz phase")
}
