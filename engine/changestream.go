package engine

import (
	"bytes"
	"context"
	"encoding/hex"
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Change streams (replica-set mode): an aggregate whose first stage is
// $changeStream reads the change history (changes.go) from a start point
// on, turns each record into a change event, runs the rest of the
// pipeline over the events, and leaves a tailable cursor whose getMore
// waits (awaitData) until a commit with events wakes it or maxTimeMS (the
// drivers' maxAwaitTimeMS, one second by default) passes.
//
// A resume token is {_data: hex of the history key}: an event's key, or,
// as a batch's postBatchResumeToken when the stream has read everything,
// the key just past the last visible cluster time. Resuming after a token
// reads the keys after it.

// changeStream is a change stream cursor's state.
type changeStream struct {
	db, coll   string // coll "": a database's stream; db "": the cluster's
	from       []byte // the next history key to read
	lookup     bool   // fullDocument: updateLookup
	rest       *agg.Pipeline
	restStages bson.A
	pbrt       bson.D // the postBatchResumeToken of the last batch
	// invalidated: the stream reported its collection's (or database's)
	// drop and an invalidate event; its cursor is closed.
	invalidated bool
}

// changeStream cursors have no document source of their own.
func (cs *changeStream) next() (bson.Raw, error) { return nil, nil }
func (cs *changeStream) close()                  {}

var changeStreamSpecFields = map[string]bool{
	"fullDocument": true, "fullDocumentBeforeChange": true, "resumeAfter": true, "startAfter": true,
	"startAtOperationTime": true, "allChangesForCluster": true, "showExpandedEvents": true,
	// Known to mongod, not supported here (refused as not implemented).
	"showMigrationEvents": false, "showSystemEvents": false, "allowToRunOnConfigDB": false, "allowToRunOnSystemNS": false,
	"showRawUpdateDescription": false, "$_generateV2ResumeTokens": false,
}

// changeStreamStages are the stages allowed after $changeStream.
var changeStreamStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// isChangeStream reports whether an aggregate pipeline opens a change stream.
func isChangeStream(pipeline bson.A) (bson.D, bool) {
	if len(pipeline) == 0 {
		return nil, false
	}
	st, ok := pipeline[0].(bson.D)
	if !ok || len(st) != 1 || st[0].Key != "$changeStream" {
		return nil, false
	}
	spec, _ := st[0].Value.(bson.D)
	return spec, true
}

// tokenOf is the resume token of a history key.
func tokenOf(key []byte) bson.D {
	return bson.D{{Key: "_data", Value: strings.ToUpper(hex.EncodeToString(key[1:]))}}
}

// invalidateTokenOf is the resume token of the invalidate event that
// follows the drop recorded at key: usable with startAfter only.
func invalidateTokenOf(key []byte) bson.D {
	return bson.D{{Key: "_data", Value: strings.ToUpper(hex.EncodeToString(key[1:])) + "01"}}
}

// parseToken reads a resume token back into its history key, and whether
// it is an invalidate event's.
func parseToken(field string, v any) ([]byte, bool, error) {
	k, err := parseTokenKey(field, v)
	if err != nil {
		return nil, false, err
	}
	if len(k) == 14 {
		return k[:13], true, nil
	}
	return k, false, nil
}

func parseTokenKey(field string, v any) ([]byte, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$changeStream.%s' is the wrong type '%s', expected type 'object'", field, bsonx.TypeName(v))
	}
	data, _ := bsonx.Get(d, "_data")
	s, ok := data.(string)
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Bad resume token: _data of missing or of wrong type. Expected string, got %s", expr_ExtJSON(d))
	}
	b, err := hex.DecodeString(s)
	if err != nil || !(len(b) == 12 || len(b) == 13 && b[12] == 1) {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Bad resume token: %s is not a resume token of this server", expr_ExtJSON(d))
	}
	return append([]byte{docstore.PfxChange}, b...), nil
}

func expr_ExtJSON(d bson.D) string {
	b, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		return "?"
	}
	return string(b)
}

// keyAfter is the first key after k.
func keyAfter(k []byte) []byte { return append(append([]byte(nil), k...), 0) }

