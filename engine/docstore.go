package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/keycodec"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// A stored document is a small fixed header followed by the BSON body:
//
//	[0]     format version (1)
//	[1:9]   _ts, Unix seconds of the last modification (int64, big-endian)
//	[9:17]  the document's own valid ttl, or ttl.NoOwnTTL (int64)
//
// Keeping _ts and the parsed ttl in the header lets every read decide expiry
// from 17 bytes without parsing the body (spec §5: _ts is not part of the
// user's document).
const headerLen = 17

const headerVersion = 1

func encodeValue(ts, own int64, body []byte) []byte {
	v := make([]byte, headerLen, headerLen+len(body))
	v[0] = headerVersion
	binary.BigEndian.PutUint64(v[1:], uint64(ts))
	binary.BigEndian.PutUint64(v[9:], uint64(own))
	return append(v, body...)
}

// record is one stored document as read from the store.
type record struct {
	idKey []byte
	ts    int64
	own   int64
	raw   bson.Raw
}

func decodeRecord(idKey, val []byte) (*record, error) {
	if len(val) < headerLen+5 || val[0] != headerVersion {
		return nil, fmt.Errorf("corrupt document value under key %x", idKey)
	}
	return &record{
		idKey: idKey,
		ts:    int64(binary.BigEndian.Uint64(val[1:])),
		own:   int64(binary.BigEndian.Uint64(val[9:])),
		raw:   bson.Raw(val[headerLen:]),
	}, nil
}

// deadline applies THE expiry rule to a record.
func (s *collState) deadline(r *record) int64 {
	if s.policy == nil {
		return ttl.Never
	}
	return s.policy.Deadline(r.ts, r.own, r.raw)
}

// visible reports whether a record is live at nowMS.
func (s *collState) visible(r *record, nowMS int64) bool {
	return !ttl.Expired(s.deadline(r), nowMS)
}

// doc decodes a record's body.
func (r *record) doc() (bson.D, error) { return bsonx.Decode(r.raw) }

// idKeyOf encodes an _id value.
func idKeyOf(id any) []byte { return keycodec.AppendValue(nil, id) }

// getRecord reads a document by encoded _id (expired or not).
func (c *Collection) getRecord(r storage.Reader, idKey []byte) (*record, error) {
	val, err := r.Get(docstore.DocKey(c.Meta().ID, idKey))
	if err == storage.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(append([]byte(nil), idKey...), val)
}

// --- index keys -------------------------------------------------------------

// indexKeys returns the encoded key tuples a document contributes to an
// index (several for a multikey index), or none when a sparse or partial
// index skips it.
func indexKeys(ix *index, doc bson.D) (keys [][]byte, multikey bool, err error) {
	if ix.isTSIndex() {
		return nil, false, nil
	}
	if ix.partial != nil && !ix.partial.Matches(doc) {
		return nil, false, nil
	}
	fieldVals := make([][]any, len(ix.Key))
	arrayField := -1
	allMissing := true
	for i, f := range ix.Key {
		vals, isArray, present := keyValuesAt(doc, f.Key)
		if present {
			allMissing = false
		}
		if isArray {
			if arrayField >= 0 && arrayField != i {
				return nil, false, mongoerr.New(171,
					"cannot index parallel arrays [%s] [%s]", ix.Key[arrayField].Key, f.Key)
			}
			arrayField = i
			multikey = true
		}
		fieldVals[i] = vals
	}
	if ix.Sparse && allMissing {
		return nil, false, nil
	}
	// Cartesian product (at most one field has several values).
	keys = [][]byte{nil}
	for i, vals := range fieldVals {
		desc := isDescending(ix.Key[i].Value)
		next := make([][]byte, 0, len(keys)*len(vals))
		for _, k := range keys {
			for _, v := range vals {
				nk := append([]byte(nil), k...)
				if desc {
					nk = keycodec.AppendValueDesc(nk, v)
				} else {
					nk = keycodec.AppendValue(nk, v)
				}
				next = append(next, nk)
			}
		}
		keys = next
	}
	return dedupKeys(keys), multikey, nil
}

func dedupKeys(keys [][]byte) [][]byte {
	if len(keys) < 2 {
		return keys
	}
	out := keys[:0]
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[string(k)] {
			seen[string(k)] = true
			out = append(out, k)
		}
	}
	return out
}

func isDescending(v any) bool {
	f, ok := bsonx.ToFloat(v)
	return ok && f < 0
}

