package agg

import (
	"context"
	"math"
	"sort"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func defaultCountOutput() bson.D {
	return bson.D{{Key: "count", Value: bson.D{{Key: "$sum", Value: int32(1)}}}}
}

func parseOutput(stageName string, v any, opts *Options) ([]accSpec, error) {
	d, ok := v.(bson.D)
	if !ok {
		code := int32(40196)
		if stageName == "$bucketAuto" {
			code = 40244
		}
		return nil, mongoerr.New(code, "The %s 'output' field must be an object, but found type: %s.", stageName, bsonx.TypeName(v))
	}
	g, err := parseGroup(append(bson.D{{Key: "_id", Value: nil}}, d...), opts)
	if err != nil {
		return nil, err
	}
	return g.accs, nil
}

func groupByExpr(stageName string, v any, opts *Options) (expr.Expr, error) {
	s, isStr := v.(string)
	if !(isStr && len(s) > 0 && s[0] == '$') && !isOperatorDoc(v) {
		code := int32(40202)
		if stageName == "$bucketAuto" {
			code = 40239
		}
		return nil, mongoerr.New(code, "The %s 'groupBy' field must be defined as a $-prefixed path or an expression, but found: %s.", stageName, expr.ExtJSON(v))
	}
	return compileExpr(v, opts)
}

// ---- $bucket

type bucketStage struct {
	groupBy    expr.Expr
	boundaries bson.A
	def        any
	hasDefault bool
	g          *groupStage
}

func (*bucketStage) name() string { return "$bucket" }

func init() {
	stageParsers["$bucket"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(40201, "Argument to $bucket stage must be an object, but found type: %s.", bsonx.TypeName(spec))
		}
		s := &bucketStage{}
		var gbV any
		hasGB, hasB := false, false
		out := defaultCountOutput()
		var outV any = out
		for _, e := range d {
			switch e.Key {
			case "groupBy":
				gbV, hasGB = e.Value, true
			case "boundaries":
				a, ok := e.Value.(bson.A)
				if !ok {
					return nil, mongoerr.New(40200, "The $bucket 'boundaries' field must be an array, but found type: %s.", bsonx.TypeName(e.Value))
				}
				s.boundaries, hasB = a, true
			case "default":
				s.def, s.hasDefault = e.Value, true
			case "output":
				outV = e.Value
			default:
				return nil, mongoerr.New(40197, "Unrecognized option to $bucket: %s.", e.Key)
			}
		}
		if !hasGB || !hasB {
			return nil, mongoerr.New(40198, "$bucket requires 'groupBy' and 'boundaries' to be specified.")
		}
		gb, err := groupByExpr("$bucket", gbV, opts)
		if err != nil {
			return nil, err
		}
		s.groupBy = gb
		if len(s.boundaries) < 2 {
			return nil, mongoerr.New(40192, "The $bucket 'boundaries' field must have at least 2 values, but found %d value(s).", len(s.boundaries))
		}
		for i, b := range s.boundaries {
			if i == 0 {
				continue
			}
			prev := s.boundaries[i-1]
			if bsonx.Rank(prev) != bsonx.Rank(b) {
				return nil, mongoerr.New(40193, "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types %s and %s.", bsonx.TypeName(prev), bsonx.TypeName(b))
			}
			if bsonx.Compare(prev, b) >= 0 {
				return nil, mongoerr.New(40194, "The 'boundaries' option to $bucket must be sorted in ascending order, but elements %d and %d are not in ascending order (%s is not less than %s).", i-1, i, expr.ExtJSON(prev), expr.ExtJSON(b))
			}
		}
		if s.hasDefault {
			if bsonx.Rank(s.def) == bsonx.Rank(s.boundaries[0]) &&
				bsonx.Compare(s.def, s.boundaries[0]) >= 0 && bsonx.Compare(s.def, s.boundaries[len(s.boundaries)-1]) < 0 {
				return nil, mongoerr.New(40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.")
			}
		}
		accs, err := parseOutput("$bucket", outV, opts)
		if err != nil {
			return nil, err
		}
		s.g = &groupStage{accs: accs}
		return s, nil
	}
	stageParsers["$bucketAuto"] = parseBucketAuto
}

func (s *bucketStage) bucketOf(v any) (int, bool) {
	b := s.boundaries
	if bsonx.Compare(v, b[0]) < 0 || bsonx.Compare(v, b[len(b)-1]) >= 0 || (bsonx.Rank(v) != bsonx.Rank(b[0])) {
		return 0, false
	}
	i := sort.Search(len(b), func(i int) bool { return bsonx.Compare(b[i], v) > 0 })
	return i - 1, true
}

func (s *bucketStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return lazy(in, func(ctx context.Context) ([]bson.D, error) {
		groups := make([]*group, len(s.boundaries)-1)
		var defGroup *group
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			env := rc.exprEnv(d)
			v, err := s.groupBy.Eval(env)
			if err != nil {
				return nil, err
			}
			if bsonx.IsMissing(v) {
				v = nil
			}
			var gr *group
			if i, ok := s.bucketOf(v); ok {
				if groups[i] == nil {
					if groups[i], err = s.g.newGroup(s.boundaries[i], env); err != nil {
						return nil, err
					}
				}
				gr = groups[i]
			} else {
				if !s.hasDefault {
					return nil, mongoerr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
				}
				if defGroup == nil {
					if defGroup, err = s.g.newGroup(s.def, env); err != nil {
						return nil, err
					}
				}
				gr = defGroup
			}
			for _, a := range gr.accs {
				if err := a.add(env); err != nil {
					return nil, err
				}
			}
		}
		var out []bson.D
		if defGroup != nil && bsonx.Compare(s.def, s.boundaries[0]) < 0 {
			out = append(out, s.g.output(defGroup))
			defGroup = nil
		}
		for _, gr := range groups {
			if gr != nil {
				out = append(out, s.g.output(gr))
			}
		}
		if defGroup != nil {
			out = append(out, s.g.output(defGroup))
		}
		return out, nil
	}), nil
}

