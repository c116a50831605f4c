package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// nextEvent waits (up to five seconds) for a change stream's next event.
func nextEvent(t *testing.T, cs *mongo.ChangeStream) bson.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !cs.Next(ctx) {
		t.Fatalf("no change event: %v", cs.Err())
	}
	return append(bson.Raw(nil), cs.Current...)
}

// noEvent checks that a stream has nothing to report now.
func noEvent(t *testing.T, cs *mongo.ChangeStream, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cs.TryNext(ctx) {
		t.Fatalf("%s: unexpected event %v", what, cs.Current)
	}
	noErr(t, cs.Err(), what)
}

func evStr(t *testing.T, ev bson.Raw, path ...string) string {
	t.Helper()
	v, err := ev.LookupErr(path...)
	noErr(t, err, "event field "+path[0])
	return v.StringValue()
}

func evInt(t *testing.T, ev bson.Raw, path ...string) int64 {
	t.Helper()
	v, err := ev.LookupErr(path...)
	noErr(t, err, "event field "+path[0])
	n, ok := v.AsInt64OK()
	if !ok {
		t.Fatalf("event field %v is %v, not a number", path, v)
	}
	return n
}

// The four document events of a collection stream, in commit order, each
// with its resume token, cluster time, wall time, namespace and key; the
// insert and replace with the document, the update with its description.
func TestIssue14StreamDocumentEvents(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("events")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch")
	defer cs.Close(e.ctx)
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "x"}, {Key: "arr", Value: bson.A{1, 2, 3}}})
	noErr(t, err, "insert")
	_, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "a", Value: 2}, {Key: "n.x", Value: true}}},
		{Key: "$unset", Value: bson.D{{Key: "b", Value: ""}}},
		{Key: "$pop", Value: bson.D{{Key: "arr", Value: 1}}}})
	noErr(t, err, "update")
	_, err = c.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}})
	noErr(t, err, "no-op update") // changes nothing: no event
	_, err = c.ReplaceOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "z", Value: 9}})
	noErr(t, err, "replace")
	_, err = c.DeleteOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "delete")

	var prevTime bson.Timestamp
	var prevToken string
	for i, want := range []string{"insert", "update", "replace", "delete"} {
		ev := nextEvent(t, cs)
		eq(t, "operationType", evStr(t, ev, "operationType"), want)
		eq(t, "ns.db", evStr(t, ev, "ns", "db"), e.db.Name())
		eq(t, "ns.coll", evStr(t, ev, "ns", "coll"), "events")
		eq(t, "documentKey._id", evInt(t, ev, "documentKey", "_id"), int64(1))
		tok := evStr(t, ev, "_id", "_data")
		if tok <= prevToken {
			t.Fatalf("event %d: token %q not after %q", i, tok, prevToken)
		}
		prevToken = tok
		tt, ti, ok := ev.Lookup("clusterTime").TimestampOK()
		ts := bson.Timestamp{T: tt, I: ti}
		if !ok {
			t.Fatalf("clusterTime missing: %v", ev)
		}
		if ts.T < prevTime.T || ts.T == prevTime.T && ts.I <= prevTime.I {
			t.Fatalf("event %d: clusterTime %v not after %v", i, ts, prevTime)
		}
		prevTime = ts
		wall, ok := ev.Lookup("wallTime").DateTimeOK()
		if !ok || time.Since(time.UnixMilli(wall)) > time.Minute {
			t.Fatalf("wallTime %v", ev.Lookup("wallTime"))
		}
		if _, err := ev.LookupErr("lsid"); err == nil {
			t.Fatalf("a write outside a transaction has an lsid: %v", ev)
		}
		switch want {
		case "insert":
			eq(t, "fullDocument.b", evStr(t, ev, "fullDocument", "b"), "x")
		case "update":
			if _, err := ev.LookupErr("fullDocument"); err == nil {
				t.Fatalf("update event with fullDocument without updateLookup: %v", ev)
			}
			ud := ev.Lookup("updateDescription").Document()
			var got struct {
				UpdatedFields   bson.M   `bson:"updatedFields"`
				RemovedFields   []string `bson:"removedFields"`
				TruncatedArrays []bson.D `bson:"truncatedArrays"`
			}
			noErr(t, bson.Unmarshal(ud, &got), "decode updateDescription")
			eq(t, "updatedFields.a", got.UpdatedFields["a"], any(int32(2)))
			eq(t, "updatedFields.n", fmt.Sprint(got.UpdatedFields["n"]), fmt.Sprint(bson.M{"x": true}))
			eq(t, "updatedFields size", len(got.UpdatedFields), 2)
			strsEq(t, "removedFields", got.RemovedFields, []string{"b"})
			eq(t, "truncatedArrays", fmt.Sprint(got.TruncatedArrays), fmt.Sprint([]bson.D{{{Key: "field", Value: "arr"}, {Key: "newSize", Value: int32(2)}}}))
		case "replace":
			eq(t, "fullDocument.z", evInt(t, ev, "fullDocument", "z"), int64(9))
		case "delete":
			if _, err := ev.LookupErr("fullDocument"); err == nil {
				t.Fatalf("delete event with fullDocument: %v", ev)
			}
		}
	}
	noEvent(t, cs, "after the four events")
}

