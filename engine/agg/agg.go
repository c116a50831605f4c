// Package agg is the aggregation pipeline: it parses a pipeline once into
// stages and runs it as a chain of pull iterators over documents, so that
// $limit stops upstream work early and only blocking stages ($sort, $group,
// $bucketAuto, $facet...) hold documents in memory.
//
// Everything outside the pipeline (collections, writes, statistics) is
// reached through Env, which the engine implements; the package itself does
// no I/O except spilling $sort/$group state to temporary files when
// allowDiskUse permits.
package agg

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Iterator is a stream of documents. Next returns ok=false at the end.
// Close releases resources and may be called at any time (and more than
// once).
type Iterator interface {
	Next(ctx context.Context) (bson.D, bool, error)
	Close()
}

// Env is implemented by the engine: everything a pipeline needs from
// outside. Namespaces are always explicit (db, coll) because $lookup,
// $unionWith, $out and $merge may name other collections of the same
// database (or, for $out/$merge, another database).
type Env interface {
	// Scan returns the visible (non-expired) documents of db.coll matching
	// filter (nil = all), in natural order. A collection that does not
	// exist scans as empty. Used by $lookup, $unionWith and $merge (to find
	// the target document by its "on" fields; that filter is a conjunction
	// of equalities on scalar values, which an index can serve).
	Scan(ctx context.Context, db, coll string, filter bson.D) (Iterator, error)
	// Out atomically replaces the contents of db.coll with docs ($out),
	// creating the collection if needed and keeping an existing
	// collection's indexes and options. Documents without _id get one.
	// If any write fails (e.g. a duplicate key), the target is unchanged.
	Out(ctx context.Context, db, coll string, docs Iterator) error
	// Insert inserts one document into db.coll, creating the collection if
	// needed ($merge whenNotMatched: "insert"). doc always has an _id.
	Insert(ctx context.Context, db, coll string, doc bson.D) error
	// Replace replaces the document whose _id equals id with doc ($merge
	// whenMatched modes); doc carries the same _id.
	Replace(ctx context.Context, db, coll string, id any, doc bson.D) error
	// HasUniqueIndex reports whether db.coll has a unique index whose key
	// is exactly the given set of fields (in any order), which $merge
	// requires for its "on" fields other than _id. A missing collection has
	// none.
	HasUniqueIndex(ctx context.Context, db, coll string, fields []string) (bool, error)
	// CollStats returns the document $collStats outputs for db.coll given
	// the stage's specification (latencyStats, storageStats, count,
	// queryExecStats); the engine fills in ns, host and localTime too.
	CollStats(ctx context.Context, db, coll string, spec bson.D) (bson.D, error)
	// IndexStats returns one document per index of db.coll, as
	// $indexStats outputs them ({name, key, host, accesses, spec}).
	IndexStats(ctx context.Context, db, coll string) ([]bson.D, error)
}

// DefaultMemoryLimit is mongod's per-stage limit for $group and $sort
// (internalDocumentSourceGroupMaxMemoryBytes / ...SortMaxBlockingMemoryUsageBytes).
const DefaultMemoryLimit int64 = 100 * 1024 * 1024

// Options are the aggregate command's settings that affect parsing and
// execution.
type Options struct {
	// ReplicaSet: the server is a replica-set member (--replSet), where
	// $changeStream is refused as not implemented yet rather than as on a
	// standalone.
	ReplicaSet bool
	// Let holds the command's `let` variables: expressions evaluated once,
	// at Parse time, against an empty document.
	Let bson.D
	// AllowDiskUse lets $sort and $group spill to temporary files instead
	// of failing with QueryExceededMemoryLimitNoDiskUseAllowed.
	AllowDiskUse bool
	// DB and Coll are the namespace the pipeline runs on (Coll is empty for
	// a db-level aggregate such as one starting with $documents).
	DB, Coll string
	// Now is $$NOW (zero: the time of Parse).
	Now time.Time
	// MemoryLimit overrides DefaultMemoryLimit (bytes) for each blocking
	// stage; tests set it low to exercise spilling.
	MemoryLimit int64
	// GroupMemoryLimit overrides MemoryLimit for $group
	// (internalDocumentSourceGroupMaxMemoryBytes); 0: MemoryLimit.
	GroupMemoryLimit int64
	// BucketAutoMemoryLimit is the same for $bucketAuto
	// (internalDocumentSourceBucketAutoMaxMemoryBytes).
	BucketAutoMemoryLimit int64
	// GraphLookupMemoryLimit is the same for $graphLookup
	// (internalDocumentSourceGraphLookupMaxMemoryBytes).
	GraphLookupMemoryLimit int64
	// FacetMaxOutputBytes bounds the document $facet builds
	// (internalQueryFacetMaxOutputDocSizeBytes, 100 MB).
	FacetMaxOutputBytes int64
	// TempDir is where spills go (empty: os.TempDir()).
	TempDir string
	// Hidden names a top-level field the input documents may carry that
	// is returned only when a stage names it (mayfly's _ts; see hidden.go).
	Hidden string

	// letNames are variable names defined by the command or an enclosing
	// $lookup; inLookup marks a $lookup/$unionWith sub-pipeline.
	letNames   []string
	inLookup   bool
	strictVars bool
}

