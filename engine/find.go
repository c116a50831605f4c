package engine

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

// sortMemLimit is mongod's internalQueryMaxBlockingSortMemoryUsageBytes.
var sortMemLimit int64 = 100 * 1024 * 1024

// querySpec is a read: find, count, distinct, and the matching part of
// update, delete and findAndModify.
type querySpec struct {
	filter       bson.D
	projection   bson.D
	sort         bson.D
	skip, limit  int64 // limit 0: none
	hint         any
	allowDiskUse bool
}

// compiledQuery is a querySpec bound to a collection state with its plan.
type compiledQuery struct {
	c      *Collection
	r      *Request // for maxTimeMS and cancellation while scanning (may be nil)
	spec   *querySpec
	m      *query.Matcher
	proj   *query.Projection
	srt    *query.Sort
	withTS bool
	plan   *plan
	stats  scanStats
}

func (c *Collection) compileQuery(r *Request, q *querySpec) (*compiledQuery, error) {
	cq := &compiledQuery{c: c, spec: q, r: r}
	if r != nil && len(r.queries) < 16 { // a $lookup compiles one per document: the first few tell the plan
		r.queries = append(r.queries, cq)
	}
	var err error
	if idOnlyEquality(q.filter) && q.hint == nil {
		// {_id: v}: the _id key lookup decides the match exactly (equal keys
		// are equal values and _id is never an array), so no matcher runs
		// and documents can go out as stored.
		cq.plan = idPointPlan([]any{q.filter[0].Value})
		if len(q.projection) > 0 {
			if cq.proj, err = query.CompileProjection(q.projection); err != nil {
				return nil, err
			}
			cq.proj = cq.proj.WithRuntime(c.e.newExprRuntime(r))
		}
		cq.withTS = mentionsTS(q.projection)
		cq.plan.sorted = true
		return cq, nil
	}
	if len(q.filter) > 0 {
		if cq.m, err = query.CompileWithRuntime(q.filter, c.e.newExprRuntime(r)); err != nil {
			return nil, err
		}
	}
	if len(q.projection) > 0 {
		if cq.proj, err = query.CompileProjection(q.projection); err != nil {
			return nil, err
		}
		cq.proj = cq.proj.WithRuntime(c.e.newExprRuntime(r))
	}
	sortSpec := q.sort
	if len(sortSpec) == 1 && sortSpec[0].Key == "$natural" {
		if q.hint == nil {
			q.hint = sortSpec
		}
		sortSpec = nil
	}
	if len(sortSpec) > 0 {
		if cq.srt, err = query.CompileSort(sortSpec); err != nil {
			return nil, err
		}
	}
	cq.withTS = mentionsTS(q.filter, sortSpec, q.projection)
	if cq.plan, err = planQuery(c.st(), q.filter, sortSpec, q.hint); err != nil {
		return nil, err
	}
	if cq.srt == nil {
		cq.plan.sorted = true
	}
	return cq, nil
}

// idOnlyEquality reports whether a filter is exactly {_id: v} for an
// indexable v (no operators, arrays, null or regex).
func idOnlyEquality(f bson.D) bool {
	return len(f) == 1 && f[0].Key == "_id" && indexable(f[0].Value)
}

// matches opens a raw stream of matching live documents (no sort, skip,
// limit or projection) — what writes iterate over.
func (cq *compiledQuery) matches() *matchIter {
	mi := cq.c.newMatchIter(cq.plan, cq.m, cq.withTS, &cq.stats)
	mi.r = cq.r
	if cq.r != nil && cq.r.txn != nil {
		mi.sc.rd = cq.r.txn
	}
	return mi
}

// output renders one matched document as the client sees it: projected,
// without _ts unless the projection names it.
func (cq *compiledQuery) output(md *matchedDoc) (bson.Raw, error) {
	if md.doc == nil {
		return md.rec.Raw, nil
	}
	d := md.doc
	if cq.proj != nil {
		var err error
		d, err = cq.proj.Apply(d, cq.m)
		if err != nil {
			return nil, err
		}
		if cq.withTS && !cq.proj.Includes("_ts") {
			d = stripTS(d)
		}
	} else if cq.withTS {
		d = stripTS(d)
	}
	b, err := bson.Marshal(d)
	return b, err
}

