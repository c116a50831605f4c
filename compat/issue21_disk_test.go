package compat

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/storage/pebblekv"
)

// TestIssue21DiskFullRefusesWrites: when the data directory's filesystem
// has less free space than --min-free-disk, writes fail with mongod's
// OutOfDiskSpace (14031) and its "available disk space of N bytes is less
// than required minimum of M" wording while reads keep working; deletions
// (which free space) may still use half of the margin; when space comes
// back writes are accepted again by the same server, with nothing
// acknowledged lost. The filesystem is measured through an injected
// statfs, so the test needs no full disk.
func TestIssue21DiskFullRefusesWrites(t *testing.T) {
	// Always an in-process server of its own (also under MAYFLY_URI): the
	// test controls what its disk measurement reports.
	t.Parallel()
	var avail atomic.Uint64
	avail.Store(50 << 30)
	stat := func(string) (pebblekv.DiskUsage, error) {
		a := avail.Load()
		return pebblekv.DiskUsage{AvailBytes: a, TotalBytes: 100 << 30, UsedBytes: 100<<30 - a}, nil
	}
	srv, err := server.Start(server.Config{InMemory: true, DiskStat: stat, MinFreeDisk: "256MiB"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := connect(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coll := cli.Database("disk").Collection("c")

	acked := map[int32]bool{}
	next := int32(0)
	insert := func() error {
		next++
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: next}, {Key: "pad", Value: strings.Repeat("x", 100)}})
		if err == nil {
			acked[next] = true
		}
		return err
	}
	for i := 0; i < 100; i++ {
		if err := insert(); err != nil {
			t.Fatal(err)
		}
	}
	// An index makes the reads below use it, and must survive too.
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "pad", Value: 1}}}); err != nil {
		t.Fatal(err)
	}

	tmp := cli.Database("disk").Collection("tmp")
	if _, err := tmp.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// 200 MiB free: below 256 MiB. Within a measurement (1 s) inserts fail.
	avail.Store(200 << 20)
	var refused error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if refused = insert(); refused != nil {
			break
		}
	}
	code, _, ok := errCode(refused)
	if !ok || code != 14031 {
		t.Fatalf("insert below the threshold: %v (code %d)", refused, code)
	}
	if !strings.Contains(refused.Error(), "available disk space of") || !strings.Contains(refused.Error(), "is less than required minimum of 268435456") {
		t.Errorf("errmsg: %v", refused)
	}
	// Every kind of write is refused; the server stays up and answers.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}})
	if code, _, _ := errCode(err); code != 14031 {
		t.Errorf("update: %v", err)
	}
	_, err = coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: -1}}, bson.D{{Key: "_id", Value: -2}}})
	if code, _, _ := errCode(err); code != 14031 {
		t.Errorf("insertMany: %v", err)
	}
	err = cli.Database("disk").CreateCollection(ctx, "other")
	if code, name, _ := errCode(err); code != 14031 || name != "OutOfDiskSpace" {
		t.Errorf("create: %v (%d %s)", err, code, name)
	}

	readAll := func(what string) {
		t.Helper()
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			t.Fatalf("%s: find: %v", what, err)
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatalf("%s: find: %v", what, err)
		}
		seen := map[int32]bool{}
		for _, d := range docs {
			seen[d["_id"].(int32)] = true
		}
		for id := range acked {
			if !seen[id] {
				t.Fatalf("%s: acknowledged _id %d missing", what, id)
			}
		}
		if len(docs) != len(acked) {
			t.Fatalf("%s: %d documents, %d acknowledged", what, len(docs), len(acked))
		}
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "pad", Value: strings.Repeat("x", 100)}})
		if err != nil || n != int64(len(acked)) {
			t.Fatalf("%s: count by index: %d, %v", what, n, err)
		}
	}
	readAll("while refusing writes")
	if err := cli.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}

	// Deleting frees space: allowed above half the threshold (128 MiB).
	if err := tmp.Drop(ctx); err != nil {
		t.Fatalf("drop above half the threshold: %v", err)
	}
	res, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if err != nil || res.DeletedCount != 1 {
		t.Fatalf("delete above half the threshold: %v %v", res, err)
	}
	delete(acked, 1)
	// Below half the threshold deletions are refused too.
	avail.Store(100 << 20)
	var derr error
	for id, deadline := int32(2), time.Now().Add(10*time.Second); time.Now().Before(deadline); id++ {
		if _, derr = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); derr != nil {
			break
		}
		delete(acked, id) // admitted before the measurement
		time.Sleep(10 * time.Millisecond)
	}
	if code, _, _ := errCode(derr); code != 14031 {
		t.Fatalf("delete below half the threshold: %v", derr)
	}
	readAll("after refused deletes")

	// Space is back: the same server accepts writes again.
	avail.Store(50 << 30)
	var werr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if werr = insert(); werr == nil {
			break
		}
	}
	if werr != nil {
		t.Fatalf("writes still refused after space came back: %v", werr)
	}
	for i := 0; i < 20; i++ {
		if err := insert(); err != nil {
			t.Fatalf("insert after recovery: %v", err)
		}
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	readAll("after recovery")
	if st := srv.Stats(); st.Current < 1 {
		t.Errorf("connections: %+v", st)
	}
}