// Pipeline is a parsed pipeline. It is immutable after Parse and may be run
// any number of times, concurrently.
type Pipeline struct {
	stages      []stage
	opts        Options
	vars        map[string]any
	readsHidden bool // the input must carry opts.Hidden
}

// stage is one parsed stage.
type stage interface {
	// name is the stage name ("$match").
	name() string
	// run wraps the upstream iterator.
	run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error)
}

func (o *Options) groupMemoryLimit() int64 {
	if o.GroupMemoryLimit > 0 {
		return o.GroupMemoryLimit
	}
	return o.MemoryLimit
}

func (o *Options) facetMaxOutputBytes() int64 {
	if o.FacetMaxOutputBytes > 0 {
		return o.FacetMaxOutputBytes
	}
	return DefaultMemoryLimit
}

func (o *Options) graphLookupMemoryLimit() int64 {
	if o.GraphLookupMemoryLimit > 0 {
		return o.GraphLookupMemoryLimit
	}
	return DefaultMemoryLimit
}

func (o *Options) bucketAutoMemoryLimit() int64 {
	if o.BucketAutoMemoryLimit > 0 {
		return o.BucketAutoMemoryLimit
	}
	return o.MemoryLimit
}

// runCtx is per-run state shared by the stages.
type runCtx struct {
	env  Env
	vars map[string]any
	opts *Options
	rt   *expr.Runtime // the operation's runtime (nil: none)
}

// RuntimeEnv is implemented by an Env that gives the pipeline's expressions
// a runtime: the operation's interrupt check (maxTimeMS, killOp) and its
// expression memory limits.
type RuntimeEnv interface {
	Runtime() *expr.Runtime
}

func runtimeOf(env Env) *expr.Runtime {
	if re, ok := env.(RuntimeEnv); ok {
		return re.Runtime()
	}
	return nil
}

func (rc *runCtx) exprEnv(doc bson.D) *expr.Env {
	return &expr.Env{Root: doc, Vars: rc.vars, RT: rc.rt}
}

// Parse parses a pipeline. Errors use mongod's codes (40323 for a stage
// document with other than one field, 40324 for an unknown stage, 40601
// for $out/$merge not last, ...).
func Parse(pipeline bson.A, opts Options) (*Pipeline, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.MemoryLimit <= 0 {
		opts.MemoryLimit = DefaultMemoryLimit
	}
	vars, letNames, err := evalLet(opts.Let, opts.Now, false)
	if err != nil {
		return nil, err
	}
	opts.letNames = append(append([]string{}, opts.letNames...), letNames...)
	opts.strictVars = true
	stages, err := parseStages(pipeline, &opts, false)
	if err != nil {
		return nil, err
	}
	optimize(stages)
	return &Pipeline{stages: stages, opts: opts, vars: vars, readsHidden: hiddenReads(pipeline, &opts)}, nil
}

func checkVarName(name string) error {
	if name == "" {
		return mongoerr.New(16866, "empty variable names are not allowed")
	}
	c := name[0]
	if !(c >= 'a' && c <= 'z') && c < 0x80 {
		return mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80) {
			return mongoerr.New(16868, "'%s' contains an invalid character for a variable name: '%c'", name, c)
		}
	}
	return nil
}

// compileExpr compiles an expression with the pipeline's variables in
// scope: in a parsed pipeline, references to undefined user variables fail
// at parse time (17276) as in mongod. Update pipelines get their variables
// only at run time, so they are checked then.
func compileExpr(v any, opts *Options) (expr.Expr, error) {
	if !opts.strictVars {
		return expr.Compile(v)
	}
	return expr.CompileWith(v, expr.Options{Vars: append([]string{}, opts.letNames...)})
}

type stageParser func(spec any, opts *Options) (stage, error)

var stageParsers = map[string]stageParser{}

// firstOnly lists stages that must be first in a pipeline.
var firstOnly = map[string]bool{"$documents": true, "$collStats": true, "$indexStats": true}