// open returns the query's result stream.
func (cq *compiledQuery) open() (docSource, error) {
	mi := cq.matches()
	mi.rawOnly = cq.proj == nil
	if cq.plan.sorted {
		return &streamSource{cq: cq, mi: mi, skip: cq.spec.skip}, nil
	}
	return cq.sortAll(mi)
}

// streamSource yields documents as the scan finds them.
type streamSource struct {
	cq   *compiledQuery
	mi   *matchIter
	skip int64
}

func (s *streamSource) next() (bson.Raw, error) {
	for {
		md, err := s.mi.next()
		if err != nil || md == nil {
			s.mi.sc.pause()
			return nil, err
		}
		if s.skip > 0 {
			s.skip--
			continue
		}
		s.cq.stats.nReturned++
		return s.cq.output(md)
	}
}

func (s *streamSource) close() { s.mi.sc.close() }

// sortedSource holds a blocking sort's result. Each document keeps its
// deadline: one that expires while the cursor is open is not returned by
// later batches (spec §6.1).
type sortedSource struct {
	cq   *compiledQuery
	docs []*matchedDoc
	i    int
}

func (s *sortedSource) next() (bson.Raw, error) {
	now := s.cq.c.e.nowMS()
	for s.i < len(s.docs) {
		md := s.docs[s.i]
		s.docs[s.i] = nil
		s.i++
		if ttl.Expired(s.cq.c.st().deadline(md.rec), now) { // current policy: it may have changed since the sort
			continue
		}
		s.cq.stats.nReturned++
		return s.cq.output(md)
	}
	return nil, nil
}

func (s *sortedSource) close() { s.docs = nil }

func (cq *compiledQuery) sortAll(mi *matchIter) (docSource, error) {
	defer mi.sc.close()
	type item struct {
		md   *matchedDoc
		keys []any
	}
	var items []item
	var mem int64
	memLimit := cq.c.e.params.sortMemLimit()
	k := int64(0)
	if cq.spec.limit > 0 {
		k = cq.spec.skip + cq.spec.limit
	}
	less := func(a, b item) bool { return cq.srt.CompareKeys(a.keys, b.keys) < 0 }
	for {
		md, err := mi.next()
		if err != nil {
			return nil, err
		}
		if md == nil {
			break
		}
		if md.doc == nil {
			if md.doc, err = md.rec.Doc(); err != nil {
				return nil, err
			}
		}
		it := item{md: md, keys: cq.srt.Keys(md.doc)}
		items = append(items, it)
		mem += int64(len(md.rec.Raw)) + 64
		if k > 0 && int64(len(items)) >= 2*k+64 {
			// Bounded top-k: keep only the best k seen so far.
			sort.SliceStable(items, func(i, j int) bool { return less(items[i], items[j]) })
			items = items[:k]
			mem = 0
			for _, x := range items {
				mem += int64(len(x.md.rec.Raw)) + 64
			}
		}
		if mem > memLimit {
			if !cq.c.e.allowDiskUse(cq.r) {
				return nil, mongoerr.New(mongoerr.QueryExceededMemoryLimit,
					"Executor error during find command :: caused by :: Sort exceeded memory limit of %d bytes, but did not opt in to external sorting.", memLimit)
			}
			// Over the limit with disk use allowed: continue as an
			// external sort, spilling to temporary files.
			mds := make([]*matchedDoc, len(items))
			keys := make([][]any, len(items))
			for i, x := range items {
				mds[i], keys[i] = x.md, x.keys
			}
			items = nil
			return cq.spillSort(mi, mds, keys, k, memLimit)
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return less(items[i], items[j]) })
	if k > 0 && int64(len(items)) > k {
		items = items[:k]
	}
	skip := cq.spec.skip
	if skip > int64(len(items)) {
		skip = int64(len(items))
	}
	out := make([]*matchedDoc, 0, int64(len(items))-skip)
	for _, x := range items[skip:] {
		out = append(out, x.md)
	}
	return &sortedSource{cq: cq, docs: out}, nil
}

// --- find -------------------------------------------------------------------

var findFields = map[string]bool{
	"find": true, "filter": true, "projection": true, "sort": true, "skip": true, "limit": true,
	"batchSize": true, "singleBatch": true, "hint": true, "comment": true, "maxTimeMS": true,
	"readConcern": true, "max": false, "min": false, "returnKey": false, "showRecordId": false,
	"tailable": false, "oplogReplay": true, "noCursorTimeout": true, "awaitData": false,
	"allowPartialResults": true, "collation": true, "allowDiskUse": true, "let": true, "$db": true,
}