// keyValuesAt returns the values an index on path takes for doc, as mongod
// generates keys: arrays along the path contribute each element; a missing
// field indexes as null; an empty array as undefined. present reports
// whether the full path exists anywhere (sparse indexes skip documents
// where it does not).
func keyValuesAt(doc bson.D, path string) (vals []any, isArray, present bool) {
	parts := strings.Split(path, ".")
	var walk func(v any, i int)
	walk = func(v any, i int) {
		if i == len(parts) {
			present = true
			if a, ok := v.(bson.A); ok {
				isArray = true
				if len(a) == 0 {
					vals = append(vals, bson.Undefined{})
				}
				vals = append(vals, a...)
				return
			}
			vals = append(vals, v)
			return
		}
		switch x := v.(type) {
		case bson.D:
			if fv, ok := bsonx.Get(x, parts[i]); ok {
				walk(fv, i+1)
			} else {
				vals = append(vals, nil)
			}
		case bson.A:
			isArray = true
			if idx, err := positional(parts[i]); err == nil && idx < len(x) {
				walk(x[idx], i+1)
				return
			}
			if len(x) == 0 {
				vals = append(vals, nil)
			}
			for _, el := range x {
				if d, ok := el.(bson.D); ok {
					walk(d, i)
				} else {
					vals = append(vals, nil)
				}
			}
		default:
			vals = append(vals, nil)
		}
	}
	walk(doc, 0)
	return vals, isArray, present
}

func positional(s string) (int, error) {
	if s == "" || len(s) > 9 {
		return 0, fmt.Errorf("not positional")
	}
	n := 0
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, fmt.Errorf("not positional")
		}
		n = n*10 + int(ch-'0')
	}
	return n, nil
}

// --- writes -----------------------------------------------------------------

// writeDoc stages newDoc (with _id first) in place of old (nil for an
// insert or when no document is stored) into the transaction tx,
// maintaining every index and the expiry index. old must have been read
// through tx: writing the document's key makes a concurrent writer of the
// same document conflict. The transaction is committed by the caller.
//
// body, when not nil, is newDoc already encoded (an inserted document sent
// with _id first), so it is not marshalled again. Every check runs before
// anything is staged, so a refused document leaves the transaction as it
// was. The _id and unique keys the document takes are claimed in b (see
// docTxn), so later writes of the same transaction see them as taken.
func (c *Collection) writeDoc(b storage.Txn, s *collState, old *record, newDoc bson.D, ts int64, body []byte) (size int, err error) {
	if body == nil {
		if body, err = bson.Marshal(newDoc); err != nil {
			return 0, mongoerr.New(mongoerr.BadValue, "cannot encode document: %v", err)
		}
	}
	if len(body) > maxBSONSize {
		return 0, mongoerr.New(mongoerr.BSONObjectTooLarge, "object to insert too large. size in bytes: %d, max size: %d", len(body), maxBSONSize)
	}
	id, _ := bsonx.Get(newDoc, "_id")
	idKey := idKeyOf(id)
	own := ttl.OwnTTL(newDoc)
	m := s.meta
	var oldDoc bson.D
	if old != nil {
		if oldDoc, err = old.doc(); err != nil {
			return 0, err
		}
	}
	// An expired old version holds no keys (spec §6.3): its entries may be
	// missing (index builds skip expired documents) and its unique keys may
	// have been taken by live documents since, so every key of the new
	// version is checked and written afresh; its old entries are deleted.
	oldLive := old != nil && s.visible(old, c.e.nowMS())
	type change struct {
		prefix   []byte
		del, add [][]byte
		unique   bool
		ix       *index
	}
	changes := make([]change, 0, len(s.indexes))
	metaChanged := false
	for _, ix := range s.indexes {
		var oldKeys, newKeys [][]byte
		if oldDoc != nil {
			oldKeys, _, _ = indexKeys(ix, oldDoc)
		}
		var mk bool
		newKeys, mk, err = indexKeys(ix, newDoc)
		if err != nil {
			return 0, err
		}
		if mk && !ix.Multikey {
			metaChanged = true
		}
		ch := change{prefix: docstore.IndexPrefix(m.ID, ix.ID), ix: ix}
		var added [][]byte
		ch.del, added = diffKeys(oldKeys, newKeys, oldLive)
		for _, k := range added {
			if ix.refusesDuplicates() {
				if err := c.checkUnique(b, s, ix, ch.prefix, k, idKey, newDoc); err != nil {
					return 0, err
				}
			}
			ch.add = append(ch.add, k)
		}
		changes = append(changes, ch)
	}
	// All checks passed: write.
	for _, ch := range changes {
		for _, k := range ch.del {
			if err := b.Delete(cat(cat(ch.prefix, k), old.idKey)); err != nil {
				return 0, err
			}
		}
		for _, k := range ch.add {
			if ch.ix.refusesDuplicates() {
				claim(b, string(ch.prefix)+string(k), idKey)
			}
			if err := b.Set(cat(cat(ch.prefix, k), idKey), idKey); err != nil {
				return 0, err
			}
		}
	}
	if metaChanged {
		c.markMultikey(s, newDoc)
	}
	if old != nil {
		if err := c.deleteExpiryEntry(b, m.ID, old); err != nil {
			return 0, err
		}
	}
	nr := &record{idKey: idKey, ts: ts, own: own}
	if err := c.setExpiryEntry(b, m.ID, nr, len(body)); err != nil {
		return 0, err
	}
	if err := b.Set(docstore.DocKey(m.ID, idKey), encodeValue(ts, own, body)); err != nil {
		return 0, err
	}
	claim(b, idClaim(idKey), idKey)
	noteStaged(b, c, idKey, ts)
	return len(body), nil
}