func parseStages(pipeline bson.A, opts *Options, inFacet bool) ([]stage, error) {
	stages := make([]stage, 0, len(pipeline))
	for i, raw := range pipeline {
		d, ok := raw.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		if len(d) != 1 {
			return nil, mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := d[0].Key
		p, ok := stageParsers[name]
		if !ok {
			switch name {
			case "$search", "$searchMeta", "$vectorSearch", "$geoNear",
				"$planCacheStats":
				return nil, mongoerr.New(mongoerr.NotImplemented, "%s is not supported by mayfly", name)
			}
			return nil, mongoerr.New(40324, "Unrecognized pipeline stage name: '%s'", name)
		}
		if (name == "$out" || name == "$merge") && i != len(pipeline)-1 {
			return nil, mongoerr.New(40601, "%s can only be the final stage in the pipeline", name)
		}
		if inFacet {
			switch name {
			case "$out", "$merge", "$facet", "$collStats", "$indexStats", "$documents", "$currentOp", "$listLocalSessions", "$listSessions":
				return nil, mongoerr.New(40600, "%s is not allowed to be used within a $facet stage", name)
			}
		}
		if (firstOnly[name] || name == "$listSessions") && i != 0 {
			code := int32(40602)
			return nil, mongoerr.New(code, "%s is only valid as the first stage in a pipeline", name)
		}
		st, err := p(d[0].Value, opts)
		if err != nil {
			return nil, err
		}
		stages = append(stages, st)
	}
	stages = withHidden(stages, pipeline, opts, inFacet)
	return stages, nil
}

// Prefix is the leading part of a pipeline that an engine may execute
// itself, e.g. with an index scan: documents matching Filter, ordered by
// Sort, of which the first Skip are dropped and at most Limit are kept.
type Prefix struct {
	// Filter is the conjunction of the leading $match stages (nil if
	// none), as a find filter for query.Compile. Matches that reference
	// pipeline variables ($$var inside $expr) are never included.
	Filter bson.D
	// Sort is a $sort directly following those matches (nil if none).
	Sort bson.D
	// Skip is the number of documents to drop after sorting (0 if none).
	Skip int64
	// Limit is the maximum number of documents to return after skipping;
	// -1 means no limit. $skip/$limit stages are folded in order, so
	// [$limit 10, $skip 3] becomes Skip 3, Limit 7.
	Limit int64
}

// Split returns the pushable prefix and the rest of the pipeline. Running
// Rest over the prefix's output (filtered, sorted, skipped and limited as
// described by Prefix) is equivalent to running the whole pipeline over the
// collection. Rest may have no stages. A $sort that is not followed by
// $skip/$limit is included, so an engine that cannot sort by an index must
// sort itself (or run Rest after prepending the $sort; see Stages).
func (p *Pipeline) Split() (Prefix, *Pipeline) {
	pre := Prefix{Limit: -1}
	i := 0
	var filters []bson.D
	for i < len(p.stages) {
		m, ok := p.stages[i].(*matchStage)
		if !ok || m.usesVars {
			break
		}
		filters = append(filters, m.filter)
		i++
	}
	switch len(filters) {
	case 0:
	case 1:
		pre.Filter = filters[0]
	default:
		and := bson.A{}
		for _, f := range filters {
			and = append(and, f)
		}
		pre.Filter = bson.D{{Key: "$and", Value: and}}
	}
	if i < len(p.stages) {
		if s, ok := p.stages[i].(*sortStage); ok {
			pre.Sort = s.spec
			i++
		}
	}
	for i < len(p.stages) {
		switch s := p.stages[i].(type) {
		case *skipStage:
			if pre.Limit >= 0 {
				pre.Limit = max(0, pre.Limit-s.n)
			}
			pre.Skip += s.n
		case *limitStage:
			if pre.Limit < 0 || s.n < pre.Limit {
				pre.Limit = s.n
			}
		default:
			goto done
		}
		i++
	}
done:
	rest := &Pipeline{stages: p.stages[i:], opts: p.opts, vars: p.vars, readsHidden: p.readsHidden}
	return pre, rest
}

// Len is the number of stages (the client's: not counting the internal
// removal of a hidden field).
func (p *Pipeline) Len() int { return len(p.StageNames()) }

// StageNames lists the stage names in order (for explain output).
func (p *Pipeline) StageNames() []string {
	out := make([]string, 0, len(p.stages))
	for _, s := range p.stages {
		if _, ok := s.(*hideStage); !ok {
			out = append(out, s.name())
		}
	}
	return out
}

// IsWrite reports whether the pipeline ends in $out or $merge.
func (p *Pipeline) IsWrite() bool {
	if len(p.stages) == 0 {
		return false
	}
	n := p.stages[len(p.stages)-1].name()
	return n == "$out" || n == "$merge"
}

// NeedsInput reports whether the pipeline reads its input iterator (false
// when it starts with $documents, $collStats or $indexStats).
func (p *Pipeline) NeedsInput() bool {
	return len(p.stages) == 0 || !firstOnly[p.stages[0].name()]
}

// Run executes the pipeline over input (which may be nil when the pipeline
// does not need input). The returned iterator owns input and closes it.
// For $out/$merge pipelines the writes happen during Run and the returned
// iterator is empty.
func (p *Pipeline) Run(ctx context.Context, env Env, input Iterator) (Iterator, error) {
	rc := &runCtx{env: env, vars: p.vars, opts: &p.opts, rt: runtimeOf(env)}
	return p.runWith(ctx, rc, input)
}

func (p *Pipeline) runWith(ctx context.Context, rc *runCtx, input Iterator) (Iterator, error) {
	it := input
	if it == nil {
		it = Slice(nil)
	}
	for _, s := range p.stages {
		next, err := s.run(ctx, rc, it)
		if err != nil {
			it.Close()
			return nil, err
		}
		it = next
	}
	return it, nil
}

// RunWithVars is Run with extra variables (e.g. a $lookup's let values, or
// $$new for a $merge pipeline), which must have been declared at Parse via
// Options.Let names.
func (p *Pipeline) RunWithVars(ctx context.Context, env Env, input Iterator, vars map[string]any) (Iterator, error) {
	all := make(map[string]any, len(p.vars)+len(vars))
	for k, v := range p.vars {
		all[k] = v
	}
	for k, v := range vars {
		all[k] = v
	}
	rc := &runCtx{env: env, vars: all, opts: &p.opts, rt: runtimeOf(env)}
	return p.runWith(ctx, rc, input)
}

// ---------------------------------------------------------------------------
// iterators

type sliceIter struct {
	docs []bson.D
	i    int
}

// Slice returns an iterator over docs.
func Slice(docs []bson.D) Iterator { return &sliceIter{docs: docs} }

func (s *sliceIter) Next(ctx context.Context) (bson.D, bool, error) {
	if s.i >= len(s.docs) {
		return nil, false, nil
	}
	d := s.docs[s.i]
	s.docs[s.i] = nil
	s.i++
	return d, true, nil
}

func (s *sliceIter) Close() { s.docs = nil }

// Collect drains an iterator (closing it).
func Collect(ctx context.Context, it Iterator) ([]bson.D, error) {
	defer it.Close()
	var out []bson.D
	for {
		d, ok, err := it.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, d)
	}
}