func init() {
	Register(
		&Command{Name: "find", Help: "query for documents", Run: cmdFind},
		&Command{Name: "getMore", Help: "get more results from a cursor", Run: cmdGetMore},
		&Command{Name: "killCursors", Help: "kill a list of cursor ids", Run: cmdKillCursors},
		&Command{Name: "count", Help: "count documents", Run: cmdCount},
		&Command{Name: "distinct", Help: "distinct values of a field", Run: cmdDistinct},
	)
}

// checkFields refuses unknown command fields as mongod does (40415), and
// options mayfly does not implement with a clear message.
func checkFields(r *Request, known map[string]bool) error {
	for _, f := range r.Cmd[1:] {
		supported, isKnown := known[f.Key]
		if IsEnvelopeField(f.Key) {
			continue
		}
		if !isKnown {
			return mongoerr.New(40415, "BSON field '%s.%s' is an unknown field.", r.Name, f.Key)
		}
		if !supported {
			if f.Value == false || f.Value == nil {
				continue
			}
			return mongoerr.New(mongoerr.NotImplemented, "%s option '%s' is not supported by mayfly", r.Name, f.Key)
		}
	}
	if v, ok := r.Arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return err
		}
	}
	return nil
}

// checkCollation accepts only the simple collation.
func checkCollation(v any) error {
	d, ok := v.(bson.D)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "collation must be an object")
	}
	if len(d) == 0 {
		return nil
	}
	if loc, _ := bsonx.Get(d, "locale"); loc == "simple" {
		return nil
	}
	return mongoerr.New(mongoerr.NotImplemented, "collations other than {locale: \"simple\"} are not supported by mayfly")
}

// hintValue normalises a hint given as Arg's or bsonx.Get's (value, found)
// pair: absent or {} means none.
func hintValue(h any, _ bool) any {
	if d, ok := h.(bson.D); ok && len(d) == 0 {
		return nil
	}
	return h
}

func docArg(r *Request, key string) (bson.D, error) {
	v, ok := r.Arg(key)
	if !ok || v == nil {
		return nil, nil
	}
	d, isDoc := v.(bson.D)
	if !isDoc {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'", r.Name, key, bsonx.TypeName(v))
	}
	return d, nil
}

func intArg(r *Request, key string) (int64, bool, error) {
	v, ok := r.Arg(key)
	if !ok || v == nil {
		return 0, false, nil
	}
	n, isInt := bsonx.ToInt64(v)
	if !isInt {
		if !bsonx.IsNumber(v) {
			return 0, false, mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", r.Name, key, bsonx.TypeName(v))
		}
		f, _ := bsonx.ToFloat(v)
		n = int64(f)
	}
	return n, true, nil
}

func boolArg(r *Request, key string) bool {
	v, _ := r.Arg(key)
	return truthy(v)
}

// truthy is how mongod reads a boolean option: booleans as they are,
// numbers by non-zero, null or absent as false.
func truthy(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case nil:
		return false
	}
	f, ok := bsonx.ToFloat(v)
	return ok && f != 0
}

// collName returns the command's collection name, validated.
func collName(r *Request) (string, error) {
	v := r.Cmd[0].Value
	s, ok := v.(string)
	if !ok {
		return "", mongoerr.New(mongoerr.InvalidNamespace, "collection name has invalid type %s", bsonx.TypeName(v))
	}
	check := ValidateNS
	if createsNamespace(r.Name) {
		check = ValidateCollName
	}
	if err := check(r.DB, s); err != nil {
		return "", err
	}
	return s, nil
}

// createsNamespace: the commands mongod checks with userAllowedWriteNS /
// userAllowedCreateNS (they write to the collection or create it); the
// others only parse the namespace.
func createsNamespace(cmd string) bool {
	switch strings.ToLower(cmd) {
	case "insert", "update", "delete", "findandmodify", "create", "createindexes":
		return true
	}
	return false
}

