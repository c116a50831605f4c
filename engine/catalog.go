package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// collMeta is the persisted description of a collection. It is immutable
// once published: changes build a new one (copy on write) under the
// collection's exclusive lock.
type collMeta struct {
	ID          uint64      `bson:"id"`
	DB          string      `bson:"db"`
	Name        string      `bson:"name"`
	UUID        bson.Binary `bson:"uuid"`
	Options     bson.D      `bson:"options"`
	HasTTL      bool        `bson:"hasTTL"`
	DefaultTTL  int64       `bson:"defaultTTL"`
	Indexes     []indexMeta `bson:"indexes"`
	NextIndexID uint32      `bson:"nextIndexID"`
	// TSIndexName names the Cosmos-style {_ts: 1} index while DefaultTTL is
	// set (spec §3.3). The index has no entries: it is a view of the
	// setting, synthesised by listIndexes, so the two always agree.
	TSIndexName string `bson:"tsIndexName,omitempty"`
}

// indexMeta describes one secondary index (the _id index is implicit: the
// document keys themselves).
type indexMeta struct {
	ID     uint32 `bson:"id"`
	Name   string `bson:"name"`
	Key    bson.D `bson:"key"`
	Unique bool   `bson:"unique"`
	Sparse bool   `bson:"sparse"`
	Hidden bool   `bson:"hidden"`
	// PrepareUnique: new duplicate keys are refused, existing ones kept
	// (collMod's first step towards unique).
	PrepareUnique bool   `bson:"prepareUnique,omitempty"`
	Partial       bson.D `bson:"partial,omitempty"`
	HasTTL        bool   `bson:"hasTTL"`
	TTL           int64  `bson:"ttl"`
	Multikey      bool   `bson:"multikey"`
	// Spec is the index as listIndexes shows it (v, key, name, options).
	Spec bson.D `bson:"spec"`
}

// isTSIndex reports whether this is the Cosmos-style {_ts: 1} index that
// stands for the collection's DefaultTTL (spec §3.3). It has no entries.
// refusesDuplicates reports whether a write may not add a key that another
// live document holds: unique indexes, and prepareUnique ones.
func (ix *indexMeta) refusesDuplicates() bool { return ix.Unique || ix.PrepareUnique }

func (ix *indexMeta) isTSIndex() bool {
	return len(ix.Key) == 1 && ix.Key[0].Key == "_ts"
}

func (m *collMeta) ns() string { return m.DB + "." + m.Name }

func (m *collMeta) clone() *collMeta {
	c := *m
	c.Indexes = append([]indexMeta(nil), m.Indexes...)
	c.Options = append(bson.D(nil), m.Options...)
	return &c
}

// index is an index with its compiled partial filter, and what the
// document store needs of it (ds).
type index struct {
	indexMeta
	partial *query.Matcher
	ds      docstore.Index
}

// newIndex compiles an index's partial filter and derives its docstore
// view.
func newIndex(m indexMeta) (*index, error) {
	ix := &index{indexMeta: m}
	if len(ix.Partial) > 0 {
		pm, err := query.Compile(ix.Partial)
		if err != nil {
			return nil, err
		}
		ix.partial = pm
	}
	ix.ds = docstore.Index{ID: m.ID, Name: m.Name, Key: m.Key, Sparse: m.Sparse, Unique: m.refusesDuplicates(),
		Multikey: m.Multikey, NoEntries: m.isTSIndex(), Partial: ix.partial}
	return ix, nil
}

// collState is the runtime view derived from a collMeta: compiled partial
// filters and the TTL policy, and the document store's view of them (ds).
// Rebuilt whenever the meta changes.
type collState struct {
	meta    *collMeta
	indexes []*index
	policy  *ttl.Policy
	ds      docstore.Coll
}

// deadline applies THE expiry rule to a record.
func (s *collState) deadline(r *docstore.Record) int64 { return docstore.Deadline(s.policy, r) }

// visible reports whether a record is live at nowMS.
func (s *collState) visible(r *docstore.Record, nowMS int64) bool {
	return docstore.Visible(s.policy, r, nowMS)
}

// getRecord reads a document by encoded _id (expired or not).
func (c *Collection) getRecord(r storage.Reader, idKey []byte) (*docstore.Record, error) {
	return docstore.GetRecord(r, c.Meta().ID, idKey)
}

