package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// kill9Config is how many kill -9 cycles to run and how long clients write
// in each. -short keeps it to 2 × 300 ms; MAYFLY_KILL9_CYCLES and
// MAYFLY_KILL9_CYCLE_MS override both for a soak.
func kill9Config(t *testing.T) (cycles int, cycle time.Duration) {
	cycles, ms := 3, 1000
	if testing.Short() {
		cycles, ms = 2, 300
	}
	if v := os.Getenv("MAYFLY_KILL9_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MAYFLY_KILL9_CYCLES=%q: want a positive integer", v)
		}
		cycles = n
	}
	if v := os.Getenv("MAYFLY_KILL9_CYCLE_MS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MAYFLY_KILL9_CYCLE_MS=%q: want a positive integer", v)
		}
		ms = n
	}
	return cycles, time.Duration(ms) * time.Millisecond
}

// ack is one acknowledged insert: its _id and when the reply arrived.
type ack struct {
	id string
	at time.Time
}

// writeUntilKilled runs writers goroutines per write concern, inserting
// one document per command (pausing pace between them) until the server
// stops answering, and returns the acknowledged inserts per write concern
// name.
func writeUntilKilled(t *testing.T, addr string, cycle int, wcs []namedWC, writers int, pace time.Duration, stop <-chan struct{}) map[string][]ack {
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true").
		SetMaxPoolSize(uint64(len(wcs) * writers)).SetServerSelectionTimeout(time.Second).SetTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		client.Disconnect(ctx)
	}()
	db := client.Database("kill9")
	var (
		mu   sync.Mutex
		acks = map[string][]ack{}
		wg   sync.WaitGroup
	)
	for _, wc := range wcs {
		for g := 0; g < writers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("%s/%d/%d/%d", wc.name, cycle, g, n)
					// Once the server is killed nothing more can be
					// acknowledged: a command started then must not wait
					// for a server to come back.
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					err := db.RunCommand(ctx, bson.D{
						{Key: "insert", Value: "c"},
						{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}}},
						{Key: "writeConcern", Value: wc.wc},
					}).Err()
					cancel()
					if err != nil {
						return // the server is gone (or going): nothing more is acknowledged
					}
					at := time.Now()
					mu.Lock()
					acks[wc.name] = append(acks[wc.name], ack{id, at})
					mu.Unlock()
					if pace > 0 {
						time.Sleep(pace)
					}
				}
			}()
		}
	}
	<-stop
	wg.Wait()
	return acks
}

type namedWC struct {
	name string
	wc   bson.D
}

