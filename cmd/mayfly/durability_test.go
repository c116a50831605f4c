package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// TestJournaledWriteSurvivesKill9: a write acknowledged with j: true is on
// stable storage (the Pebble batch committed with a WAL sync) before the
// reply, so SIGKILL right after the reply loses nothing.
func TestJournaledWriteSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	p := launch(t, "--dbpath", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p.addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	c := client.Database("dur").Collection("c", options.Collection().SetWriteConcern(writeconcern.Journaled()))
	for i := 0; i < 50; i++ {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "journaled"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 7}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "updated"}}}}); err != nil {
		t.Fatal(err)
	}
	// No clean shutdown: the process dies at once.
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	client.Disconnect(ctx)

	p2 := launch(t, "--dbpath", dir)
	client2, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + p2.addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer client2.Disconnect(ctx)
	c2 := client2.Database("dur").Collection("c")
	n, err := c2.CountDocuments(ctx, bson.D{})
	if err != nil || n != 50 {
		t.Fatalf("after kill -9: %d documents (%v), want 50", n, err)
	}
	var d bson.M
	if err := c2.FindOne(ctx, bson.D{{Key: "_id", Value: 7}}).Decode(&d); err != nil || d["v"] != "updated" {
		t.Fatalf("journaled update lost: %v %v", d, err)
	}
}
