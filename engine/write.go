package engine

import (
	"bytes"
	"hash/fnv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// prepareNewDoc checks a document about to be stored (insert, replacement,
// update result, upsert) and returns it with _id first: mongod's rules for
// _id, spec §5.3 (no client _ts) and §4.1 (valid ttl while TTL is on).
// $-prefixed field names are storable since MongoDB 5.0, and empty field
// names always were (mongod's storage validation has no rule against them);
// the update package applies the rules that differ for updates.
func prepareNewDoc(s *collState, d bson.D, generateID bool) (bson.D, error) {
	idIdx := -1
	for i, f := range d {
		switch {
		case f.Key == "_id":
			idIdx = i
		case f.Key == "_ts":
			return nil, mongoerr.New(mongoerr.BadValue, "_ts is a system property maintained by the server: a document cannot set it")
		}
	}
	if idIdx < 0 {
		if !generateID {
			return nil, mongoerr.New(mongoerr.InvalidIdField, "document is missing _id")
		}
		d = append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, d...)
	} else if idIdx > 0 {
		id := d[idIdx]
		out := make(bson.D, 0, len(d))
		out = append(out, id)
		out = append(out, d[:idIdx]...)
		d = append(out, d[idIdx+1:]...)
	}
	switch id := d[0].Value.(type) {
	case bson.A:
		return nil, mongoerr.New(mongoerr.InvalidIdField, "The '_id' value cannot be of type array")
	case bson.Regex:
		return nil, mongoerr.New(mongoerr.InvalidIdField, "can't use a regex for _id")
	case bson.Undefined:
		return nil, mongoerr.New(mongoerr.InvalidIdField, "can't use a undefined for _id")
	case bson.D:
		for _, f := range id {
			if strings.HasPrefix(f.Key, "$") {
				return nil, mongoerr.New(mongoerr.DollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", f.Key)
			}
		}
	}
	if depth(d) > maxUserDepth {
		return nil, mongoerr.New(mongoerr.Overflow, "Document exceeds maximum nesting depth of %d", maxUserDepth)
	}
	if s.meta.HasTTL {
		if err := ttl.ValidateDocTTL(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// maxUserDepth is mongod's nesting limit for stored documents: maxBSONDepth
// (200) less the 20 levels it keeps for the system.
const maxUserDepth = 180

// depth counts nesting levels as mongod does for that limit: a document or
// array is one level plus its deepest non-empty child.
func depth(v any) int {
	deepest := 0
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if d := depth(e.Value); d > deepest {
				deepest = d
			}
		}
		if len(x) == 0 {
			return 0
		}
	case bson.A:
		for _, e := range x {
			if d := depth(e); d > deepest {
				deepest = d
			}
		}
		if len(x) == 0 {
			return 0
		}
	default:
		return 0
	}
	return deepest + 1
}

// nowTS is _ts for a write happening now (Unix seconds, spec §1).
func (e *Engine) nowTS() int64 { return e.nowMS() / 1000 }

// stageDoc stages one document change (newDoc in place of old, read
// through tx) with the _ts it gets, and returns what to account once the
// transaction commits.
//
// op names the change for change streams: "update" or "replace" (of a
// live document), "" to infer (insert, or replace of a live document),
// "-" for none (an update that changed nothing, a system document).
func (c *Collection) stageDoc(tx storage.Txn, s *collState, old *docstore.Record, newDoc bson.D, ts int64, op string) (func(), error) {
	size, err := c.writeDoc(tx, s, old, newDoc, ts, nil)
	if err != nil {
		return nil, err
	}
	if c.e.repl != nil && op != "-" {
		var oldDoc bson.D
		if old != nil && docstore.Visible(s.ds.Policy, old, c.e.nowMS()) {
			if oldDoc, err = old.Doc(); err != nil {
				return nil, err
			}
		}
		switch {
		case oldDoc == nil:
			op = "insert"
		case op == "":
			op = "replace"
		}
		c.noteChange(tx, op, oldDoc, newDoc)
	}
	return func() {
		if old == nil {
			c.nDocs.Add(1)
			c.size.Add(int64(size))
		} else {
			c.size.Add(int64(size - len(old.Raw)))
		}
	}, nil
}

// replaceByID stores newDoc under idKey in its own transaction, whatever
// is stored there (nothing, a live or an expired document: $merge's
// replacement by _id). Callers that decide from the stored document use
// withDoc instead.
func (c *Collection) replaceByID(r *Request, idKey []byte, newDoc bson.D) error {
	return c.writeTxn(r, idKey, func(tx storage.Txn, s *collState) (func(), error) {
		rd, _ := c.e.ds.ReaderOf(tx)
		old, err := c.getRecord(rd, idKey)
		if err != nil {
			return nil, err
		}
		nd, err := prepareNewDoc(s, newDoc, false)
		if err != nil {
			return nil, err
		}
		return c.stageDoc(tx, s, old, nd, c.e.nowTS(), "")
	})
}

// insertOne stores a new document; an expired holder of its _id is
// replaced (spec §6.3).
func (c *Collection) insertOne(r *Request, d bson.D) error {
	d, err := prepareNewDoc(c.st(), d, true)
	if err != nil {
		return err
	}
	idKey := docstore.IDKeyOf(d[0].Value)
	return c.writeTxn(r, idKey, func(tx storage.Txn, s *collState) (func(), error) {
		old, err := c.e.ds.IDFree(tx, &s.ds, idKey, d)
		if err != nil {
			return nil, err
		}
		r.retryNoteInsert(0)
		return c.stageDoc(tx, s, old, d, c.e.nowTS(), "")
	})
}

// lockDoc queues this process's single-document writers of idKey (see
// Collection.docLocks) and returns the unlock. Take it after the
// collection's shared lock, never before (DDL waits for that one).
func (c *Collection) lockDoc(idKey []byte) func() {
	h := fnv.New32a()
	h.Write(idKey)
	m := &c.docLocks[h.Sum32()%uint32(len(c.docLocks))]
	m.Lock()
	return m.Unlock
}

// writeTxn runs fn as one write of the document idKey (runTxn) under the
// collection's shared lock and the document's lock (lockDoc; always in
// that order, as withDoc), with the collection's state as the attempt sees
// it; a dropped collection fails with NamespaceNotFound.
func (c *Collection) writeTxn(r *Request, idKey []byte, fn func(tx storage.Txn, s *collState) (func(), error)) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if r == nil || r.txn == nil {
		defer c.lockDoc(idKey)()
	}
	return c.e.runTxn(r, func(tx storage.Txn) (func(), error) {
		if c.dropped.Load() {
			return nil, mongoerr.New(mongoerr.NamespaceNotFound, "collection was dropped")
		}
		return fn(tx, c.st())
	})
}

// writeDoc stages newDoc in place of old into tx through the document
// store (docstore.Store.WriteDoc: the document, its index and expiry
// entries, the unique checks), marks an index that became multikey in the
// collection's metadata, and notes the write for a multi-document
// transaction's restamp.
func (c *Collection) writeDoc(tx storage.Txn, s *collState, old *docstore.Record, newDoc bson.D, ts int64, body []byte) (int, error) {
	w, err := c.e.ds.WriteDoc(tx, &s.ds, old, newDoc, ts, body)
	if w.Multikey {
		c.markMultikey(s, newDoc)
	}
	if err != nil {
		return 0, err
	}
	noteStaged(tx, c, w.IDKey, ts)
	return w.Size, nil
}

// withDoc reads a matched document in a storage transaction, checks it is
// still live and still matches, and hands it to fn, which stages its change
// into tx; the transaction then commits, and is run again from a fresh
// snapshot when a concurrent write of the document conflicts. found is
// false when the document changed away meanwhile (the caller moves on or
// retries). With held the caller already holds the collection's lock.
func (c *Collection) withDoc(r *Request, cq *compiledQuery, idKey []byte, held bool, fn func(tx storage.Txn, s *collState, rec *docstore.Record, doc bson.D, pos int) (func(), error)) (found bool, err error) {
	if !held {
		c.mu.RLock()
		defer c.mu.RUnlock()
	}
	if r == nil || r.txn == nil {
		defer c.lockDoc(idKey)()
	}
	err = c.e.runTxn(r, func(tx storage.Txn) (func(), error) {
		found = false
		if c.dropped.Load() {
			return nil, nil
		}
		s := c.st()
		rd, _ := c.e.ds.ReaderOf(tx)
		rec, err := c.getRecord(rd, idKey)
		if err != nil || rec == nil || !s.visible(rec, c.e.nowMS()) {
			return nil, err
		}
		doc, err := rec.Doc()
		if err != nil {
			return nil, err
		}
		mdoc := doc
		if cq.withTS {
			mdoc = append(bsonx.CloneD(doc), bson.E{Key: "_ts", Value: rec.TS})
		}
		pos := -1
		if cq.m != nil {
			ok, p := cq.m.MatchesPos(mdoc)
			if !ok {
				return nil, nil
			}
			pos = p
		}
		found = true
		return fn(tx, s, rec, doc, pos)
	})
	return found, err
}

// matchedIDs runs a query and returns the _id keys of the live matches
// (all of them, or the first limit), so writes never revisit a document
// they moved within the scanned index.
func (cq *compiledQuery) matchedIDs(r *Request, limit int) ([][]byte, error) {
	if cq.srt != nil {
		src, err := cq.sortedRecords()
		if err != nil {
			return nil, err
		}
		var out [][]byte
		for _, md := range src {
			out = append(out, md.rec.IDKey)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return out, nil
	}
	mi := cq.matches()
	mi.rawOnly = cq.m == nil
	defer mi.sc.close()
	var out [][]byte
	for {
		if len(out)%1024 == 1023 {
			if err := r.CheckDeadline(); err != nil {
				return nil, err
			}
		}
		md, err := mi.next()
		if err != nil {
			return nil, err
		}
		if md == nil {
			return out, nil
		}
		out = append(out, md.rec.IDKey)
		if limit > 0 && len(out) >= limit {
			return out, nil
		}
	}
}

// sortedRecords returns the matches in sort order (findAndModify's sort).
func (cq *compiledQuery) sortedRecords() ([]*matchedDoc, error) {
	mi := cq.matches()
	src, err := cq.sortAll(mi)
	if err != nil {
		return nil, err
	}
	ss, ok := src.(*sortedSource)
	if !ok {
		return nil, nil
	}
	return ss.docs, nil
}

// stageDelete stages the removal of a document found by withDoc.
func (c *Collection) stageDelete(tx storage.Txn, s *collState, rec *docstore.Record) (func(), error) {
	if s.meta.DB == "admin" && s.meta.Name == "system.version" && bytes.Equal(rec.IDKey, fcvIDKey) {
		// OpObserverImpl::onDelete keeps the featureCompatibilityVersion document.
		return nil, mongoerr.New(40670, "removing FeatureCompatibilityVersion document is not allowed")
	}
	if err := docstore.DeleteDoc(tx, &s.ds, rec); err != nil {
		return nil, err
	}
	if c.e.repl != nil {
		doc, err := rec.Doc()
		if err != nil {
			return nil, err
		}
		c.noteChange(tx, "delete", doc, nil)
	}
	return func() {
		c.nDocs.Add(-1)
		c.size.Add(-int64(len(rec.Raw)))
	}, nil
}

// ensureStats initialises the stored-document counters once per collection
// by a scan. Engine.Open runs it for every collection before serving (and a
// new collection starts exact at zero), so writers only ever add to exact
// counters.
func (c *Collection) ensureStats() {
	c.statsOnce.Do(func() {
		m := c.Meta()
		p := docstore.CollPrefix(docstore.PfxDoc, m.ID)
		it, err := c.e.kv.NewIter(p, docstore.PrefixEnd(p))
		if err != nil {
			return
		}
		defer it.Close()
		var n, sz int64
		for ok := it.First(); ok; ok = it.Next() {
			n++
			sz += int64(len(it.Value()) - docstore.HeaderLen)
		}
		c.nDocs.Store(n)
		c.size.Store(sz)
	})
}

// insertChunk is how many documents of one insert command share a batch.
const insertChunk = 256

// insertMany stores the documents of one insert command. Each chunk of
// documents is one storage transaction (every document in it whole, so
// readers never see part of one), with duplicate _id and unique keys
// checked against the snapshot and against the chunk itself; concurrent
// inserters of other documents run in parallel, and a conflict (another
// writer claimed one of the chunk's _ids or unique values) runs the chunk
// again. A refused document adds nothing to the transaction; ordered
// inserts stop at it. raws, when given, are the documents as the client
// sent them, reused as the stored bytes when _id is already first.
func (c *Collection) insertMany(r *Request, docs bson.A, raws []bson.Raw, ordered bool) (n int64, errs bson.A, err error) {
	for i := 0; i < len(docs); {
		end := min(i+insertChunk, len(docs))
		stop := false
		ok, cerrs, cerr := c.insertChunk(r, docs, raws, i, end, ordered)
		n += ok
		errs = append(errs, cerrs...)
		if cerr != nil {
			return n, errs, cerr
		}
		if ordered && len(cerrs) > 0 {
			stop = true
		}
		if stop {
			break
		}
		i = end
	}
	return n, errs, nil
}

func (c *Collection) insertChunk(r *Request, docs bson.A, raws []bson.Raw, from, to int, ordered bool) (int64, bson.A, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var errs bson.A
	if c.dropped.Load() {
		for j := from; j < to; j++ {
			errs = append(errs, mongoerr.New(mongoerr.NamespaceNotFound, "collection was dropped").WriteError(j))
			if ordered {
				break
			}
		}
		return 0, errs, nil
	}
	var written int64
	err := c.e.runTxn(r, func(tx storage.Txn) (func(), error) {
		errs, written = nil, 0
		s := c.st()
		ts := c.e.nowTS()
		var added, addedBytes int64
		for j := from; j < to; j++ {
			d, isDoc := docs[j].(bson.D)
			var werr error
			if !isDoc {
				werr = mongoerr.New(mongoerr.TypeMismatch, "document to insert must be an object")
			} else {
				werr = c.insertStaged(tx, s, d, raws, j, ts, &added, &addedBytes)
			}
			if werr != nil {
				if storage.IsConflict(werr) {
					return nil, werr
				}
				errs = append(errs, mongoerr.From(werr).WriteError(j))
				if ordered {
					break
				}
				continue
			}
			r.retryNoteInsert(j)
			written++
		}
		return func() {
			c.nDocs.Add(added)
			c.size.Add(addedBytes)
		}, nil
	})
	if err != nil {
		return 0, nil, err
	}
	return written, errs, nil
}

// insertStaged stages the j-th document of an insert command into tx.
func (c *Collection) insertStaged(tx storage.Txn, s *collState, d bson.D, raws []bson.Raw, j int, ts int64, added, addedBytes *int64) error {
	nd, err := prepareNewDoc(s, d, true)
	if err != nil {
		return err
	}
	var body []byte
	if raws != nil && raws[j] != nil && len(nd) == len(d) && d[0].Key == "_id" {
		body = raws[j]
	}
	idKey := docstore.IDKeyOf(nd[0].Value)
	old, err := c.e.ds.IDFree(tx, &s.ds, idKey, nd)
	if err != nil {
		return err
	}
	size, err := c.writeDoc(tx, s, old, nd, ts, body)
	if err != nil {
		return err
	}
	c.noteChange(tx, "insert", nil, nd)
	replaced := 0
	if old != nil {
		replaced = len(old.Raw)
	} else {
		*added++
	}
	*addedBytes += int64(size - replaced)
	return nil
}