// A transaction's events appear only once it commits, together, with its
// lsid and txnNumber; an aborted transaction leaves none.
func TestIssue14StreamTransaction(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("tx")
	cs, err := e.db.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch the database")
	defer cs.Close(e.ctx)
	sess, err := e.cli.StartSession()
	noErr(t, err, "start session")
	defer sess.EndSession(e.ctx)
	noErr(t, sess.StartTransaction(), "start transaction")
	sctx := mongo.NewSessionContext(e.ctx, sess)
	_, err = c.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert in the transaction")
	_, err = e.coll("tx2").InsertOne(sctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "insert in the transaction")
	noEvent(t, cs, "before the commit")
	noErr(t, sess.CommitTransaction(e.ctx), "commit")
	ev1, ev2 := nextEvent(t, cs), nextEvent(t, cs)
	eq(t, "first coll", evStr(t, ev1, "ns", "coll"), "tx")
	eq(t, "second coll", evStr(t, ev2, "ns", "coll"), "tx2")
	eq(t, "one commit, one cluster time", ev1.Lookup("clusterTime").String(), ev2.Lookup("clusterTime").String())
	for _, ev := range []bson.Raw{ev1, ev2} {
		eq(t, "txnNumber", evInt(t, ev, "txnNumber"), int64(1))
		_, data := ev.Lookup("lsid", "id").Binary()
		_, want := sess.ID().Lookup("id").Binary()
		eq(t, "lsid", fmt.Sprintf("%x", data), fmt.Sprintf("%x", want))
	}
	// An aborted transaction records nothing.
	noErr(t, sess.StartTransaction(), "start transaction")
	_, err = c.InsertOne(sctx, bson.D{{Key: "_id", Value: 3}})
	noErr(t, err, "insert in the transaction")
	noErr(t, sess.AbortTransaction(e.ctx), "abort")
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 4}})
	noErr(t, err, "insert")
	ev := nextEvent(t, cs)
	eq(t, "after the abort", evInt(t, ev, "documentKey", "_id"), int64(4))
}