// ---- $bucketAuto

type bucketAutoStage struct {
	groupBy expr.Expr
	n       int64
	g       *groupStage
	gran    string
}

func (*bucketAutoStage) name() string { return "$bucketAuto" }

func parseBucketAuto(spec any, opts *Options) (stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(40240, "The argument to $bucketAuto must be an object, but found type: %s.", bsonx.TypeName(spec))
	}
	s := &bucketAutoStage{}
	var gbV any
	hasGB, hasN := false, false
	var outV any = defaultCountOutput()
	for _, e := range d {
		switch e.Key {
		case "groupBy":
			gbV, hasGB = e.Value, true
		case "buckets":
			if !bsonx.IsNumber(e.Value) {
				return nil, mongoerr.New(40241, "The $bucketAuto 'buckets' field must be a numeric value, but found type: %s.", bsonx.TypeName(e.Value))
			}
			n, ok := bsonx.ToInt64(e.Value)
			if !ok || n > math.MaxInt32 {
				return nil, mongoerr.New(40242, "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found %s.", expr.ExtJSON(e.Value))
			}
			if n <= 0 {
				return nil, mongoerr.New(40243, "The $bucketAuto 'buckets' field must be greater than 0, but found: %d.", n)
			}
			s.n, hasN = n, true
		case "output":
			outV = e.Value
		case "granularity":
			g, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.New(40261, "The $bucketAuto 'granularity' field must be a string, but found type: %s.", bsonx.TypeName(e.Value))
			}
			if _, ok := granularities[g]; !ok {
				return nil, mongoerr.New(40257, "Rounding granularity not recognized: %s", g)
			}
			s.gran = g
		default:
			return nil, mongoerr.New(40245, "Unrecognized option to $bucketAuto: %s.", e.Key)
		}
	}
	if !hasGB || !hasN {
		return nil, mongoerr.New(40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified")
	}
	gb, err := groupByExpr("$bucketAuto", gbV, opts)
	if err != nil {
		return nil, err
	}
	s.groupBy = gb
	accs, err := parseOutput("$bucketAuto", outV, opts)
	if err != nil {
		return nil, err
	}
	s.g = &groupStage{accs: accs}
	return s, nil
}

type keyedDoc struct {
	key any
	env *expr.Env
}

