package engine

import (
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func TestOpClockNextStrictlyIncreasesWhileTheWallClockStalls(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	c := NewOpClock(func() time.Time { return now })
	if (c.Last() != bson.Timestamp{}) {
		t.Fatalf("Last before any write = %v, want zero", c.Last())
	}
	a := c.Next()
	b := c.Next()
	if a != (bson.Timestamp{T: 1_900_000_000, I: 1}) || b != (bson.Timestamp{T: 1_900_000_000, I: 2}) {
		t.Fatalf("Next, Next = %v, %v", a, b)
	}
	now = now.Add(-time.Hour) // the wall clock steps back
	if d := c.Next(); d != (bson.Timestamp{T: 1_900_000_000, I: 3}) {
		t.Fatalf("Next after the wall clock stepped back = %v", d)
	}
	now = now.Add(2 * time.Hour)
	if d := c.Next(); d != (bson.Timestamp{T: 1_900_003_600, I: 1}) {
		t.Fatalf("Next after the wall clock moved on = %v", d)
	}
	if c.Last() != (bson.Timestamp{T: 1_900_003_600, I: 1}) {
		t.Fatalf("Last = %v", c.Last())
	}
}

func TestOpClockAdvanceFollowsGossipWithinTheDriftLimit(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	c := NewOpClock(func() time.Time { return now })
	c.Next()
	if err := c.Advance(bson.Timestamp{T: 1_900_000_100, I: 7}); err != nil {
		t.Fatal(err)
	}
	if n := c.Next(); n != (bson.Timestamp{T: 1_900_000_100, I: 8}) {
		t.Fatalf("Next after Advance = %v", n)
	}
	if err := c.Advance(bson.Timestamp{T: 5, I: 1}); err != nil || c.Last().T != 1_900_000_100 {
		t.Fatalf("an older gossiped time moved the clock: %v %v", err, c.Last())
	}
	err := c.Advance(bson.Timestamp{T: 1_900_000_000 + 366*24*3600, I: 1})
	if !mongoerr.Is(err, mongoerr.ClusterTimeFailsRateLimiter) {
		t.Fatalf("a cluster time a year ahead: %v", err)
	}
}

func TestOpClockConcurrentNextNeverRepeats(t *testing.T) {
	c := NewOpClock(nil)
	var mu sync.Mutex
	seen := map[bson.Timestamp]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				ts := c.Next()
				mu.Lock()
				if seen[ts] {
					t.Errorf("timestamp %v handed out twice", ts)
				}
				seen[ts] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
