package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// reaperCrashConfig: how many kill -9 cycles and how many expiring
// documents per cycle. -short keeps it to 2 cycles of 3000;
// MAYFLY_REAPER_CYCLES and MAYFLY_REAPER_DOCS override both.
func reaperCrashConfig(t *testing.T) (cycles, docs int) {
	cycles, docs = 3, 20000
	if testing.Short() {
		cycles, docs = 2, 3000
	}
	for _, v := range []struct {
		env string
		dst *int
	}{{"MAYFLY_REAPER_CYCLES", &cycles}, {"MAYFLY_REAPER_DOCS", &docs}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", v.env, s)
			}
			*v.dst = n
		}
	}
	return cycles, docs
}

// reapClient is a driver connection to one mayfly process.
type reapClient struct {
	t      *testing.T
	client *mongo.Client
	db     *mongo.Database
}

func dialReap(t *testing.T, addr string) *reapClient {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true").SetTimeout(60 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return &reapClient{t: t, client: client, db: client.Database("reap")}
}

func (rc *reapClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rc.client.Disconnect(ctx)
}

func (rc *reapClient) run(cmd bson.D) bson.Raw {
	rc.t.Helper()
	raw, err := rc.db.RunCommand(context.Background(), cmd).Raw()
	if err != nil {
		rc.t.Fatalf("%v: %v", cmd[0].Key, err)
	}
	return raw
}

// num reads an integer field at a dotted path of a reply.
func num(t *testing.T, raw bson.Raw, path string) int64 {
	t.Helper()
	v, err := raw.LookupErr(strings.Split(path, ".")...)
	if err != nil {
		t.Fatalf("reply has no %s: %v", path, err)
	}
	n, ok := v.AsInt64OK()
	if !ok {
		t.Fatalf("%s is %v, not a number", path, v)
	}
	return n
}

// ttlFigures are the reaper counters of serverStatus: metrics.ttl and
// mayfly's ttl section.
type ttlFigures struct{ deleted, passes, backlog, reclaimed int64 }

func (rc *reapClient) ttlStatus() ttlFigures {
	rc.t.Helper()
	st := rc.run(bson.D{{Key: "serverStatus", Value: 1}})
	return ttlFigures{
		deleted:   num(rc.t, st, "metrics.ttl.deletedDocuments"),
		passes:    num(rc.t, st, "metrics.ttl.passes"),
		backlog:   num(rc.t, st, "ttl.expiredBacklog"),
		reclaimed: num(rc.t, st, "ttl.reclaimedBytes"),
	}
}

