package engine

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

func init() {
	Register(
		&Command{Name: "create", Help: "create a collection", Write: true, Run: cmdCreate},
		&Command{Name: "drop", Help: "drop a collection", Write: true, Run: cmdDrop},
		&Command{Name: "dropDatabase", Help: "drop a database", Write: true, Run: cmdDropDatabase},
		&Command{Name: "listDatabases", Help: "list databases", AdminOnly: true, Run: cmdListDatabases},
		&Command{Name: "listCollections", Help: "list collections", Run: cmdListCollections},
		&Command{Name: "renameCollection", Help: "rename a collection", AdminOnly: true, Write: true, Run: cmdRenameCollection},
		&Command{Name: "dbStats", Aliases: []string{"dbstats"}, Help: "database statistics", Run: cmdDBStats},
		&Command{Name: "collStats", Aliases: []string{"collstats"}, Help: "collection statistics", Run: cmdCollStats},
		&Command{Name: "collMod", Help: "modify collection options", Write: true, Run: cmdCollMod},
	)
}

// Options of create that mayfly implements, and ones it refuses clearly.
var createSupported = map[string]bool{"defaultTimeToLive": true, "idIndex": true, "collation": true}
var createRefused = map[string]bool{"capped": true, "size": true, "max": true, "timeseries": true, "validator": true,
	"validationLevel": true, "validationAction": true, "clusteredIndex": true, "viewOn": true, "pipeline": true,
	"changeStreamPreAndPostImages": true, "storageEngine": true, "indexOptionDefaults": true, "expireAfterSeconds": true,
	"encryptedFields": true, "flags": true, "temp": true, "recordPreImages": true}

func cmdCreate(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	var opts bson.D
	var reply bson.D
	hasTTL, defTTL := false, int64(0)
	for _, f := range r.Cmd[1:] {
		switch {
		case IsEnvelopeField(f.Key):
			continue
		case f.Key == "autoIndexId":
			// mongod 7.0 (create.idl: safeBool; cmd_create.cpp,
			// DatabaseImpl::createCollection): deprecated, noted in the
			// reply, kept in the options; false only where the namespace
			// is not replicated (the local database).
			if _, isBool := f.Value.(bool); !isBool && !bsonx.IsNumber(f.Value) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.autoIndexId' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'", bsonx.TypeName(f.Value))
			}
			if !truthy(f.Value) {
				if r.DB != "local" {
					return nil, mongoerr.New(50001, "autoIndexId:false is not allowed for collection %s.%s because it can be replicated", r.DB, coll)
				}
				return nil, mongoerr.New(mongoerr.NotImplemented, "autoIndexId:false is not supported by mayfly: every collection has its _id index")
			}
			e.log.Warn("The autoIndexId option is deprecated and will be removed in a future release")
			reply = bson.D{{Key: "note", Value: "The autoIndexId option is deprecated and will be removed in a future release"}}
			opts = append(bson.D{{Key: "autoIndexId", Value: true}}, opts...)
		case f.Key == "defaultTimeToLive":
			n, on, err := ttl.ParseDefaultTTL(f.Value, true)
			if err != nil {
				return nil, err
			}
			hasTTL, defTTL = on, n
			if on {
				opts = append(opts, bson.E{Key: "defaultTimeToLive", Value: f.Value})
			}
		case f.Key == "collation":
			if err := checkCollation(f.Value); err != nil {
				return nil, err
			}
		case f.Key == "capped" && f.Value == false, f.Key == "idIndex":
		case createSupported[f.Key]:
			opts = append(opts, f)
		case createRefused[f.Key]:
			return nil, mongoerr.New(mongoerr.NotImplemented, "create option '%s' is not supported by mayfly yet", f.Key)
		default:
			return nil, mongoerr.New(40415, "BSON field 'create.%s' is an unknown field.", f.Key)
		}
	}
	c, exists, err := e.createCollection(r.DB, coll, opts, hasTTL, defTTL)
	if err != nil {
		return nil, err
	}
	if exists {
		// MongoDB 7.0: creating an existing collection with identical
		// options succeeds and does nothing; other options are a conflict.
		m := c.Meta()
		if m.HasTTL == hasTTL && (!hasTTL || m.DefaultTTL == defTTL) && bsonx.Equal(collOptions(m), collOptions(&collMeta{Options: opts, HasTTL: hasTTL, DefaultTTL: defTTL})) {
			return append(bson.D{}, reply...), nil
		}
		return nil, mongoerr.New(mongoerr.NamespaceExists, "Collection %s.%s already exists with different options.", r.DB, coll)
	}
	return append(bson.D{}, reply...), nil
}