// Resuming after a token (resumeAfter, startAfter) or at an operation time
// yields exactly the events after that point: none missed, none twice.
func TestIssue14StreamResume(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("r")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch")
	for i := 1; i <= 3; i++ {
		_, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}})
		noErr(t, err, "insert")
	}
	first := nextEvent(t, cs)
	second := nextEvent(t, cs)
	token := cs.ResumeToken()
	eq(t, "resume token is the event's _id", token.String(), second.Lookup("_id").Document().String())
	cs.Close(e.ctx)
	for i := 4; i <= 5; i++ {
		_, err := c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}})
		noErr(t, err, "insert")
	}
	ids := func(cs *mongo.ChangeStream, n int) []int64 {
		var out []int64
		for range n {
			out = append(out, evInt(t, nextEvent(t, cs), "documentKey", "_id"))
		}
		noEvent(t, cs, "after the resumed events")
		return out
	}
	for _, o := range []*options.ChangeStreamOptionsBuilder{
		options.ChangeStream().SetResumeAfter(token),
		options.ChangeStream().SetStartAfter(token),
	} {
		rs, err := c.Watch(e.ctx, mongo.Pipeline{}, o)
		noErr(t, err, "watch resumed")
		eq(t, "events after the token", fmt.Sprint(ids(rs, 3)), "[3 4 5]")
		rs.Close(e.ctx)
	}
	// A stream resumed where nothing followed yet: its batch token
	// resumes there again.
	rs, err := c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&bson.Timestamp{T: 4000000000}).SetBatchSize(0))
	noErr(t, err, "watch from the future")
	future := rs.ResumeToken()
	rs.Close(e.ctx)
	rs, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token))
	noErr(t, err, "watch resumed")
	eq(t, "events after the token", fmt.Sprint(ids(rs, 3)), "[3 4 5]")
	rs.Close(e.ctx)
	rs, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token).SetBatchSize(0))
	noErr(t, err, "watch resumed, empty first batch")
	again := rs.ResumeToken()
	rs.Close(e.ctx)
	rs, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(again))
	noErr(t, err, "watch resumed at a first batch's token")
	eq(t, "events after the first batch's token", fmt.Sprint(ids(rs, 3)), "[3 4 5]")
	rs.Close(e.ctx)
	rs, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(future))
	noErr(t, err, "watch resumed at a future time's token")
	noEvent(t, rs, "before the future")
	rs.Close(e.ctx)
	at, ai := first.Lookup("clusterTime").Timestamp()
	_ = second
	rs, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&bson.Timestamp{T: at, I: ai}).SetMaxAwaitTime(10*time.Millisecond))
	noErr(t, err, "watch at an operation time")
	got := ids(rs, 5)
	eq(t, "events from the operation time", fmt.Sprint(got), "[1 2 3 4 5]")
	// The postBatchResumeToken of an empty batch resumes past everything seen.
	pbrt := rs.ResumeToken()
	rs.Close(e.ctx)
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 6}})
	noErr(t, err, "insert")
	rs, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(pbrt))
	noErr(t, err, "watch after the batch token")
	eq(t, "after the postBatchResumeToken", fmt.Sprint(ids(rs, 1)), "[6]")
	rs.Close(e.ctx)
}

// A getMore waiting for events returns as soon as one is committed, not
// when its await time runs out.
func TestIssue14StreamAwaitWakes(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("w")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(3*time.Second))
	noErr(t, err, "watch")
	defer cs.Close(e.ctx)
	wrote := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := c.InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}}); err == nil {
			wrote <- time.Now()
		}
		close(wrote)
	}()
	start := time.Now()
	ev := nextEvent(t, cs)
	got := time.Now()
	at, ok := <-wrote
	if !ok {
		t.Fatal("insert failed")
	}
	eq(t, "the event", evStr(t, ev, "operationType"), "insert")
	if got.Sub(start) > 2*time.Second {
		t.Fatalf("the waiting getMore returned after %v: it waited for its await time", got.Sub(start))
	}
	if d := got.Sub(at); d > 100*time.Millisecond {
		t.Fatalf("event delivered %v after the insert returned", d)
	}
}

// Database and cluster streams see every collection's changes; the stages
// after $changeStream filter and reshape events; updateLookup adds the
// current document to updates.
func TestIssue14StreamScopesAndStages(t *testing.T) {
	e := newReplEnv(t)
	dbs, err := e.db.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "db.watch")
	defer dbs.Close(e.ctx)
	all, err := e.cli.Watch(e.ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "update"}}}},
		{{Key: "$addFields", Value: bson.D{{Key: "who", Value: "$fullDocument.name"}}}},
		{{Key: "$project", Value: bson.D{{Key: "operationType", Value: 1}, {Key: "who", Value: 1}, {Key: "ns", Value: 1}}}},
	}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	noErr(t, err, "client.watch")
	defer all.Close(e.ctx)
	other := e.cli.Database(e.db.Name() + "_other").Collection("o")
	defer other.Database().Drop(context.Background())
	_, err = e.coll("a").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}})
	noErr(t, err, "insert a")
	_, err = other.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "bob"}})
	noErr(t, err, "insert other")
	_, err = e.coll("b").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "insert b")
	_, err = other.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "bo"}}}})
	noErr(t, err, "update other")

	eq(t, "db stream: a", evStr(t, nextEvent(t, dbs), "ns", "coll"), "a")
	eq(t, "db stream: b", evStr(t, nextEvent(t, dbs), "ns", "coll"), "b")
	noEvent(t, dbs, "db stream: the other database")

	ev := nextEvent(t, all)
	eq(t, "cluster stream: the update only", evStr(t, ev, "operationType"), "update")
	eq(t, "cluster stream: other db", evStr(t, ev, "ns", "db"), e.db.Name()+"_other")
	eq(t, "updateLookup through $addFields", evStr(t, ev, "who"), "bo")
	if _, err := ev.LookupErr("updateDescription"); err == nil {
		t.Fatalf("$project kept updateDescription: %v", ev)
	}
	noEvent(t, all, "cluster stream")
}