// Collection is a live collection.
type Collection struct {
	e     *Engine
	state atomic.Pointer[collState]

	// mu orders document writes against DDL: every document write (and
	// the reaper) holds it shared for the length of its storage
	// transaction, which alone protects documents and unique values from
	// each other (txn.go); DDL that must see the collection still
	// (createIndexes, collMod, rename, validate) holds it exclusively.
	mu sync.RWMutex
	// purgeMu makes a reaper batch (its commit, the counters and the
	// consumed expiry ranges) one step for the statistics (figures).
	purgeMu sync.RWMutex
	// docLocks queue single-document writers of one document (by a hash
	// of its _id) in this process, so that a hot document's writers wait
	// their turn instead of conflicting and running again (txn.go); the
	// storage transaction still decides correctness.
	docLocks [64]sync.Mutex

	statsOnce sync.Once
	nDocs     atomic.Int64 // stored documents (expired-unpurged included)
	size      atomic.Int64 // their BSON bytes
	dropped   atomic.Bool

	ttlDeleted atomic.Int64

	// reap tracks, per expiry-index kind, how far the reaper has consumed
	// the index in this process: scans resume at from (no walking over the
	// tombstones of earlier batches), and the consumed span [rangeFrom,
	// from) gets one range tombstone per pass. Safe because a new entry can
	// never sort below from: deadlines and _ts of new writes come from a
	// clock that never runs backwards. Lost on restart (scans then start at
	// the beginning once).
	reapMu sync.Mutex
	reap   map[byte]*reapPos
}

type reapPos struct {
	from      []byte // next key to scan from
	rangeFrom []byte // start of the consumed span not yet range-deleted
}

func (c *Collection) st() *collState { return c.state.Load() }

// Meta returns the current metadata.
func (c *Collection) Meta() *collMeta { return c.st().meta }

func (c *Collection) publish(m *collMeta) error {
	s := &collState{meta: m}
	pol := &ttl.Policy{HasDefault: m.HasTTL, DefaultTTL: m.DefaultTTL}
	for i := range m.Indexes {
		ix, err := newIndex(m.Indexes[i])
		if err != nil {
			return err
		}
		s.indexes = append(s.indexes, ix)
		s.ds.Indexes = append(s.ds.Indexes, &ix.ds)
		if ix.HasTTL && !ix.isTSIndex() {
			rule := ttl.IndexRule{Field: ix.Key[0].Key, ExpireAfterSeconds: ix.TTL}
			if pm := ix.partial; pm != nil {
				rule.Applies = func(raw bson.Raw) bool {
					var d bson.D
					if bson.Unmarshal(raw, &d) != nil {
						return false
					}
					return pm.Matches(d)
				}
			}
			pol.Indexes = append(pol.Indexes, rule)
		}
	}
	if pol.Active() {
		s.policy = pol
	}
	s.ds.ID, s.ds.NS, s.ds.Policy = m.ID, m.ns(), s.policy
	c.state.Store(s)
	return nil
}

// Catalog maps database and collection names to collections.
type Catalog struct {
	e   *Engine
	mu  sync.RWMutex
	dbs map[string]map[string]*Collection
}

func (e *Engine) loadCatalog() error {
	e.cat = &Catalog{e: e, dbs: map[string]map[string]*Collection{}}
	it, err := e.kv.NewIter([]byte{docstore.PfxCatalog}, []byte{docstore.PfxCatalog + 1})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		var m collMeta
		if err := bson.Unmarshal(it.Value(), &m); err != nil {
			return fmt.Errorf("catalog entry %q: %w", it.Key(), err)
		}
		c := &Collection{e: e}
		if err := c.publish(&m); err != nil {
			return fmt.Errorf("catalog entry %s: %w", m.ns(), err)
		}
		e.cat.put(c)
		if m.ID >= e.nextCollID.Load() {
			e.nextCollID.Store(m.ID + 1)
		}
	}
	return it.Error()
}

func (cat *Catalog) put(c *Collection) {
	m := c.Meta()
	db := cat.dbs[m.DB]
	if db == nil {
		db = map[string]*Collection{}
		cat.dbs[m.DB] = db
	}
	db[m.Name] = c
}

// Get returns a collection or nil.
func (cat *Catalog) Get(db, coll string) *Collection {
	cat.mu.RLock()
	defer cat.mu.RUnlock()
	return cat.dbs[db][coll]
}

// Databases returns the database names in order.
func (cat *Catalog) Databases() []string {
	cat.mu.RLock()
	defer cat.mu.RUnlock()
	var out []string
	for db, colls := range cat.dbs {
		if len(colls) > 0 {
			out = append(out, db)
		}
	}
	sort.Strings(out)
	return out
}

