package engine

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/engine/update"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/ttl"
)

func init() {
	Register(&Command{Name: "aggregate", Help: "run an aggregation pipeline", Run: cmdAggregate})
	// Pipeline-style updates ({u: [{$set: …}]}) are aggregation stages.
	update.PipelineCompiler = func(p bson.A) (func(doc bson.D) (bson.D, error), error) {
		f, err := agg.CompileUpdatePipeline(p)
		if err != nil {
			return nil, err
		}
		return func(doc bson.D) (bson.D, error) { return f(doc, nil) }, nil
	}
}

var aggFields = map[string]bool{"aggregate": true, "pipeline": true, "cursor": true, "explain": true, "allowDiskUse": true,
	"let": true, "hint": true, "collation": true, "bypassDocumentValidation": true, "readConcern": true, "fromMongos": false,
	"needsMerge": false, "isMapReduceCommand": false}

func cmdAggregate(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, aggFields); err != nil {
		return nil, err
	}
	var coll string
	switch v := r.Cmd[0].Value.(type) {
	case string:
		var err error
		if coll, err = collName(r); err != nil {
			return nil, err
		}
	default:
		if n, ok := bsonx.ToInt64(v); !ok || n != 1 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Invalid {aggregate: %v}: the aggregate field must be a collection name or 1", v)
		}
	}
	pipeline, err := arrayArg(r, "pipeline")
	if err != nil {
		return nil, err
	}
	explain := boolArg(r, "explain")
	cursorOpt, hasCursor := r.Arg("cursor")
	if !hasCursor && !explain {
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	batchSize := int64(101)
	if cd, ok := cursorOpt.(bson.D); ok {
		if v, ok := bsonx.Get(cd, "batchSize"); ok {
			n, isInt := bsonx.ToInt64(v)
			if !isInt || n < 0 {
				return nil, mongoerr.New(mongoerr.BadValue, "cursor.batchSize must not be negative")
			}
			batchSize = n
		}
	}
	if spec, ok := isChangeStream(pipeline); ok && spec != nil && e.repl != nil && !explain {
		return e.openChangeStream(r, coll, spec, pipeline, batchSize) // changestream.go
	}
	let, err := docArg(r, "let")
	if err != nil {
		return nil, err
	}
	opts := agg.Options{ReplicaSet: e.repl != nil, Let: let, AllowDiskUse: e.allowDiskUse(r), DB: r.DB, Coll: coll, Now: e.Now(),
		MemoryLimit: e.params.sortMemLimit(), GroupMemoryLimit: e.params.groupMemLimit(),
		BucketAutoMemoryLimit: e.params.bucketAutoMemLimit(), GraphLookupMemoryLimit: e.params.graphLookupMemLimit(),
		FacetMaxOutputBytes: e.params.facetOutLimit()}
	if containsKey(pipeline, "_ts") {
		opts.Hidden = "_ts" // spec §5.2: usable by the stages, returned only when named
	}
	p, err := agg.Parse(pipeline, opts)
	if err != nil {
		return nil, err
	}
	ns := r.DB + "." + coll
	if coll == "" {
		ns = r.DB + ".$cmd.aggregate"
		if p.NeedsInput() {
			return nil, mongoerr.New(mongoerr.InvalidNamespace, "{aggregate: 1} is not valid for '%s'; a collection is required.", firstStage(p))
		}
	}
	if err := e.beforeAggregate(r, coll, pipeline); err != nil {
		return nil, err
	}
	hint := hintValue(r.Arg("hint"))
	env := &aggEnv{e: e, r: r, rt: e.newExprRuntime(r)}
	input, cq, rest, err := e.aggInput(r, coll, p, hint, p.ReadsHidden())
	if err != nil {
		return nil, err
	}
	if explain {
		if input != nil {
			input.Close()
		}
		return e.explainAggregate(r, ns, pipeline, cq, rest)
	}
	it, err := rest.Run(r.Ctx, env, input)
	if err != nil {
		return nil, err
	}
	src := &aggSource{it: it, ctx: r.Ctx, rt: env.rt}
	cur := &cursor{ns: ns, src: src, remaining: -1}
	if p.IsWrite() {
		batch, _, err := fillBatch(r, cur, 0)
		src.close()
		if err != nil {
			return nil, err
		}
		return cursorReply("firstBatch", batch, 0, ns), nil
	}
	n := batchSize
	if n == 0 {
		n = -1
	}
	var batch bson.A
	exhausted := false
	if n == -1 {
		batch = bson.A{}
	} else if batch, exhausted, err = fillBatch(r, cur, n); err != nil {
		src.close()
		return nil, err
	}
	if exhausted {
		src.close()
		return cursorReply("firstBatch", batch, 0, ns), nil
	}
	return cursorReply("firstBatch", batch, e.cursors.add(cur), ns), nil
}

