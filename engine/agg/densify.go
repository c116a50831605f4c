package agg

import (
	"context"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// $densify creates documents for the missing values of a numeric or date
// field on a step grid, over the whole input ("full"), each partition
// ("partition"), or explicit [lower, upper) bounds. Documents without the
// field pass through unchanged.

type densifyStage struct {
	field      []string
	partitions [][]string
	step       any
	unit       string
	bounds     string // "full", "partition" or "" for explicit
	lo, hi     any
}

func (*densifyStage) name() string { return "$densify" }

func init() {
	stageParsers["$densify"] = parseDensify
}

func parseDensify(spec any, opts *Options) (stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$densify specification must be an object")
	}
	s := &densifyStage{}
	var rng bson.D
	for _, e := range d {
		switch e.Key {
		case "field":
			f, ok := e.Value.(string)
			if !ok || f == "" || strings.HasPrefix(f, "$") {
				return nil, mongoerr.New(5733601, "Cannot densify field '%s': field must be a non-empty path that does not start with '$'", expr.ExtJSON(e.Value))
			}
			s.field = strings.Split(f, ".")
		case "partitionByFields":
			a, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$densify.partitionByFields' is the wrong type '%s', expected type 'array'", bsonx.TypeName(e.Value))
			}
			for _, p := range a {
				ps, ok := p.(string)
				if !ok || ps == "" || strings.HasPrefix(ps, "$") {
					return nil, mongoerr.New(8993000, "Cannot partition by field '%s'", expr.ExtJSON(p))
				}
				s.partitions = append(s.partitions, strings.Split(ps, "."))
			}
		case "range":
			r, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$densify.range' is the wrong type '%s', expected type 'object'", bsonx.TypeName(e.Value))
			}
			rng = r
		default:
			return nil, mongoerr.New(40415, "BSON field '$densify.%s' is an unknown field.", e.Key)
		}
	}
	if s.field == nil {
		return nil, mongoerr.New(40414, "BSON field '$densify.field' is missing but a required field")
	}
	if rng == nil {
		return nil, mongoerr.New(40414, "BSON field '$densify.range' is missing but a required field")
	}
	hasBounds := false
	for _, e := range rng {
		switch e.Key {
		case "step":
			if !bsonx.IsNumber(e.Value) || bsonx.CompareNumbers(e.Value, int32(0)) <= 0 {
				return nil, mongoerr.New(5733401, "the step parameter in a range statement must be a strictly positive numeric value")
			}
			s.step = e.Value
		case "unit":
			u, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$densify.range.unit' is the wrong type")
			}
			s.unit = u
		case "bounds":
			hasBounds = true
			switch b := e.Value.(type) {
			case string:
				if b != "full" && b != "partition" {
					return nil, mongoerr.New(5946802, "Bounds string must either be 'full' or 'partition'")
				}
				s.bounds = b
			case bson.A:
				if len(b) != 2 {
					return nil, mongoerr.New(5733403, "a bounding array in a range statement must have exactly two elements")
				}
				if bsonx.Compare(b[0], b[1]) > 0 {
					return nil, mongoerr.New(5733402, "the bounds in a range statement must be the lower bound followed by the upper bound")
				}
				s.lo, s.hi = b[0], b[1]
			default:
				return nil, mongoerr.New(5946801, "the bounds in a range statement must be the string 'full', 'partition', or an ascending array of two numbers or two dates")
			}
		default:
			return nil, mongoerr.New(40415, "BSON field '$densify.range.%s' is an unknown field.", e.Key)
		}
	}
	if s.step == nil || !hasBounds {
		return nil, mongoerr.New(40414, "BSON field '$densify.range.step' and 'bounds' are required")
	}
	if s.unit != "" {
		if _, ok := bsonx.ToInt64(s.step); !ok {
			return nil, mongoerr.New(6586400, "The step parameter in a range statement must be a whole number when densifying a date range")
		}
	}
	if s.bounds == "partition" && len(s.partitions) == 0 {
		return nil, mongoerr.New(5733408, "one may not specify the bounds as 'partition' without specifying a non-empty array of partitionByFields")
	}
	return s, nil
}

// next advances a value by one step.
func (s *densifyStage) next(v any) (any, error) {
	if s.unit != "" {
		dt, ok := v.(bson.DateTime)
		if !ok {
			return nil, mongoerr.New(5733501, "Densify field type must be a date when a unit is specified")
		}
		amt, _ := bsonx.ToInt64(s.step)
		e, err := expr.Compile(bson.D{{Key: "$dateAdd", Value: bson.D{{Key: "startDate", Value: dt}, {Key: "unit", Value: s.unit}, {Key: "amount", Value: amt}}}})
		if err != nil {
			return nil, err
		}
		return e.Eval(&expr.Env{})
	}
	if !bsonx.IsNumber(v) {
		return nil, mongoerr.New(5733201, "Densify field type must be numeric when no unit is specified, found %s", bsonx.TypeName(v))
	}
	return expr.Add(v, s.step), nil
}