func parseFind(r *Request) (*querySpec, error) {
	q := &querySpec{}
	var err error
	if q.filter, err = docArg(r, "filter"); err != nil {
		return nil, err
	}
	if q.projection, err = docArg(r, "projection"); err != nil {
		return nil, err
	}
	if q.sort, err = docArg(r, "sort"); err != nil {
		return nil, err
	}
	var ok bool
	if q.skip, ok, err = intArg(r, "skip"); err != nil {
		return nil, err
	} else if ok && q.skip < 0 {
		return nil, mongoerr.New(51024, "BSON field 'skip' value must be >= 0, actual value '%d'", q.skip)
	}
	if q.limit, _, err = intArg(r, "limit"); err != nil {
		return nil, err
	}
	q.hint = hintValue(r.Arg("hint"))
	q.allowDiskUse = boolArg(r, "allowDiskUse")
	return q, nil
}

func cmdFind(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, findFields); err != nil {
		return nil, err
	}
	if err := e.applyLet(r, map[string]bool{"filter": false, "projection": true}); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	q, err := parseFind(r)
	if err != nil {
		return nil, err
	}
	batchSize, hasBatch, err := intArg(r, "batchSize")
	if err != nil {
		return nil, err
	}
	if hasBatch && batchSize < 0 {
		return nil, mongoerr.New(51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", batchSize)
	}
	singleBatch := boolArg(r, "singleBatch")
	if q.limit < 0 {
		q.limit = -q.limit
		singleBatch = true
	}
	ns := r.DB + "." + coll
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		if err := validateQuery(q); err != nil {
			return nil, err
		}
		return cursorReply("firstBatch", bson.A{}, 0, ns), nil
	}
	cq, err := c.compileQuery(r, q)
	if err != nil {
		return nil, err
	}
	src, err := cq.open()
	if err != nil {
		return nil, err
	}
	cur := &cursor{ns: ns, src: src, remaining: -1}
	if q.limit > 0 {
		cur.remaining = q.limit
	}
	n := int64(101)
	if hasBatch {
		n = batchSize
		if n == 0 {
			n = -1 // an empty first batch: open the cursor and return nothing yet
		}
	}
	if singleBatch && q.limit > 0 && (!hasBatch || q.limit < n) {
		n = q.limit
	}
	var batch bson.A
	exhausted := false
	if n == -1 {
		batch = bson.A{}
	} else {
		batch, exhausted, err = fillBatch(r, cur, n)
		if err != nil {
			src.close()
			return nil, err
		}
	}
	if exhausted || singleBatch {
		src.close()
		return cursorReply("firstBatch", batch, 0, ns), nil
	}
	id := e.cursors.add(cur)
	return cursorReply("firstBatch", batch, id, ns), nil
}

func cmdGetMore(e *Engine, r *Request) (bson.D, error) {
	id, ok := r.Cmd[0].Value.(int64)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", bsonx.TypeName(r.Cmd[0].Value))
	}
	collV, _ := r.Arg("collection")
	coll, ok := collV.(string)
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'getMore.collection' is missing but a required field")
	}
	batchSize, _, err := intArg(r, "batchSize")
	if err != nil {
		return nil, err
	}
	ns := r.DB + "." + coll
	cur, err := e.cursors.checkout(id, ns)
	if err != nil {
		return nil, err
	}
	if cs, ok := cur.src.(*changeStream); ok {
		return e.streamGetMore(r, cur, cs, id, ns) // changestream.go
	}
	useContext(cur.src, r.Ctx)
	batch, exhausted, err := fillBatch(r, cur, batchSize)
	if err != nil {
		e.cursors.checkin(cur, true)
		return nil, err
	}
	e.cursors.checkin(cur, exhausted)
	if exhausted {
		id = 0
	}
	return cursorReply("nextBatch", batch, id, ns), nil
}

func cmdKillCursors(e *Engine, r *Request) (bson.D, error) {
	v, _ := r.Arg("cursors")
	ids, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(40414, "BSON field 'killCursors.cursors' is missing but a required field")
	}
	killed, notFound := bson.A{}, bson.A{}
	for _, x := range ids {
		id, _ := x.(int64)
		if e.cursors.kill(id) {
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return bson.D{{Key: "cursorsKilled", Value: killed}, {Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}}, {Key: "cursorsUnknown", Value: bson.A{}}}, nil
}

var countFields = map[string]bool{"count": true, "query": true, "skip": true, "limit": true, "hint": true,
	"collation": true, "readConcern": true, "fields": true}