// Collections returns a database's collections in name order.
func (cat *Catalog) Collections(db string) []*Collection {
	cat.mu.RLock()
	defer cat.mu.RUnlock()
	var out []*Collection
	for _, c := range cat.dbs[db] {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta().Name < out[j].Meta().Name })
	return out
}

// All returns every collection.
func (cat *Catalog) All() []*Collection {
	var out []*Collection
	for _, db := range cat.Databases() {
		out = append(out, cat.Collections(db)...)
	}
	return out
}

// ValidateDBName checks the database name of a database-level command
// (listCollections, dbStats): DatabaseName's own checks, then mongod's
// validDBName on Linux, where only / \ . space " $ and NUL are refused
// (the FAT32 characters *<>:|? only on Windows).
func ValidateDBName(db string) error {
	if db == "" {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: ''")
	}
	if err := checkDatabaseName(db); err != nil {
		return err
	}
	if !validDBName(db, false) {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: '%s'", db)
	}
	return nil
}

// checkDatabaseName is what mongod 7.0's DatabaseName constructor refuses,
// whatever the command.
func checkDatabaseName(db string) error {
	switch {
	case strings.Contains(db, "."):
		return mongoerr.New(mongoerr.InvalidNamespace, "'.' is an invalid character in a db name: %s", db)
	case strings.Contains(db, "\x00"):
		return mongoerr.New(mongoerr.InvalidNamespace, "database names cannot have embedded null characters")
	case len(db) > maxDBNameLen:
		return mongoerr.New(mongoerr.InvalidNamespace, "db name must be at most %d characters, found: %d", maxDBNameLen, len(db))
	}
	return nil
}

// maxDBNameLen and maxNSLen are mongod's limits in bytes: a database name
// of at most 63, a full user namespace "db.coll" of at most 255.
const (
	maxDBNameLen = 63
	maxNSLen     = 255
)

// validDBName is NamespaceString::validDBName as built for Linux.
func validDBName(db string, allowDollar bool) bool {
	if db == "" || len(db) > maxDBNameLen {
		return false
	}
	bad := "/\\. \"\x00"
	if !allowDollar {
		bad += "$"
	}
	return !strings.ContainsAny(db, bad)
}

// ValidateNS is what every collection command checks when it parses its
// namespace (NamespaceString's constructor and isValid): reads of a name
// that could never be created ("a$b") simply find nothing, as in mongod.
func ValidateNS(db, coll string) error {
	if err := checkDatabaseName(db); err != nil {
		return err
	}
	if strings.Contains(coll, "\x00") {
		return mongoerr.New(mongoerr.InvalidNamespace, "namespaces cannot have embedded null characters")
	}
	if strings.HasPrefix(coll, ".") {
		return mongoerr.New(mongoerr.InvalidNamespace, "Collection names cannot start with '.': %s", coll)
	}
	if coll == "" || !validDBName(db, true) {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.%s'", db, coll)
	}
	return nil
}

// ValidateCollName checks a namespace that is written to or created, as
// mongod's userAllowedCreateNS: no $ in the database or collection name,
// system collections only from the allowed few, and at most 255 bytes for
// "db.coll". Names such as "a." and "a..b" are valid.
func ValidateCollName(db, coll string) error {
	if err := ValidateNS(db, coll); err != nil {
		return err
	}
	switch {
	case !validDBName(db, false):
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace: %s.%s", db, coll)
	case strings.Contains(coll, "$"):
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid collection name: %s", coll)
	case len(db)+1+len(coll) > maxNSLen:
		return mongoerr.New(mongoerr.InvalidNamespace, "Fully qualified namespace is too long. Namespace: %s.%s Max: %d", db, coll, maxNSLen)
	case strings.HasPrefix(coll, "system.") && !allowedSystem[coll] &&
		!(db == "admin" && (coll == "system.version" || coll == "system.users" || coll == "system.roles")) && !(db == "config" && coll == "system.sessions"):
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid system namespace: %s.%s", db, coll)
	}
	return nil
}

var allowedSystem = map[string]bool{"system.js": true, "system.views": true, "system.profile": true}

func (e *Engine) saveMeta(b storage.Batch, m *collMeta) error {
	raw, err := bson.Marshal(m)
	if err != nil {
		return err
	}
	return b.Set(docstore.CatalogKey(m.DB, m.Name), raw)
}

