package engine

import (
	"bytes"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
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

// commitDoc writes one document change in its own atomic batch.
func (c *Collection) commitDoc(r *Request, s *collState, old *record, newDoc bson.D) error {
	return c.commitDocAt(r, s, old, newDoc, c.e.nowTS())
}

// commitDocAt is commitDoc with the _ts the document gets.
func (c *Collection) commitDocAt(r *Request, s *collState, old *record, newDoc bson.D, ts int64) error {
	b := c.e.kv.NewBatch()
	defer b.Close()
	size, err := c.writeDoc(b, s, old, newDoc, ts, nil, nil)
	if err != nil {
		return err
	}
	if err := b.Commit(r.SyncRequested()); err != nil {
		return err
	}
	if old == nil {
		c.nDocs.Add(1)
		c.size.Add(int64(size))
	} else {
		c.size.Add(int64(size - len(old.raw)))
	}
	return nil
}

// insertOne stores a new document; an expired holder of its _id is
// replaced (spec §6.3).
func (c *Collection) insertOne(r *Request, d bson.D) error {
	s := c.st()
	d, err := prepareNewDoc(s, d, true)
	if err != nil {
		return err
	}
	idKey := idKeyOf(d[0].Value)
	unlock := c.lockDoc(idKey, false)
	defer unlock()
	if c.dropped.Load() {
		return mongoerr.New(mongoerr.NamespaceNotFound, "collection was dropped")
	}
	s = c.st()
	old, err := c.getRecord(c.e.kv, idKey)
	if err != nil {
		return err
	}
	if old != nil && s.visible(old, c.e.nowMS()) {
		return dupKeyError(s.meta, nil, d)
	}
	return c.commitDoc(r, s, old, d)
}

// withDoc re-reads a matched document under its write protection, checks
// it is still live and still matches, and hands it to fn. found is false
// when the document changed away meanwhile (the caller moves on or
// retries). With held the caller already holds the collection exclusively.
func (c *Collection) withDoc(cq *compiledQuery, idKey []byte, held bool, fn func(s *collState, rec *record, doc bson.D, pos int) error) (found bool, err error) {
	if !held {
		unlock := c.lockDoc(idKey, false)
		defer unlock()
	}
	if c.dropped.Load() {
		return false, nil
	}
	s := c.st()
	rec, err := c.getRecord(c.e.kv, idKey)
	if err != nil || rec == nil || !s.visible(rec, c.e.nowMS()) {
		return false, err
	}
	doc, err := rec.doc()
	if err != nil {
		return false, err
	}
	mdoc := doc
	if cq.withTS {
		mdoc = append(bsonx.CloneD(doc), bson.E{Key: "_ts", Value: rec.ts})
	}
	pos := -1
	if cq.m != nil {
		ok, p := cq.m.MatchesPos(mdoc)
		if !ok {
			return false, nil
		}
		pos = p
	}
	return true, fn(s, rec, doc, pos)
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
			out = append(out, md.rec.idKey)
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
		out = append(out, md.rec.idKey)
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

// deleteMatched removes a document found by withDoc.
func (c *Collection) deleteRecord(r *Request, s *collState, rec *record) error {
	if s.meta.DB == "admin" && s.meta.Name == "system.version" && bytes.Equal(rec.idKey, fcvIDKey) {
		// OpObserverImpl::onDelete keeps the featureCompatibilityVersion document.
		return mongoerr.New(40670, "removing FeatureCompatibilityVersion document is not allowed")
	}
	b := c.e.kv.NewBatch()
	defer b.Close()
	if err := c.deleteDoc(b, s, rec); err != nil {
		return err
	}
	if err := b.Commit(r.SyncRequested()); err != nil {
		return err
	}
	c.nDocs.Add(-1)
	c.size.Add(-int64(len(rec.raw)))
	return nil
}

// ensureStats initialises the stored-document counters once per collection
// by a scan. Engine.Open runs it for every collection before serving (and a
// new collection starts exact at zero), so writers only ever add to exact
// counters.
func (c *Collection) ensureStats() {
	c.statsOnce.Do(func() {
		m := c.Meta()
		p := collPrefix(pfxDoc, m.ID)
		it, err := c.e.kv.NewIter(p, prefixEnd(p))
		if err != nil {
			return
		}
		defer it.Close()
		var n, sz int64
		for ok := it.First(); ok; ok = it.Next() {
			n++
			sz += int64(len(it.Value()) - headerLen)
		}
		c.nDocs.Store(n)
		c.size.Store(sz)
	})
}

// insertChunk is how many documents of one insert command share a batch.
const insertChunk = 256

// insertMany stores the documents of one insert command. Each chunk of
// documents is written under the collection's exclusive lock into one
// atomic batch (every document in it whole, so readers never see part of
// one), with duplicate _id and unique keys checked against the store and
// against the chunk itself. A refused document adds nothing to the batch;
// ordered inserts stop at it. raws, when given, are the documents as the
// client sent them, reused as the stored bytes when _id is already first.
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
	c.mu.Lock()
	defer c.mu.Unlock()
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
	s := c.st()
	b := c.e.kv.NewBatch()
	defer b.Close()
	pending := map[string]struct{}{}
	ts, nowMS := c.e.nowTS(), c.e.nowMS()
	var added, addedBytes, written int64
	for j := from; j < to; j++ {
		d, isDoc := docs[j].(bson.D)
		var werr error
		var size int
		replaced := 0
		if !isDoc {
			werr = mongoerr.New(mongoerr.TypeMismatch, "document to insert must be an object")
		} else {
			var nd bson.D
			nd, werr = prepareNewDoc(s, d, true)
			if werr == nil {
				var body []byte
				if raws != nil && raws[j] != nil && len(nd) == len(d) && d[0].Key == "_id" {
					body = raws[j]
				}
				idKey := idKeyOf(nd[0].Value)
				pk := "\x00id" + string(idKey)
				if _, dup := pending[pk]; dup {
					werr = dupKeyError(s.meta, nil, nd)
				} else if old, gerr := c.getRecord(c.e.kv, idKey); gerr != nil {
					werr = gerr
				} else if old != nil && s.visible(old, nowMS) {
					werr = dupKeyError(s.meta, nil, nd)
				} else if size, werr = c.writeDoc(b, s, old, nd, ts, body, pending); werr == nil {
					pending[pk] = struct{}{}
					if old != nil {
						replaced = len(old.raw)
					}
				}
				if werr == nil && replaced == 0 {
					added++
				}
				if werr == nil {
					written++
				}
				if werr == nil {
					addedBytes += int64(size - replaced)
				}
			}
		}
		if werr != nil {
			errs = append(errs, mongoerr.From(werr).WriteError(j))
			if ordered {
				break
			}
		}
	}
	if b.Len() > 0 {
		if err := b.Commit(r.SyncRequested()); err != nil {
			return 0, nil, err
		}
	}
	c.nDocs.Add(added)
	c.size.Add(addedBytes)
	return written, errs, nil
}