func firstStage(p *agg.Pipeline) string {
	if names := p.StageNames(); len(names) > 0 {
		return names[0]
	}
	return "[]"
}

// aggInput pushes the pipeline's leading $match/$sort/$skip/$limit into a
// query over the collection (so it uses indexes and the TTL rule like
// find), and returns its documents as the input of the rest.
func (e *Engine) aggInput(r *Request, coll string, p *agg.Pipeline, hint any, usesTS bool) (agg.Iterator, *compiledQuery, *agg.Pipeline, error) {
	if coll == "" || !p.NeedsInput() {
		return nil, nil, p, nil
	}
	pre, rest := p.Split()
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		if err := validateQuery(&querySpec{filter: pre.Filter, sort: pre.Sort}); err != nil {
			return nil, nil, nil, err
		}
		return agg.Slice(nil), nil, rest, nil
	}
	q := &querySpec{filter: pre.Filter, sort: pre.Sort, skip: pre.Skip, hint: hint, allowDiskUse: boolArg(r, "allowDiskUse")}
	if pre.Limit >= 0 {
		q.limit = pre.Limit
		if pre.Limit == 0 {
			return agg.Slice(nil), nil, rest, nil
		}
	}
	cq, err := c.compileQuery(r, q)
	if err != nil {
		return nil, nil, nil, err
	}
	if usesTS {
		cq.withTS = true
	}
	return newQueryIter(cq), cq, rest, nil
}

// queryIter adapts a compiled query to agg.Iterator (documents decoded,
// with _ts when the query uses it, checked against the TTL rule when
// produced).
type queryIter struct {
	cq     *compiledQuery
	mi     *matchIter
	sorted []*matchedDoc
	i      int
	skip   int64
	limit  int64
	n      int64
	opened bool
	last   *docstore.Record // of the document Next returned last
}

func newQueryIter(cq *compiledQuery) *queryIter {
	return &queryIter{cq: cq, skip: cq.spec.skip, limit: cq.spec.limit}
}

func (q *queryIter) Next(ctx context.Context) (bson.D, bool, error) {
	if !q.opened {
		q.opened = true
		q.mi = q.cq.matches()
		if !q.cq.plan.sorted {
			src, err := q.cq.sortAll(q.mi)
			if err != nil {
				return nil, false, err
			}
			q.sorted = src.(*sortedSource).docs
			q.skip, q.limit = 0, 0 // sortAll applied them
		}
	}
	if q.limit > 0 && q.n >= q.limit {
		return nil, false, nil
	}
	for {
		if err := ctx.Err(); err != nil { // killOp, or the client went away
			return nil, false, mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
		}
		var md *matchedDoc
		if q.sorted != nil || !q.cq.plan.sorted {
			if q.i >= len(q.sorted) {
				return nil, false, nil
			}
			md = q.sorted[q.i]
			q.sorted[q.i] = nil
			q.i++
			if ttl.Expired(q.cq.c.st().deadline(md.rec), q.cq.c.e.nowMS()) {
				continue
			}
		} else {
			var err error
			if md, err = q.mi.next(); err != nil || md == nil {
				return nil, false, err
			}
			if q.skip > 0 {
				q.skip--
				continue
			}
		}
		d := md.doc
		if d == nil {
			var err error
			if d, err = md.rec.Doc(); err != nil {
				return nil, false, err
			}
		}
		q.n++
		q.cq.stats.nReturned++
		q.last = md.rec
		return d, true, nil
	}
}

// Source lets a stage that buffers documents ($sort) drop those that
// expire meanwhile (spec §6.1; agg.Tracked).
func (q *queryIter) Source() agg.Source {
	if q.last == nil {
		return nil
	}
	return &liveRecord{c: q.cq.c, rec: q.last}
}

// liveRecord is a stored document whose expiry is judged under the
// collection's policy at the time of asking (it may have changed).
type liveRecord struct {
	c   *Collection
	rec *docstore.Record
}

func (l *liveRecord) Live() bool {
	return !ttl.Expired(l.c.st().deadline(l.rec), l.c.e.nowMS())
}

