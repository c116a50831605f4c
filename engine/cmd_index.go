package engine

import (
	"fmt"
	"strings"
	"syscall"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

func init() {
	Register(
		&Command{Name: "createIndexes", Help: "create indexes", Write: true, Run: cmdCreateIndexes},
		&Command{Name: "listIndexes", Help: "list indexes", Run: cmdListIndexes},
		&Command{Name: "dropIndexes", Aliases: []string{"deleteIndexes"}, Help: "drop indexes", Write: true, Run: cmdDropIndexes},
	)
}

func idIndexSpec() bson.D {
	return bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}
}

// listIndexSpecs is what listIndexes shows: _id_, the _ts index while
// DefaultTTL is set (spec §3.3), then the secondary indexes.
func listIndexSpecs(m *collMeta) []bson.D {
	out := []bson.D{idIndexSpec()}
	if m.HasTTL {
		out = append(out, bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_ts", Value: int32(1)}}},
			{Key: "name", Value: m.TSIndexName}, {Key: "expireAfterSeconds", Value: ttlValue(m.DefaultTTL)}})
	}
	for _, ix := range m.Indexes {
		out = append(out, orderIndexSpec(ix.Spec))
	}
	return out
}

func cmdListIndexes(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	batchSize, err := simpleCursorBatchSize(r)
	if err != nil {
		return nil, err
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", r.DB, coll)
	}
	return e.listCursorReply(r, batchSize, r.DB+"."+coll, listIndexSpecs(c.Meta()))
}

// defaultIndexName is mongod's generated name: field_direction pairs.
func defaultIndexName(key bson.D) string {
	parts := make([]string, 0, 2*len(key))
	for _, f := range key {
		parts = append(parts, f.Key, fmt.Sprint(f.Value))
	}
	return strings.Join(parts, "_")
}

// indexOptions are the index spec fields mongod 7.0 accepts
// (index_key_validate.h allowedFieldNames) that mayfly implements; "ns" and
// "_id" are legacy leftovers mongod accepts and drops, "background" and
// "dropDups" ones it keeps in the spec but ignores.
var indexOptions = map[string]bool{"key": true, "name": true, "unique": true, "sparse": true, "partialFilterExpression": true,
	"expireAfterSeconds": true, "hidden": true, "background": true, "v": true, "ns": true, "collation": true,
	"dropDups": true, "_id": true, "prepareUnique": true}

// indexOptionsRefused are fields mongod accepts that mayfly cannot honour.
var indexOptionsRefused = map[string]bool{"weights": true, "default_language": true, "language_override": true,
	"textIndexVersion": true, "2dsphereIndexVersion": true, "bits": true, "min": true, "max": true, "bucketSize": true,
	"storageEngine": true, "wildcardProjection": true, "clustered": true,
	"coarsestIndexedLevel": true, "finestIndexedLevel": true, "originalSpec": true, "columnstoreProjection": true,
	"columnstoreCompressor": true}

// indexSpecOrder is the field order of a listIndexes entry: mongod 7.0
// serialises each one through ListIndexesReplyItem (list_indexes.idl), so
// fields come in that struct's order whatever order they were given in.
var indexSpecOrder = []string{"v", "key", "name", "background", "unique", "hidden", "partialFilterExpression", "sparse",
	"expireAfterSeconds", "storageEngine", "weights", "default_language", "language_override", "textIndexVersion",
	"2dsphereIndexVersion", "bits", "min", "max", "bucketSize", "collation", "wildcardProjection", "columnstoreProjection",
	"coarsestIndexedLevel", "finestIndexedLevel", "dropDups", "originalSpec", "clustered", "prepareUnique"}

// orderIndexSpec puts a spec's fields in listIndexes order; fields
// listIndexes does not know are left out, as mongod's repairIndexSpec does.
func orderIndexSpec(spec bson.D) bson.D {
	out := make(bson.D, 0, len(spec))
	for _, k := range indexSpecOrder {
		if v, ok := bsonx.Get(spec, k); ok {
			out = append(out, bson.E{Key: k, Value: v})
		}
	}
	return out
}

// indexBoolOptions are read as booleans and must be numbers or booleans
// (validateIndexSpec); listIndexes shows them as booleans (safeBool).
var indexBoolOptions = map[string]bool{"background": true, "unique": true, "sparse": true, "dropDups": true, "prepareUnique": true, "clustered": true}

