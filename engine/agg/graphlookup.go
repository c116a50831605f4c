package agg

import (
	"context"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// $graphLookup: a breadth-first search over another collection. Each round
// queries the collection (through Env.Scan, so indexes on connectToField
// apply) for the values found in the previous round.

type graphLookupStage struct {
	from, db     string
	startWith    expr.Expr
	connectFrom  []string
	connectTo    string
	as           []string
	depthField   []string
	maxDepth     int64 // -1: unlimited
	restrictWith bson.D
}

func (*graphLookupStage) name() string { return "$graphLookup" }

func init() {
	stageParsers["$graphLookup"] = parseGraphLookup
}

func parseGraphLookup(spec any, opts *Options) (stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $graphLookup stage specification must be an object, but found %s", bsonx.TypeName(spec))
	}
	s := &graphLookupStage{db: opts.DB, maxDepth: -1}
	var hasStart bool
	str := func(e bson.E) (string, error) {
		v, ok := e.Value.(string)
		if !ok {
			return "", mongoerr.New(40103, "expected string as argument for %s, found: %s", e.Key, expr.ExtJSON(e.Value))
		}
		return v, nil
	}
	for _, e := range d {
		var err error
		var v string
		switch e.Key {
		case "startWith":
			if s.startWith, err = compileExpr(e.Value, opts); err != nil {
				return nil, err
			}
			hasStart = true
		case "maxDepth":
			if !bsonx.IsNumber(e.Value) {
				return nil, mongoerr.New(40100, "maxDepth must be numeric, found type: %s", bsonx.TypeName(e.Value))
			}
			f, _ := bsonx.ToFloat(e.Value)
			n := int64(f)
			if f < 0 {
				return nil, mongoerr.New(40101, "maxDepth requires a nonnegative argument, found: %d", n)
			}
			if i, ok := bsonx.ToInt64(e.Value); !ok || math.IsInf(f, 0) {
				return nil, mongoerr.New(40102, "maxDepth could not be represented as a long long: %d", n)
			} else {
				s.maxDepth = i
			}
		case "restrictSearchWithMatch":
			r, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.New(40185, "restrictSearchWithMatch must be an object, found %s", bsonx.TypeName(e.Value))
			}
			if _, err := query.Compile(r); err != nil {
				return nil, err
			}
			s.restrictWith = r
		case "from", "as", "connectFromField", "connectToField", "depthField":
			if v, err = str(e); err != nil {
				return nil, err
			}
			if e.Key != "from" {
				if err := validatePath("$graphLookup", v); err != nil {
					return nil, err
				}
			}
			switch e.Key {
			case "from":
				s.from = v
			case "as":
				s.as = strings.Split(v, ".")
			case "connectFromField":
				s.connectFrom = strings.Split(v, ".")
			case "connectToField":
				s.connectTo = v
			case "depthField":
				s.depthField = strings.Split(v, ".")
			}
		default:
			return nil, mongoerr.New(40104, "Unknown argument to $graphLookup: %s", e.Key)
		}
	}
	if s.from == "" || s.as == nil || !hasStart || s.connectFrom == nil || s.connectTo == "" {
		return nil, mongoerr.New(40105, "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and 'connectToField' to be specified.")
	}
	return s, nil
}

// graphValues adds a value to search for: arrays contribute their elements.
func graphValues(v any, out bson.A) bson.A {
	if a, ok := v.(bson.A); ok {
		for _, x := range a {
			out = append(out, x)
		}
		return out
	}
	if bsonx.IsMissing(v) {
		return out
	}
	return append(out, v)
}

func (s *graphLookupStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return mapIter(in, func(d bson.D) (bson.D, error) {
		start, err := s.startWith.Eval(rc.exprEnv(d))
		if err != nil {
			return nil, err
		}
		searched := map[string]bool{}
		seenDocs := map[string]bool{}
		var results bson.A
		var kb strings.Builder
		key := func(v any) string {
			kb.Reset()
			groupKey(&kb, v)
			return kb.String()
		}
		// Memory as mongod's DocumentSourceGraphLookUp::checkMemoryUsage:
		// the visited documents plus the frontier must stay under
		// internalDocumentSourceGraphLookupMaxMemoryBytes (100 MB), else
		// 40099 — with allowDiskUse too (it cannot spill, in mongod
		// neither).
		limit := rc.opts.graphLookupMemoryLimit()
		var visitedMem, frontierMem int64
		checkMem := func() error {
			if visitedMem+frontierMem >= limit {
				return mongoerr.New(40099, "$graphLookup reached maximum memory consumption")
			}
			return nil
		}
		frontier := bson.A{}
		for _, v := range graphValues(start, nil) {
			if k := key(v); !searched[k] {
				searched[k] = true
				frontier = append(frontier, v)
				frontierMem += approxSize(v)
			}
		}
		if err := checkMem(); err != nil {
			return nil, err
		}
		for depth := int64(0); len(frontier) > 0 && (s.maxDepth < 0 || depth <= s.maxDepth); depth++ {
			filter := equalityFilter(s.connectTo, frontier)
			if s.restrictWith != nil {
				filter = bson.D{{Key: "$and", Value: bson.A{filter, s.restrictWith}}}
			}
			it, err := rc.env.Scan(ctx, s.db, s.from, filter)
			if err != nil {
				return nil, err
			}
			found, err := Collect(ctx, it)
			if err != nil {
				return nil, err
			}
			next := bson.A{}
			frontierMem = 0
			for _, fd := range found {
				id, _ := bsonx.Get(fd, "_id")
				if k := key(id); seenDocs[k] {
					continue
				} else {
					seenDocs[k] = true
				}
				out := fd
				if s.depthField != nil {
					out = setPath(fd, s.depthField, depth, false)
				}
				results = append(results, out)
				visitedMem += approxSize(fd)
				if err := checkMem(); err != nil {
					return nil, err
				}
				v, ok := getPath(fd, s.connectFrom)
				if !ok {
					continue
				}
				for _, nv := range graphValues(v, nil) {
					if k := key(nv); !searched[k] {
						searched[k] = true
						next = append(next, nv)
						frontierMem += approxSize(nv)
						if err := checkMem(); err != nil {
							return nil, err
						}
					}
				}
			}
			frontier = next
		}
		if results == nil {
			results = bson.A{}
		}
		return setPath(d, s.as, results, false), nil
	}), nil
}
