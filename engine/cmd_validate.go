package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/keycodec"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// validate checks a collection's stored data against itself, as mongod's
// validate command (src/mongo/db/commands/validate.cpp,
// src/mongo/db/catalog/index_consistency.cpp):
//
//   - every stored document has a well-formed header and decodes as BSON,
//     with an _id that matches its key and a ttl header that matches its
//     ttl field (nInvalidDocuments, corruptRecords);
//   - every secondary index entry is one the engine's key generation
//     computes for a stored document, and every live document has all of
//     its entries (extraIndexEntries, missingIndexEntries); expired
//     documents the reaper has not purged yet may lack entries (index builds
//     skip them, spec §6.3), so only their extra entries count;
//   - every document (expired or not) has exactly the expiry-index entry its
//     header implies, with its size, and no expiry entry points elsewhere.
//
// Foreground validation holds the collection exclusively, as mongod does;
// background validation reads one snapshot without blocking writers. Both
// read a snapshot, so documents and their entries (written in one batch)
// are seen together. repair is refused: mayfly cannot rebuild entries yet.

func init() {
	Register(&Command{Name: "validate", Help: "Validate contents of a namespace by scanning its data structures for correctness.",
		Run: cmdValidate})
}

// KV returns the store under the engine, for tools and tests that inspect
// or damage stored data directly (validate's tests inject corruption).
func (e *Engine) KV() storage.KV { return e.kv }

