package engine

import (
	"bytes"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

// collModRefused are collMod options of mongod 7.0 (coll_mod.idl) that
// mayfly does not implement: they fail loudly rather than being ignored.
var collModRefused = map[string]bool{"validator": true, "validationLevel": true, "validationAction": true,
	"changeStreamPreAndPostImages": true, "expireAfterSeconds": true, "viewOn": true, "pipeline": true,
	"timeseries": true, "cappedSize": true, "cappedMax": true, "collectionUUID": true, "recordPreImages": true}

// collModIndexReq is collMod's index sub-document (CollModIndex in
// coll_mod.idl) once its fields are type-checked.
type collModIndexReq struct {
	keyPattern     bson.D
	name           string
	hasKP, hasName bool
	expire         *int64
	expireRaw      any
	hidden         *bool
	unique         *bool
	prepareUnique  *bool
	forceNonUnique *bool
}

func collModBool(field string, v any) (*bool, error) {
	if _, isBool := v.(bool); !isBool && !bsonx.IsNumber(v) {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'", field, bsonx.TypeName(v))
	}
	b := truthy(v)
	return &b, nil
}

func parseCollModIndex(spec bson.D) (*collModIndexReq, error) {
	q := &collModIndexReq{}
	for _, f := range spec {
		var err error
		switch f.Key {
		case "keyPattern":
			d, ok := f.Value.(bson.D)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.keyPattern' is the wrong type '%s', expected type 'object'", bsonx.TypeName(f.Value))
			}
			q.keyPattern, q.hasKP = d, true
		case "name":
			s, ok := f.Value.(string)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.name' is the wrong type '%s', expected type 'string'", bsonx.TypeName(f.Value))
			}
			q.name, q.hasName = s, true
		case "expireAfterSeconds":
			// Checked once the index is known: the _ts index reads it as
			// a defaultTimeToLive (spec §3.3).
			n := safeNumberLong(f.Value)
			q.expire, q.expireRaw = &n, f.Value
		case "hidden":
			q.hidden, err = collModBool("collMod.index.hidden", f.Value)
		case "unique":
			q.unique, err = collModBool("collMod.index.unique", f.Value)
		case "prepareUnique":
			q.prepareUnique, err = collModBool("collMod.index.prepareUnique", f.Value)
		case "forceNonUnique":
			q.forceNonUnique, err = collModBool("collMod.index.forceNonUnique", f.Value)
		default:
			return nil, mongoerr.New(40415, "BSON field 'collMod.index.%s' is an unknown field.", f.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	return q, nil
}

// cmdCollMod changes DefaultTTL (defaultTimeToLive, or the _ts index's
// expireAfterSeconds) and an index's options (expireAfterSeconds, hidden,
// prepareUnique, unique, forceNonUnique), following mongod 7.0's
// parseCollModRequest and processCollModIndexRequest (coll_mod.cpp,
// coll_mod_index.cpp). A change that lengthens or switches off expiry first
// purges what is already expired (spec §6.5). Nothing given is ignored.
func cmdCollMod(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	var ixReq *collModIndexReq
	var defTTL *struct {
		on bool
		n  int64
	}
	dryRun := false
	for _, f := range r.Cmd[1:] {
		switch {
		case IsEnvelopeField(f.Key):
		case f.Key == "defaultTimeToLive":
			n, on, err := ttl.ParseDefaultTTL(f.Value, true)
			if err != nil {
				return nil, err
			}
			defTTL = &struct {
				on bool
				n  int64
			}{on, n}
		case f.Key == "index":
			spec, ok := f.Value.(bson.D)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index' is the wrong type '%s', expected type 'object'", bsonx.TypeName(f.Value))
			}
			if ixReq, err = parseCollModIndex(spec); err != nil {
				return nil, err
			}
		case f.Key == "dryRun":
			b, err := collModBool("collMod.dryRun", f.Value)
			if err != nil {
				return nil, err
			}
			dryRun = *b
		case collModRefused[f.Key]:
			return nil, mongoerr.New(mongoerr.NotImplemented, "collMod option '%s' is not supported by mayfly yet", f.Key)
		default:
			return nil, mongoerr.New(40415, "BSON field 'collMod.%s' is an unknown field.", f.Key)
		}
	}
	converting := ixReq != nil && ixReq.unique != nil && *ixReq.unique
	if dryRun {
		if ixReq == nil {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "dry run mode requires an valid index modification.")
		}
		if !converting {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "dry run mode requires an index modification with unique: true.")
		}
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		if converting && !dryRun {
			return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist for unique index conversion: %s.%s", r.DB, coll)
		}
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Meta().clone()
	mods := 0
	out := bson.D{}
	var apply func() error
	if ixReq != nil {
		var n int
		if apply, n, err = c.planCollModIndex(m, ixReq, &out); err != nil {
			return nil, err
		}
		mods += n
	}
	if defTTL != nil {
		mods++
	}
	if ixReq != nil && ixReq.prepareUnique != nil && mods > 1 && prepareUniqueChanges(m, ixReq) {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "prepareUnique cannot be combined with any other modification.")
	}
	if dryRun {
		if mods > 1 {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "unique: true cannot be combined with any other modification in dry run mode.")
		}
		if ix := findCollModIndex(m, ixReq); ix != nil {
			if err := c.checkConvertibleToUnique(m, ix); err != nil {
				return nil, err
			}
		}
		return bson.D{}, nil
	}
	if apply != nil {
		if err := apply(); err != nil {
			return nil, err
		}
	}
	if defTTL != nil {
		setDefaultTTL(m, defTTL.on, defTTL.n, "")
	}
	if err := c.changeMeta(m); err != nil {
		return nil, err
	}
	return out, nil
}