// sameIndexOptions is mongod's kIdentical (IndexDescriptor::compareIndexOptions)
// for two specs with the same name and key: unique and sparse compare by
// truth, the partial filter as given, and background, dropDups, hidden and
// v are not considered at all.
func sameIndexOptions(a, b bson.D) bool {
	norm := func(s bson.D) bson.D {
		out := bson.D{}
		for _, f := range orderIndexSpec(s) {
			switch f.Key {
			case "v", "key", "name", "background", "dropDups", "hidden", "textIndexVersion", "2dsphereIndexVersion":
			case "unique", "sparse":
				if truthy(f.Value) {
					out = append(out, bson.E{Key: f.Key, Value: true})
				}
			default:
				out = append(out, f)
			}
		}
		return out
	}
	return bsonx.Equal(norm(a), norm(b))
}

// parseIndexSpec validates one createIndexes entry.
func parseIndexSpec(spec bson.D) (*indexMeta, error) {
	kv, ok := bsonx.Get(spec, "key")
	key, isDoc := kv.(bson.D)
	if !ok || !isDoc {
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'key' field is a required property of an index specification")
	}
	if len(key) == 0 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be empty.")
	}
	for _, f := range key {
		switch v := f.Value.(type) {
		case string:
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index type '%s' (on field '%s') is not supported by mayfly yet", v, f.Key)
		}
		n, isNum := bsonx.ToFloat(f.Value)
		if !isNum || n == 0 {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Values in the index key pattern can only be of numeric type or string, found %s for field %s", valString(f.Value), f.Key)
		}
		if f.Key == "" || strings.HasPrefix(f.Key, "$") || strings.Contains(f.Key, "$**") {
			if strings.Contains(f.Key, "$**") {
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "wildcard indexes are not supported by mayfly yet")
			}
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Index key contains an illegal field name: '%s'", f.Key)
		}
	}
	ix := &indexMeta{Key: key}
	nv, ok := bsonx.Get(spec, "name")
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'name' field is a required property of an index specification")
	}
	name, isStr := nv.(string)
	if !isStr || name == "" {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "The field 'name' must be a non-empty string")
	}
	ix.Name = name
	// _ts lives in the document header, not the body: the only index on it
	// is the {_ts: 1} view of DefaultTTL (spec §3.3). Other indexes naming
	// it would be built without it and give wrong answers, so refuse them.
	for i, f := range key {
		if f.Key == "_ts" && (len(key) > 1 || i > 0) {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "_ts can only be indexed alone, as {_ts: 1} with expireAfterSeconds (the collection's defaultTimeToLive)")
		}
	}
	if pf, ok := bsonx.Get(spec, "partialFilterExpression"); ok && containsKey(bson.D{{Key: "p", Value: pf}}, "_ts") {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "partialFilterExpression cannot refer to _ts, a system property kept outside the document")
	}
	out := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: key}, {Key: "name", Value: name}}
	for _, f := range spec {
		if indexOptionsRefused[f.Key] {
			return nil, mongoerr.New(mongoerr.CannotCreateIndex, "index option '%s' is not supported by mayfly yet", f.Key)
		}
		if !indexOptions[f.Key] {
			return nil, mongoerr.New(mongoerr.InvalidIndexSpecificationOp, "The field '%s' is not valid for an index specification. Specification: %s", f.Key, valString(spec))
		}
		if indexBoolOptions[f.Key] && !bsonx.IsNumber(f.Value) {
			if _, isBool := f.Value.(bool); !isBool {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "The field '%s has value %s: %s, which is not convertible to bool", f.Key, f.Key, valString(f.Value))
			}
		}
		switch f.Key {
		case "v":
			if !bsonx.IsNumber(f.Value) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "The field 'v' must be a number, but got %s", bsonx.TypeName(f.Value))
			}
			n, isInt := bsonx.ToInt64(f.Value)
			if !isInt || n < -1<<31 || n >= 1<<31 {
				return nil, mongoerr.New(mongoerr.BadValue, "Index version must be representable as a 32-bit integer, but got %s", valString(f.Value))
			}
			if n != 1 && n != 2 {
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Invalid index specification %s; cannot create an index with v=%d", valString(spec), n)
			}
			out = bsonx.Set(out, "v", int32(n))
		case "background", "dropDups":
			// Accepted, kept in the spec and ignored, as by mongod 7.0.
			out = append(out, bson.E{Key: f.Key, Value: truthy(f.Value)})
		case "unique":
			ix.Unique = truthy(f.Value)
			out = append(out, bson.E{Key: "unique", Value: ix.Unique})
		case "prepareUnique":
			ix.PrepareUnique = truthy(f.Value)
			out = append(out, bson.E{Key: "prepareUnique", Value: ix.PrepareUnique})
		case "sparse":
			ix.Sparse = truthy(f.Value)
			out = append(out, bson.E{Key: "sparse", Value: ix.Sparse})
		case "hidden":
			h, isBool := f.Value.(bool)
			if !isBool {
				// mongod 7.0's message names 'name' here (index_key_validate.cpp).
				return nil, mongoerr.New(mongoerr.TypeMismatch, "The field 'name' must be a bool, but got %s", bsonx.TypeName(f.Value))
			}
			ix.Hidden = h
			out = append(out, bson.E{Key: "hidden", Value: h})
		case "partialFilterExpression":
			pf, isDoc := f.Value.(bson.D)
			if !isDoc {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "partialFilterExpression must be an object")
			}
			if _, err := query.Compile(pf); err != nil {
				return nil, err
			}
			ix.Partial = pf
			out = append(out, f)
		case "expireAfterSeconds":
			if len(key) == 1 && key[0].Key == "_ts" {
				n, _, err := ttl.ParseDefaultTTL(f.Value, false)
				if err != nil {
					return nil, err
				}
				ix.HasTTL, ix.TTL = true, n
				continue
			}
			if len(key) > 1 {
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s", valString(spec))
			}
			if key[0].Key == "_id" {
				return nil, mongoerr.New(mongoerr.InvalidIndexSpecificationOp, "The field 'expireAfterSeconds' is not valid for an _id index specification. Specification: %s", valString(spec))
			}
			n, err := ttl.ParseExpireAfterSeconds(f.Value)
			if err != nil {
				return nil, err
			}
			ix.HasTTL, ix.TTL = true, n
			out = append(out, bson.E{Key: "expireAfterSeconds", Value: int32OrInt64(n)})
		case "collation":
			if err := checkCollation(f.Value); err != nil {
				return nil, err
			}
		}
	}
	if ix.Unique && ix.PrepareUnique {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Invalid index specification %s; cannot create an index with the 'unique' option and the 'prepareUnique' option", valString(spec))
	}
	if ix.Sparse && len(ix.Partial) > 0 {
		return nil, mongoerr.New(mongoerr.CannotCreateIndex, "cannot mix \"partialFilterExpression\" and \"sparse\" options")
	}
	if len(key) == 1 && key[0].Key == "_id" && bsonx.Equal(key[0].Value, int32(1)) {
		// validateIdIndexSpec: an _id index takes no options.
		for _, f := range spec {
			switch f.Key {
			case "collation", "name", "v", "key", "ns", "_id":
			default:
				return nil, mongoerr.New(mongoerr.InvalidIndexSpecificationOp, "The field '%s' is not valid for an _id index specification. Specification: %s", f.Key, valString(spec))
			}
		}
	}
	ix.Spec = orderIndexSpec(out)
	return ix, nil
}