func cmdDrop(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	if r.DB == "admin" && coll == "system.version" {
		// OpObserverImpl::onDropCollection.
		return nil, mongoerr.New(50715, "dropping the server configuration collection (admin.system.version) is not allowed.")
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		// MongoDB 7.0: dropping a collection that does not exist succeeds.
		return bson.D{}, nil
	}
	n := int32(len(listIndexSpecs(c.Meta())))
	if err := e.dropCollection(r.DB, coll); err != nil {
		if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return bson.D{}, nil
		}
		return nil, err
	}
	return bson.D{{Key: "nIndexesWas", Value: n}, {Key: "ns", Value: r.DB + "." + coll}}, nil
}

func cmdDropDatabase(e *Engine, r *Request) (bson.D, error) {
	if r.DB == "admin" {
		// OpObserverImpl::onDropDatabase.
		return nil, mongoerr.New(50714, "dropping the admin database is not allowed.")
	}
	for _, c := range e.cat.Collections(r.DB) {
		if err := e.dropCollection(r.DB, c.Meta().Name); err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return nil, err
		}
	}
	if e.hist != nil {
		// After its collections' drop events, the database's own.
		b := e.kv.NewBatch()
		changed, err := e.stageDDLChange(b, "dropDatabase", r.DB, "")
		if err == nil {
			err = b.Commit(true)
		}
		if changed != nil {
			changed()
		}
		_ = b.Close()
		if err != nil {
			return nil, err
		}
	}
	return bson.D{{Key: "dropped", Value: r.DB}}, nil
}

// collFigures are a collection's sizes with expired documents excluded
// (spec §6.4).
type collFigures struct {
	count, size, backlogN, backlogBytes, indexSize, storage int64
	oldestDeadline                                          int64
	indexSizes                                              bson.D
}

func (c *Collection) figures() collFigures {
	c.ensureStats()
	now := c.e.nowMS()
	f := collFigures{}
	// The reaper deletes a batch and lowers nDocs under purgeMu: holding it
	// shared makes the backlog and the counters one snapshot, so a batch
	// purged during the backlog scan is not subtracted twice.
	c.purgeMu.RLock()
	f.backlogN, f.backlogBytes, f.oldestDeadline = c.backlog(now)
	f.count = c.nDocs.Load() - f.backlogN
	f.size = c.size.Load() - f.backlogBytes
	c.purgeMu.RUnlock()
	if f.count < 0 {
		f.count = 0
	}
	if f.size < 0 {
		f.size = 0
	}
	m := c.Meta()
	ds, _ := c.e.kv.EstimateDiskUsage(docstore.CollPrefix(docstore.PfxDoc, m.ID), docstore.PrefixEnd(docstore.CollPrefix(docstore.PfxDoc, m.ID)))
	f.storage = int64(ds)
	// The _id index lives in the document keys: count its key bytes.
	f.indexSizes = bson.D{{Key: "_id_", Value: f.count * 16}}
	f.indexSize = f.count * 16
	for _, ix := range m.Indexes {
		p := docstore.IndexPrefix(m.ID, ix.ID)
		sz, _ := c.e.kv.EstimateDiskUsage(p, docstore.PrefixEnd(p))
		f.indexSizes = append(f.indexSizes, bson.E{Key: ix.Name, Value: int64(sz)})
		f.indexSize += int64(sz)
	}
	if m.HasTTL {
		f.indexSizes = append(f.indexSizes, bson.E{Key: m.TSIndexName, Value: int64(0)})
	}
	return f
}