// setExpiryEntry files a document in the expiry index (spec §8): own valid
// ttl n > 0 → keyed by its deadline; no own ttl → keyed by _ts (inherits
// DefaultTTL, whatever it is at reaping time); own ttl -1 → not filed. The
// entry depends only on the document, so TTL settings never rewrite it.
func (c *Collection) setExpiryEntry(b storage.Txn, collID uint64, r *record, size int) error {
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], uint32(size))
	switch {
	case r.own == -1:
		return nil
	case r.own > 0:
		return b.Set(docstore.ExpiryKey(collID, docstore.ExpDeadline, (r.ts+r.own)*1000, r.idKey), v[:])
	default:
		return b.Set(docstore.ExpiryKey(collID, docstore.ExpTS, r.ts, r.idKey), v[:])
	}
}

func (c *Collection) deleteExpiryEntry(b storage.Txn, collID uint64, r *record) error {
	switch {
	case r.own == -1:
		return nil
	case r.own > 0:
		return b.Delete(docstore.ExpiryKey(collID, docstore.ExpDeadline, (r.ts+r.own)*1000, r.idKey))
	default:
		return b.Delete(docstore.ExpiryKey(collID, docstore.ExpTS, r.ts, r.idKey))
	}
}

// deleteDoc stages the removal of a stored document (read through b) with
// its index and expiry entries.
func (c *Collection) deleteDoc(b storage.Txn, s *collState, old *record) error {
	doc, err := old.doc()
	if err != nil {
		return err
	}
	for _, ix := range s.indexes {
		keys, _, _ := indexKeys(ix, doc)
		prefix := docstore.IndexPrefix(s.meta.ID, ix.ID)
		for _, k := range keys {
			if err := b.Delete(append(append(append([]byte(nil), prefix...), k...), old.idKey...)); err != nil {
				return err
			}
		}
	}
	if err := c.deleteExpiryEntry(b, s.meta.ID, old); err != nil {
		return err
	}
	return b.DeleteSized(docstore.DocKey(s.meta.ID, old.idKey), uint32(headerLen+len(old.raw)))
}

