package engine_test

import (
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// 16 goroutines × 50 $inc on one document end at exactly 800.
func TestConcurrentIncNeverLosesAWrite(t *testing.T) {
	ts := startServer(t)
	c := ts.db("cc").Collection("c")
	c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var d bson.D
	c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&d)
	if m(d)["n"] != int32(800) {
		t.Fatalf("n = %v, want 800", d)
	}
}

// 16 goroutines upserting the same _id create exactly one document.
func TestConcurrentUpsertsCreateOne(t *testing.T) {
	ts := startServer(t)
	c := ts.db("cc").Collection("u")
	var wg sync.WaitGroup
	var mu sync.Mutex
	upserts := 0
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "k"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			upserts += int(r.UpsertedCount)
			mu.Unlock()
		}()
	}
	wg.Wait()
	docs := findAll(t, c, bson.D{})
	if len(docs) != 1 || upserts != 1 || m(docs[0])["n"] != int32(16) {
		t.Fatalf("docs %v, upserts %d", docs, upserts)
	}
	// Upserts without _id in the filter are serialised too.
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.UpdateOne(ctx, bson.D{{Key: "name", Value: "x"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
		}()
	}
	wg.Wait()
	if docs := findAll(t, c, bson.D{{Key: "name", Value: "x"}}); len(docs) != 1 || m(docs[0])["n"] != int32(16) {
		t.Fatalf("name upserts: %v", docs)
	}
}

// findOneAndUpdate under contention hands each document out exactly once.
func TestFindOneAndUpdateClaimsEachOnce(t *testing.T) {
	ts := startServer(t)
	c := ts.db("cc").Collection("q")
	var docs []any
	for i := 0; i < 100; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "claimed", Value: false}})
	}
	c.InsertMany(ctx, docs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int32]int{}
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var d bson.D
				err := c.FindOneAndUpdate(ctx, bson.D{{Key: "claimed", Value: false}}, bson.D{{Key: "$set", Value: bson.D{{Key: "claimed", Value: true}}}},
					options.FindOneAndUpdate().SetSort(bson.D{{Key: "_id", Value: 1}})).Decode(&d)
				if err == mongo.ErrNoDocuments {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[d[0].Value.(int32)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 100 {
		t.Fatalf("claimed %d distinct documents", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("document %d claimed %d times", id, n)
		}
	}
}

// 16 writers racing on one unique key: one document, fifteen 11000 errors.
func TestUniqueIndexUnderConcurrency(t *testing.T) {
	ts := startServer(t)
	c := ts.db("cc").Collection("uniq")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, dup := 0, 0
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: g}, {Key: "email", Value: "a@b"}})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else if mongo.IsDuplicateKeyError(err) {
				dup++
			} else {
				t.Error(err)
			}
		}(g)
	}
	wg.Wait()
	if ok != 1 || dup != 15 || len(findAll(t, c, bson.D{})) != 1 {
		t.Fatalf("ok %d dup %d", ok, dup)
	}
}