// funcIter adapts a next function.
type funcIter struct {
	next  func(ctx context.Context) (bson.D, bool, error)
	close func()
	src   Iterator // the input each output document comes from (see Tracked), if any
}

func (f *funcIter) Next(ctx context.Context) (bson.D, bool, error) { return f.next(ctx) }
func (f *funcIter) Close() {
	if f.close != nil {
		f.close()
		f.close = nil
	}
}

// mapIter applies fn to each document; fn returning nil drops the document.
func mapIter(in Iterator, fn func(bson.D) (bson.D, error)) Iterator {
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			for {
				if err := ctx.Err(); err != nil {
					return nil, false, mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
				}
				d, ok, err := in.Next(ctx)
				if err != nil || !ok {
					return nil, false, err
				}
				out, err := fn(d)
				if err != nil {
					return nil, false, err
				}
				if out != nil {
					return out, true, nil
				}
			}
		},
		close: in.Close,
		src:   in,
	}
}

func fieldNameErr(stageName, f string) error {
	if f == "" {
		return mongoerr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasPrefix(f, "$") {
		return mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	return nil
}

// optimize applies rewrites that do not change results: a $sort directly
// followed by $limit (or $skip then $limit) keeps only the top documents
// (bounded memory).
func optimize(stages []stage) {
	for i := 0; i+1 < len(stages); i++ {
		s, ok := stages[i].(*sortStage)
		if !ok {
			continue
		}
		if l, ok := stages[i+1].(*limitStage); ok {
			cp := *s
			cp.limit = l.n
			stages[i] = &cp
		} else if sk, ok := stages[i+1].(*skipStage); ok && i+2 < len(stages) {
			// [$sort, $skip n, $limit m] needs only the first n+m
			if l, ok := stages[i+2].(*limitStage); ok && sk.n+l.n > 0 && sk.n < 1<<40 && l.n < 1<<40 {
				cp := *s
				cp.limit = sk.n + l.n
				stages[i] = &cp
			}
		}
	}
}