// presentIDs returns every _id in kill9.c.
func presentIDs(t *testing.T, addr string) map[string]bool {
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cur, err := client.Database("kill9").Collection("c").Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for cur.Next(ctx) {
		out[cur.Current.Lookup("_id").StringValue()] = true
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// kill9Cycles starts mayfly on one dbpath, lets concurrent clients insert
// with each write concern for a cycle, kills the process with SIGKILL at
// once, restarts it on the same dbpath and hands what was acknowledged,
// when the kill happened and what survived to check.
func kill9Cycles(t *testing.T, wcs []namedWC, writers int, pace, minCycle time.Duration, extraArgs []string, check func(cycle int, acks map[string][]ack, killedAt time.Time, present map[string]bool)) {
	cycles, cycleLen := kill9Config(t)
	if cycleLen < minCycle && os.Getenv("MAYFLY_KILL9_CYCLE_MS") == "" {
		cycleLen = minCycle
	}
	dir := t.TempDir()
	args := append([]string{"--dbpath", dir}, extraArgs...)
	p := launch(t, args...)
	for cycle := 0; cycle < cycles; cycle++ {
		stop := make(chan struct{})
		var acks map[string][]ack
		done := make(chan struct{})
		go func() { acks = writeUntilKilled(t, p.addr, cycle, wcs, writers, pace, stop); close(done) }()
		time.Sleep(cycleLen)
		// No clean shutdown: the process dies at once, replies in flight
		// included.
		killedAt := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
		close(stop)
		<-done
		p = launch(t, args...)
		check(cycle, acks, killedAt, presentIDs(t, p.addr))
	}
}

// TestIssue21Kill9EveryJournaledSpelling: a write acknowledged with j or
// fsync — in every spelling mongod accepts as true (safeBool: true, 1,
// 1.0, NumberLong(1)) — is on stable storage before the reply, so SIGKILL
// at any moment loses none of them.
func TestIssue21Kill9EveryJournaledSpelling(t *testing.T) {
	wcs := []namedWC{
		{"j-true", bson.D{{Key: "j", Value: true}}},
		{"j-int32", bson.D{{Key: "j", Value: int32(1)}}},
		{"j-double", bson.D{{Key: "j", Value: 1.0}}},
		{"j-int64", bson.D{{Key: "j", Value: int64(1)}}},
		{"w1-j-int32", bson.D{{Key: "w", Value: int32(1)}, {Key: "j", Value: int32(1)}}},
		{"fsync-true", bson.D{{Key: "fsync", Value: true}}},
		{"fsync-int32", bson.D{{Key: "fsync", Value: int32(1)}}},
	}
	total, lost := map[string]int{}, map[string]int{}
	// The longest background sync interval, so that what survives is what
	// the write concern itself made durable.
	kill9Cycles(t, wcs, 2, 0, 0, []string{"--journalCommitInterval", "500"}, func(cycle int, acks map[string][]ack, _ time.Time, present map[string]bool) {
		for name, as := range acks {
			total[name] += len(as)
			for _, a := range as {
				if !present[a.id] {
					lost[name]++
					if lost[name] <= 3 {
						t.Errorf("cycle %d: acknowledged %s insert %s lost by kill -9", cycle, name, a.id)
					}
				}
			}
		}
	})
	for _, wc := range wcs {
		t.Logf("%-12s acknowledged %6d, lost %d", wc.name, total[wc.name], lost[wc.name])
		if total[wc.name] == 0 {
			t.Errorf("%s: no insert was acknowledged: the test measured nothing", wc.name)
		}
	}
}

// TestIssue21Kill9UnjournaledWindow: a write acknowledged without j or
// fsync can be lost to a crash, but only if it was acknowledged within
// about --journalCommitInterval before it: the background WAL sync makes
// everything older durable. The writers are paced so that Pebble's 32 KiB
// WAL buffer fills slowly: without the background sync, writes acknowledged
// hundreds of milliseconds before the kill were still only in the
// process's memory.
func TestIssue21Kill9UnjournaledWindow(t *testing.T) {
	const interval = 20 * time.Millisecond
	// Slack for the syncer's tick, the fsync itself and a loaded machine.
	const margin = 250 * time.Millisecond
	wcs := []namedWC{
		{"default", bson.D{}},
		{"w1", bson.D{{Key: "w", Value: int32(1)}}},
		{"w1-j-false", bson.D{{Key: "w", Value: int32(1)}, {Key: "j", Value: false}}},
		{"majority", bson.D{{Key: "w", Value: "majority"}}},
	}
	total, lostOld, lostRecent := 0, 0, 0
	var worst time.Duration
	// Cycles of at least 800 ms, so that writes acknowledged well past the
	// bound are at stake in every cycle.
	kill9Cycles(t, wcs, 1, 20*time.Millisecond, 800*time.Millisecond, []string{"--journalCommitInterval", fmt.Sprint(interval.Milliseconds())},
		func(cycle int, acks map[string][]ack, killedAt time.Time, present map[string]bool) {
			for name, as := range acks {
				total += len(as)
				for _, a := range as {
					if present[a.id] {
						continue
					}
					age := killedAt.Sub(a.at)
					if age > worst {
						worst = age
					}
					if age <= interval+margin {
						lostRecent++
						continue
					}
					lostOld++
					if lostOld <= 3 {
						t.Errorf("cycle %d: %s insert %s acknowledged %v before kill -9 was lost (bound %v)", cycle, name, a.id, age.Round(time.Millisecond), interval+margin)
					}
				}
			}
		})
	t.Logf("acknowledged %d unjournaled inserts; lost %d within %v of the kill, %d older; oldest lost acknowledged %v before the kill",
		total, lostRecent, interval+margin, lostOld, worst.Round(time.Millisecond))
	if total == 0 {
		t.Fatal("no insert was acknowledged: the test measured nothing")
	}
}

// TestIssue21JournalCommitIntervalFlag: --journalCommitInterval takes
// mongod's range, 1 to 500 ms; anything else stops startup with a message
// naming the flag and the range.
func TestIssue21JournalCommitIntervalFlag(t *testing.T) {
	for _, bad := range []string{"0", "501", "-5", "soon"} {
		code, out, errOut := runOnce(t, "--journalCommitInterval", bad, "--dbpath", t.TempDir())
		if code != exitBadOptions || out != "" || !strings.Contains(errOut, "journalCommitInterval") {
			t.Errorf("--journalCommitInterval %s: exit %d, stdout %q, stderr %q", bad, code, out, errOut)
		}
		if bad == "0" && !strings.Contains(errOut, "between 1 and 500 milliseconds") {
			t.Errorf("--journalCommitInterval 0: stderr %q does not give the range", errOut)
		}
	}
	for _, ok := range []string{"1", "500"} {
		p := launch(t, "--journalCommitInterval", ok, "--dbpath", t.TempDir())
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("--journalCommitInterval %s: %v", ok, err)
		}
	}
}