func cmdValidate(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	background := boolArg(r, "background")
	full := boolArg(r, "full")
	enforceFastCount := boolArg(r, "enforceFastCount")
	repair := boolArg(r, "repair")
	metadata := boolArg(r, "metadata")
	conformance := boolArg(r, "checkBSONConformance") || full
	notSupported := func(msg string) error { return mongoerr.New(mongoerr.CommandNotSupported, "%s", msg) }
	switch {
	case background && full:
		return nil, notSupported("Running the validate command with both { background: true } and { full: true } is not supported.")
	case background && enforceFastCount:
		return nil, notSupported("Running the validate command with both { background: true } and { enforceFastCount: true } is not supported.")
	case background && repair:
		return nil, notSupported("Running the validate command with both {background: true } and { repair: true } is not supported.")
	case enforceFastCount && repair:
		return nil, notSupported("Running the validate command with both {enforceFastCount: true } and { repair: true } is not supported.")
	case metadata && (background || full || enforceFastCount || repair || boolArg(r, "checkBSONConformance")):
		return nil, notSupported("Running the validate command with { metadata: true } is not supported with any other options")
	case boolArg(r, "checkBSONConformance") && repair:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Cannot specify both { checkBSONConformance: true } and { repair: true }")
	case repair:
		return nil, notSupported("Running the validate command with { repair: true } is not supported by mayfly: it cannot rebuild index or expiry entries; drop and recreate the index, or restore from a backup")
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Collection '%s.%s' does not exist to validate.", r.DB, coll)
	}
	if !background {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	v := &validation{c: c, s: c.st(), now: e.nowMS(), conformance: conformance, r: r}
	if metadata {
		v.checkMetadata()
	} else {
		snap := e.kv.NewSnapshot()
		defer snap.Close()
		if err := v.run(snap); err != nil {
			return nil, err
		}
		if enforceFastCount {
			v.checkFastCount()
		}
	}
	return v.reply(), nil
}

// validation is one run's state.
type validation struct {
	c           *Collection
	s           *collState
	now         int64
	conformance bool
	r           *Request

	nrecords, nInvalid, nNonCompliant, nExpired int64
	corrupt                                     bson.A
	corruptIDs                                  map[string]bool
	keysPerIndex                                map[string]int64
	invalidIndex                                map[string]bool
	extra, missing                              bson.A
	errors, warnings                            []string
	inconsistent                                bool // missing or extra index entries
}

// expectedEntry is an index or expiry entry a document implies.
type expectedEntry struct {
	idKey   []byte
	expired bool
	size    int // expiry entries: the value's size
}

func (v *validation) fail(msg string) { v.errors = append(v.errors, msg) }

func (v *validation) run(snap storage.Reader) error {
	m := v.s.meta
	v.corruptIDs = map[string]bool{}
	v.keysPerIndex = map[string]int64{}
	v.invalidIndex = map[string]bool{}
	// Per index (by position in v.s.indexes): index key suffix (key…, _id)
	// → what the documents imply.
	want := make([]map[string]expectedEntry, len(v.s.indexes))
	for i := range want {
		want[i] = map[string]expectedEntry{}
	}
	wantExp := map[string]expectedEntry{}
	badTTL := 0

	// Documents.
	lo := docstore.CollPrefix(docstore.PfxDoc, m.ID)
	it, err := snap.NewIter(lo, docstore.PrefixEnd(lo))
	if err != nil {
		return err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%1024 == 0 {
			if err := v.r.CheckDeadline(); err != nil {
				it.Close()
				return err
			}
		}
		v.nrecords++
		idKey := append([]byte(nil), it.Key()[len(lo):]...)
		rec, doc, why := decodeForValidate(idKey, it.Value())
		if why != "" {
			v.nInvalid++
			v.corruptIDs[string(idKey)] = true
			v.corrupt = append(v.corrupt, idFromKey(idKey))
			v.c.e.log.Warn("validate: invalid document", zap.String("ns", m.ns()), zap.String("key", hex.EncodeToString(idKey)), zap.String("reason", why))
			continue
		}
		if v.conformance && !bsonConformant(rec.Raw) {
			v.nNonCompliant++
		}
		if own := ttl.OwnTTL(doc); own != rec.Own {
			badTTL++
			v.c.e.log.Warn("validate: ttl header disagrees with the document", zap.String("ns", m.ns()),
				zap.String("key", hex.EncodeToString(idKey)), zap.Int64("header", rec.Own), zap.Int64("field", own))
		}
		expired := !v.s.visible(rec, v.now)
		if expired {
			v.nExpired++
		}
		if k := expiryEntryKey(m.ID, rec); k != nil {
			wantExp[string(k)] = expectedEntry{idKey: idKey, expired: expired, size: len(rec.Raw)}
		}
		for i, ix := range v.s.indexes {
			keys, _, err := docstore.IndexKeys(&ix.ds, doc)
			if err != nil {
				v.fail(fmt.Sprintf("Index with name '%s' cannot index document %s: %v", ix.Name, docstore.ShortJSON(bson.D{{Key: "_id", Value: idFromKey(idKey)}}), err))
				v.invalidIndex[ix.Name] = true
				continue
			}
			for _, k := range keys {
				want[i][string(k)+string(idKey)] = expectedEntry{idKey: idKey, expired: expired}
			}
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	it.Close()
	if v.nInvalid > 0 {
		v.fail("Detected one or more invalid documents. See logs.")
	}
	if badTTL > 0 {
		v.fail(fmt.Sprintf("Detected %d documents whose stored ttl header disagrees with their ttl field. See logs.", badTTL))
	}
	if v.nNonCompliant > 0 {
		v.warnings = append(v.warnings, "Detected one or more documents in this collection not conformant to BSON specifications. See logs.")
	}

	// Secondary indexes.
	nMissing, nExtra := 0, 0
	for i, ix := range v.s.indexes {
		if ix.isTSIndex() {
			continue
		}
		p := docstore.IndexPrefix(m.ID, ix.ID)
		it, err := snap.NewIter(p, docstore.PrefixEnd(p))
		if err != nil {
			return err
		}
		var count int64
		for ok := it.First(); ok; ok = it.Next() {
			count++
			suffix := it.Key()[len(p):]
			idKey := it.Value()
			if _, ok := want[i][string(suffix)]; ok && bytes.HasSuffix(suffix, idKey) {
				delete(want[i], string(suffix))
				continue
			}
			if v.corruptIDs[string(idKey)] {
				continue // its document is already reported
			}
			nExtra++
			v.invalidIndex[ix.Name] = true
			v.extra = append(v.extra, v.entryInfo(ix, suffix, idKey))
		}
		if err := it.Error(); err != nil {
			it.Close()
			return err
		}
		it.Close()
		v.keysPerIndex[ix.Name] = count
		for suffix, w := range want[i] {
			if w.expired {
				continue // expired documents need hold no keys (spec §6.3)
			}
			nMissing++
			v.invalidIndex[ix.Name] = true
			v.missing = append(v.missing, v.entryInfo(ix, []byte(suffix), w.idKey))
		}
	}
	for _, ix := range v.s.indexes {
		if v.invalidIndex[ix.Name] {
			v.fail(fmt.Sprintf("Index with name '%s' has inconsistencies.", ix.Name))
		}
	}
	if nMissing > 0 {
		v.warnings = append(v.warnings, fmt.Sprintf("Detected %d missing index entries.", nMissing))
	}
	if nExtra > 0 {
		v.warnings = append(v.warnings, fmt.Sprintf("Detected %d extra index entries.", nExtra))
	}
	if nMissing > 0 || nExtra > 0 {
		// mongod marks the collection invalid with these warnings.
		v.inconsistent = true
	}

	// The expiry index.
	ep := docstore.CollPrefix(docstore.PfxExpiry, m.ID)
	it, err = snap.NewIter(ep, docstore.PrefixEnd(ep))
	if err != nil {
		return err
	}
	expExtra, expMissing, expSize := 0, 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		w, ok := wantExp[string(k)]
		if ok {
			delete(wantExp, string(k))
			if val := it.Value(); len(val) != 4 || int(binary.BigEndian.Uint32(val)) != w.size {
				expSize++
			}
			continue
		}
		if len(k) > 18 && v.corruptIDs[string(k[18:])] {
			continue
		}
		expExtra++
		v.c.e.log.Warn("validate: expiry index entry without its document", zap.String("ns", m.ns()), zap.String("key", hex.EncodeToString(k)))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	it.Close()
	expMissing = len(wantExp)
	for k := range wantExp {
		v.c.e.log.Warn("validate: document missing from the expiry index", zap.String("ns", m.ns()), zap.String("key", hex.EncodeToString([]byte(k))))
	}
	if expMissing > 0 {
		v.fail(fmt.Sprintf("Detected %d missing expiry index entries: those documents would never expire.", expMissing))
	}
	if expExtra > 0 {
		v.fail(fmt.Sprintf("Detected %d extra expiry index entries that match no document's TTL deadline.", expExtra))
	}
	if expSize > 0 {
		v.fail(fmt.Sprintf("Detected %d expiry index entries whose recorded size differs from their document's.", expSize))
	}
	if v.nExpired > 0 {
		v.warnings = append(v.warnings, fmt.Sprintf("%d expired documents are awaiting the TTL reaper (not counted as errors).", v.nExpired))
	}
	return nil
}

// checkMetadata is { metadata: true }: the index specifications only.
func (v *validation) checkMetadata() {
	v.keysPerIndex = map[string]int64{}
	v.invalidIndex = map[string]bool{}
	for _, ix := range v.s.indexes {
		if len(ix.Key) == 0 {
			v.invalidIndex[ix.Name] = true
			v.fail(fmt.Sprintf("Index with name '%s' has an empty key pattern.", ix.Name))
		}
	}
}

// checkFastCount is { enforceFastCount: true }: the collection's document
// counter must equal the stored documents.
func (v *validation) checkFastCount() {
	v.c.ensureStats()
	if fast := v.c.nDocs.Load(); fast != v.nrecords {
		v.fail(fmt.Sprintf("fast count (%d) does not match number of records (%d) for collection '%s'", fast, v.nrecords, v.s.meta.ns()))
	}
}

func (v *validation) valid() bool {
	return len(v.errors) == 0 && !v.inconsistent
}

func (v *validation) reply() bson.D {
	m := v.s.meta
	keys := bson.D{{Key: "_id_", Value: int32(v.nrecords - v.nInvalid)}}
	details := bson.D{{Key: "_id_", Value: bson.D{{Key: "valid", Value: true}}}}
	if m.HasTTL {
		// The {_ts: 1} index is a view of DefaultTTL over every document.
		keys = append(keys, bson.E{Key: m.TSIndexName, Value: int32(v.nrecords - v.nInvalid)})
		details = append(details, bson.E{Key: m.TSIndexName, Value: bson.D{{Key: "valid", Value: true}}})
	}
	for _, ix := range v.s.indexes {
		if ix.isTSIndex() {
			continue
		}
		keys = append(keys, bson.E{Key: ix.Name, Value: int32(v.keysPerIndex[ix.Name])})
		details = append(details, bson.E{Key: ix.Name, Value: bson.D{{Key: "valid", Value: !v.invalidIndex[ix.Name]}}})
	}
	strs := func(s []string) bson.A {
		a := bson.A{}
		for _, x := range s {
			a = append(a, x)
		}
		return a
	}
	orEmpty := func(a bson.A) bson.A {
		if a == nil {
			return bson.A{}
		}
		return a
	}
	out := bson.D{
		{Key: "ns", Value: m.ns()},
		{Key: "uuid", Value: m.UUID},
		{Key: "nInvalidDocuments", Value: int32(v.nInvalid)},
		{Key: "nNonCompliantDocuments", Value: int32(v.nNonCompliant)},
		{Key: "nrecords", Value: int32(v.nrecords)},
		{Key: "nIndexes", Value: int32(len(keys))},
		{Key: "keysPerIndex", Value: keys},
		{Key: "indexDetails", Value: details},
		{Key: "valid", Value: v.valid()},
		{Key: "repaired", Value: false},
		{Key: "warnings", Value: strs(v.warnings)},
		{Key: "errors", Value: strs(v.errors)},
		{Key: "extraIndexEntries", Value: orEmpty(v.extra)},
		{Key: "missingIndexEntries", Value: orEmpty(v.missing)},
		{Key: "corruptRecords", Value: orEmpty(v.corrupt)},
	}
	if !v.valid() {
		out = append(out, bson.E{Key: "advice", Value: "A corrupt namespace has been detected. See http://dochub.mongodb.org/core/data-recovery for recovery steps."})
	}
	return out
}

// entryInfo renders an inconsistent index entry as mongod's validate does:
// {indexName, recordId, idKey, indexKey}. mayfly has no record ids; the
// document's _id stands for it.
func (v *validation) entryInfo(ix *index, suffix, idKey []byte) bson.D {
	id := idFromKey(idKey)
	key := bson.D{}
	rest := suffix
	if len(rest) >= len(idKey) {
		rest = rest[:len(rest)-len(idKey)]
	}
	for _, f := range ix.Key {
		var val any
		if len(rest) > 0 {
			if docstore.IsDescending(f.Value) {
				inv := make([]byte, len(rest))
				for i, b := range rest {
					inv[i] = ^b
				}
				dv, r, err := keycodec.DecodeValue(inv)
				if err == nil {
					val, rest = dv, rest[len(rest)-len(r):]
				} else {
					rest = nil
				}
			} else {
				dv, r, err := keycodec.DecodeValue(rest)
				if err == nil {
					val, rest = dv, r
				} else {
					rest = nil
				}
			}
		}
		key = append(key, bson.E{Key: f.Key, Value: val})
	}
	return bson.D{
		{Key: "indexName", Value: ix.Name},
		{Key: "recordId", Value: id},
		{Key: "idKey", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "indexKey", Value: key},
	}
}

// decodeForValidate decodes a stored document, returning why it is invalid
// ("" when it is not).
func decodeForValidate(idKey, val []byte) (*docstore.Record, bson.D, string) {
	rec, err := docstore.DecodeRecord(idKey, val)
	if err != nil {
		return nil, nil, "bad document header"
	}
	if err := rec.Raw.Validate(); err != nil {
		return nil, nil, "invalid BSON: " + err.Error()
	}
	if int(binary.LittleEndian.Uint32(rec.Raw)) != len(rec.Raw) {
		return nil, nil, "trailing bytes after the BSON document"
	}
	doc, err := bsonx.Decode(rec.Raw)
	if err != nil {
		return nil, nil, "undecodable BSON: " + err.Error()
	}
	id, ok := bsonx.Get(doc, "_id")
	if !ok {
		return nil, nil, "document has no _id"
	}
	if !bytes.Equal(docstore.IDKeyOf(id), idKey) {
		return nil, nil, "document _id does not match its key"
	}
	return rec, doc, ""
}

// idFromKey decodes an encoded _id, or shows the bytes when they do not
// decode.
func idFromKey(idKey []byte) any {
	if v, rest, err := keycodec.DecodeValue(idKey); err == nil && len(rest) == 0 {
		return v
	}
	return "<undecodable key " + hex.EncodeToString(idKey) + ">"
}

// expiryEntryKey is the expiry-index key a record must have (nil when its
// own ttl is -1: never expires), as setExpiryEntry files it.
func expiryEntryKey(collID uint64, r *docstore.Record) []byte {
	switch {
	case r.Own == -1:
		return nil
	case r.Own > 0:
		return docstore.ExpiryKey(collID, docstore.ExpDeadline, (r.TS+r.Own)*1000, r.IDKey)
	default:
		return docstore.ExpiryKey(collID, docstore.ExpTS, r.TS, r.IDKey)
	}
}

// bsonConformant applies checkBSONConformance's extra checks to a document
// that is already structurally valid: UTF-8 in field names and strings.
func bsonConformant(raw bson.Raw) bool {
	elems, err := raw.Elements()
	if err != nil {
		return false
	}
	for _, el := range elems {
		if !utf8.ValidString(el.Key()) {
			return false
		}
		val := el.Value()
		switch val.Type {
		case bson.TypeString:
			s, ok := val.StringValueOK()
			if ok && !utf8.ValidString(s) {
				return false
			}
		case bson.TypeEmbeddedDocument, bson.TypeArray:
			if !bsonConformant(bson.Raw(val.Value)) {
				return false
			}
		}
	}
	return true
}
