package engine

import (
	"sort"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// serverParams are the server parameters setParameter can change at
// runtime. The zero value holds mongod 7.0's defaults.
type serverParams struct {
	// diskUseOff is !allowDiskUseByDefault (mongod 6.0+: default true,
	// query_knobs.idl): whether a find or aggregate that does not say
	// allowDiskUse may spill its blocking stages to temporary files.
	diskUseOff atomic.Bool
	// sortMem is internalQueryMaxBlockingSortMemoryUsageBytes (0: the
	// default, 100 MB): the memory a blocking sort holds before it spills
	// or fails.
	sortMem atomic.Int64
	// groupMem is internalDocumentSourceGroupMaxMemoryBytes (0: the
	// default, 100 MB), the same for $group.
	groupMem atomic.Int64
	// bucketAutoMem is internalDocumentSourceBucketAutoMaxMemoryBytes (0:
	// the default, 100 MB), the same for $bucketAuto.
	bucketAutoMem atomic.Int64
	// graphLookupMem is internalDocumentSourceGraphLookupMaxMemoryBytes
	// (0: the default, 100 MB).
	graphLookupMem atomic.Int64
	// facetOut is internalQueryFacetMaxOutputDocSizeBytes (0: 100 MB).
	facetOut atomic.Int64
	// rangeMem, pushMem, addToSetMem are internalQueryMaxRangeBytes,
	// internalQueryMaxPushBytes and internalQueryMaxAddToSetBytes (0: the
	// default, 100 MB): expression memory limits ($range, $concatArrays;
	// the $push and $addToSet accumulators).
	rangeMem, pushMem, addToSetMem atomic.Int64
}

func (p *serverParams) exprLimit(v *atomic.Int64) int64 {
	if n := v.Load(); n > 0 {
		return n
	}
	return expr.DefaultExprMemoryLimit
}

func (p *serverParams) graphLookupMemLimit() int64 {
	if v := p.graphLookupMem.Load(); v > 0 {
		return v
	}
	return agg.DefaultMemoryLimit
}

func (p *serverParams) facetOutLimit() int64 {
	if v := p.facetOut.Load(); v > 0 {
		return v
	}
	return agg.DefaultMemoryLimit
}

func (p *serverParams) bucketAutoMemLimit() int64 {
	if v := p.bucketAutoMem.Load(); v > 0 {
		return v
	}
	return agg.DefaultMemoryLimit
}

func (p *serverParams) sortMemLimit() int64 {
	if v := p.sortMem.Load(); v > 0 {
		return v
	}
	return sortMemLimit
}

func (p *serverParams) groupMemLimit() int64 {
	if v := p.groupMem.Load(); v > 0 {
		return v
	}
	return agg.DefaultMemoryLimit
}

// allowDiskUse is the effective allowDiskUse of a find or aggregate: the
// command's own value when it gives one (a truthy value as mongod reads
// booleans), else allowDiskUseByDefault, as mongod's
// `allowDiskUse.value_or(allowDiskUseByDefault)`. Requests without the
// field (findAndModify, count, distinct… and internal queries, r == nil)
// get the default too.
func (e *Engine) allowDiskUse(r *Request) bool {
	if r != nil {
		if v, ok := r.Arg("allowDiskUse"); ok && v != nil {
			if _, isNull := v.(bson.Null); !isNull {
				return truthy(v)
			}
		}
	}
	return !e.params.diskUseOff.Load()
}

// runtimeParams are the parameters setParameter accepts, with their
// current values (as getParameter shows them).
func (e *Engine) runtimeParams() bson.D {
	return bson.D{
		{Key: "allowDiskUseByDefault", Value: !e.params.diskUseOff.Load()},
		{Key: "internalDocumentSourceBucketAutoMaxMemoryBytes", Value: e.params.bucketAutoMemLimit()},
		{Key: "internalDocumentSourceGraphLookupMaxMemoryBytes", Value: e.params.graphLookupMemLimit()},
		{Key: "internalDocumentSourceGroupMaxMemoryBytes", Value: e.params.groupMemLimit()},
		{Key: "internalQueryFacetMaxOutputDocSizeBytes", Value: e.params.facetOutLimit()},
		{Key: "internalQueryMaxAddToSetBytes", Value: int32(e.params.exprLimit(&e.params.addToSetMem))},
		{Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: int32(e.params.sortMemLimit())},
		{Key: "internalQueryMaxPushBytes", Value: int32(e.params.exprLimit(&e.params.pushMem))},
		{Key: "internalQueryMaxRangeBytes", Value: int32(e.params.exprLimit(&e.params.rangeMem))},
		{Key: "logComponentVerbosity", Value: e.logComponentVerbosity()},
		{Key: "logLevel", Value: int32(e.verbosity().Level())},
		{Key: "transactionLifetimeLimitSeconds", Value: int32(e.txns.lifetimeLimit() / time.Second)},
	}
}

func init() {
	Register(&Command{Name: "setParameter", Help: "set administrative option(s): {setParameter: 1, <param>: <value>}", AdminOnly: true, Run: cmdSetParameter})
}

// cmdSetParameter is mongod's CmdSet (src/mongo/db/commands/parameters.cpp):
// every named parameter is checked first (unknown: InvalidOptions
// "attempted to set unrecognized parameter [x], use help:true to see
// options "; known but fixed: IllegalOperation "not allowed to change [x]
// at runtime"; twice: InvalidOptions), then set in name order; the reply
// carries the first one's old value as `was`.
func cmdSetParameter(e *Engine, r *Request) (bson.D, error) {
	settable := e.runtimeParams()
	fixed := serverParameters(e)
	toSet := map[string]any{}
	for _, f := range r.Cmd[1:] {
		if IsEnvelopeField(f.Key) || f.Key == "comment" {
			continue
		}
		if _, ok := bsonx.Get(settable, f.Key); !ok {
			if _, ok := bsonx.Get(fixed, f.Key); ok {
				return nil, mongoerr.New(mongoerr.IllegalOperation, "not allowed to change [%s] at runtime", f.Key)
			}
			return nil, mongoerr.New(mongoerr.InvalidOptions, "attempted to set unrecognized parameter [%s], use help:true to see options ", f.Key)
		}
		if _, dup := toSet[f.Key]; dup {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "attempted to set parameter [%s] twice in the same setParameter command", f.Key)
		}
		toSet[f.Key] = f.Value
	}
	if len(toSet) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to set, use help:true to see options ")
	}
	names := make([]string, 0, len(toSet))
	for k := range toSet {
		names = append(names, k)
	}
	sort.Strings(names)
	out := bson.D{}
	for i, name := range names {
		if i == 0 {
			was, _ := bsonx.Get(settable, name)
			out = append(out, bson.E{Key: "was", Value: was})
		}
		if err := e.setParam(name, toSet[name]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *Engine) setParam(name string, v any) error {
	switch name {
	case "logLevel":
		return e.setLogLevel(v)
	case "logComponentVerbosity":
		return e.setLogComponentVerbosity(v)
	case "transactionLifetimeLimitSeconds":
		n, ok := bsonx.ToInt64(v)
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "Invalid value for parameter %s: %v", name, v)
		}
		if n < 1 {
			return mongoerr.New(mongoerr.BadValue, "Invalid value for parameter transactionLifetimeLimitSeconds: %d is not greater than or equal to 1", n)
		}
		e.txns.lifetime.Store(n)
		return nil
	case "allowDiskUseByDefault":
		// an IDL bool parameter takes any value by its truth (coerce<bool>)
		e.params.diskUseOff.Store(!truthy(v))
		return nil
	case "internalQueryMaxBlockingSortMemoryUsageBytes", "internalDocumentSourceGroupMaxMemoryBytes", "internalDocumentSourceBucketAutoMaxMemoryBytes",
		"internalDocumentSourceGraphLookupMaxMemoryBytes", "internalQueryFacetMaxOutputDocSizeBytes",
		"internalQueryMaxRangeBytes", "internalQueryMaxPushBytes", "internalQueryMaxAddToSetBytes":
		n, ok := bsonx.ToInt64(v)
		if !ok {
			return mongoerr.New(mongoerr.BadValue, "Invalid value for parameter %s: %v", name, v)
		}
		if n <= 0 {
			return mongoerr.New(mongoerr.BadValue, "Invalid value for parameter %s: %d is not greater than 0", name, n)
		}
		switch name {
		case "internalDocumentSourceGroupMaxMemoryBytes":
			e.params.groupMem.Store(n)
		case "internalDocumentSourceBucketAutoMaxMemoryBytes":
			e.params.bucketAutoMem.Store(n)
		case "internalDocumentSourceGraphLookupMaxMemoryBytes":
			e.params.graphLookupMem.Store(n)
		case "internalQueryFacetMaxOutputDocSizeBytes":
			e.params.facetOut.Store(n)
		case "internalQueryMaxRangeBytes", "internalQueryMaxPushBytes", "internalQueryMaxAddToSetBytes":
			if n > 1<<31-1 {
				return mongoerr.New(mongoerr.BadValue, "Invalid value for parameter %s: %d is out of range for an int", name, n)
			}
			map[string]*atomic.Int64{"internalQueryMaxRangeBytes": &e.params.rangeMem,
				"internalQueryMaxPushBytes": &e.params.pushMem, "internalQueryMaxAddToSetBytes": &e.params.addToSetMem}[name].Store(n)
		default:
			if n > 1<<31-1 {
				return mongoerr.New(mongoerr.BadValue, "Invalid value for parameter %s: %d is out of range for an int", name, n)
			}
			e.params.sortMem.Store(n)
		}
		return nil
	}
	return mongoerr.New(mongoerr.InvalidOptions, "attempted to set unrecognized parameter [%s], use help:true to see options ", name)
}