func (s *densifyStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	return lazy(in, func(ctx context.Context) ([]bson.D, error) {
		type item struct {
			doc  bson.D
			val  any
			part string
			pv   bson.D
		}
		var items, passthrough []item
		var kb strings.Builder
		var mem int64
		for {
			d, ok, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			mem += approxSize(d)
			// $densify cannot spill (in mongod neither): the limit holds
			// with allowDiskUse too, with mongod's code 6007200
			// (document_source_densify.cpp).
			if mem > rc.opts.MemoryLimit {
				return nil, mongoerr.New(6007200, "$densify exceeded memory limit of %d", rc.opts.MemoryLimit)
			}
			v, ok := getPath(d, s.field)
			if !ok || expr.IsNullish(v) {
				passthrough = append(passthrough, item{doc: d})
				continue
			}
			if s.unit != "" {
				if _, isDate := v.(bson.DateTime); !isDate {
					return nil, mongoerr.New(5733501, "Densify field type must be a date when a unit is specified, found %s", bsonx.TypeName(v))
				}
			} else if !bsonx.IsNumber(v) {
				return nil, mongoerr.New(5733201, "Densify field type must be numeric when no unit is specified, found %s", bsonx.TypeName(v))
			}
			it := item{doc: d, val: v, pv: bson.D{}}
			kb.Reset()
			for _, p := range s.partitions {
				pv, _ := getPath(d, p)
				groupKey(&kb, pv)
				it.pv = setPath(it.pv, p, pv, false)
			}
			it.part = kb.String()
			items = append(items, it)
		}
		sort.SliceStable(items, func(i, j int) bool {
			if items[i].part != items[j].part {
				return items[i].part < items[j].part
			}
			return bsonx.Compare(items[i].val, items[j].val) < 0
		})
		// partitions are grouped by an encoded key; their order is
		// unspecified, as in mongod
		var globalLo, globalHi any
		for i, it := range items {
			if i == 0 || bsonx.Compare(it.val, globalLo) < 0 {
				globalLo = it.val
			}
			if i == 0 || bsonx.Compare(it.val, globalHi) > 0 {
				globalHi = it.val
			}
		}
		var out []bson.D
		newDoc := func(v any, pv bson.D) bson.D {
			d := setPath(bson.D{}, s.field, v, false)
			for _, e := range bsonx.CloneD(pv) {
				d = bsonx.Set(d, e.Key, e.Value)
			}
			return d
		}
		const maxGenerated = 500_000 // mongod's internalQueryMaxAllowedDensifyDocs
		generated := 0
		for start := 0; start < len(items); {
			end := start + 1
			for end < len(items) && items[end].part == items[start].part {
				end++
			}
			part := items[start:end]
			// "full"/"partition" bounds end at the largest existing value,
			// which is present, so an exclusive upper bound suffices.
			var lo, hi any
			switch s.bounds {
			case "full":
				lo, hi = globalLo, globalHi
			case "partition":
				lo, hi = part[0].val, part[len(part)-1].val
			default:
				lo, hi = s.lo, s.hi
			}
			cur := lo
			for _, it := range part {
				for bsonx.Compare(cur, it.val) < 0 && (bsonx.Compare(cur, hi) < 0) {
					out = append(out, newDoc(cur, part[0].pv))
					generated++
					if generated > maxGenerated {
						return nil, mongoerr.New(5897900, "Generated %d documents in $densify, which is over the limit of %d. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents", generated, maxGenerated)
					}
					var err error
					if cur, err = s.next(cur); err != nil {
						return nil, err
					}
				}
				out = append(out, it.doc)
				for bsonx.Compare(cur, it.val) <= 0 {
					var err error
					if cur, err = s.next(cur); err != nil {
						return nil, err
					}
				}
			}
			for bsonx.Compare(cur, hi) < 0 {
				out = append(out, newDoc(cur, part[0].pv))
				generated++
				if generated > maxGenerated {
					return nil, mongoerr.New(5897900, "Generated %d documents in $densify, which is over the limit of %d. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents", generated, maxGenerated)
				}
				var err error
				if cur, err = s.next(cur); err != nil {
					return nil, err
				}
			}
			start = end
		}
		for _, p := range passthrough {
			out = append(out, p.doc)
		}
		return out, nil
	}), nil
}
