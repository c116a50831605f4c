// Package docstore is the document store beneath the engine's command
// layer: the key layout (keys.go), the stored record format, index-key
// computation, and the staging of a document write or delete into a
// storage transaction with its secondary-index and expiry-index entries,
// including the unique-value checks (guard keys and the claims of a
// transaction, txn.go). Its only way to the key-value store is the storage
// transaction (storage.Txn, storage.TxnKV): the engine decides what to
// write (commands, catalog, planning, TTL policy) and hands the docstore
// the collection's state as plain values (Coll, Index).
package docstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/keycodec"
	"github.com/mayflydb/mayfly/engine/query"
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
const HeaderLen = 17

const headerVersion = 1

// EncodeValue builds a stored document value: header and body.
func EncodeValue(ts, own int64, body []byte) []byte {
	v := make([]byte, HeaderLen, HeaderLen+len(body))
	v[0] = headerVersion
	binary.BigEndian.PutUint64(v[1:], uint64(ts))
	binary.BigEndian.PutUint64(v[9:], uint64(own))
	return append(v, body...)
}

// Record is one stored document as read from the store.
type Record struct {
	IDKey []byte   // the encoded _id
	TS    int64    // _ts, Unix seconds of the last modification
	Own   int64    // the document's own valid ttl, or ttl.NoOwnTTL
	Raw   bson.Raw // the body
}

// DecodeRecord decodes a stored value (header and body) read under the
// encoded _id idKey.
func DecodeRecord(idKey, val []byte) (*Record, error) {
	if len(val) < HeaderLen+5 || val[0] != headerVersion {
		return nil, fmt.Errorf("corrupt document value under key %x", idKey)
	}
	return &Record{
		IDKey: idKey,
		TS:    int64(binary.BigEndian.Uint64(val[1:])),
		Own:   int64(binary.BigEndian.Uint64(val[9:])),
		Raw:   bson.Raw(val[HeaderLen:]),
	}, nil
}

// Deadline applies THE expiry rule of policy (nil: nothing expires) to a
// record.
func Deadline(policy *ttl.Policy, r *Record) int64 {
	if policy == nil {
		return ttl.Never
	}
	return policy.Deadline(r.TS, r.Own, r.Raw)
}

// Visible reports whether a record is live at nowMS under policy.
func Visible(policy *ttl.Policy, r *Record, nowMS int64) bool {
	return !ttl.Expired(Deadline(policy, r), nowMS)
}

// Doc decodes a record's body.
func (r *Record) Doc() (bson.D, error) { return bsonx.Decode(r.Raw) }

// IDKeyOf encodes an _id value.
func IDKeyOf(id any) []byte { return keycodec.AppendValue(nil, id) }

// GetRecord reads a document of collection collID by encoded _id (expired
// or not); nil when none is stored.
func GetRecord(r storage.Reader, collID uint64, idKey []byte) (*Record, error) {
	val, err := r.Get(DocKey(collID, idKey))
	if err == storage.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeRecord(append([]byte(nil), idKey...), val)
}

// --- what the store needs of a collection ----------------------------------

// Index is what the store needs of a secondary index to maintain its
// entries: the engine builds one per index whenever the collection's
// metadata changes (the _id index is implicit: the document keys).
type Index struct {
	ID   uint32
	Name string
	Key  bson.D
	// Sparse indexes skip documents missing every key field.
	Sparse bool
	// Unique: a write may not add a key another live document holds
	// (unique indexes, and prepareUnique ones).
	Unique bool
	// Multikey is the index's recorded multikey flag: a write that makes
	// it multikey reports so (Written.Multikey).
	Multikey bool
	// NoEntries marks the Cosmos-style {_ts: 1} index that stands for the
	// collection's DefaultTTL (spec §3.3): it holds no entries.
	NoEntries bool
	// Partial is the compiled partial filter, or nil.
	Partial *query.Matcher
}

// Coll is the collection state a write is staged under: its id and
// namespace, its indexes and its TTL policy (nil: nothing expires).
type Coll struct {
	ID      uint64
	NS      string
	Indexes []*Index
	Policy  *ttl.Policy
}