// findCollModIndex returns the secondary index a request names (nil for
// the _id and _ts indexes, and when none matches).
func findCollModIndex(m *collMeta, q *collModIndexReq) *indexMeta {
	for i := range m.Indexes {
		ix := &m.Indexes[i]
		if (q.hasName && ix.Name == q.name) || (q.hasKP && bsonx.Equal(ix.Key, q.keyPattern)) {
			return ix
		}
	}
	return nil
}

func prepareUniqueChanges(m *collMeta, q *collModIndexReq) bool {
	ix := findCollModIndex(m, q)
	return ix != nil && !ix.Unique && ix.PrepareUnique != *q.prepareUnique
}

// planCollModIndex validates an index modification against m and returns
// the function that applies it (to m, appending mongod's reply fields to
// out) and how many modifications it counts.
func (c *Collection) planCollModIndex(m *collMeta, q *collModIndexReq, out *bson.D) (func() error, int, error) {
	if q.hasName && q.hasKP {
		return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "Cannot specify both key pattern and name.")
	}
	if !q.hasName && !q.hasKP {
		return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "Must specify either index name or key pattern.")
	}
	if q.expire == nil && q.hidden == nil && q.unique == nil && q.prepareUnique == nil && q.forceNonUnique == nil {
		return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "no expireAfterSeconds, hidden, unique, or prepareUnique field")
	}
	if q.unique != nil && q.forceNonUnique != nil {
		return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "collMod does not support 'unique' and 'forceNonUnique' options at the same time")
	}
	// The {_ts: 1} index is the collection's DefaultTTL (spec §3.3).
	isTS := (q.hasKP && len(q.keyPattern) == 1 && q.keyPattern[0].Key == "_ts") || (q.hasName && m.HasTTL && q.name == m.TSIndexName)
	if q.expire != nil && !isTS {
		if !bsonx.IsNumber(q.expireRaw) {
			return nil, 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'", bsonx.TypeName(q.expireRaw))
		}
		if *q.expire < 0 {
			return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0")
		}
		if *q.expire > math.MaxInt32 {
			return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
		}
	}
	mods := 0
	for _, set := range []bool{q.expire != nil, q.unique != nil, q.hidden != nil, q.prepareUnique != nil, q.forceNonUnique != nil} {
		if set {
			mods++
		}
	}
	// The _id index: implicit in mayfly (the document keys), always unique.
	if (q.hasName && q.name == "_id_") || (q.hasKP && len(q.keyPattern) == 1 && q.keyPattern[0].Key == "_id" && bsonx.Equal(q.keyPattern[0].Value, int32(1))) {
		switch {
		case q.expire != nil:
			return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "the _id field does not support TTL indexes")
		case q.unique != nil && !*q.unique:
			return nil, 0, mongoerr.New(mongoerr.BadValue, "Cannot make index non-unique")
		case q.hidden != nil:
			return nil, 0, mongoerr.New(mongoerr.BadValue, "can't hide _id index")
		case q.forceNonUnique != nil && !*q.forceNonUnique:
			return nil, 0, mongoerr.New(mongoerr.BadValue, "'forceNonUnique: false' is not supported")
		case q.forceNonUnique != nil:
			return nil, 0, mongoerr.New(mongoerr.NotImplemented, "the _id index of a mayfly collection cannot be made non-unique")
		}
		// unique and prepareUnique on an index that is unique: no-ops.
		return nil, mods, nil
	}
	if isTS {
		if !m.HasTTL {
			return nil, 0, mongoerr.New(mongoerr.IndexNotFound, "cannot find index %s for ns %s", collModIndexLabel(q), m.ns())
		}
		if q.expire == nil || mods > 1 {
			return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "the %s index is the collection's defaultTimeToLive: only its expireAfterSeconds can change", m.TSIndexName)
		}
		n, _, err := ttl.ParseDefaultTTL(q.expireRaw, false)
		if err != nil {
			return nil, 0, err
		}
		return func() error {
			old := m.DefaultTTL
			setDefaultTTL(m, true, n, "")
			*out = append(*out, bson.E{Key: "expireAfterSeconds_old", Value: old}, bson.E{Key: "expireAfterSeconds_new", Value: n})
			return nil
		}, mods, nil
	}
	ix := findCollModIndex(m, q)
	if ix == nil {
		return nil, 0, mongoerr.New(mongoerr.IndexNotFound, "cannot find index %s for ns %s", collModIndexLabel(q), m.ns())
	}
	var ttlN int64
	if q.expire != nil {
		if !ix.HasTTL && len(ix.Key) != 1 {
			return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "TTL indexes are single-field indexes, compound indexes do not support TTL")
		}
		n, err := ttl.ParseExpireAfterSeconds(*q.expire)
		if err != nil {
			return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "%s", mongoerr.From(err).Msg)
		}
		ttlN = n
	}
	makeUnique := false
	if q.unique != nil {
		if !*q.unique {
			return nil, 0, mongoerr.New(mongoerr.BadValue, "Cannot make index non-unique")
		}
		if !ix.Unique {
			if !ix.PrepareUnique {
				return nil, 0, mongoerr.New(mongoerr.InvalidOptions, "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.")
			}
			makeUnique = true
		}
	}
	setHidden := false
	if q.hidden != nil {
		if strings.HasPrefix(m.Name, "system.") {
			return nil, 0, mongoerr.New(mongoerr.BadValue, "Can't hide index on system collection")
		}
		setHidden = ix.Hidden != *q.hidden
	}
	setPrepare := q.prepareUnique != nil && !ix.Unique && ix.PrepareUnique != *q.prepareUnique
	forceNonUnique := false
	if q.forceNonUnique != nil {
		if !*q.forceNonUnique {
			return nil, 0, mongoerr.New(mongoerr.BadValue, "'forceNonUnique: false' is not supported")
		}
		forceNonUnique = ix.Unique
	}
	if makeUnique {
		// Checked before anything changes; collMod holds the collection
		// exclusively, so no write can add a duplicate meanwhile.
		if err := c.checkConvertibleToUnique(m, ix); err != nil {
			return nil, 0, err
		}
	}
	return func() error {
		if q.expire != nil {
			if ix.HasTTL {
				*out = append(*out, bson.E{Key: "expireAfterSeconds_old", Value: ix.TTL})
			}
			*out = append(*out, bson.E{Key: "expireAfterSeconds_new", Value: ttlN})
			ix.HasTTL, ix.TTL = true, ttlN
			ix.Spec = setSpecField(ix.Spec, "expireAfterSeconds", int32OrInt64(ttlN))
		}
		if setHidden {
			*out = append(*out, bson.E{Key: "hidden_old", Value: ix.Hidden}, bson.E{Key: "hidden_new", Value: *q.hidden})
			ix.Hidden = *q.hidden
			ix.Spec = specFlag(ix.Spec, "hidden", ix.Hidden)
		}
		if makeUnique {
			*out = append(*out, bson.E{Key: "unique_new", Value: true})
			ix.Unique, ix.PrepareUnique = true, false
			ix.Spec = specFlag(specFlag(ix.Spec, "unique", true), "prepareUnique", false)
		}
		if setPrepare {
			*out = append(*out, bson.E{Key: "prepareUnique_old", Value: ix.PrepareUnique}, bson.E{Key: "prepareUnique_new", Value: *q.prepareUnique})
			ix.PrepareUnique = *q.prepareUnique
			ix.Spec = specFlag(ix.Spec, "prepareUnique", ix.PrepareUnique)
		}
		if forceNonUnique {
			*out = append(*out, bson.E{Key: "forceNonUnique_new", Value: true})
			ix.Unique = false
			ix.Spec = specFlag(ix.Spec, "unique", false)
		}
		return nil
	}, mods, nil
}