// openChangeStream answers an aggregate whose pipeline starts with
// $changeStream.
func (e *Engine) openChangeStream(r *Request, coll string, spec bson.D, pipeline bson.A, batchSize int64) (bson.D, error) {
	if e.repl == nil {
		return nil, mongoerr.New(40573, "The $changeStream stage is only supported on replica sets")
	}
	cs := &changeStream{db: r.DB, coll: coll}
	var start []byte
	for _, f := range spec {
		if supported, known := changeStreamSpecFields[f.Key]; !known {
			return nil, mongoerr.New(40415, "BSON field '$changeStream.%s' is an unknown field.", f.Key)
		} else if !supported {
			return nil, mongoerr.New(mongoerr.NotImplemented, "$changeStream option '%s' is not supported by mayfly", f.Key)
		}
		switch f.Key {
		case "fullDocument":
			s, ok := f.Value.(string)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$changeStream.fullDocument' is the wrong type '%s', expected type 'string'", bsonx.TypeName(f.Value))
			}
			switch s {
			case "default":
			case "updateLookup":
				cs.lookup = true
			case "whenAvailable", "required":
				return nil, mongoerr.New(mongoerr.NotImplemented, "fullDocument: %q is not supported by mayfly yet (no post-images)", s)
			default:
				return nil, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '$changeStream.fullDocument' is not a valid value.", s)
			}
		case "fullDocumentBeforeChange":
			if s, _ := f.Value.(string); s != "off" {
				return nil, mongoerr.New(mongoerr.NotImplemented, "fullDocumentBeforeChange is not supported by mayfly yet (no pre-images)")
			}
		case "showExpandedEvents":
			if b, _ := f.Value.(bool); b {
				return nil, mongoerr.New(mongoerr.NotImplemented, "showExpandedEvents is not supported by mayfly yet")
			}
		case "allChangesForCluster":
			b, ok := f.Value.(bool)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$changeStream.allChangesForCluster' is the wrong type '%s', expected type 'bool'", bsonx.TypeName(f.Value))
			}
			if b {
				if r.DB != "admin" || coll != "" {
					return nil, mongoerr.New(mongoerr.InvalidNamespace, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s", r.DB+"."+coll)
				}
				cs.db = ""
			}
		case "resumeAfter", "startAfter":
			if start != nil {
				return nil, mongoerr.New(40674, "Only one type of resume option is allowed, but multiple were found.")
			}
			k, inval, err := parseToken(f.Key, f.Value)
			if err != nil {
				return nil, err
			}
			if inval && f.Key == "resumeAfter" {
				return nil, mongoerr.New(mongoerr.InvalidResumeToken, "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.")
			}
			ts, _ := changeKeyTS(k)
			if tsAfter(e.hist.trimPoint(), ts) {
				return nil, historyLost()
			}
			start = keyAfter(k)
			cs.pbrt = f.Value.(bson.D)
		case "startAtOperationTime":
			if start != nil {
				return nil, mongoerr.New(40674, "Only one type of resume option is allowed, but multiple were found.")
			}
			ts, ok := f.Value.(bson.Timestamp)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$changeStream.startAtOperationTime' is the wrong type '%s', expected type 'timestamp'", bsonx.TypeName(f.Value))
			}
			if tsAfter(e.hist.trimPoint(), ts) {
				return nil, historyLost()
			}
			start = changeKey(ts, 0)
			cs.pbrt = tokenOf(changeKey(tsBefore(ts), math.MaxUint32))
		}
	}
	if cs.db != "" {
		switch {
		case cs.db == "admin" && coll == "":
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$changeStream on the admin database requires allChangesForCluster: true")
		case cs.db == "admin" || cs.db == "config" || cs.db == "local":
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s database", cs.db)
		case strings.HasPrefix(coll, "system."):
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s.%s collection", cs.db, coll)
		}
	}
	cs.restStages = pipeline[1:]
	for _, st := range cs.restStages {
		d, ok := st.(bson.D)
		if !ok || len(d) != 1 {
			continue // agg.Parse reports it
		}
		if d[0].Key == "$changeStream" {
			return nil, mongoerr.New(40602, "$changeStream is only valid as the first stage in a pipeline")
		}
		if !changeStreamStages[d[0].Key] {
			return nil, mongoerr.New(mongoerr.IllegalOperation, "%s is not permitted in a $changeStream pipeline", d[0].Key)
		}
	}
	rest, err := agg.Parse(cs.restStages, agg.Options{ReplicaSet: true, DB: r.DB, Coll: coll, Now: e.Now()})
	if err != nil {
		return nil, err
	}
	cs.rest = rest
	if start == nil {
		v, _ := e.hist.visible(e.opTime)
		start = changeKey(v, math.MaxUint32)
		cs.pbrt = tokenOf(start)
	}
	cs.from = start
	ns := r.DB + "." + coll
	if coll == "" {
		ns = r.DB + ".$cmd.aggregate"
	}
	batch := bson.A{}
	if batchSize != 0 {
		if batch, err = e.streamBatch(r, cs, batchSize); err != nil {
			return nil, err
		}
	}
	if cs.invalidated {
		return streamReply("firstBatch", batch, cs.pbrt, 0, ns), nil
	}
	cur := &cursor{ns: ns, src: cs, remaining: -1}
	id := e.cursors.add(cur)
	return streamReply("firstBatch", batch, cs.pbrt, id, ns), nil
}

