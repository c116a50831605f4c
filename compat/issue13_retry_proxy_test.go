package compat

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/ttl"
)

// TestIssue13RetryableWritesLostReply: the Go driver (retryWrites=true,
// its default) reaches a replica-set member through a proxy that lets an
// insert, an update, an upsert and a findAndModify reach the server and
// then cuts the connection before the reply gets back. The driver retries
// each on a new connection with the same lsid and txnNumber; the server
// answers the retry from its record: every write is applied exactly once
// and the driver sees the first execution's result.
func TestIssue13RetryableWritesLostReply(t *testing.T) {
	if externalURI != "" {
		t.Skip("needs a private in-process replica-set member behind the test proxy")
	}
	t.Parallel()
	proxy := newDropProxy(t)
	srv, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, Clock: ttl.NewFakeClock(epoch),
		ReplSetName: replSetName, AdvertiseHost: proxy.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	proxy.upstream.Store(srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The advertised host is the proxy's, so discovery keeps the driver
	// on the proxy.
	cli, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + proxy.Addr() + "/?replicaSet=" + replSetName + "&retryWrites=true&heartbeatFrequencyMS=500").
		SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect(context.Background())
	c := cli.Database("lostreply").Collection("c")
	if err := cli.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}

	lost := func(cmd string, write func() error) {
		t.Helper()
		seen0, dropped0 := proxy.counts(cmd)
		proxy.arm(cmd, 1)
		if err := write(); err != nil {
			t.Fatalf("%s whose first reply was lost: %v", cmd, err)
		}
		seen, dropped := proxy.counts(cmd)
		if dropped-dropped0 != 1 || seen-seen0 != 2 {
			t.Fatalf("%s: the proxy forwarded it %d times and dropped %d replies, want 2 and 1 (a retry after the lost reply)", cmd, seen-seen0, dropped-dropped0)
		}
	}

	lost("insert", func() error {
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
		return err // a second execution would be a duplicate key error
	})
	if n, err := c.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("documents after the retried insert: %d %v, want 1", n, err)
	}

	var upd *mongo.UpdateResult
	lost("update", func() (err error) {
		upd, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		return err
	})
	if upd.MatchedCount != 1 || upd.ModifiedCount != 1 {
		t.Errorf("retried update answered matched %d modified %d, want 1 and 1", upd.MatchedCount, upd.ModifiedCount)
	}

	lost("update", func() (err error) {
		upd, err = c.UpdateOne(ctx, bson.D{{Key: "k", Value: "up"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
		return err
	})
	var up bson.M
	if err := c.FindOne(ctx, bson.D{{Key: "k", Value: "up"}}).Decode(&up); err != nil {
		t.Fatal(err)
	}
	if upd.UpsertedID == nil || upd.UpsertedID != up["_id"] {
		t.Errorf("retried upsert answered upserted _id %v, the stored document has %v", upd.UpsertedID, up["_id"])
	}

	var after bson.M
	lost("findAndModify", func() error {
		return c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after)
	})
	if after["n"] != int32(11) {
		t.Errorf("retried findAndModify returned %v, want n: 11", after)
	}

	var got []bson.M
	cur, err := c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0]["n"] != int32(11) || got[1]["n"] != int32(1) {
		t.Fatalf("documents after the retried writes: %v, want {_id: 1, n: 11} and the upserted one with n: 1 (each $inc applied once)", got)
	}
}
