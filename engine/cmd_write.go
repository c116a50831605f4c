package engine

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/update"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
)

func init() {
	Register(
		&Command{Name: "insert", Help: "insert documents", Write: true, Run: cmdInsert},
		&Command{Name: "update", Help: "update documents", Write: true, Run: cmdUpdate},
		&Command{Name: "delete", Help: "delete documents", Write: true, Run: cmdDelete},
		&Command{Name: "findAndModify", Aliases: []string{"findandmodify"}, Help: "find one document and update, replace or remove it", Write: true, Run: cmdFindAndModify},
	)
}

var insertFields = map[string]bool{"insert": true, "documents": true, "ordered": true, "bypassDocumentValidation": true, "bypassEmptyTsReplacement": true}

// orderedArg defaults to true.
func orderedArg(r *Request) bool {
	v, ok := r.Arg("ordered")
	if !ok {
		return true
	}
	b, isBool := v.(bool)
	return !isBool || b
}

func arrayArg(r *Request, key string) (bson.A, error) {
	v, ok := r.Arg(key)
	if !ok {
		return nil, mongoerr.New(40414, "BSON field '%s.%s' is missing but a required field", r.Name, key)
	}
	a, isArr := v.(bson.A)
	if !isArr {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", r.Name, key, bsonx.TypeName(v))
	}
	return a, nil
}

// writeReply renders n, nModified and writeErrors.
func writeReply(n int64, extra bson.D, errs bson.A) bson.D {
	out := bson.D{{Key: "n", Value: int32OrInt64(n)}}
	out = append(out, extra...)
	if len(errs) > 0 {
		out = append(out, bson.E{Key: "writeErrors", Value: errs})
	}
	return out
}

func cmdInsert(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, insertFields); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	docs, err := arrayArg(r, "documents")
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and 100000. Got 0 operations.")
	}
	if len(docs) > 100000 {
		return nil, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and 100000. Got %d operations.", len(docs))
	}
	if err := checkInsertDocuments(docs); err != nil {
		return nil, err
	}
	fix, err := e.emptyTSFixer(r)
	if err != nil {
		return nil, err
	}
	raws := rawDocuments(r, len(docs))
	if fix != nil {
		docs = fixInsertTimestamps(docs, raws, fix)
	}
	c, _, err := e.collectionForWrite(r.DB, coll)
	if err != nil {
		return nil, err
	}
	ordered := orderedArg(r)
	if len(docs) == 1 {
		// One document: the per-document path (its _id stripe only), so
		// concurrent single inserts into one collection run in parallel.
		d, ok := docs[0].(bson.D)
		var werr error
		if !ok {
			werr = mongoerr.New(mongoerr.TypeMismatch, "document to insert must be an object")
		} else {
			werr = c.insertOne(r, d)
		}
		if werr != nil {
			return writeReply(0, nil, bson.A{mongoerr.From(werr).WriteError(0)}), nil
		}
		return writeReply(1, nil, nil), nil
	}
	n, errs, err := c.insertMany(r, docs, raws, ordered)
	if err != nil {
		return nil, err
	}
	return writeReply(n, nil, errs), nil
}

// rawDocuments returns the insert's documents as the client encoded them
// (nil when they cannot be matched one to one with the decoded ones).
func rawDocuments(r *Request, n int) []bson.Raw {
	v, err := r.Raw.LookupErr("documents")
	if err != nil {
		return nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil || len(vals) != n {
		return nil
	}
	out := make([]bson.Raw, n)
	for i, rv := range vals {
		if d, ok := rv.DocumentOK(); ok {
			out[i] = d
		}
	}
	return out
}

var updateFields = map[string]bool{"update": true, "updates": true, "ordered": true, "bypassDocumentValidation": true, "bypassEmptyTsReplacement": true, "let": true}
var updateStmtFields = map[string]bool{"q": true, "u": true, "multi": true, "upsert": true, "arrayFilters": true, "hint": true, "collation": true, "c": true}

func cmdUpdate(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, updateFields); err != nil {
		return nil, err
	}
	if err := e.applyStatementLet(r, "updates"); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	stmts, err := arrayArg(r, "updates")
	if err != nil {
		return nil, err
	}
	if _, err := bypassEmptyTsReplacement(r); err != nil {
		return nil, err
	}
	if err := checkUpdateStatements(stmts); err != nil {
		return nil, err
	}
	ordered := orderedArg(r)
	var n, nMod int64
	var errs, upserted bson.A
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "update statement must be an object")
		}
		res, werr := e.updateStatement(r, coll, st)
		if werr != nil {
			me := mongoerr.From(werr)
			if me.Code == 40414 || me.Code == 40415 {
				return nil, me
			}
			errs = append(errs, me.WriteError(i))
			if ordered {
				break
			}
			continue
		}
		n += res.matched
		nMod += res.modified
		if res.upsertedID != nil {
			n++
			upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: res.upsertedID}})
		}
	}
	extra := bson.D{}
	if len(upserted) > 0 {
		extra = append(extra, bson.E{Key: "upserted", Value: upserted})
	}
	extra = append(extra, bson.E{Key: "nModified", Value: int32OrInt64(nMod)})
	return writeReply(n, extra, errs), nil
}