func historyLost() error {
	return mongoerr.New(mongoerr.ChangeStreamHistoryLost, "Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
}

func streamReply(batchName string, batch bson.A, pbrt bson.D, id int64, ns string) bson.D {
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: batchName, Value: batch},
		{Key: "postBatchResumeToken", Value: pbrt},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}
}

// streamGetMore answers a getMore on a change stream cursor: the events
// committed since the last batch, or, when there are none, the first to
// come before the await time passes.
func (e *Engine) streamGetMore(r *Request, cur *cursor, cs *changeStream, id int64, ns string) (bson.D, error) {
	batchSize, _, err := intArg(r, "batchSize")
	if err != nil {
		e.cursors.checkin(cur, false)
		return nil, err
	}
	deadline := r.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Second)
	}
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	for {
		_, wake := e.hist.visible(e.opTime)
		batch, err := e.streamBatch(r, cs, batchSize)
		if err != nil {
			e.cursors.checkin(cur, true) // a failed stream is closed, as mongod's
			return nil, err
		}
		if cs.invalidated {
			e.cursors.checkin(cur, true)
			return streamReply("nextBatch", batch, cs.pbrt, 0, ns), nil
		}
		wait := time.Until(deadline)
		if len(batch) > 0 || wait <= 0 {
			e.cursors.checkin(cur, false)
			return streamReply("nextBatch", batch, cs.pbrt, id, ns), nil
		}
		t := time.NewTimer(wait)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			e.cursors.checkin(cur, false)
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// maxStreamBatchBytes bounds the history read for one batch.
const maxStreamBatchBytes = 8 << 20

// streamBatch reads the visible history from cs.from on (at most n records
// when n > 0), turns the records of the stream's namespaces into events,
// runs the stream's pipeline over them, and moves cs.from and cs.pbrt on.
func (e *Engine) streamBatch(r *Request, cs *changeStream, n int64) (bson.A, error) {
	v, _ := e.hist.visible(e.opTime)
	hi := changeKey(v, math.MaxUint32)
	if bytes.Compare(cs.from, hi) >= 0 {
		return bson.A{}, nil // nothing new: the last token stands
	}
	if n <= 0 {
		n = math.MaxInt64
	}
	it, err := e.kv.NewIter(cs.from, hi)
	if err != nil {
		return nil, err
	}
	var events []bson.D
	var last, inval []byte
	var invalTS bson.Timestamp
	var invalWall bson.DateTime
	size, scanned := 0, int64(0)
	full := false
	for ok := it.First(); ok; ok = it.Next() {
		if scanned >= n || size >= maxStreamBatchBytes {
			full = true
			break
		}
		key := append([]byte(nil), it.Key()...)
		val := it.Value()
		last = key
		var rec struct {
			O  string        `bson:"o"`
			DB string        `bson:"db"`
			C  string        `bson:"c"`
			K  bson.RawValue `bson:"k"`
			W  bson.DateTime `bson:"w"`
			F  bson.Raw      `bson:"f,omitempty"`
			U  bson.Raw      `bson:"u,omitempty"`
			L  *bson.Binary  `bson:"l,omitempty"`
			N  int64         `bson:"n,omitempty"`
			T  bson.Raw      `bson:"t,omitempty"`
		}
		if err := bson.Unmarshal(val, &rec); err != nil {
			it.Close()
			return nil, mongoerr.New(mongoerr.InternalError, "change history record: %v", err)
		}
		if !cs.wants(rec.DB, rec.C) {
			continue
		}
		scanned++
		size += len(val)
		ts, _ := changeKeyTS(key)
		ev := bson.D{
			{Key: "_id", Value: tokenOf(key)},
			{Key: "operationType", Value: rec.O},
			{Key: "clusterTime", Value: ts},
			{Key: "wallTime", Value: rec.W},
		}
		switch {
		case rec.F != nil:
			ev = append(ev, bson.E{Key: "fullDocument", Value: rec.F})
		case rec.O == "update" && cs.lookup:
			doc, err := e.lookupDoc(rec.DB, rec.C, rec.K)
			if err != nil {
				it.Close()
				return nil, err
			}
			if doc == nil {
				ev = append(ev, bson.E{Key: "fullDocument", Value: nil})
			} else {
				ev = append(ev, bson.E{Key: "fullDocument", Value: doc})
			}
		}
		switch rec.O {
		case "drop":
			ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: rec.DB}, {Key: "coll", Value: rec.C}}})
		case "rename":
			ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: rec.DB}, {Key: "coll", Value: rec.C}}},
				bson.E{Key: "to", Value: rec.T})
		case "dropDatabase":
			ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: rec.DB}}})
		default:
			ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: rec.DB}, {Key: "coll", Value: rec.C}}},
				bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: rec.K}}})
		}
		if rec.U != nil {
			ev = append(ev, bson.E{Key: "updateDescription", Value: rec.U})
		}
		if rec.L != nil {
			ev = append(ev, bson.E{Key: "txnNumber", Value: rec.N}, bson.E{Key: "lsid", Value: bson.D{{Key: "id", Value: *rec.L}}})
		}
		// The stages read plain values: round-trip through BSON.
		b, err := bson.Marshal(ev)
		if err != nil {
			it.Close()
			return nil, err
		}
		d, err := bsonx.Decode(b)
		if err != nil {
			it.Close()
			return nil, err
		}
		events = append(events, d)
		if cs.db != "" && (cs.coll != "" && (rec.O == "drop" || rec.O == "rename") || cs.coll == "" && rec.O == "dropDatabase") {
			// The stream's collection (database) is gone: invalidate.
			inval, invalTS, invalWall = key, ts, rec.W
			break
		}
	}
	it.Close()
	if inval != nil {
		cs.invalidated = true
		cs.from = keyAfter(inval)
		cs.pbrt = invalidateTokenOf(inval)
	} else if full {
		cs.from = keyAfter(last)
		cs.pbrt = tokenOf(last)
	} else {
		cs.from = hi
		cs.pbrt = tokenOf(hi)
	}
	batch := bson.A{}
	if len(events) == 0 {
		return batch, nil
	}
	if err := e.runStreamStages(r, cs, events, &batch); err != nil {
		return nil, err
	}
	if inval != nil {
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: invalidateTokenOf(inval)}, {Key: "operationType", Value: "invalidate"},
			{Key: "clusterTime", Value: invalTS}, {Key: "wallTime", Value: invalWall}})
		if err != nil {
			return nil, err
		}
		batch = append(batch, bson.Raw(raw))
	}
	return batch, nil
}

