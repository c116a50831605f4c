package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// modelDoc is what the model knows of one document.
type modelDoc struct {
	ts  int64 // seconds
	ttl int64 // 0 = absent, -1 or n
}

type ttlModel struct {
	hasDef bool
	def    int64
	docs   map[int32]modelDoc
}

// expired is the spec's rule, written independently of the server's.
func (m *ttlModel) expired(d modelDoc, now int64) bool {
	if !m.hasDef {
		return false
	}
	eff := m.def
	if d.ttl != 0 {
		eff = d.ttl
	}
	return eff != -1 && d.ts+eff <= now
}

func (m *ttlModel) forgetExpired(now int64) {
	for id, d := range m.docs {
		if m.expired(d, now) {
			delete(m.docs, id)
		}
	}
}

func (m *ttlModel) visible(now int64) []int32 {
	var out []int32
	for id, d := range m.docs {
		if !m.expired(d, now) {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestTTLProperty drives random inserts, updates, deletes, DefaultTTL
// changes and clock moves while the reaper runs passes concurrently; after
// every step the documents a client sees must be exactly those the rule
// says are live, so the reaper never deleted a live document and nothing
// expired ever came back.
func TestTTLProperty(t *testing.T) {
	ts := startServer(t)
	db := ts.db("prop")
	ts.run(t, "prop", bson.D{{Key: "create", Value: "c"}, {Key: "defaultTimeToLive", Value: 10}})
	c := db.Collection("c")
	md := &ttlModel{hasDef: true, def: 10, docs: map[int32]modelDoc{}}
	r := rand.New(rand.NewPCG(1, 2))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ts.e.RunTTLPass(context.Background()); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	randTTL := func() int64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return -1
		}
		return int64(1 + r.IntN(15))
	}
	steps := 400
	if testing.Short() {
		steps = 100
	}
	for step := 0; step < steps; step++ {
		now := ts.clock.Now().Unix()
		id := int32(r.IntN(40))
		switch op := r.IntN(10); {
		case op < 3: // insert (over an expired id too)
			tt := randTTL()
			d := bson.D{{Key: "_id", Value: id}}
			if tt != 0 {
				d = append(d, bson.E{Key: "ttl", Value: tt})
			}
			_, err := c.InsertOne(ctx, d)
			cur, exists := md.docs[id]
			live := exists && !md.expired(cur, now)
			if live {
				if err == nil {
					t.Fatalf("step %d: insert over live %d succeeded", step, id)
				}
			} else {
				if err != nil {
					t.Fatalf("step %d: insert %d: %v", step, id, err)
				}
				md.docs[id] = modelDoc{ts: now, ttl: tt}
			}
		case op < 6: // update: touch, set ttl, or unset ttl
			var u bson.D
			tt := int64(-2)
			switch r.IntN(3) {
			case 0:
				u = bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
			case 1:
				tt = randTTL()
				if tt == 0 {
					u = bson.D{{Key: "$unset", Value: bson.D{{Key: "ttl", Value: 1}}}}
				} else {
					u = bson.D{{Key: "$set", Value: bson.D{{Key: "ttl", Value: tt}}}}
				}
			case 2:
				tt = 0
				u = bson.D{{Key: "$unset", Value: bson.D{{Key: "ttl", Value: 1}}}}
			}
			res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, u)
			if err != nil {
				t.Fatal(err)
			}
			cur, exists := md.docs[id]
			live := exists && !md.expired(cur, now)
			if (res.MatchedCount == 1) != live {
				t.Fatalf("step %d: update %d matched %d, model live %v", step, id, res.MatchedCount, live)
			}
			if live {
				cur.ts = now
				if tt != -2 {
					cur.ttl = tt
				}
				md.docs[id] = cur
			}
		case op < 7:
			res, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
			if err != nil {
				t.Fatal(err)
			}
			cur, exists := md.docs[id]
			live := exists && !md.expired(cur, now)
			if (res.DeletedCount == 1) != live {
				t.Fatalf("step %d: delete %d deleted %d, model live %v", step, id, res.DeletedCount, live)
			}
			delete(md.docs, id)
		case op < 8: // change DefaultTTL: expired documents never come back
			var v any
			switch r.IntN(4) {
			case 0:
				v = nil
			case 1:
				v = -1
			default:
				v = 1 + r.IntN(15)
			}
			ts.run(t, "prop", bson.D{{Key: "collMod", Value: "c"}, {Key: "defaultTimeToLive", Value: v}})
			md.forgetExpired(now)
			if v == nil {
				md.hasDef = false
			} else {
				md.hasDef, md.def = true, int64(fmt.Sprint(v)[0]-'0')
				fmt.Sscan(fmt.Sprint(v), &md.def)
			}
		default:
			ts.clock.Advance(time.Duration(r.IntN(4)) * time.Second)
		}
		now = ts.clock.Now().Unix()
		got := idList(findAll(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), false)
		want := md.visible(now)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: visible %v, model %v", step, got, want)
		}
	}
}