// Refusals: stages a stream does not allow, a resume token that is not
// one, $changeStream after the first stage, options not supported, a
// resume point older than the history, an event whose _id was changed.
func TestIssue14StreamRefusals(t *testing.T) {
	e := newReplEnv(t)
	agg := func(coll any, pipeline bson.A) error {
		return e.runErr(bson.D{{Key: "aggregate", Value: coll}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}})
	}
	cs := func(spec bson.D) bson.D { return bson.D{{Key: "$changeStream", Value: spec}} }
	wantCode(t, agg("c", bson.A{cs(bson.D{}), bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}), 20, "IllegalOperation")
	wantCode(t, agg("c", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, cs(bson.D{})}), 40602, "Location40602")
	wantCode(t, agg("c", bson.A{cs(bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: "zz"}}}})}), 9, "FailedToParse")
	wantCode(t, agg("c", bson.A{cs(bson.D{{Key: "bogus", Value: 1}})}), 40415, "Location40415")
	wantCode(t, agg(1, bson.A{cs(bson.D{{Key: "allChangesForCluster", Value: true}})}), 73, "InvalidNamespace")
	wantCode(t, agg("c", bson.A{cs(bson.D{{Key: "fullDocumentBeforeChange", Value: "required"}})}), 238, "NotImplemented")
	// A resume point older than the history: 286.
	wantCode(t, agg("c", bson.A{cs(bson.D{{Key: "startAtOperationTime", Value: bson.Timestamp{T: 1, I: 1}}})}), 286, "ChangeStreamHistoryLost")

	// An event whose _id a stage changed cannot be resumed: 280.
	c := e.coll("c")
	w, err := c.Watch(e.ctx, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "_id", Value: 1}}}}})
	noErr(t, err, "watch")
	defer w.Close(e.ctx)
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert")
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	if w.Next(ctx) {
		t.Fatalf("event with a modified _id delivered: %v", w.Current)
	}
	wantCode(t, w.Err(), 280, "ChangeStreamFatalError")
}

// A standalone still refuses change streams as mongod does (40573).
func TestIssue14StreamStandalone(t *testing.T) {
	s := newEnv(t)
	_, err := s.coll("c").Watch(s.ctx, mongo.Pipeline{})
	wantCode(t, err, 40573, "Location40573")
}

// The driver's automatic resume (here after its cursor was killed, a
// resumable error) continues from the last token: nothing lost, nothing
// twice.
func TestIssue14StreamDriverResume(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("dr")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	noErr(t, err, "watch")
	defer cs.Close(e.ctx)
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert")
	eq(t, "first", evInt(t, nextEvent(t, cs), "documentKey", "_id"), int64(1))
	e.run(bson.D{{Key: "killCursors", Value: "dr"}, {Key: "cursors", Value: bson.A{cs.ID()}}})
	for i := 2; i <= 3; i++ {
		_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: i}})
		noErr(t, err, "insert")
	}
	eq(t, "after the resume", evInt(t, nextEvent(t, cs), "documentKey", "_id"), int64(2))
	eq(t, "after the resume", evInt(t, nextEvent(t, cs), "documentKey", "_id"), int64(3))
	noEvent(t, cs, "after the resumed events")
}