// ids returns the _ids a find returns, sorted (hint "" = no hint).
func (rc *reapClient) ids(filter bson.D, hint string) []string {
	rc.t.Helper()
	opts := options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}})
	if hint != "" {
		opts.SetHint(hint)
	}
	cur, err := rc.db.Collection("c").Find(context.Background(), filter, opts)
	if err != nil {
		rc.t.Fatalf("find %v hint %q: %v", filter, hint, err)
	}
	var out []string
	for cur.Next(context.Background()) {
		out = append(out, cur.Current.Lookup("_id").StringValue())
	}
	if err := cur.Err(); err != nil {
		rc.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestIssue21ReaperKill9: kill -9 while the reaper purges (and, every
// other cycle, just as its pass ends and the requested compaction runs)
// leaves no expired document visible, by any access path, and no live
// document deleted; after the restart the reaper finishes the purge, down
// to exactly the live documents (spec §8.3).
//
// The collection has DefaultTTL 2 s. Each cycle inserts documents that
// inherit it, documents that opt out (ttl -1) or outlive the test (ttl
// 3600), and documents that expire through a MongoDB TTL index on a Date
// field (ttl -1, so only the index expires them) next to ones whose Date
// is far ahead. --reaper-rate slows the reaper so that the kill lands in
// the middle of its pass.
func TestIssue21ReaperKill9(t *testing.T) {
	cycles, docs := reaperCrashConfig(t)
	nLive, nTix := docs/4, docs/10
	// A pass over one cycle's expiring documents takes about 4 s.
	rate := max((docs+nTix)/4, 256)
	dir := t.TempDir()
	args := []string{"--dbpath", dir, "--reaper-rate", strconv.Itoa(rate)}
	p := launch(t, args...)
	rc := dialReap(t, p.addr)
	rc.run(bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 2}})
	rc.run(bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "kind", Value: 1}}}, {Key: "name", Value: "kind_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "name", Value: "n_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: 1}},
	}}})
	pad := strings.Repeat("x", 1500) // enough bytes to pass the 4 MiB compaction threshold
	live := map[string]bool{}
	var liveTix []string // live documents with a Date in the TTL index
	far := bson.NewDateTimeFromTime(time.Now().Add(240 * time.Hour))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 21))

	for cycle := 0; cycle < cycles; cycle++ {
		// Insert, batch by batch, journaled: what is lost to the kill must
		// be the reaper's doing, not unsynced inserts.
		var batch bson.A
		flush := func() {
			if len(batch) == 0 {
				return
			}
			rc.run(bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: batch}, {Key: "writeConcern", Value: bson.D{{Key: "j", Value: true}}}})
			batch = nil
		}
		add := func(d bson.D) {
			batch = append(batch, d)
			if len(batch) == 500 {
				flush()
			}
		}
		for i := 0; i < docs; i++ {
			add(bson.D{{Key: "_id", Value: fmt.Sprintf("e/%d/%d", cycle, i)}, {Key: "kind", Value: "exp"}, {Key: "n", Value: i}, {Key: "pad", Value: pad}})
			if i < nLive {
				id := fmt.Sprintf("l/%d/%d", cycle, i)
				ttlv := int32(-1)
				if i%2 == 1 {
					ttlv = 3600
				}
				add(bson.D{{Key: "_id", Value: id}, {Key: "kind", Value: "live"}, {Key: "n", Value: i}, {Key: "ttl", Value: ttlv}, {Key: "pad", Value: pad}})
				live[id] = true
			}
			if i < nTix {
				id := fmt.Sprintf("t/%d/%d", cycle, i)
				add(bson.D{{Key: "_id", Value: id}, {Key: "kind", Value: "tix"}, {Key: "n", Value: i}, {Key: "ttl", Value: -1},
					{Key: "at", Value: bson.NewDateTimeFromTime(time.Now())}, {Key: "pad", Value: pad}})
				id = fmt.Sprintf("f/%d/%d", cycle, i)
				add(bson.D{{Key: "_id", Value: id}, {Key: "kind", Value: "future"}, {Key: "n", Value: i}, {Key: "ttl", Value: -1},
					{Key: "at", Value: bson.A{far, "not a date"}}, {Key: "pad", Value: pad}})
				live[id] = true
				liveTix = append(liveTix, id)
			}
		}
		flush()
		// Every expiring document of this cycle is expired by then: _ts is
		// in whole seconds, DefaultTTL 2 s, the TTL index 1 s.
		allExpired := time.Now().Add(3*time.Second + 100*time.Millisecond)

		// Wait for the reaper to be purging, then kill it: mid-pass on
		// even cycles; on odd ones just after its last batch, while it
		// waits out the rate limit and then asks for the compaction of
		// what it deleted. The documents stored (collStats count plus the
		// expired backlog) fall batch by batch as it purges.
		stored := func() int64 {
			cs := rc.run(bson.D{{Key: "collStats", Value: "c"}})
			return num(t, cs, "count") + num(t, cs, "ttl.expiredBacklog")
		}
		expiring := int64(docs + nTix)
		all := int64(len(live)) + expiring
		if n := stored(); n > all {
			t.Fatalf("cycle %d: %d documents stored after the inserts, want at most %d", cycle, n, all)
		}
		deadline := time.Now().Add(2 * time.Minute)
		killAfter := time.Duration(100+rng.IntN(1500)) * time.Millisecond
		if cycle%2 == 1 {
			killAfter = time.Duration(rng.IntN(400)) * time.Millisecond
		}
		var seenAt time.Time
		for seenAt.IsZero() || time.Since(seenAt) < killAfter {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: the reaper did not purge within 2 minutes (%+v)", cycle, rc.ttlStatus())
			}
			n := stored()
			if seenAt.IsZero() && (cycle%2 == 0 && n < all || cycle%2 == 1 && n == int64(len(live))) {
				seenAt = time.Now()
			}
			time.Sleep(10 * time.Millisecond)
		}
		left := stored() - int64(len(live))
		before := rc.ttlStatus()
		rc.close()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
		t.Logf("cycle %d: killed with %d of %d expiring documents still stored (backlog %d); %d passes had ended, reclaiming %d bytes",
			cycle, left, expiring, before.backlog, before.passes, before.reclaimed)

		p = launch(t, args...)
		restarted := time.Now()
		rc = dialReap(t, p.addr)
		if d := time.Until(allExpired); d > 0 {
			time.Sleep(d)
		}
		verifyReaped(t, rc, cycle, "after restart", live, liveTix)
		// The reaper finishes the purge: the backlog drains and the stored
		// documents are exactly the live ones.
		for {
			f := rc.ttlStatus()
			cs := rc.run(bson.D{{Key: "collStats", Value: "c"}})
			if f.backlog == 0 && num(t, cs, "ttl.expiredBacklog") == 0 {
				t.Logf("cycle %d: the backlog drained %v after the restart", cycle, time.Since(restarted).Round(10*time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: the reaper did not finish the purge after restart: %+v", cycle, f)
			}
			time.Sleep(50 * time.Millisecond)
		}
		verifyReaped(t, rc, cycle, "after the purge", live, liveTix)
	}
	rc.close()
}