// specFlag sets a boolean index option as mongod's catalog does on collMod
// (updateHiddenSetting, updateUniqueSetting, updatePrepareUniqueSetting):
// true is stored, false removes the field.
func specFlag(spec bson.D, k string, on bool) bson.D {
	if on {
		return setSpecField(spec, k, true)
	}
	return bsonx.Delete(append(bson.D(nil), spec...), k)
}

func collModIndexLabel(q *collModIndexReq) string {
	if q.hasName {
		return q.name
	}
	return docstore.ShortJSON(q.keyPattern)
}

// checkConvertibleToUnique scans an index for keys that live documents
// share and fails as mongod's buildConvertUniqueErrorStatus does: 359
// CannotConvertIndexToUnique with violations [{ids: [...]}, ...], one entry
// per duplicated key. Expired documents do not count (spec §6.3).
func (c *Collection) checkConvertibleToUnique(m *collMeta, ix *indexMeta) error {
	prefix := docstore.IndexPrefix(m.ID, ix.ID)
	it, err := c.e.kv.NewIter(prefix, docstore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	defer it.Close()
	s := c.st()
	now := c.e.nowMS()
	violations := bson.A{}
	var curKey []byte
	var ids bson.A
	flush := func() {
		if len(ids) > 1 {
			violations = append(violations, bson.D{{Key: "ids", Value: ids}})
		}
		ids = nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		k, idKey := it.Key(), it.Value()
		if len(k) < len(prefix)+len(idKey) {
			continue
		}
		key := k[len(prefix) : len(k)-len(idKey)]
		if curKey == nil || !bytes.Equal(key, curKey) {
			flush()
			curKey = append([]byte{}, key...)
		}
		rec, err := c.getRecord(c.e.kv, idKey)
		if err != nil {
			return err
		}
		if rec == nil || !s.visible(rec, now) {
			continue
		}
		doc, err := rec.Doc()
		if err != nil {
			return err
		}
		id, _ := bsonx.Get(doc, "_id")
		ids = append(ids, id)
	}
	if err := it.Error(); err != nil {
		return err
	}
	flush()
	if len(violations) == 0 {
		return nil
	}
	return &mongoerr.Error{Code: mongoerr.CannotConvertIndexToUnique,
		Msg:   "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.",
		Extra: bson.D{{Key: "violations", Value: violations}}}
}
