package agg

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// $fill replaces null and missing fields: with an expression's value, the
// last non-null value (locf) or a linear interpolation between neighbours,
// within partitions ordered by sortBy (as mongod's $setWindowFields-based
// implementation orders them).

type fillOutput struct {
	field  []string
	value  expr.Expr
	method string
}

type fillStage struct {
	win     *windowStage // partition/sort machinery (outputs unused)
	outputs []fillOutput
}

func (*fillStage) name() string { return "$fill" }

func init() {
	stageParsers["$fill"] = func(spec any, opts *Options) (stage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$fill specification must be an object")
		}
		s := &fillStage{win: &windowStage{}}
		var outD bson.D
		for _, e := range d {
			switch e.Key {
			case "partitionBy":
				c, err := compileExpr(e.Value, opts)
				if err != nil {
					return nil, err
				}
				s.win.partition = c
			case "partitionByFields":
				a, ok := e.Value.(bson.A)
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$fill.partitionByFields' must be an array of strings")
				}
				pd := bson.D{}
				for _, f := range a {
					fs, ok := f.(string)
					if !ok || fs == "" || strings.HasPrefix(fs, "$") {
						return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$fill.partitionByFields' must be an array of field names")
					}
					pd = append(pd, bson.E{Key: strings.ReplaceAll(fs, ".", "_"), Value: "$" + fs})
				}
				c, err := compileExpr(pd, opts)
				if err != nil {
					return nil, err
				}
				s.win.partition = c
			case "sortBy":
				sd, ok := e.Value.(bson.D)
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$fill.sortBy' is the wrong type '%s', expected type 'object'", bsonx.TypeName(e.Value))
				}
				srt, err := query.CompileSort(sd)
				if err != nil {
					return nil, err
				}
				s.win.sortSpec, s.win.sort = sd, srt
			case "output":
				od, ok := e.Value.(bson.D)
				if !ok {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$fill.output' is the wrong type '%s', expected type 'object'", bsonx.TypeName(e.Value))
				}
				outD = od
			default:
				return nil, mongoerr.New(40415, "BSON field '$fill.%s' is an unknown field.", e.Key)
			}
		}
		if outD == nil {
			return nil, mongoerr.New(40414, "BSON field '$fill.output' is missing but a required field")
		}
		for _, e := range outD {
			if err := validatePath("$fill", e.Key); err != nil {
				return nil, err
			}
			fd, ok := e.Value.(bson.D)
			if !ok || len(fd) != 1 {
				return nil, mongoerr.New(6050203, "Exactly one of 'value' or 'method' must be specified for '%s'", e.Key)
			}
			o := fillOutput{field: strings.Split(e.Key, ".")}
			switch fd[0].Key {
			case "value":
				c, err := compileExpr(fd[0].Value, opts)
				if err != nil {
					return nil, err
				}
				o.value = c
			case "method":
				m, _ := fd[0].Value.(string)
				if m != "locf" && m != "linear" {
					return nil, mongoerr.New(6050202, "Method must be either locf or linear")
				}
				if s.win.sort == nil {
					return nil, mongoerr.New(6050204, "Method requires sortBy to be specified")
				}
				if m == "linear" && len(s.win.sortSpec) != 1 {
					return nil, mongoerr.New(605001, "$linearFill requires a sortBy with exactly one field")
				}
				o.method = m
			default:
				return nil, mongoerr.New(40415, "BSON field '$fill.output.%s.%s' is an unknown field.", e.Key, fd[0].Key)
			}
			s.outputs = append(s.outputs, o)
		}
		return s, nil
	}
}

func (s *fillStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	if s.win.sort == nil && s.win.partition == nil {
		// value fills only: a streaming $addFields
		return mapIter(in, func(d bson.D) (bson.D, error) {
			for _, o := range s.outputs {
				var err error
				if d, err = fillValue(rc, d, o); err != nil {
					return nil, err
				}
			}
			return d, nil
		}), nil
	}
	w := *s.win
	w.outputs = nil
	sorted, err := w.run(ctx, rc, in)
	if err != nil {
		return nil, err
	}
	return lazy(sorted, func(ctx context.Context) ([]bson.D, error) {
		docs, err := Collect(ctx, sorted)
		if err != nil {
			return nil, err
		}
		// partition boundaries, recomputed on the sorted output
		parts := make([]any, len(docs))
		for i, d := range docs {
			if s.win.partition != nil {
				p, err := s.win.partition.Eval(rc.exprEnv(d))
				if err != nil {
					return nil, err
				}
				if bsonx.IsMissing(p) {
					p = nil
				}
				parts[i] = p
			}
		}
		for start := 0; start < len(docs); {
			end := start + 1
			for end < len(docs) && bsonx.Compare(parts[end], parts[start]) == 0 {
				end++
			}
			for _, o := range s.outputs {
				if err := s.fillPartition(rc, docs[start:end], o); err != nil {
					return nil, err
				}
			}
			start = end
		}
		return docs, nil
	}), nil
}

func fillValue(rc *runCtx, d bson.D, o fillOutput) (bson.D, error) {
	if v, ok := getPath(d, o.field); ok && !expr.IsNullish(v) {
		return d, nil
	}
	v, err := o.value.Eval(rc.exprEnv(d))
	if err != nil {
		return nil, err
	}
	if bsonx.IsMissing(v) {
		v = nil
	}
	return setPath(d, o.field, v, false), nil
}

func (s *fillStage) fillPartition(rc *runCtx, part []bson.D, o fillOutput) error {
	switch {
	case o.value != nil:
		for i := range part {
			d, err := fillValue(rc, part[i], o)
			if err != nil {
				return err
			}
			part[i] = d
		}
	case o.method == "locf":
		var last any
		have := false
		for i := range part {
			if v, ok := getPath(part[i], o.field); ok && !expr.IsNullish(v) {
				last, have = v, true
				continue
			}
			if have {
				part[i] = setPath(part[i], o.field, last, false)
			}
		}
	case o.method == "linear":
		x := func(i int) any { return s.win.sort.Keys(part[i])[0] }
		prev := -1
		for i := range part {
			v, ok := getPath(part[i], o.field)
			if !ok || expr.IsNullish(v) {
				continue
			}
			if !bsonx.IsNumber(v) {
				return mongoerr.New(6050106, "Value to be filled by $linearFill must be a number, found %s", bsonx.TypeName(v))
			}
			if prev >= 0 && i-prev > 1 {
				y0, _ := getPath(part[prev], o.field)
				x0, x1 := numOrDate(x(prev)), numOrDate(x(i))
				for j := prev + 1; j < i; j++ {
					xj := numOrDate(x(j))
					var y any = nil
					if x1 != x0 {
						t := (xj - x0) / (x1 - x0)
						y0f, _ := bsonx.ToFloat(y0)
						y1f, _ := bsonx.ToFloat(v)
						y = y0f + t*(y1f-y0f)
					}
					part[j] = setPath(part[j], o.field, y, false)
				}
			}
			prev = i
		}
	}
	return nil
}

func numOrDate(v any) float64 {
	if d, ok := v.(bson.DateTime); ok {
		return float64(d)
	}
	f, _ := bsonx.ToFloat(v)
	return f
}