// verifyReaped asserts that the collection holds exactly the live
// documents, whichever way it is read: a collection scan, each secondary
// index (the TTL index included), counts and aggregation.
func verifyReaped(t *testing.T, rc *reapClient, cycle int, when string, live map[string]bool, liveTix []string) {
	t.Helper()
	var want []string
	for id := range live {
		want = append(want, id)
	}
	sort.Strings(want)
	wantTix := append([]string(nil), liveTix...)
	sort.Strings(wantTix)
	same := func(what string, got, want []string) {
		t.Helper()
		if len(got) == len(want) {
			eq := true
			for i := range got {
				if got[i] != want[i] {
					eq = false
					break
				}
			}
			if eq {
				return
			}
		}
		have := map[string]bool{}
		for _, id := range got {
			have[id] = true
		}
		var missing, extra []string
		for _, id := range want {
			if !have[id] {
				missing = append(missing, id)
			}
			delete(have, id)
		}
		for id := range have {
			extra = append(extra, id)
		}
		sort.Strings(extra)
		t.Fatalf("cycle %d, %s: %s returned %d documents, want %d; %d live missing (e.g. %.5v), %d unexpected (e.g. %.5v)",
			cycle, when, what, len(got), len(want), len(missing), missing, len(extra), extra)
	}
	same("collection scan", rc.ids(bson.D{}, ""), want)
	same("scan of kind_1", rc.ids(bson.D{{Key: "kind", Value: bson.D{{Key: "$gte", Value: ""}}}}, "kind_1"), want)
	same("scan of n_1", rc.ids(bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 0}}}}, "n_1"), want)
	same("scan of the TTL index at_1", rc.ids(bson.D{{Key: "at", Value: bson.D{{Key: "$exists", Value: true}}}}, "at_1"), wantTix)
	same("expired kinds by kind_1", rc.ids(bson.D{{Key: "kind", Value: bson.D{{Key: "$in", Value: bson.A{"exp", "tix"}}}}}, "kind_1"), nil)
	ctx := context.Background()
	coll := rc.db.Collection("c")
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != int64(len(want)) {
		t.Fatalf("cycle %d, %s: countDocuments %d (%v), want %d", cycle, when, n, err, len(want))
	}
	if n, err := coll.EstimatedDocumentCount(ctx); err != nil || n != int64(len(want)) {
		t.Fatalf("cycle %d, %s: estimatedDocumentCount %d (%v), want %d", cycle, when, n, err, len(want))
	}
	cnt := rc.run(bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "kind", Value: "exp"}}}, {Key: "hint", Value: "kind_1"}})
	if n := num(t, cnt, "n"); n != 0 {
		t.Fatalf("cycle %d, %s: count of expired kind via kind_1 = %d, want 0", cycle, when, n)
	}
	cs := rc.run(bson.D{{Key: "collStats", Value: "c"}})
	if n := num(t, cs, "count"); n != int64(len(want)) {
		t.Fatalf("cycle %d, %s: collStats count %d, want %d", cycle, when, n, len(want))
	}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$kind"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var groups []bson.M
	if err := cur.All(ctx, &groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if k := g["_id"]; k == "exp" || k == "tix" {
			t.Fatalf("cycle %d, %s: $group sees %v expired documents of kind %v", cycle, when, g["n"], k)
		}
	}
}