// visible reports whether a record is live at nowMS under the collection's
// policy.
func (s *Coll) visible(r *Record, nowMS int64) bool { return Visible(s.Policy, r, nowMS) }

// Store is the document store over a transactional key-value store. now
// is the engine's clock (Unix ms), read where a write decides whether a
// stored document is live.
type Store struct {
	kv  storage.TxnKV
	now func() int64
}

// New returns the document store over kv.
func New(kv storage.TxnKV, now func() int64) *Store { return &Store{kv: kv, now: now} }

// --- index keys -------------------------------------------------------------

// IndexKeys returns the encoded key tuples a document contributes to an
// index (several for a multikey index), or none when a sparse or partial
// index skips it.
func IndexKeys(ix *Index, doc bson.D) (keys [][]byte, multikey bool, err error) {
	if ix.NoEntries {
		return nil, false, nil
	}
	if ix.Partial != nil && !ix.Partial.Matches(doc) {
		return nil, false, nil
	}
	fieldVals := make([][]any, len(ix.Key))
	arrayField := -1
	allMissing := true
	for i, f := range ix.Key {
		vals, isArray, present := KeyValuesAt(doc, f.Key)
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
		desc := IsDescending(ix.Key[i].Value)
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

// IsDescending reports whether an index key pattern value is descending.
func IsDescending(v any) bool {
	f, ok := bsonx.ToFloat(v)
	return ok && f < 0
}

// KeyValuesAt returns the values an index on path takes for doc, as mongod
// generates keys: arrays along the path contribute each element; a missing
// field indexes as null; an empty array as undefined. present reports
// whether the full path exists anywhere (sparse indexes skip documents
// where it does not).
func KeyValuesAt(doc bson.D, path string) (vals []any, isArray, present bool) {
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
			if idx, err := Positional(parts[i]); err == nil && idx < len(x) {
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

// Positional parses a path component that is an array position (digits
// only, at most 9).
func Positional(s string) (int, error) {
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

// Written is what a staged document write took: its size in bytes, its
// encoded _id, and whether it made an index multikey that is not recorded
// so yet (the engine then marks it in the collection's metadata; being
// conservative early is harmless).
type Written struct {
	Size     int
	IDKey    []byte
	Multikey bool
}

// WriteDoc stages newDoc (with _id first) in place of old (nil for an
// insert or when no document is stored) into the transaction tx,
// maintaining every index and the expiry index. old must have been read
// through tx: writing the document's key makes a concurrent writer of the
// same document conflict. The transaction is committed by the caller.
//
// body, when not nil, is newDoc already encoded (an inserted document sent
// with _id first), so it is not marshalled again. Every check runs before
// anything is staged, so a refused document leaves the transaction as it
// was. The _id and unique keys the document takes are claimed in b (see
// Txn), so later writes of the same transaction see them as taken.
func (st *Store) WriteDoc(b storage.Txn, s *Coll, old *Record, newDoc bson.D, ts int64, body []byte) (w Written, err error) {
	if body == nil {
		if body, err = bson.Marshal(newDoc); err != nil {
			return w, mongoerr.New(mongoerr.BadValue, "cannot encode document: %v", err)
		}
	}
	if len(body) > maxBSONSize {
		return w, mongoerr.New(mongoerr.BSONObjectTooLarge, "object to insert too large. size in bytes: %d, max size: %d", len(body), maxBSONSize)
	}
	id, _ := bsonx.Get(newDoc, "_id")
	idKey := IDKeyOf(id)
	own := ttl.OwnTTL(newDoc)
	var oldDoc bson.D
	if old != nil {
		if oldDoc, err = old.Doc(); err != nil {
			return w, err
		}
	}
	// An expired old version holds no keys (spec §6.3): its entries may be
	// missing (index builds skip expired documents) and its unique keys may
	// have been taken by live documents since, so every key of the new
	// version is checked and written afresh; its old entries are deleted.
	oldLive := old != nil && s.visible(old, st.now())
	type change struct {
		prefix   []byte
		del, add [][]byte
		unique   bool
		ix       *Index
	}
	changes := make([]change, 0, len(s.Indexes))
	metaChanged := false
	for _, ix := range s.Indexes {
		var oldKeys, newKeys [][]byte
		if oldDoc != nil {
			oldKeys, _, _ = IndexKeys(ix, oldDoc)
		}
		var mk bool
		newKeys, mk, err = IndexKeys(ix, newDoc)
		if err != nil {
			return w, err
		}
		if mk && !ix.Multikey {
			metaChanged = true
		}
		ch := change{prefix: IndexPrefix(s.ID, ix.ID), ix: ix}
		var added [][]byte
		ch.del, added = diffKeys(oldKeys, newKeys, oldLive)
		for _, k := range added {
			if ix.Unique {
				if err := st.checkUnique(b, s, ix, ch.prefix, k, idKey, newDoc); err != nil {
					return w, err
				}
			}
			ch.add = append(ch.add, k)
		}
		changes = append(changes, ch)
	}
	// All checks passed: write.
	w.Multikey = metaChanged
	for _, ch := range changes {
		for _, k := range ch.del {
			if err := b.Delete(cat(cat(ch.prefix, k), old.IDKey)); err != nil {
				return w, err
			}
		}
		for _, k := range ch.add {
			if ch.ix.Unique {
				claim(b, string(ch.prefix)+string(k), idKey)
			}
			if err := b.Set(cat(cat(ch.prefix, k), idKey), idKey); err != nil {
				return w, err
			}
		}
	}
	if old != nil {
		if err := deleteExpiryEntry(b, s.ID, old); err != nil {
			return w, err
		}
	}
	nr := &Record{IDKey: idKey, TS: ts, Own: own}
	if err := SetExpiryEntry(b, s.ID, nr, len(body)); err != nil {
		return w, err
	}
	if err := b.Set(DocKey(s.ID, idKey), EncodeValue(ts, own, body)); err != nil {
		return w, err
	}
	claim(b, idClaim(idKey), idKey)
	w.Size, w.IDKey = len(body), idKey
	return w, nil
}

// SetExpiryEntry files a document in the expiry index (spec §8): own valid
// ttl n > 0 → keyed by its deadline; no own ttl → keyed by _ts (inherits
// DefaultTTL, whatever it is at reaping time); own ttl -1 → not filed. The
// entry depends only on the document, so TTL settings never rewrite it.
func SetExpiryEntry(b storage.Txn, collID uint64, r *Record, size int) error {
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], uint32(size))
	switch {
	case r.Own == -1:
		return nil
	case r.Own > 0:
		return b.Set(ExpiryKey(collID, ExpDeadline, (r.TS+r.Own)*1000, r.IDKey), v[:])
	default:
		return b.Set(ExpiryKey(collID, ExpTS, r.TS, r.IDKey), v[:])
	}
}

func deleteExpiryEntry(b storage.Txn, collID uint64, r *Record) error {
	switch {
	case r.Own == -1:
		return nil
	case r.Own > 0:
		return b.Delete(ExpiryKey(collID, ExpDeadline, (r.TS+r.Own)*1000, r.IDKey))
	default:
		return b.Delete(ExpiryKey(collID, ExpTS, r.TS, r.IDKey))
	}
}

// DeleteDoc stages the removal of a stored document (read through b) with
// its index and expiry entries.
func DeleteDoc(b storage.Txn, s *Coll, old *Record) error {
	doc, err := old.Doc()
	if err != nil {
		return err
	}
	for _, ix := range s.Indexes {
		keys, _, _ := IndexKeys(ix, doc)
		prefix := IndexPrefix(s.ID, ix.ID)
		for _, k := range keys {
			if err := b.Delete(append(append(append([]byte(nil), prefix...), k...), old.IDKey...)); err != nil {
				return err
			}
		}
	}
	if err := deleteExpiryEntry(b, s.ID, old); err != nil {
		return err
	}
	return b.DeleteSized(DocKey(s.ID, old.IDKey), uint32(HeaderLen+len(old.Raw)))
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
func (st *Store) checkUnique(tx storage.Txn, s *Coll, ix *Index, prefix, key, idKey []byte, doc bson.D) error {
	lo := append(append([]byte(nil), prefix...), key...)
	if err := tx.LockKeys(lo); err != nil {
		return err
	}
	rd, latest := st.ReaderOf(tx)
	if latest {
		// An earlier document of this (insert) transaction took the
		// value: the latest committed state does not show it.
		if owner, ok := claimedBy(tx, string(lo)); ok && owner != string(idKey) {
			return DupKeyError(s.NS, ix, doc)
		}
	}
	it, err := rd.NewIter(lo, PrefixEnd(lo))
	if err != nil {
		return err
	}
	defer it.Close()
	now := st.now()
	for ok := it.First(); ok; ok = it.Next() {
		other := append([]byte(nil), it.Value()...)
		if bytes.Equal(other, idKey) {
			continue
		}
		r, err := GetRecord(rd, s.ID, other)
		if err != nil {
			return err
		}
		if r == nil || !s.visible(r, now) {
			continue
		}
		if latest || claimed(tx, string(lo)) {
			// Live now, or a write of this transaction.
			return DupKeyError(s.NS, ix, doc)
		}
		if stale, err := st.heldSince(s, append(lo, other...), other, now); err != nil {
			return err
		} else if stale {
			return storage.ErrConflict
		}
		return DupKeyError(s.NS, ix, doc)
	}
	return it.Error()
}

// heldSince reports whether a holder found live in a snapshot has let go
// since: its entry entryKey or its live document is gone from the latest
// committed state.
func (st *Store) heldSince(s *Coll, entryKey, idKey []byte, now int64) (stale bool, err error) {
	if entryKey != nil {
		if _, err := st.kv.Get(entryKey); err == storage.ErrNotFound {
			return true, nil
		} else if err != nil {
			return false, err
		}
	}
	r, err := GetRecord(st.kv, s.ID, idKey)
	if err != nil {
		return false, err
	}
	return r == nil || !s.visible(r, now), nil
}

// IDFree reads the stored holder of idKey through tx and refuses it when
// it is live (E11000 on _id_). It returns the holder otherwise (nil, or an
// expired document the new one replaces). A holder live in the snapshot but
// gone since is a conflict: the retry sees the current state.
func (st *Store) IDFree(tx storage.Txn, s *Coll, idKey []byte, d bson.D) (*Record, error) {
	rd, latest := st.ReaderOf(tx)
	if latest {
		if _, ok := claimedBy(tx, idClaim(idKey)); ok {
			return nil, DupKeyError(s.NS, nil, d) // an earlier document of this insert
		}
	}
	old, err := GetRecord(rd, s.ID, idKey)
	if err != nil {
		return nil, err
	}
	now := st.now()
	if old != nil && s.visible(old, now) {
		if latest || claimed(tx, idClaim(idKey)) {
			return nil, DupKeyError(s.NS, nil, d) // live now, or written by this transaction
		}
		if stale, err := st.heldSince(s, nil, idKey, now); err != nil {
			return nil, err
		} else if stale {
			return nil, storage.ErrConflict
		}
		return nil, DupKeyError(s.NS, nil, d)
	}
	return old, nil
}

// DupKeyError renders mongod's E11000 error with keyPattern and keyValue.
func DupKeyError(ns string, ix *Index, doc bson.D) error {
	pattern := bson.D{{Key: "_id", Value: int32(1)}}
	name := "_id_"
	if ix != nil {
		pattern, name = ix.Key, ix.Name
	}
	keyValue := bson.D{}
	for _, f := range pattern {
		vals, _, _ := KeyValuesAt(doc, f.Key)
		var v any
		if len(vals) > 0 {
			v = vals[0]
		}
		keyValue = append(keyValue, bson.E{Key: f.Key, Value: v})
	}
	return &mongoerr.Error{
		Code:  mongoerr.DuplicateKey,
		Msg:   fmt.Sprintf("E11000 duplicate key error collection: %s index: %s dup key: %s", ns, name, ShortJSON(keyValue)),
		Extra: bson.D{{Key: "keyPattern", Value: pattern}, {Key: "keyValue", Value: keyValue}},
	}
}

// ShortJSON renders a document as mongod does in error messages ({ k: v, … }).
func ShortJSON(d bson.D) string {
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

// maxBSONSize is the largest document (16 MiB), as mongod.
const maxBSONSize = 16 * 1024 * 1024

func cat(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}