func cmdCreateIndexes(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	specs, err := arrayArg(r, "indexes")
	if err != nil {
		return nil, err
	}
	ignoreUnknown := false
	for _, f := range r.Cmd[1:] {
		switch {
		case IsEnvelopeField(f.Key), f.Key == "indexes":
		case f.Key == "commitQuorum":
			return nil, mongoerr.New(mongoerr.BadValue, "Standalones can't specify commitQuorum")
		case f.Key == "ignoreUnknownIndexOptions":
			if _, isBool := f.Value.(bool); !isBool && !bsonx.IsNumber(f.Value) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'createIndexes.ignoreUnknownIndexOptions' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'", bsonx.TypeName(f.Value))
			}
			ignoreUnknown = truthy(f.Value)
		default:
			return nil, mongoerr.New(40415, "BSON field 'createIndexes.%s' is an unknown field.", f.Key)
		}
	}
	if len(specs) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one index to create")
	}
	var parsed []*indexMeta
	for _, s := range specs {
		d, ok := s.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "The 'indexes' field must be an array of index specifications")
		}
		if ignoreUnknown {
			// mongod drops the fields validateIndexSpec would refuse
			// (index_key_validate::removeUnknownFields).
			kept := bson.D{}
			for _, f := range d {
				if indexOptions[f.Key] || indexOptionsRefused[f.Key] {
					kept = append(kept, f)
				}
			}
			d = kept
		}
		ix, err := parseIndexSpec(d)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, ix)
	}
	c, created, err := e.collectionForWrite(r.DB, coll)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Meta().clone()
	before := len(listIndexSpecs(m))
	var build []int // positions in m.Indexes of the indexes to build
	for _, ix := range parsed {
		skip, err := checkIndexConflict(m, ix)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		if err := checkIndexLimit(r.DB, coll, m, ix); err != nil {
			return nil, err
		}
		if ix.Key[0].Key == "_ts" && len(ix.Key) == 1 {
			if !ix.HasTTL {
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "an index on _ts must carry expireAfterSeconds: it sets the collection's defaultTimeToLive (spec §3.3)")
			}
			setDefaultTTL(m, true, ix.TTL, ix.Name)
			continue
		}
		ix.ID = m.NextIndexID
		m.NextIndexID++
		m.Indexes = append(m.Indexes, *ix)
		build = append(build, len(m.Indexes)-1)
	}
	if len(build) > 0 {
		if err := c.buildIndexes(m, build); err != nil {
			return nil, err
		}
	}
	if err := c.changeMeta(m); err != nil {
		return nil, err
	}
	out := bson.D{{Key: "numIndexesBefore", Value: int32(before)}, {Key: "numIndexesAfter", Value: int32(len(listIndexSpecs(m)))}}
	if before == len(listIndexSpecs(m)) {
		out = append(out, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	out = append(out, bson.E{Key: "createdCollectionAutomatically", Value: created})
	return out, nil
}

// checkIndexConflict: the same spec again is a no-op; the same name with
// another key, or the same key with other options, is an error.
func checkIndexConflict(m *collMeta, ix *indexMeta) (skip bool, err error) {
	if len(ix.Key) == 1 && ix.Key[0].Key == "_id" && !ix.Unique && !ix.Sparse && len(ix.Partial) == 0 {
		return true, nil
	}
	if len(ix.Key) == 1 && ix.Key[0].Key == "_ts" && m.HasTTL {
		if m.TSIndexName == ix.Name && m.DefaultTTL == ix.TTL {
			return true, nil
		}
		return false, mongoerr.New(mongoerr.IndexOptionsConflict, "An equivalent index already exists with a different name or options. Use collMod to change expireAfterSeconds of the _ts index (the collection's defaultTimeToLive)")
	}
	for _, ex := range m.Indexes {
		sameKey := bsonx.Equal(ex.Key, ix.Key)
		if ex.Name == ix.Name {
			if !sameKey {
				return false, mongoerr.New(mongoerr.IndexKeySpecsConflict, "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s", valString(ix.Spec), valString(ex.Spec))
			}
			if sameIndexOptions(ex.Spec, ix.Spec) {
				return true, nil
			}
			return false, mongoerr.New(mongoerr.IndexOptionsConflict, "An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s", valString(ix.Spec), valString(ex.Spec))
		}
		if sameKey && bsonx.Equal(ex.Partial, ix.Partial) {
			return false, mongoerr.New(mongoerr.IndexOptionsConflict, "Index already exists with a different name: %s", ex.Name)
		}
	}
	return false, nil
}

// buildIndexes fills new indexes from the existing documents (expired ones
// are skipped: they are already gone for every reader). Unique violations
// among live documents fail the build and nothing is kept. Callers hold
// c.mu exclusively.
func (c *Collection) buildIndexes(m *collMeta, build []int) error {
	st := &collState{meta: m, policy: c.st().policy}
	var ixs []*index
	for _, pos := range build {
		ix, err := newIndex(m.Indexes[pos])
		if err != nil {
			return err
		}
		ixs = append(ixs, ix)
	}
	p := docstore.CollPrefix(docstore.PfxDoc, m.ID)
	it, err := c.e.kv.NewIter(p, docstore.PrefixEnd(p))
	if err != nil {
		return err
	}
	defer it.Close()
	now := c.e.nowMS()
	b := c.e.kv.NewBatch()
	defer func() { b.Close() }()
	seen := make([]map[string]bson.D, len(ixs))
	for i := range seen {
		seen[i] = map[string]bson.D{}
	}
	for ok := it.First(); ok; ok = it.Next() {
		rec, err := docstore.DecodeRecord(append([]byte(nil), it.Key()[len(p):]...), it.Value())
		if err != nil {
			return err
		}
		if !st.visible(rec, now) {
			continue
		}
		doc, err := rec.Doc()
		if err != nil {
			return err
		}
		for i, ix := range ixs {
			keys, mk, err := docstore.IndexKeys(&ix.ds, doc)
			if err != nil {
				return err
			}
			if mk {
				m.Indexes[build[i]].Multikey = true
			}
			pre := docstore.IndexPrefix(m.ID, ix.ID)
			for _, k := range keys {
				if ix.Unique {
					if _, dup := seen[i][string(k)]; dup {
						e := docstore.DupKeyError(m.ns(), &ix.ds, doc).(*mongoerr.Error)
						return &mongoerr.Error{Code: e.Code, Msg: "Index build failed: " + e.Msg, Extra: e.Extra}
					}
					seen[i][string(k)] = nil
				}
				if err := b.Set(cat(cat(pre, k), rec.IDKey), rec.IDKey); err != nil {
					return err
				}
			}
		}
		if b.Len() > 10000 {
			if err := b.Commit(false); err != nil {
				return err
			}
			b.Close()
			b = c.e.kv.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return b.Commit(true)
}

func cmdDropIndexes(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s.%s", r.DB, coll)
	}
	target, ok := r.Arg("index")
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Meta().clone()
	was := int32(len(listIndexSpecs(m)))
	var names []string
	switch t := target.(type) {
	case string:
		if t == "*" {
			for _, ix := range m.Indexes {
				names = append(names, ix.Name)
			}
			if m.HasTTL {
				names = append(names, m.TSIndexName)
			}
		} else {
			names = []string{t}
		}
	case bson.A:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "dropIndexes index names must be strings")
			}
			names = append(names, s)
		}
	case bson.D:
		switch {
		case len(t) == 1 && t[0].Key == "_id":
			return nil, mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
		case len(t) == 1 && t[0].Key == "_ts" && m.HasTTL:
			names = []string{m.TSIndexName}
		default:
			found := ""
			for _, ix := range m.Indexes {
				if bsonx.Equal(ix.Key, t) {
					found = ix.Name
				}
			}
			if found == "" {
				return nil, mongoerr.New(mongoerr.IndexNotFound, "can't find index with key: %s", valString(t))
			}
			names = []string{found}
		}
	default:
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'dropIndexes.index' is the wrong type")
	}
	var dropped []indexMeta
	for _, n := range names {
		if n == "_id_" {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
		}
		if m.HasTTL && n == m.TSIndexName {
			setDefaultTTL(m, false, 0, "")
			continue
		}
		idx := -1
		for i, ix := range m.Indexes {
			if ix.Name == n {
				idx = i
			}
		}
		if idx < 0 {
			return nil, mongoerr.New(mongoerr.IndexNotFound, "index not found with name [%s]", n)
		}
		dropped = append(dropped, m.Indexes[idx])
		m.Indexes = append(m.Indexes[:idx:idx], m.Indexes[idx+1:]...)
	}
	if err := c.changeMeta(m); err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		b := e.kv.NewBatch()
		defer b.Close()
		for _, ix := range dropped {
			p := docstore.IndexPrefix(m.ID, ix.ID)
			if err := b.DeleteRange(p, docstore.PrefixEnd(p)); err != nil {
				return nil, err
			}
		}
		if err := b.Commit(true); err != nil {
			return nil, err
		}
	}
	return bson.D{{Key: "nIndexesWas", Value: was}}, nil
}

// fsUsage reports the filesystem holding the working directory.
func fsUsage() (used, total int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(".", &st); err != nil {
		return 0, 0
	}
	total = int64(st.Blocks) * int64(st.Bsize)
	used = total - int64(st.Bfree)*int64(st.Bsize)
	return used, total
}