type updateResult struct {
	matched, modified int64
	upsertedID        any
	before, after     bson.D // for findAndModify
	// dupRetries counts upserts that found their _id taken by a document
	// committed after they matched nothing (upsertDupRetries).
	dupRetries int
}

// upsertDupRetries bounds how often an upsert whose insert collides on _id
// with a concurrent upsert's document matches again (and then updates it),
// as mongod retries an upsert on DuplicateKey (SERVER-14322); a persistent
// collision (a document with that _id that does not match) is E11000.
const upsertDupRetries = 3

func stmtFields(r *Request, st bson.D, known map[string]bool, cmd string) error {
	for _, f := range st {
		sup, ok := known[f.Key]
		if !ok {
			return mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", cmd, f.Key)
		}
		if !sup {
			return mongoerr.New(mongoerr.NotImplemented, "%s option '%s' is not supported by mayfly", cmd, f.Key)
		}
		if f.Key == "collation" {
			if err := checkCollation(f.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Engine) updateStatement(r *Request, coll string, st bson.D) (*updateResult, error) {
	if err := stmtFields(r, st, updateStmtFields, "update.updates"); err != nil {
		return nil, err
	}
	qv, _ := bsonx.Get(st, "q")
	q, ok := qv.(bson.D)
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'update.updates.q' is missing but a required field")
	}
	u, ok := bsonx.Get(st, "u")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'update.updates.u' is missing but a required field")
	}
	multi := stmtBool(st, "multi")
	upsert := stmtBool(st, "upsert")
	af, _ := bsonx.Get(st, "arrayFilters")
	afa, _ := af.(bson.A)
	hint := hintValue(bsonx.Get(st, "hint"))
	upd, err := update.Compile(u, afa)
	if err != nil {
		return nil, err
	}
	if _, hasC := bsonx.Get(st, "c"); hasC && !upd.IsPipeline() {
		return nil, mongoerr.New(51198, "Constant values may only be specified for pipeline updates")
	}
	if multi && upd.IsReplacement() {
		return nil, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
	}
	fix, err := e.emptyTSFixer(r)
	if err != nil {
		return nil, err
	}
	upd.FixReplacement(fix)
	return e.applyUpdate(r, coll, &querySpec{filter: q, hint: hint}, upd, multi, upsert, false)
}

func stmtBool(st bson.D, key string) bool {
	v, _ := bsonx.Get(st, key)
	return truthy(v)
}

// applyUpdate runs one update (or findAndModify update) statement. Each
// matched document is re-read, re-matched and rewritten in its own storage
// transaction, so concurrent updates never lose each other (withDoc). An
// upsert takes its transaction before it matches: when nothing matches it
// inserts under the collection's upsert guard, so of two concurrent upserts
// of one missing document the later committer conflicts, matches again and
// updates what the first inserted.
func (e *Engine) applyUpdate(r *Request, coll string, q *querySpec, upd *update.Update, multi, upsert, wantDocs bool) (*updateResult, error) {
	var c *Collection
	var err error
	if upsert {
		c, _, err = e.collectionForWrite(r.DB, coll)
		if err != nil {
			return nil, err
		}
	} else if c = e.cat.Get(r.DB, coll); c == nil {
		return &updateResult{}, validateQuery(q)
	}
	res := &updateResult{}
	for attempt := 0; attempt < maxTxnAttempts; attempt++ {
		var guard storage.Txn
		switch {
		case r.txn != nil:
			guard = r.txn // a multi-document transaction: matched at its snapshot
		case upsert:
			// Begin before matching: "nothing matches" is then true as of
			// the guard transaction's snapshot or later.
			if guard, err = e.beginDocTxn(); err != nil {
				return nil, err
			}
		}
		done, err := e.updateAttempt(r, c, q, upd, multi, upsert, wantDocs, res, guard)
		if guard != nil && guard != r.txn {
			_ = guard.Rollback()
		}
		if done || err != nil {
			return res, err
		}
		if attempt > 0 {
			backoff(attempt)
		}
	}
	return res, mongoerr.New(mongoerr.WriteConflict, "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.")
}

// updateAttempt matches once and updates what matched (or upserts, in
// guard). done is false when the attempt must be repeated: a single update
// whose match changed away, or an upsert whose insert conflicted.
func (e *Engine) updateAttempt(r *Request, c *Collection, q *querySpec, upd *update.Update, multi, upsert, wantDocs bool, res *updateResult, guard storage.Txn) (done bool, err error) {
	cq, err := c.compileQuery(r, q)
	if err != nil {
		return true, err
	}
	limit := 1
	if multi {
		limit = 0
	}
	ids, err := cq.matchedIDs(r, limit)
	if err != nil {
		return true, err
	}
	raced := false
	for _, id := range ids {
		found, err := c.withDoc(r, cq, id, false, func(tx storage.Txn, s *collState, rec *docstore.Record, doc bson.D, pos int) (func(), error) {
			nd, modified, err := upd.Apply(doc, pos, false, e.clock.Now())
			if err != nil {
				return nil, err
			}
			if err := checkIDUnchanged(doc, nd); err != nil {
				return nil, err
			}
			nd, err = prepareNewDoc(s, nd, false)
			if err != nil {
				return nil, err
			}
			ts := e.nowTS()
			op := "update"
			switch {
			case !modified:
				op = "-"
			case upd.IsReplacement():
				op = "replace"
			}
			account, err := c.stageDoc(tx, s, rec, nd, ts, op)
			if err != nil {
				return nil, err
			}
			r.retryNoteWrite(modified, nil, doc, rec.TS, nd, ts)
			record := func() {
				res.matched++
				if modified {
					res.modified++
				}
				if wantDocs { // with _ts: findAndModify's fields may name it (spec §5.2)
					res.before, res.after = withTS(doc, rec.TS), withTS(nd, ts)
				}
			}
			if r.txn != nil {
				// In a multi-document transaction this runs once and the
				// statement's reply counts it now (n, nModified, the
				// findAndModify value); only the accounting waits for the
				// commit.
				record()
				return account, nil
			}
			return func() { account(); record() }, nil
		})
		if err != nil {
			return true, err
		}
		if !found && !multi {
			raced = true
		}
		if found && !multi {
			return true, nil
		}
	}
	if raced {
		return false, nil // the document changed under us: match again
	}
	if res.matched > 0 || !upsert {
		return true, nil
	}
	err = e.upsertInsert(r, c, guard, q.filter, upd, res, wantDocs)
	if mongoerr.Is(err, mongoerr.DuplicateKey) && r.txn == nil && res.dupRetries < upsertDupRetries {
		// Read at the latest state, the _id may belong to a concurrent
		// upsert that committed after this one matched nothing: match again.
		res.dupRetries++
		return false, nil
	}
	if storage.IsConflict(err) && r.txn != nil {
		e.writeConflicts.Add(1)
		return true, errWriteConflictInTxn()
	}
	if storage.IsConflict(err) {
		e.writeConflicts.Add(1)
		return false, nil
	}
	return true, err
}

// upsertInsert inserts the upsert's seed with the update applied, in tx
// (begun before the match found nothing), under the collection's upsert
// guard.
func (e *Engine) upsertInsert(r *Request, c *Collection, tx storage.Txn, filter bson.D, upd *update.Update, res *updateResult, wantDocs bool) error {
	seed, err := upd.UpsertSeed(filter)
	if err != nil {
		return err
	}
	seed = bsonx.Delete(seed, "_ts") // spec §5.3: a filter's _ts is not copied
	var nd bson.D
	nd, _, err = upd.Apply(seed, -1, true, e.clock.Now())
	if id, ok := bsonx.Get(seed, "_id"); ok && err == nil && upd.IsReplacement() {
		if _, has := bsonx.Get(nd, "_id"); !has {
			nd = append(bson.D{{Key: "_id", Value: id}}, nd...)
		}
	}
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.dropped.Load() {
		return mongoerr.New(mongoerr.NamespaceNotFound, "collection was dropped")
	}
	s := c.st()
	nd, err = prepareNewDoc(s, nd, true)
	if err != nil {
		return err
	}
	if err := tx.LockKeys(docstore.UpsertGuardKey(s.meta.ID)); err != nil {
		return err
	}
	idKey := docstore.IDKeyOf(nd[0].Value)
	old, err := c.e.ds.IDFree(tx, &s.ds, idKey, nd)
	if err != nil {
		return err
	}
	ts := e.nowTS()
	account, err := c.stageDoc(tx, s, old, nd, ts, "")
	if err != nil {
		return err
	}
	if r.txn != nil {
		if r.txnOnCommit != nil {
			*r.txnOnCommit = append(*r.txnOnCommit, account)
		}
	} else {
		ctx := context.Background()
		if r.Ctx != nil {
			ctx = r.Ctx
		}
		r.retryNoteWrite(false, nd[0].Value, nil, 0, nd, ts)
		if err := e.commitWrite(ctx, r, tx); err != nil {
			return err
		}
		account()
	}
	res.upsertedID = nd[0].Value
	if wantDocs {
		res.after = withTS(nd, ts)
	}
	return nil
}

func checkIDUnchanged(before, after bson.D) error {
	a, _ := bsonx.Get(before, "_id")
	b, ok := bsonx.Get(after, "_id")
	if !ok {
		return nil // prepareNewDoc restores nothing: replacement keeps _id via update package
	}
	if bsonx.Compare(a, b) != 0 || bsonx.TypeNumber(a) != bsonx.TypeNumber(b) {
		return mongoerr.New(mongoerr.ImmutableField, "Performing an update on the path '_id' would modify the immutable field '_id'")
	}
	return nil
}

var deleteFields = map[string]bool{"delete": true, "deletes": true, "ordered": true, "bypassDocumentValidation": true, "bypassEmptyTsReplacement": true, "let": true}
var deleteStmtFields = map[string]bool{"q": true, "limit": true, "hint": true, "collation": true}

func cmdDelete(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, deleteFields); err != nil {
		return nil, err
	}
	if err := e.applyStatementLet(r, "deletes"); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	stmts, err := arrayArg(r, "deletes")
	if err != nil {
		return nil, err
	}
	if err := checkDeleteStatements(stmts); err != nil {
		return nil, err
	}
	ordered := orderedArg(r)
	c := e.cat.Get(r.DB, coll)
	var n int64
	var errs bson.A
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "delete statement must be an object")
		}
		if err := stmtFields(r, st, deleteStmtFields, "delete.deletes"); err != nil {
			return nil, err
		}
		qv, _ := bsonx.Get(st, "q")
		q, ok := qv.(bson.D)
		if !ok {
			return nil, mongoerr.New(40414, "BSON field 'delete.deletes.q' is missing but a required field")
		}
		lv, ok := bsonx.Get(st, "limit")
		if !ok {
			return nil, mongoerr.New(40414, "BSON field 'delete.deletes.limit' is missing but a required field")
		}
		limit, _ := bsonx.ToInt64(lv)
		if limit != 0 && limit != 1 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %v", lv)
		}
		if c == nil {
			if werr := validateQuery(&querySpec{filter: q}); werr != nil {
				errs = append(errs, mongoerr.From(werr).WriteError(i))
				if ordered {
					break
				}
			}
			continue
		}
		hint := hintValue(bsonx.Get(st, "hint"))
		deleted, werr := c.deleteMatching(r, &querySpec{filter: q, hint: hint}, limit == 1, nil)
		n += deleted
		if werr != nil {
			errs = append(errs, mongoerr.From(werr).WriteError(i))
			if ordered {
				break
			}
		}
	}
	return writeReply(n, nil, errs), nil
}