// createCollection creates db.coll with options; exists reports an
// existing collection (no error: callers decide whether that is 48).
func (e *Engine) createCollection(db, coll string, opts bson.D, hasTTL bool, defTTL int64) (c *Collection, exists bool, err error) {
	if err := ValidateCollName(db, coll); err != nil {
		return nil, false, err
	}
	e.cat.mu.Lock()
	defer e.cat.mu.Unlock()
	if c := e.cat.dbs[db][coll]; c != nil {
		return c, true, nil
	}
	id := e.nextCollID.Add(1) - 1
	u := bson.NewObjectID() // 12 random-ish bytes; padded into a v4-shaped UUID
	uuid := make([]byte, 16)
	copy(uuid, u[:])
	binary.BigEndian.PutUint32(uuid[12:], uint32(id))
	uuid[6] = (uuid[6] & 0x0f) | 0x40
	uuid[8] = (uuid[8] & 0x3f) | 0x80
	m := &collMeta{ID: id, DB: db, Name: coll, UUID: bson.Binary{Subtype: 4, Data: uuid}, Options: opts,
		HasTTL: hasTTL, DefaultTTL: defTTL, NextIndexID: 1}
	if hasTTL {
		m.TSIndexName = "_ts_1"
	}
	c = &Collection{e: e}
	if err := c.publish(m); err != nil {
		return nil, false, err
	}
	b := e.kv.NewBatch()
	defer b.Close()
	if err := e.saveMeta(b, m); err != nil {
		return nil, false, err
	}
	if err := b.Set(docstore.MetaKey("nextCollID"), binary.BigEndian.AppendUint64(nil, id+1)); err != nil {
		return nil, false, err
	}
	if err := b.Commit(true); err != nil {
		return nil, false, err
	}
	c.statsOnce.Do(func() {}) // a new collection's counters start exact at zero
	e.cat.put(c)
	return c, false, nil
}

// collectionForWrite returns db.coll, creating it implicitly as the first
// insert (or upsert, or createIndexes) does in mongod.
func (e *Engine) collectionForWrite(db, coll string) (*Collection, bool, error) {
	if c := e.cat.Get(db, coll); c != nil {
		return c, false, nil
	}
	c, exists, err := e.createCollection(db, coll, nil, false, 0)
	return c, !exists && err == nil, err
}

// dropCollection removes a collection and all its data.
func (e *Engine) dropCollection(db, coll string) error {
	e.cat.mu.Lock()
	c := e.cat.dbs[db][coll]
	if c == nil {
		e.cat.mu.Unlock()
		return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found")
	}
	delete(e.cat.dbs[db], coll)
	if len(e.cat.dbs[db]) == 0 {
		delete(e.cat.dbs, db)
	}
	e.cat.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropped.Store(true)
	e.cursors.killNamespace(db + "." + coll)
	return e.deleteCollectionData(c.Meta(), true)
}

func (e *Engine) deleteCollectionData(m *collMeta, withCatalog bool) error {
	b := e.kv.NewBatch()
	defer b.Close()
	for _, kind := range []byte{docstore.PfxDoc, docstore.PfxIndex, docstore.PfxExpiry} {
		p := docstore.CollPrefix(kind, m.ID)
		if err := b.DeleteRange(p, docstore.PrefixEnd(p)); err != nil {
			return err
		}
	}
	if withCatalog {
		if err := b.Delete(docstore.CatalogKey(m.DB, m.Name)); err != nil {
			return err
		}
	}
	// The drop is recorded in the change history with it (changes.go).
	changed, err := e.stageDDLChange(b, "drop", m.DB, m.Name)
	if err != nil {
		return err
	}
	err = b.Commit(true)
	if changed != nil {
		changed()
	}
	if err != nil {
		return err
	}
	e.compactSoon(docstore.CollPrefix(docstore.PfxDoc, m.ID), docstore.PrefixEnd(docstore.CollPrefix(docstore.PfxExpiry, m.ID)))
	return nil
}

// updateMeta publishes and persists a changed meta. Callers hold c.mu.
func (c *Collection) updateMeta(m *collMeta) error {
	b := c.e.kv.NewBatch()
	defer b.Close()
	if err := c.e.saveMeta(b, m); err != nil {
		return err
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	return c.publish(m)
}

var errDropped = errors.New("collection dropped")

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
				if _, mk, _ := docstore.IndexKeys(&ix.ds, doc); mk {
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