// checkUnique refuses a key that a live document other than idKey holds.
// Expired holders do not count (spec §6.3).
//
// The probe reads tx's snapshot and locks the value's guard key (the index
// prefix and value without an _id, a key no entry has): two transactions
// claiming one value both lock its guard, so the later committer conflicts
// and re-checks, and a unique index is never violated. A holder found in
// the snapshot that has let go of the value since (updated, deleted) is a
// conflict too, not a duplicate: the retry sees the current state, as
// mongod's storage engine would make it retry.
func (c *Collection) checkUnique(tx storage.Txn, s *collState, ix *index, prefix, key, idKey []byte, doc bson.D) error {
	lo := append(append([]byte(nil), prefix...), key...)
	if err := tx.LockKeys(lo); err != nil {
		return err
	}
	rd, latest := c.e.readerOf(tx)
	if latest {
		// An earlier document of this (insert) transaction took the
		// value: the latest committed state does not show it.
		if owner, ok := claimedBy(tx, string(lo)); ok && owner != string(idKey) {
			return dupKeyError(s.meta, &ix.indexMeta, doc)
		}
	}
	it, err := rd.NewIter(lo, docstore.PrefixEnd(lo))
	if err != nil {
		return err
	}
	defer it.Close()
	now := c.e.nowMS()
	for ok := it.First(); ok; ok = it.Next() {
		other := append([]byte(nil), it.Value()...)
		if bytes.Equal(other, idKey) {
			continue
		}
		r, err := c.getRecord(rd, other)
		if err != nil {
			return err
		}
		if r == nil || !s.visible(r, now) {
			continue
		}
		if latest || claimed(tx, string(lo)) {
			// Live now, or a write of this transaction.
			return dupKeyError(s.meta, &ix.indexMeta, doc)
		}
		if stale, err := c.heldSince(s, append(lo, other...), other, now); err != nil {
			return err
		} else if stale {
			return storage.ErrConflict
		}
		return dupKeyError(s.meta, &ix.indexMeta, doc)
	}
	return it.Error()
}

// heldSince reports whether a holder found live in a snapshot has let go
// since: its entry entryKey or its live document is gone from the latest
// committed state.
func (c *Collection) heldSince(s *collState, entryKey, idKey []byte, now int64) (stale bool, err error) {
	if entryKey != nil {
		if _, err := c.e.kv.Get(entryKey); err == storage.ErrNotFound {
			return true, nil
		} else if err != nil {
			return false, err
		}
	}
	r, err := c.getRecord(c.e.kv, idKey)
	if err != nil {
		return false, err
	}
	return r == nil || !s.visible(r, now), nil
}

// dupKeyError renders mongod's E11000 error with keyPattern and keyValue.
func dupKeyError(m *collMeta, ix *indexMeta, doc bson.D) error {
	pattern := bson.D{{Key: "_id", Value: int32(1)}}
	name := "_id_"
	if ix != nil {
		pattern, name = ix.Key, ix.Name
	}
	keyValue := bson.D{}
	for _, f := range pattern {
		vals, _, _ := keyValuesAt(doc, f.Key)
		var v any
		if len(vals) > 0 {
			v = vals[0]
		}
		keyValue = append(keyValue, bson.E{Key: f.Key, Value: v})
	}
	return &mongoerr.Error{
		Code:  mongoerr.DuplicateKey,
		Msg:   fmt.Sprintf("E11000 duplicate key error collection: %s index: %s dup key: %s", m.ns(), name, shortJSON(keyValue)),
		Extra: bson.D{{Key: "keyPattern", Value: pattern}, {Key: "keyValue", Value: keyValue}},
	}
}

func shortJSON(d bson.D) string {
	var sb strings.Builder
	sb.WriteString("{ ")
	for i, e := range d {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(e.Key)
		sb.WriteString(": ")
		b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: e.Value}}, false, false)
		if err == nil {
			s := string(b)
			s = strings.TrimSuffix(strings.TrimPrefix(s, `{"v":`), "}")
			sb.WriteString(s)
		}
	}
	sb.WriteString(" }")
	return sb.String()
}

// markMultikey records that an index became multikey (the planner then
// stops intersecting range bounds on it). Done outside the write batch:
// being conservative early is harmless.
func (c *Collection) markMultikey(s *collState, doc bson.D) {
	m := s.meta.clone()
	changed := false
	for i := range m.Indexes {
		if m.Indexes[i].Multikey {
			continue
		}
		for _, ix := range s.indexes {
			if ix.ID == m.Indexes[i].ID {
				if _, mk, _ := indexKeys(ix, doc); mk {
					m.Indexes[i].Multikey = true
					changed = true
				}
			}
		}
	}
	if changed {
		c.e.metaMu.Lock()
		defer c.e.metaMu.Unlock()
		// Re-read the current meta under metaMu: another writer may have
		// published in between; only the flags are merged.
		cur := c.Meta().clone()
		for i := range cur.Indexes {
			for _, x := range m.Indexes {
				if x.ID == cur.Indexes[i].ID && x.Multikey {
					cur.Indexes[i].Multikey = true
				}
			}
		}
		_ = c.updateMeta(cur)
	}
}

// maxBSONSize is the largest document (16 MiB), as mongod.
const maxBSONSize = 16 * 1024 * 1024