// runStreamStages runs the stream's stages over events, appending the
// results to batch.
func (e *Engine) runStreamStages(r *Request, cs *changeStream, events []bson.D, batch *bson.A) error {
	env := &aggEnv{e: e, r: r, rt: e.newExprRuntime(r)}
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := cs.rest.Run(ctx, env, agg.Slice(events))
	if err != nil {
		return err
	}
	defer out.Close()
	for {
		d, ok, err := out.Next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		id, _ := bsonx.Get(d, "_id")
		if idd, isDoc := id.(bson.D); !isDoc || len(idd) != 1 || idd[0].Key != "_data" {
			return mongoerr.New(mongoerr.ChangeStreamFatalError, "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.")
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			return err
		}
		*batch = append(*batch, bson.Raw(raw))
	}
	return nil
}

// wants reports whether an event of db.coll belongs to the stream.
func (cs *changeStream) wants(db, coll string) bool {
	if strings.HasPrefix(coll, "system.") {
		return false
	}
	switch {
	case cs.db == "":
		return db != "admin" && db != "config" && db != "local"
	case cs.coll == "":
		return db == cs.db
	default:
		return db == cs.db && coll == cs.coll
	}
}

// lookupDoc reads the current live version of a document (fullDocument:
// updateLookup); nil when it is gone.
func (e *Engine) lookupDoc(db, coll string, id bson.RawValue) (bson.D, error) {
	c := e.cat.Get(db, coll)
	if c == nil {
		return nil, nil
	}
	d, err := bsonx.Decode(mustMarshal(bson.D{{Key: "v", Value: id}}))
	if err != nil {
		return nil, err
	}
	rec, err := c.getRecord(e.kv, docstore.IDKeyOf(d[0].Value))
	if err != nil || rec == nil {
		return nil, err
	}
	if !docstore.Visible(c.st().ds.Policy, rec, e.nowMS()) {
		return nil, nil
	}
	return rec.Doc()
}