// deleteMatching deletes the live documents matching q (one when single).
func (c *Collection) deleteMatching(r *Request, q *querySpec, single bool, got *bson.D) (int64, error) {
	var n int64
	for attempt := 0; attempt < 100; attempt++ {
		cq, err := c.compileQuery(r, q)
		if err != nil {
			return n, err
		}
		limit := 0
		if single {
			limit = 1
		}
		ids, err := cq.matchedIDs(r, limit)
		if err != nil {
			return n, err
		}
		raced := false
		for _, id := range ids {
			found, err := c.withDoc(r, cq, id, false, func(tx storage.Txn, s *collState, rec *docstore.Record, doc bson.D, _ int) (func(), error) {
				account, err := c.stageDelete(tx, s, rec)
				if err != nil {
					return nil, err
				}
				r.retryNoteWrite(false, nil, doc, rec.TS, nil, 0)
				if r.txn != nil {
					// In a multi-document transaction: the value now (the
					// reply needs it), the accounting at the commit.
					if got != nil {
						*got = withTS(doc, rec.TS)
					}
					return account, nil
				}
				return func() {
					account()
					if got != nil {
						*got = withTS(doc, rec.TS)
					}
				}, nil
			})
			if err != nil {
				return n, err
			}
			if found {
				n++
				if single {
					return n, nil
				}
			} else if single {
				raced = true
			}
		}
		if !raced {
			return n, nil
		}
	}
	return n, nil
}
