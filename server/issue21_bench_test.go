package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/wire"
)

func issue21RSS() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "VmRSS:" {
			kb, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func issue21OpMsg(id int32, cmd bson.D) []byte {
	doc, _ := bson.Marshal(cmd)
	b := binary.LittleEndian.AppendUint32(nil, uint32(21+len(doc)))
	b = binary.LittleEndian.AppendUint32(b, uint32(id))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(wire.OpMsg))
	b = binary.LittleEndian.AppendUint32(b, 0)
	return append(append(b, 0), doc...)
}

// BenchmarkIssue21HostileEndToEnd runs the whole server (engine, Pebble
// in memory) with default limits against 1000 hostile connections of one
// kind and reports the process's peak heap and RSS, and how long a driver
// connected before the flood takes to insert and read back a document
// while they are there (run with -benchtime=1x):
//   - bigframe: a declared 48 MB frame, 64 KiB of it sent, then silence;
//   - unread:   32 pipelined finds returning 1 MB each, never read;
//   - unread8MB: one find returning 8 MB, never read.
func BenchmarkIssue21HostileEndToEnd(b *testing.B) {
	for _, kind := range []string{"bigframe", "unread", "unread8MB"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				srv, err := Start(Config{InMemory: true})
				if err != nil {
					b.Fatal(err)
				}
				cli, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				coll := cli.Database("bench").Collection("big")
				for i := range 8 {
					if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: make([]byte, 1<<20)}}); err != nil {
						b.Fatal(err)
					}
				}
				batch := int32(1)
				if kind == "unread8MB" {
					batch = 8
				}
				var reqs []byte
				for i := range 32 {
					reqs = append(reqs, issue21OpMsg(int32(i), bson.D{{Key: "find", Value: "big"}, {Key: "batchSize", Value: batch}, {Key: "singleBatch", Value: true}, {Key: "$db", Value: "bench"}})...)
				}
				runtime.GC()
				var peakHeap, peakRSS atomic.Uint64
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					var ms runtime.MemStats
					for {
						runtime.ReadMemStats(&ms)
						peakHeap.Store(max(peakHeap.Load(), ms.HeapAlloc))
						peakRSS.Store(max(peakRSS.Load(), issue21RSS()))
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond):
						}
					}
				}()
				var cs []net.Conn
				for i := range 1000 {
					c, err := net.Dial("tcp", srv.Addr())
					if err != nil {
						b.Fatal(err)
					}
					cs = append(cs, c)
					switch kind {
					case "bigframe":
						hdr := binary.LittleEndian.AppendUint32(nil, wire.MaxMessageSize)
						hdr = binary.LittleEndian.AppendUint32(hdr, uint32(i))
						hdr = binary.LittleEndian.AppendUint32(hdr, 0)
						hdr = binary.LittleEndian.AppendUint32(hdr, uint32(wire.OpMsg))
						c.Write(append(hdr, make([]byte, 64<<10)...))
					case "unread":
						go c.Write(reqs)
					case "unread8MB":
						go c.Write(reqs[:len(reqs)/32])
					}
				}
				time.Sleep(3 * time.Second)
				start := time.Now()
				opCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
				_, err = coll.InsertOne(opCtx, bson.D{{Key: "_id", Value: "probe"}})
				if err == nil {
					err = coll.FindOne(opCtx, bson.D{{Key: "_id", Value: "probe"}}).Err()
				}
				cancel()
				took := time.Since(start)
				close(stop)
				<-sampled
				b.ReportMetric(float64(peakHeap.Load())/1e6, "peak-heap-MB")
				b.ReportMetric(float64(peakRSS.Load())/1e6, "peak-RSS-MB")
				b.ReportMetric(float64(took.Milliseconds()), "driver-ms")
				fmt.Fprintf(os.Stderr, "%s: 1000 connections, peak heap %.0f MB, peak RSS %.0f MB, driver insert+find %v (err %v)\n",
					kind, float64(peakHeap.Load())/1e6, float64(peakRSS.Load())/1e6, took, err)
				for _, c := range cs {
					c.Close()
				}
				cli.Disconnect(ctx)
				srv.Close()
			}
		})
	}
}