func (q *queryIter) Close() {
	if q.mi != nil {
		q.mi.sc.close()
	}
	q.sorted = nil
}

// aggSource adapts a pipeline's output to a cursor's docSource.
type aggSource struct {
	it  agg.Iterator
	ctx context.Context
	rt  *expr.Runtime // the pipeline's expression runtime
}

func (s *aggSource) next() (bson.Raw, error) {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	d, ok, err := s.it.Next(ctx)
	if err != nil || !ok {
		return nil, err
	}
	b, err := bson.Marshal(d)
	if err == nil {
		err = checkOutputDoc(b, d)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (s *aggSource) close() { s.it.Close() }

// useContext makes a cursor's pipeline run under the context of the
// request now reading it (a getMore, which killOp can interrupt).
func useContext(src docSource, ctx context.Context) {
	switch s := src.(type) {
	case *aggSource:
		s.ctx = ctx
	case *pushback:
		useContext(s.docSource, ctx)
	}
}

// aggEnv implements agg.Env over the engine.
type aggEnv struct {
	e  *Engine
	r  *Request
	rt *expr.Runtime
}

// Scan yields the live documents of db.coll matching filter: $lookup and
// $unionWith never see expired documents (spec §6.1). A filter may name
// _ts; the documents never carry it.
func (a *aggEnv) Scan(ctx context.Context, db, coll string, filter bson.D) (agg.Iterator, error) {
	return a.scan(db, coll, filter, false)
}

// ScanHidden is Scan with _ts in every document, for sub-pipelines that
// use it (agg.HiddenScanner).
func (a *aggEnv) ScanHidden(ctx context.Context, db, coll string, filter bson.D) (agg.Iterator, error) {
	return a.scan(db, coll, filter, true)
}

func (a *aggEnv) scan(db, coll string, filter bson.D, withTS bool) (agg.Iterator, error) {
	c := a.e.cat.Get(db, coll)
	if c == nil {
		return agg.Slice(nil), nil
	}
	cq, err := c.compileQuery(a.r, &querySpec{filter: filter})
	if err != nil {
		return nil, err
	}
	if withTS || !cq.withTS {
		cq.withTS = cq.withTS || withTS
		return newQueryIter(cq), nil
	}
	return &stripTSIter{newQueryIter(cq)}, nil
}

// stripTSIter drops the _ts a scan's filter needed.
type stripTSIter struct{ agg.Iterator }

func (s *stripTSIter) Next(ctx context.Context) (bson.D, bool, error) {
	d, ok, err := s.Iterator.Next(ctx)
	return stripTS(d), ok, err
}

func (a *aggEnv) Insert(ctx context.Context, db, coll string, doc bson.D) error {
	c, _, err := a.e.collectionForWrite(db, coll)
	if err != nil {
		return err
	}
	return c.insertOne(a.r, doc)
}

func (a *aggEnv) Replace(ctx context.Context, db, coll string, id any, doc bson.D) error {
	c := a.e.cat.Get(db, coll)
	if c == nil {
		return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found")
	}
	return c.replaceByID(a.r, docstore.IDKeyOf(id), doc)
}

func (a *aggEnv) HasUniqueIndex(ctx context.Context, db, coll string, fields []string) (bool, error) {
	c := a.e.cat.Get(db, coll)
	if c == nil {
		return false, nil
	}
	if len(fields) == 1 && fields[0] == "_id" {
		return true, nil
	}
	for _, ix := range c.Meta().Indexes {
		if !ix.Unique || len(ix.Key) != len(fields) || len(ix.Partial) > 0 {
			continue
		}
		match := true
		for _, f := range fields {
			if _, ok := bsonx.Get(ix.Key, f); !ok {
				match = false
			}
		}
		if match {
			return true, nil
		}
	}
	return false, nil
}

// Out replaces db.coll's contents: documents go to a temporary collection
// carrying the target's options and indexes, which is then renamed over
// the target, so a failure leaves the target unchanged.
func (a *aggEnv) Out(ctx context.Context, db, coll string, docs agg.Iterator) error {
	defer docs.Close()
	if err := ValidateCollName(db, coll); err != nil {
		return err
	}
	e := a.e
	tmpName := fmt.Sprintf("tmp.agg_out.%s", bson.NewObjectID().Hex())
	var opts bson.D
	hasTTL, def, tsName := false, int64(0), ""
	var idx []indexMeta
	if t := e.cat.Get(db, coll); t != nil {
		m := t.Meta()
		opts, hasTTL, def, idx, tsName = m.Options, m.HasTTL, m.DefaultTTL, m.Indexes, m.TSIndexName
	}
	tmp, _, err := e.createCollection(db, tmpName, opts, hasTTL, def)
	if err != nil {
		return err
	}
	cleanup := func() { _ = e.dropCollection(db, tmpName) }
	if len(idx) > 0 || (hasTTL && tsName != tmp.Meta().TSIndexName) {
		tmp.mu.Lock()
		m := tmp.Meta().clone()
		m.TSIndexName = tsName // the _ts index keeps its name too (spec §3.3)
		for _, ix := range idx {
			ix.ID = m.NextIndexID
			m.NextIndexID++
			ix.Multikey = false
			m.Indexes = append(m.Indexes, ix)
		}
		err := tmp.updateMeta(m)
		tmp.mu.Unlock()
		if err != nil {
			cleanup()
			return err
		}
	}
	for {
		d, ok, err := docs.Next(ctx)
		if err != nil {
			cleanup()
			return err
		}
		if !ok {
			break
		}
		if err := tmp.insertOne(a.r, d); err != nil {
			cleanup()
			return err
		}
	}
	_, err = cmdRenameCollection(e, &Request{Ctx: ctx, DB: "admin", Name: "renameCollection",
		Cmd: bson.D{{Key: "renameCollection", Value: db + "." + tmpName}, {Key: "to", Value: db + "." + coll}, {Key: "dropTarget", Value: true}}})
	if err != nil {
		cleanup()
	}
	return err
}

func (a *aggEnv) CollStats(ctx context.Context, db, coll string, spec bson.D) (bson.D, error) {
	c := a.e.cat.Get(db, coll)
	out := bson.D{{Key: "ns", Value: db + "." + coll}, {Key: "host", Value: hostName(a.e)}, {Key: "localTime", Value: bson.NewDateTimeFromTime(a.e.clock.Now())}}
	for _, f := range spec {
		switch f.Key {
		case "storageStats":
			if c == nil {
				return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Unable to retrieve storageStats in $collStats stage :: caused by :: Collection [%s.%s] not found.", db, coll)
			}
			scale := int64(1)
			if sd, ok := f.Value.(bson.D); ok {
				if v, ok := bsonx.Get(sd, "scale"); ok {
					if n, isInt := bsonx.ToInt64(v); isInt && n > 0 {
						scale = n
					}
				}
			}
			out = append(out, bson.E{Key: "storageStats", Value: c.collStatsDoc(scale)})
		case "count":
			if c == nil {
				return nil, mongoerr.New(mongoerr.NamespaceNotFound, "Unable to retrieve count in $collStats stage :: caused by :: Collection [%s.%s] not found.", db, coll)
			}
			out = append(out, bson.E{Key: "count", Value: c.figures().count})
		case "latencyStats":
			zero := bson.D{{Key: "latency", Value: int64(0)}, {Key: "ops", Value: int64(0)}}
			out = append(out, bson.E{Key: "latencyStats", Value: bson.D{{Key: "reads", Value: zero}, {Key: "writes", Value: zero}, {Key: "commands", Value: zero}, {Key: "transactions", Value: zero}}})
		case "queryExecStats":
			out = append(out, bson.E{Key: "queryExecStats", Value: bson.D{{Key: "collectionScans", Value: bson.D{{Key: "total", Value: int64(0)}, {Key: "nonTailable", Value: int64(0)}}}}})
		}
	}
	return out, nil
}

func (a *aggEnv) IndexStats(ctx context.Context, db, coll string) ([]bson.D, error) {
	c := a.e.cat.Get(db, coll)
	if c == nil {
		return nil, nil
	}
	var out []bson.D
	since := bson.NewDateTimeFromTime(a.e.start)
	for _, s := range listIndexSpecs(c.Meta()) {
		name, _ := bsonx.Get(s, "name")
		key, _ := bsonx.Get(s, "key")
		out = append(out, bson.D{{Key: "name", Value: name}, {Key: "key", Value: key}, {Key: "host", Value: hostName(a.e)},
			{Key: "accesses", Value: bson.D{{Key: "ops", Value: int64(0)}, {Key: "since", Value: since}}}, {Key: "spec", Value: s}})
	}
	return out, nil
}

func hostName(e *Engine) string {
	h := e.info.Host
	if h == "" {
		h = "localhost"
	}
	if e.info.Port != 0 && !strings.Contains(h, ":") {
		return fmt.Sprintf("%s:%d", h, e.info.Port)
	}
	return h
}