func cmdCount(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, countFields); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	q := &querySpec{}
	if q.filter, err = docArg(r, "query"); err != nil {
		return nil, err
	}
	if q.skip, _, err = intArg(r, "skip"); err != nil {
		return nil, err
	}
	if q.skip < 0 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "skip value is negative in count query")
	}
	if q.limit, _, err = intArg(r, "limit"); err != nil {
		return nil, err
	}
	if q.limit < 0 {
		q.limit = -q.limit
	}
	q.hint = hintValue(r.Arg("hint"))
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		if err := validateQuery(q); err != nil {
			return nil, err
		}
		return bson.D{{Key: "n", Value: int32(0)}}, nil
	}
	n, _, err := c.count(r, q)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "n", Value: int32OrInt64(n)}}, nil
}

// count counts live matching documents.
func (c *Collection) count(r *Request, q *querySpec) (int64, *compiledQuery, error) {
	cq, err := c.compileQuery(r, &querySpec{filter: q.filter, hint: q.hint})
	if err != nil {
		return 0, nil, err
	}
	mi := cq.matches()
	mi.rawOnly = true
	defer mi.sc.close()
	var n, skipped int64
	for {
		if n%1024 == 1023 {
			if err := r.CheckDeadline(); err != nil {
				return 0, nil, err
			}
		}
		md, err := mi.next()
		if err != nil {
			return 0, nil, err
		}
		if md == nil {
			break
		}
		if skipped < q.skip {
			skipped++
			continue
		}
		n++
		if q.limit > 0 && n >= q.limit {
			break
		}
	}
	cq.stats.nReturned = n
	return n, cq, nil
}

var distinctFields = map[string]bool{"distinct": true, "key": true, "query": true, "collation": true, "readConcern": true, "hint": true}

func cmdDistinct(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, distinctFields); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	kv, ok := r.Arg("key")
	key, isStr := kv.(string)
	if !ok || !isStr {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'distinct.key' is missing or not a string")
	}
	filter, err := docArg(r, "query")
	if err != nil {
		return nil, err
	}
	c := e.cat.Get(r.DB, coll)
	values := bson.A{}
	if c == nil {
		if err := validateQuery(&querySpec{filter: filter}); err != nil {
			return nil, err
		}
		return bson.D{{Key: "values", Value: values}}, nil
	}
	values, _, err = c.distinct(r, key, filter)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "values", Value: values}}, nil
}

// distinct collects the distinct values at key among live matching
// documents; arrays contribute their elements, as mongod does.
func (c *Collection) distinct(r *Request, key string, filter bson.D) (bson.A, *compiledQuery, error) {
	cq, err := c.compileQuery(r, &querySpec{filter: filter, hint: hintValue(r.Arg("hint"))})
	if err != nil {
		return nil, nil, err
	}
	mi := cq.matches()
	defer mi.sc.close()
	var vals []any
	for {
		md, err := mi.next()
		if err != nil {
			return nil, nil, err
		}
		if md == nil {
			break
		}
		d := md.doc
		if d == nil {
			if d, err = md.rec.Doc(); err != nil {
				return nil, nil, err
			}
		}
		if key == "_ts" {
			d = append(d, bson.E{Key: "_ts", Value: md.rec.TS})
		}
		vals = appendDistinct(vals, d, strings.Split(key, "."))
		cq.stats.nReturned++
	}
	sort.SliceStable(vals, func(i, j int) bool { return bsonx.Compare(vals[i], vals[j]) < 0 })
	out := bson.A{}
	for i, v := range vals {
		if i > 0 && bsonx.Compare(vals[i-1], v) == 0 {
			continue
		}
		out = append(out, v)
	}
	return out, cq, nil
}

// appendDistinct collects the values distinct sees at path: arrays are
// unwound (their elements count, and documents inside them are traversed),
// missing fields contribute nothing, explicit nulls count.
func appendDistinct(out []any, v any, path []string) []any {
	if len(path) == 0 {
		if a, ok := v.(bson.A); ok {
			return append(out, a...)
		}
		return append(out, v)
	}
	switch x := v.(type) {
	case bson.D:
		if fv, ok := bsonx.Get(x, path[0]); ok {
			return appendDistinct(out, fv, path[1:])
		}
	case bson.A:
		if i, err := docstore.Positional(path[0]); err == nil {
			if i < len(x) {
				return appendDistinct(out, x[i], path[1:])
			}
			return out
		}
		for _, el := range x {
			if d, ok := el.(bson.D); ok {
				out = appendDistinct(out, d, path)
			}
		}
	}
	return out
}
