package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkReaperPurge times one reaper pass (Engine.RunTTLPass) over an
// expired set of n documents of ~150 bytes, on in-memory Pebble with the
// fake clock. The ns/doc metric must not grow with n: batches resume where
// the previous one stopped instead of rescanning (and range-deleting) the
// expiry index from its start, which made a pass quadratic.
//
//	go test ./engine -run '^$' -bench ReaperPurge -benchtime 1x
func BenchmarkReaperPurge(b *testing.B) {
	for _, n := range []int{10_000, 40_000, 160_000} {
		b.Run(fmt.Sprintf("expired=%d", n), func(b *testing.B) {
			ctx := context.Background()
			payload := strings.Repeat("x", 100)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ts := startServer(b)
				db := ts.db("bench")
				if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "exp"}, {Key: "defaultTimeToLive", Value: 60}}).Err(); err != nil {
					b.Fatal(err)
				}
				c := db.Collection("exp")
				for lo := 0; lo < n; lo += 1000 {
					docs := make([]any, 0, 1000)
					for j := lo; j < min(lo+1000, n); j++ {
						docs = append(docs, bson.D{{Key: "_id", Value: j}, {Key: "p", Value: payload}})
					}
					if _, err := c.InsertMany(ctx, docs); err != nil {
						b.Fatal(err)
					}
				}
				ts.clock.Advance(2 * time.Minute)
				b.StartTimer()
				got, err := ts.e.RunTTLPass(ctx)
				b.StopTimer()
				if err != nil || got != int64(n) {
					b.Fatalf("pass purged %d of %d: %v", got, n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/doc")
		})
	}
}