// Concurrent writers: every committed change reaches the stream once, in
// cluster-time order, however the commits interleave.
func TestIssue14StreamConcurrentWriters(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("cw")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(100*time.Millisecond))
	noErr(t, err, "watch")
	defer cs.Close(e.ctx)
	const writers, each = 8, 40
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				if _, err := c.InsertOne(context.Background(), bson.D{{Key: "_id", Value: w*1000 + i}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	seen := map[int64]bool{}
	last := ""
	for range writers * each {
		ev := nextEvent(t, cs)
		id := evInt(t, ev, "documentKey", "_id")
		if seen[id] {
			t.Fatalf("event for %d twice", id)
		}
		seen[id] = true
		tok := evStr(t, ev, "_id", "_data")
		if tok <= last {
			t.Fatalf("token %s after %s: out of order", tok, last)
		}
		last = tok
	}
	for range writers {
		noErr(t, <-errs, "insert")
	}
	noEvent(t, cs, "after every write")
}

// Dropping a collection: its stream reports the drop, then invalidate, and
// closes; startAfter the invalidate token opens a new stream on the
// recreated collection, resumeAfter it is refused (260). A database
// stream sees the drops and dropDatabase, then invalidate; the cluster's
// stream sees them and goes on.
func TestIssue14StreamDropInvalidate(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("d")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch the collection")
	defer cs.Close(e.ctx)
	dbs, err := e.db.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch the database")
	defer dbs.Close(e.ctx)
	all, err := e.cli.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	noErr(t, err, "watch the cluster")
	defer all.Close(e.ctx)
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert")
	noErr(t, c.Drop(e.ctx), "drop")

	eq(t, "collection stream", evStr(t, nextEvent(t, cs), "operationType"), "insert")
	drop := nextEvent(t, cs)
	eq(t, "collection stream", evStr(t, drop, "operationType"), "drop")
	eq(t, "drop ns", evStr(t, drop, "ns", "coll"), "d")
	inval := nextEvent(t, cs)
	eq(t, "collection stream", evStr(t, inval, "operationType"), "invalidate")
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	if cs.Next(ctx) {
		t.Fatalf("event after invalidate: %v", cs.Current)
	}
	eq(t, "stream closed", cs.ID(), int64(0))

	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "insert into the recreated collection")
	tok := inval.Lookup("_id").Document()
	_, err = c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(tok))
	wantCode(t, err, 260, "InvalidResumeToken")
	sa, err := c.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(tok))
	noErr(t, err, "startAfter the invalidate")
	defer sa.Close(e.ctx)
	eq(t, "after startAfter", evInt(t, nextEvent(t, sa), "documentKey", "_id"), int64(2))

	_, err = e.db.Collection("other").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 3}})
	noErr(t, err, "insert")
	noErr(t, e.db.Drop(e.ctx), "dropDatabase")
	var ops []string
	for {
		ev := nextEvent(t, dbs)
		op := evStr(t, ev, "operationType")
		ops = append(ops, op)
		if op == "invalidate" || len(ops) > 10 {
			break
		}
	}
	eq(t, "database stream", fmt.Sprint(ops), "[insert drop insert insert drop drop dropDatabase invalidate]")
	var cops []string
	for range 7 {
		cops = append(cops, evStr(t, nextEvent(t, all), "operationType"))
	}
	eq(t, "cluster stream", fmt.Sprint(cops), "[insert drop insert insert drop drop dropDatabase]")
	noEvent(t, all, "cluster stream after dropDatabase")
}

// Renaming a collection: its stream reports rename (with to) and
// invalidates; the database's stream reports it and goes on under the new
// name.
func TestIssue14StreamRename(t *testing.T) {
	e := newReplEnv(t)
	c := e.coll("src")
	cs, err := c.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch the collection")
	defer cs.Close(e.ctx)
	dbs, err := e.db.Watch(e.ctx, mongo.Pipeline{})
	noErr(t, err, "watch the database")
	defer dbs.Close(e.ctx)
	_, err = c.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}})
	noErr(t, err, "insert")
	e.admin(bson.D{{Key: "renameCollection", Value: e.db.Name() + ".src"}, {Key: "to", Value: e.db.Name() + ".dst"}})
	_, err = e.coll("dst").InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	noErr(t, err, "insert into the renamed collection")

	eq(t, "collection stream", evStr(t, nextEvent(t, cs), "operationType"), "insert")
	ren := nextEvent(t, cs)
	eq(t, "collection stream", evStr(t, ren, "operationType"), "rename")
	eq(t, "rename ns", evStr(t, ren, "ns", "coll"), "src")
	eq(t, "rename to.db", evStr(t, ren, "to", "db"), e.db.Name())
	eq(t, "rename to.coll", evStr(t, ren, "to", "coll"), "dst")
	eq(t, "collection stream", evStr(t, nextEvent(t, cs), "operationType"), "invalidate")

	eq(t, "database stream", evStr(t, nextEvent(t, dbs), "operationType"), "insert")
	eq(t, "database stream", evStr(t, nextEvent(t, dbs), "operationType"), "rename")
	ev := nextEvent(t, dbs)
	eq(t, "database stream after the rename", evStr(t, ev, "ns", "coll"), "dst")
	eq(t, "database stream after the rename", evInt(t, ev, "documentKey", "_id"), int64(2))
}