func cmdListDatabases(e *Engine, r *Request) (bson.D, error) {
	m, err := filterArg(r)
	if err != nil {
		return nil, err
	}
	nameOnly := boolArg(r, "nameOnly")
	dbs := bson.A{}
	var total int64
	for _, db := range e.cat.Databases() {
		var size int64
		empty := true
		if !nameOnly {
			for _, c := range e.cat.Collections(db) {
				f := c.figures()
				size += f.size + f.indexSize
				if f.count > 0 {
					empty = false
				}
			}
		}
		entry := bson.D{{Key: "name", Value: db}}
		if !nameOnly {
			entry = append(entry, bson.E{Key: "sizeOnDisk", Value: size}, bson.E{Key: "empty", Value: empty})
		}
		if m != nil && !m.Matches(entry) {
			continue
		}
		total += size
		dbs = append(dbs, entry)
	}
	out := bson.D{{Key: "databases", Value: dbs}}
	if !nameOnly {
		out = append(out, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total / (1024 * 1024)})
	}
	return out, nil
}

// collOptions renders a collection's options, DefaultTTL included (spec §3.5).
func collOptions(m *collMeta) bson.D {
	out := bson.D{}
	for _, o := range m.Options {
		if o.Key != "defaultTimeToLive" {
			out = append(out, o)
		}
	}
	if m.HasTTL {
		out = append(out, bson.E{Key: "defaultTimeToLive", Value: ttlValue(m.DefaultTTL)})
	}
	return out
}

// filterArg compiles the optional filter of listDatabases/listCollections
// (nil when there is none).
func filterArg(r *Request) (*query.Matcher, error) {
	filter, err := docArg(r, "filter")
	if err != nil || len(filter) == 0 {
		return nil, err
	}
	return query.Compile(filter)
}

func ttlValue(n int64) any { return int32OrInt64(n) }

func cmdListCollections(e *Engine, r *Request) (bson.D, error) {
	m, err := filterArg(r)
	if err != nil {
		return nil, err
	}
	if err := ValidateDBName(r.DB); err != nil {
		return nil, err
	}
	batchSize, err := simpleCursorBatchSize(r)
	if err != nil {
		return nil, err
	}
	nameOnly := boolArg(r, "nameOnly")
	batch := []bson.D{}
	for _, c := range e.cat.Collections(r.DB) {
		meta := c.Meta()
		full := bson.D{
			{Key: "name", Value: meta.Name}, {Key: "type", Value: "collection"},
			{Key: "options", Value: collOptions(meta)},
			{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: meta.UUID}}},
			{Key: "idIndex", Value: bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}},
		}
		if m != nil && !m.Matches(full) {
			continue
		}
		if nameOnly {
			batch = append(batch, bson.D{{Key: "name", Value: meta.Name}, {Key: "type", Value: "collection"}})
		} else {
			batch = append(batch, full)
		}
	}
	return e.listCursorReply(r, batchSize, r.DB+".$cmd.listCollections", batch)
}

func splitNS(ns string) (string, string, bool) {
	i := strings.IndexByte(ns, '.')
	if i <= 0 || i == len(ns)-1 {
		return "", "", false
	}
	return ns[:i], ns[i+1:], true
}