func (s *bucketAutoStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	// The documents are sorted by their groupBy value with $sort's
	// external sorter: over the memory limit they spill to disk when
	// allowDiskUse permits, else fail with the Sorter's 292 "Sort exceeded
	// memory limit", as mongod's DocumentSourceBucketAuto::populateSorter
	// (a Sorter with extSortAllowed = allowDiskUse).
	srt := &sorter{
		cmp:      func(a, b []any) int { return bsonx.Compare(a[0], b[0]) },
		limit:    rc.opts.bucketAutoMemoryLimit(),
		disk:     rc.opts.AllowDiskUse,
		dir:      rc.opts.TempDir,
		memError: sortMemError,
	}
	return lazy(in, func(ctx context.Context) ([]bson.D, error) {
		defer srt.cleanup()
		n := 0
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			env := rc.exprEnv(d)
			v, err := s.groupBy.Eval(env)
			if err != nil {
				return nil, err
			}
			if bsonx.IsMissing(v) {
				v = nil
			}
			if s.gran != "" && (!bsonx.IsNumber(v) || bsonx.CompareNumbers(v, int32(0)) < 0 || bsonx.IsNaN(v)) {
				return nil, mongoerr.New(40258, "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value with type: %s", bsonx.TypeName(v))
			}
			if err := srt.add([]any{v}, bson.D{{Key: "k", Value: v}, {Key: "d", Value: d}}); err != nil {
				return nil, err
			}
			n++
		}
		if n == 0 {
			return nil, nil
		}
		sorted, err := srt.finish()
		if err != nil {
			return nil, err
		}
		defer sorted.Close()
		// cur is the next document in groupBy order (ok=false at the end).
		var cur keyedDoc
		more := false
		advance := func() error {
			r, ok, err := sorted.Next(ctx)
			if err != nil || !ok {
				more = false
				return err
			}
			more = true
			k, _ := bsonx.Get(r, "k")
			dv, _ := bsonx.Get(r, "d")
			d, _ := dv.(bson.D)
			cur = keyedDoc{key: k, env: rc.exprEnv(d)}
			return nil
		}
		if err := advance(); err != nil {
			return nil, err
		}
		size := int(math.Round(float64(n) / float64(s.n)))
		if size < 1 {
			size = 1
		}
		type bucket struct {
			min, max any
			gr       *group
		}
		var buckets []*bucket
		for more {
			b := &bucket{min: cur.key}
			gr, err := s.g.newGroup(nil, cur.env)
			if err != nil {
				return nil, err
			}
			b.gr = gr
			last := int64(len(buckets)) == s.n-1
			count := 0
			for more && (last || count < size || bsonx.Compare(cur.key, b.max) == 0) {
				for _, a := range gr.accs {
					if err := a.add(cur.env); err != nil {
						return nil, err
					}
				}
				b.max = cur.key
				if err := advance(); err != nil {
					return nil, err
				}
				count++
			}
			if s.gran != "" {
				// the max rounds up; values below it join this bucket
				if len(buckets) == 0 {
					b.min = roundGranularity(s.gran, b.min, false)
				} else {
					b.min = buckets[len(buckets)-1].max
				}
				b.max = roundGranularity(s.gran, b.max, true)
				for more && bsonx.Compare(cur.key, b.max) < 0 {
					for _, a := range gr.accs {
						if err := a.add(cur.env); err != nil {
							return nil, err
						}
					}
					if err := advance(); err != nil {
						return nil, err
					}
				}
			}
			buckets = append(buckets, b)
		}
		// without granularity a bucket's max is the next bucket's min (the
		// last keeps its own)
		for j := 0; s.gran == "" && j+1 < len(buckets); j++ {
			buckets[j].max = buckets[j+1].min
		}
		out := make([]bson.D, len(buckets))
		for j, b := range buckets {
			b.gr.key = bson.D{{Key: "min", Value: b.min}, {Key: "max", Value: b.max}}
			out[j] = s.g.output(b.gr)
		}
		return out, nil
	}), nil
}

// granularities are the preferred-number series $bucketAuto can round
// bucket boundaries to.
var granularities = map[string][]float64{
	"R5":        {1.0, 1.6, 2.5, 4.0, 6.3},
	"R10":       {1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0},
	"R20":       {1.0, 1.12, 1.25, 1.4, 1.6, 1.8, 2.0, 2.24, 2.5, 2.8, 3.15, 3.55, 4.0, 4.5, 5.0, 5.6, 6.3, 7.1, 8.0, 9.0},
	"R40":       {1.0, 1.06, 1.12, 1.18, 1.25, 1.32, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.12, 2.24, 2.36, 2.5, 2.65, 2.8, 3.0, 3.15, 3.35, 3.55, 3.75, 4.0, 4.25, 4.5, 4.75, 5.0, 5.3, 5.6, 6.0, 6.3, 6.7, 7.1, 7.5, 8.0, 8.5, 9.0, 9.5},
	"R80":       nil,
	"1-2-5":     {1, 2, 5},
	"E6":        {1.0, 1.5, 2.2, 3.3, 4.7, 6.8},
	"E12":       {1.0, 1.2, 1.5, 1.8, 2.2, 2.7, 3.3, 3.9, 4.7, 5.6, 6.8, 8.2},
	"E24":       {1.0, 1.1, 1.2, 1.3, 1.5, 1.6, 1.8, 2.0, 2.2, 2.4, 2.7, 3.0, 3.3, 3.6, 3.9, 4.3, 4.7, 5.1, 5.6, 6.2, 6.8, 7.5, 8.2, 9.1},
	"E48":       nil,
	"E96":       nil,
	"E192":      nil,
	"POWERSOF2": nil,
}

// roundGranularity rounds a boundary up (max) or down (min) to the
// preferred-number series. Series left nil above (E48...E192, R80) use the
// nearest coarser series: a documented approximation.
func roundGranularity(g string, v any, up bool) any {
	f, _ := bsonx.ToFloat(v)
	if f <= 0 {
		return 0.0
	}
	if g == "POWERSOF2" {
		p := math.Log2(f)
		if up {
			if p == math.Floor(p) {
				return math.Pow(2, p+1)
			}
			return math.Pow(2, math.Ceil(p))
		}
		return math.Pow(2, math.Floor(p))
	}
	series := granularities[g]
	if series == nil {
		if g == "R80" {
			series = granularities["R40"]
		} else {
			series = granularities["E24"]
		}
	}
	scale := math.Pow(10, math.Floor(math.Log10(f)))
	var cands []float64
	for _, m := range []float64{scale / 10, scale, scale * 10} {
		for _, s := range series {
			cands = append(cands, roundSig(s*m))
		}
	}
	if up {
		for _, c := range cands {
			if c > f {
				return c
			}
		}
	} else {
		for k := len(cands) - 1; k >= 0; k-- {
			if cands[k] <= f {
				return cands[k]
			}
		}
	}
	return f
}

func roundSig(f float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 12, 64), 64)
	if err != nil {
		return f
	}
	return r
}
