package compat

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIssue21CollStatsWhilePurging: while the reaper purges, collStats,
// dbStats and $collStats count exactly the live documents at every moment.
// They subtract the expired backlog from the stored count; read apart, a
// batch purged during the backlog scan was subtracted twice (once from
// each) and the count came out a batch (256) short.
func TestIssue21CollStatsWhilePurging(t *testing.T) {
	mayflyOnly(t)
	e := newClockEnv(t)
	if !e.inProcess() {
		t.Skip("needs the in-process server's fake clock to expire thousands of documents at once")
	}
	e.run(bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 1}})
	const expiring, live = 12000, 500
	docs := make([]any, 0, expiring+live)
	for i := 0; i < expiring; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}})
	}
	for i := 0; i < live; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: expiring + i}, {Key: "ttl", Value: -1}})
	}
	e.insert("c", docs...)
	e.advance(2 * time.Second)
	deadline := time.Now().Add(2 * time.Minute)
	polls := 0
	for {
		cs := e.run(bson.D{{Key: "collStats", Value: "c"}})
		backlog := val(t, cs, "ttl.expiredBacklog").AsInt64()
		if n := val(t, cs, "count").AsInt64(); n != live {
			t.Fatalf("poll %d: collStats count %d while the reaper purges (backlog %d), want %d", polls, n, backlog, live)
		}
		ds := e.run(bson.D{{Key: "dbStats", Value: 1}})
		if n := val(t, ds, "objects").AsInt64(); n != live {
			t.Fatalf("poll %d: dbStats objects %d while the reaper purges, want %d", polls, n, live)
		}
		polls++
		if backlog == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reaper did not purge %d documents in 2 minutes (backlog %d)", expiring, backlog)
		}
	}
	t.Logf("%d polls while purging", polls)
	if polls < 3 {
		t.Errorf("the purge was over after %d polls: nothing was measured while it ran", polls)
	}
	eq(t, "count after the purge", e.count("c", bson.D{}), int64(live))
}