func cmdRenameCollection(e *Engine, r *Request) (bson.D, error) {
	from, _ := r.Cmd[0].Value.(string)
	toV, _ := r.Arg("to")
	to, _ := toV.(string)
	fdb, fcoll, ok1 := splitNS(from)
	tdb, tcoll, ok2 := splitNS(to)
	if !ok1 || !ok2 {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", map[bool]string{true: to, false: from}[ok1])
	}
	if err := ValidateCollName(tdb, tcoll); err != nil {
		return nil, err
	}
	if from == to {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	dropTarget := boolArg(r, "dropTarget")
	src := e.cat.Get(fdb, fcoll)
	if src == nil {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Source collection %s does not exist", from)
	}
	if e.cat.Get(tdb, tcoll) != nil {
		if !dropTarget {
			return nil, mongoerr.New(mongoerr.NamespaceExists, "target namespace exists")
		}
		if err := e.dropCollection(tdb, tcoll); err != nil {
			return nil, err
		}
	}
	// Documents and index entries are keyed by collection id, so a rename
	// (within or across databases) only moves the catalog entry.
	e.cat.mu.Lock()
	defer e.cat.mu.Unlock()
	if e.cat.dbs[tdb][tcoll] != nil {
		return nil, mongoerr.New(mongoerr.NamespaceExists, "target namespace exists")
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	old := src.Meta()
	m := old.clone()
	m.DB, m.Name = tdb, tcoll
	b := e.kv.NewBatch()
	defer b.Close()
	if err := b.Delete(docstore.CatalogKey(old.DB, old.Name)); err != nil {
		return nil, err
	}
	if err := e.saveMeta(b, m); err != nil {
		return nil, err
	}
	// Recorded in the change history with it (changes.go).
	changed, err := e.stageDDLChange(b, "rename", fdb, fcoll, tdb, tcoll)
	if err != nil {
		return nil, err
	}
	err = b.Commit(true)
	if changed != nil {
		changed()
	}
	if err != nil {
		return nil, err
	}
	if err := src.publish(m); err != nil {
		return nil, err
	}
	delete(e.cat.dbs[fdb], fcoll)
	if len(e.cat.dbs[fdb]) == 0 {
		delete(e.cat.dbs, fdb)
	}
	e.cat.put(src)
	e.cursors.killNamespace(from)
	return bson.D{}, nil
}

func scaleArg(r *Request) (int64, error) {
	v, ok := r.Arg("scale")
	if !ok {
		return 1, nil
	}
	n, isInt := bsonx.ToInt64(v)
	if !isInt {
		f, isNum := bsonx.ToFloat(v)
		if !isNum {
			return 0, mongoerr.New(mongoerr.TypeMismatch, "scale has to be a number >= 1")
		}
		n = int64(f)
	}
	if n < 1 {
		return 0, mongoerr.New(mongoerr.BadValue, "scale has to be a number >= 1")
	}
	return n, nil
}

func cmdDBStats(e *Engine, r *Request) (bson.D, error) {
	if err := ValidateDBName(r.DB); err != nil {
		return nil, err
	}
	scale, err := scaleArg(r)
	if err != nil {
		return nil, err
	}
	colls := e.cat.Collections(r.DB)
	var objects, dataSize, storageSize, indexes, indexSize, backlog int64
	for _, c := range colls {
		f := c.figures()
		objects += f.count
		dataSize += f.size
		storageSize += f.storage
		indexes += int64(len(listIndexSpecs(c.Meta())))
		indexSize += f.indexSize
		backlog += f.backlogN
	}
	avg := 0.0
	if objects > 0 {
		avg = float64(dataSize) / float64(objects)
	}
	fsUsed, fsTotal := fsUsage()
	reply := bson.D{
		{Key: "db", Value: r.DB}, {Key: "collections", Value: int64(len(colls))}, {Key: "views", Value: int64(0)},
		{Key: "objects", Value: objects}, {Key: "avgObjSize", Value: avg}, {Key: "dataSize", Value: float64(dataSize / scale)},
		{Key: "storageSize", Value: float64(storageSize / scale)}, {Key: "indexes", Value: indexes},
		{Key: "indexSize", Value: float64(indexSize / scale)}, {Key: "totalSize", Value: float64((storageSize + indexSize) / scale)},
		{Key: "scaleFactor", Value: scale}, {Key: "fsUsedSize", Value: float64(fsUsed / scale)}, {Key: "fsTotalSize", Value: float64(fsTotal / scale)},
		{Key: "ttlExpiredBacklog", Value: backlog},
	}
	if boolArg(r, "freeStorage") {
		reply = e.withFreeStorage(reply, colls, scale)
	}
	return reply, nil
}

// collStatsDoc renders collStats (and $collStats' storageStats).
func (c *Collection) collStatsDoc(scale int64) bson.D {
	m := c.Meta()
	f := c.figures()
	avg := int64(0)
	if f.count > 0 {
		avg = f.size / f.count
	}
	idxSizes := bson.D{}
	for _, x := range f.indexSizes {
		idxSizes = append(idxSizes, bson.E{Key: x.Key, Value: x.Value.(int64) / scale})
	}
	ttlDoc := bson.D{}
	if m.HasTTL {
		ttlDoc = append(ttlDoc, bson.E{Key: "defaultTimeToLive", Value: ttlValue(m.DefaultTTL)})
	} else {
		ttlDoc = append(ttlDoc, bson.E{Key: "defaultTimeToLive", Value: nil})
	}
	lag := 0.0
	if f.backlogN > 0 {
		lag = float64(c.e.nowMS()-f.oldestDeadline) / 1000
	}
	ttlDoc = append(ttlDoc, bson.E{Key: "expiredBacklog", Value: f.backlogN}, bson.E{Key: "expiredBacklogBytes", Value: f.backlogBytes},
		bson.E{Key: "oldestExpiredLagSeconds", Value: lag}, bson.E{Key: "deletedDocuments", Value: c.ttlDeleted.Load()})
	return bson.D{
		{Key: "ns", Value: m.ns()}, {Key: "size", Value: f.size / scale}, {Key: "count", Value: f.count},
		{Key: "avgObjSize", Value: avg}, {Key: "numOrphanDocs", Value: int64(0)}, {Key: "storageSize", Value: f.storage / scale},
		{Key: "freeStorageSize", Value: int64(0)}, {Key: "capped", Value: false},
		{Key: "nindexes", Value: int64(len(listIndexSpecs(m)))}, {Key: "indexBuilds", Value: bson.A{}},
		{Key: "totalIndexSize", Value: f.indexSize / scale}, {Key: "totalSize", Value: (f.storage + f.indexSize) / scale},
		{Key: "indexSizes", Value: idxSizes}, {Key: "scaleFactor", Value: scale}, {Key: "ttl", Value: ttlDoc},
	}
}

func cmdCollStats(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	scale, err := scaleArg(r)
	if err != nil {
		return nil, err
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Collection [%s.%s] not found.", r.DB, coll)
	}
	return c.collStatsDoc(scale), nil
}

func setDefaultTTL(m *collMeta, on bool, n int64, name string) {
	m.HasTTL, m.DefaultTTL = on, n
	if on {
		if name != "" {
			m.TSIndexName = name
		} else if m.TSIndexName == "" {
			m.TSIndexName = "_ts_1"
		}
	} else {
		m.TSIndexName = ""
	}
	var opts bson.D
	for _, o := range m.Options {
		if o.Key != "defaultTimeToLive" {
			opts = append(opts, o)
		}
	}
	m.Options = opts
}

// changeMeta publishes a new meta. If any document expired under the
// current policy would be live under the new one, every expired document is
// purged first, so nothing invisible ever becomes visible again. Callers
// hold c.mu exclusively.
func (c *Collection) changeMeta(m *collMeta) error {
	cur := c.st()
	if cur.policy != nil && lengthens(cur.meta, m) {
		if _, err := c.purgeAll(c.e.nowMS()); err != nil {
			return err
		}
	}
	return c.updateMeta(m)
}

// lengthens reports whether expiry under n can be later than under o for
// some document.
func lengthens(o, n *collMeta) bool {
	if o.HasTTL {
		if !n.HasTTL {
			return true
		}
		od, nd := o.DefaultTTL, n.DefaultTTL
		if od > 0 && (nd == -1 || nd > od) {
			return true
		}
	}
	for _, oi := range o.Indexes {
		if !oi.HasTTL {
			continue
		}
		found := false
		for _, ni := range n.Indexes {
			if ni.ID == oi.ID && ni.HasTTL {
				found = true
				if ni.TTL > oi.TTL {
					return true
				}
			}
		}
		if !found {
			return true
		}
	}
	return false
}

func setSpecField(spec bson.D, k string, v any) bson.D {
	return bsonx.Set(append(bson.D(nil), spec...), k, v)
}

var _ = fmt.Sprintf
