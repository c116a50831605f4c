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

// $setWindowFields, for the common operators: accumulators over document or
// range windows, $rank, $denseRank, $documentNumber, $shift and $locf.
// The stage is blocking: it sorts its input by (partitionBy, sortBy), as
// mongod does, and then computes each partition.

type windowBound struct {
	unbounded bool
	current   bool
	n         any // offset (documents: int64; range: number)
}

type windowOutput struct {
	field []string
	op    string
	acc   accSpec   // accumulator operators
	arg   expr.Expr // $shift output / $locf input
	by    int64     // $shift
	def   expr.Expr // $shift default
	// window; kind "" means the whole partition
	kind   string // "documents" or "range"
	lo, hi windowBound
	unit   string
}

type windowStage struct {
	partition expr.Expr
	sortSpec  bson.D
	sort      *query.Sort
	outputs   []windowOutput
}

func (*windowStage) name() string { return "$setWindowFields" }

func init() {
	stageParsers["$setWindowFields"] = parseWindowFields
}

func parseBound(v any, kind string) (windowBound, error) {
	switch x := v.(type) {
	case string:
		switch x {
		case "unbounded":
			return windowBound{unbounded: true}, nil
		case "current":
			return windowBound{current: true}, nil
		}
		return windowBound{}, mongoerr.New(mongoerr.FailedToParse, "Window bounds must be 'unbounded', 'current', or a number, found: %s", x)
	}
	if !bsonx.IsNumber(v) {
		return windowBound{}, mongoerr.New(mongoerr.FailedToParse, "Window bounds must be 'unbounded', 'current', or a number, found: %s", bsonx.TypeName(v))
	}
	if kind == "documents" {
		i, ok := bsonx.ToInt64(v)
		if !ok {
			return windowBound{}, mongoerr.New(mongoerr.FailedToParse, "Numeric document-based bounds must be an integer")
		}
		return windowBound{n: i}, nil
	}
	return windowBound{n: v}, nil
}

func parseWindowFields(spec any, opts *Options) (stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "$setWindowFields must be an object")
	}
	s := &windowStage{}
	var outD bson.D
	hasOut := false
	for _, e := range d {
		switch e.Key {
		case "partitionBy":
			c, err := compileExpr(e.Value, opts)
			if err != nil {
				return nil, err
			}
			s.partition = c
		case "sortBy":
			sd, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$setWindowFields.sortBy' is the wrong type '%s', expected type 'object'", bsonx.TypeName(e.Value))
			}
			srt, err := query.CompileSort(sd)
			if err != nil {
				return nil, err
			}
			s.sortSpec, s.sort = sd, srt
		case "output":
			od, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$setWindowFields.output' is the wrong type '%s', expected type 'object'", bsonx.TypeName(e.Value))
			}
			outD, hasOut = od, true
		default:
			return nil, mongoerr.New(40415, "BSON field '$setWindowFields.%s' is an unknown field.", e.Key)
		}
	}
	if !hasOut {
		return nil, mongoerr.New(40414, "BSON field '$setWindowFields.output' is missing but a required field")
	}
	for _, e := range outD {
		if err := validatePath("$setWindowFields", e.Key); err != nil {
			return nil, err
		}
		fd, ok := e.Value.(bson.D)
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "The field '%s' must be an object", e.Key)
		}
		o := windowOutput{field: strings.Split(e.Key, ".")}
		var opE *bson.E
		var winD bson.D
		for i := range fd {
			switch {
			case fd[i].Key == "window":
				w, ok := fd[i].Value.(bson.D)
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "'window' field must be an object")
				}
				winD = w
			case strings.HasPrefix(fd[i].Key, "$"):
				if opE != nil {
					return nil, mongoerr.New(mongoerr.FailedToParse, "Expected exactly one function in the window specification of '%s'", e.Key)
				}
				opE = &fd[i]
			default:
				return nil, mongoerr.New(mongoerr.FailedToParse, "'%s' is not a valid window field", fd[i].Key)
			}
		}
		if opE == nil {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Expected a window function in the specification of '%s'", e.Key)
		}
		o.op = opE.Key
		for _, w := range winD {
			switch w.Key {
			case "documents", "range":
				if o.kind != "" {
					return nil, mongoerr.New(mongoerr.FailedToParse, "Window bounds can only specify one of 'documents' or 'range'")
				}
				a, ok := w.Value.(bson.A)
				if !ok || len(a) != 2 {
					return nil, mongoerr.New(mongoerr.FailedToParse, "Window bounds must be a 2-element array: %s", expr.ExtJSON(w.Value))
				}
				o.kind = w.Key
				var err error
				if o.lo, err = parseBound(a[0], w.Key); err != nil {
					return nil, err
				}
				if o.hi, err = parseBound(a[1], w.Key); err != nil {
					return nil, err
				}
				if o.hi.unbounded && !o.lo.unbounded && o.lo.n == nil && !o.lo.current {
					return nil, mongoerr.New(mongoerr.FailedToParse, "Lower bound must not exceed upper bound")
				}
			case "unit":
				u, ok := w.Value.(string)
				if !ok {
					return nil, mongoerr.New(mongoerr.FailedToParse, "'unit' must be a string")
				}
				o.unit = u
			default:
				return nil, mongoerr.New(mongoerr.FailedToParse, "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field")
			}
		}
		if o.kind == "range" && s.sort == nil {
			return nil, mongoerr.New(5339902, "Range-based bounds require sortBy a single field")
		}
		switch o.op {
		case "$rank", "$denseRank", "$documentNumber":
			if od, ok := opE.Value.(bson.D); !ok || len(od) != 0 {
				return nil, mongoerr.New(5371601, "%s must be specified with '{}' as the value", o.op)
			}
			if s.sort == nil || (o.op != "$documentNumber" && len(s.sortSpec) != 1) {
				return nil, mongoerr.New(5371602, "%s must be specified with a top level sortBy expression with exactly one element", o.op)
			}
			if o.kind != "" {
				return nil, mongoerr.New(5371601, "Rank style window functions take no other arguments")
			}
		case "$shift":
			m, err := argsDoc("$shift", opE.Value, "output", "by", "default")
			if err != nil {
				return nil, err
			}
			if s.sort == nil {
				return nil, mongoerr.New(5313202, "'$shift' requires a sortBy")
			}
			by, ok := m["by"]
			n, isInt := bsonx.ToInt64(by)
			if !ok || !isInt || !bsonx.IsNumber(by) {
				return nil, mongoerr.New(mongoerr.FailedToParse, "'$shift' requires an integer for 'by'")
			}
			o.by = n
			if o.arg, err = compileExpr(m["output"], opts); err != nil {
				return nil, err
			}
			if dv, ok := m["default"]; ok {
				if o.def, err = compileExpr(dv, opts); err != nil {
					return nil, err
				}
			}
		case "$locf":
			if s.sort == nil {
				return nil, mongoerr.New(605001, "$locf requires a sortBy")
			}
			c, err := compileExpr(opE.Value, opts)
			if err != nil {
				return nil, err
			}
			o.arg = c
		default:
			acc, err := compileAccumulator(e.Key, o.op, opE.Value, opts)
			if err != nil {
				if mongoerr.Is(err, 15952) {
					return nil, mongoerr.New(mongoerr.NotImplemented, "window function %s is not supported by mayfly", o.op)
				}
				return nil, err
			}
			o.acc = acc
		}
		s.outputs = append(s.outputs, o)
	}
	return s, nil
}

type windowDoc struct {
	doc  bson.D
	part any
	keys []any
	seq  int
}

func (s *windowStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	// As mongod, which puts a $sort on partitionBy and sortBy before the
	// window stage: the input is ordered by (partition, sort keys) with
	// $sort's external sorter, spilling when allowDiskUse permits (else
	// 292), and partitions are then processed one at a time. A partition
	// itself is held in memory and must stay under the limit, with
	// allowDiskUse too: 5414201 with mongod 7.0's message
	// (document_source_set_window_fields.cpp).
	limit := rc.opts.MemoryLimit
	srt := &sorter{
		cmp: func(a, b []any) int {
			if c := bsonx.Compare(a[0], b[0]); c != 0 {
				return c
			}
			if s.sort != nil {
				return s.sort.CompareKeys(a[1:], b[1:])
			}
			return 0
		},
		limit:    limit,
		disk:     rc.opts.AllowDiskUse,
		dir:      rc.opts.TempDir,
		memError: sortMemError,
	}
	if s.sort == nil && s.partition == nil {
		// one partition, no sort: nothing to spill
		srt.disk = false
		srt.memError = func(int64) error { return windowMemError(limit+1, limit) }
	}
	var sorted Iterator
	var pending bson.D // first document of the next partition
	var pendingPart any
	var buf []bson.D
	started, done := false, false
	readPart := func(ctx context.Context) error {
		var part []windowDoc
		var mem int64
		add := func(d bson.D, p any) error {
			wd := windowDoc{doc: d, part: p, seq: len(part)}
			if s.sort != nil {
				wd.keys = s.sort.Keys(d)
			}
			part = append(part, wd)
			mem += query.DocSize(d)
			if mem > limit {
				return windowMemError(mem, limit)
			}
			return nil
		}
		if pending != nil {
			if err := add(pending, pendingPart); err != nil {
				return err
			}
			pending = nil
		}
		for {
			r, ok, err := sorted.Next(ctx)
			if err != nil {
				return err
			}
			if !ok {
				done = true
				break
			}
			k, _ := bsonx.Get(r, "p")
			dv, _ := bsonx.Get(r, "d")
			d, _ := dv.(bson.D)
			if len(part) > 0 && bsonx.Compare(k, part[0].part) != 0 {
				pending, pendingPart = d, k
				break
			}
			if err := add(d, k); err != nil {
				return err
			}
		}
		if len(part) == 0 {
			return nil
		}
		res, err := s.partitionOutputs(rc, part)
		if err != nil {
			return err
		}
		buf = res
		return nil
	}
	return &funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			if !started {
				started = true
				for {
					d, ok, err := in.Next(ctx)
					if err != nil {
						return nil, false, err
					}
					if !ok {
						break
					}
					var p any
					if s.partition != nil {
						if p, err = s.partition.Eval(rc.exprEnv(d)); err != nil {
							return nil, false, err
						}
						if bsonx.IsMissing(p) {
							p = nil
						}
					}
					key := []any{p}
					if s.sort != nil {
						key = append(key, s.sort.Keys(d)...)
					}
					if err := srt.add(key, bson.D{{Key: "p", Value: p}, {Key: "d", Value: d}}); err != nil {
						return nil, false, err
					}
				}
				in.Close()
				var err error
				if sorted, err = srt.finish(); err != nil {
					return nil, false, err
				}
			}
			for len(buf) == 0 {
				if done && pending == nil {
					return nil, false, nil
				}
				if err := readPart(ctx); err != nil {
					return nil, false, err
				}
			}
			d := buf[0]
			buf[0] = nil
			buf = buf[1:]
			return d, true, nil
		},
		close: func() {
			in.Close()
			if sorted != nil {
				sorted.Close()
			}
			srt.cleanup()
		},
	}, nil
}

func windowMemError(used, limit int64) error {
	return mongoerr.New(5414201, "Exceeded memory limit in DocumentSourceSetWindowFields, used %d bytes but max allowed is %d", used, limit)
}

// windowRange returns the [lo, hi) document indexes of i's window.
func (s *windowStage) windowRange(o *windowOutput, part []windowDoc, i int) (int, int, error) {
	n := len(part)
	switch o.kind {
	case "":
		return 0, n, nil
	case "documents":
		lo, hi := 0, n
		if o.lo.current {
			lo = i
		} else if !o.lo.unbounded {
			lo = i + int(o.lo.n.(int64))
		}
		if o.hi.current {
			hi = i + 1
		} else if !o.hi.unbounded {
			hi = i + int(o.hi.n.(int64)) + 1
		}
		return max(lo, 0), min(hi, n), nil
	}
	// range: compare the first sort key against bounds relative to i's
	cur := part[i].keys[0]
	bound := func(b windowBound) (any, error) {
		if b.current {
			return cur, nil
		}
		if o.unit != "" {
			dt, ok := cur.(bson.DateTime)
			if !ok {
				return nil, mongoerr.New(5429513, "Invalid range: Expected the sortBy field to be a Date, but it was %s", bsonx.TypeName(cur))
			}
			amt, _ := bsonx.ToInt64(b.n)
			v, err := expr.Compile(bson.D{{Key: "$dateAdd", Value: bson.D{{Key: "startDate", Value: dt}, {Key: "unit", Value: o.unit}, {Key: "amount", Value: amt}}}})
			if err != nil {
				return nil, err
			}
			return v.Eval(&expr.Env{})
		}
		if !bsonx.IsNumber(cur) {
			return nil, mongoerr.New(5429414, "Invalid range: Expected the sortBy field to be a number, but it was %s", bsonx.TypeName(cur))
		}
		return expr.Add(cur, b.n), nil
	}
	lo, hi := 0, n
	if !o.lo.unbounded {
		lv, err := bound(o.lo)
		if err != nil {
			return 0, 0, err
		}
		for lo < n && bsonx.Compare(part[lo].keys[0], lv) < 0 {
			lo++
		}
	}
	if !o.hi.unbounded {
		hv, err := bound(o.hi)
		if err != nil {
			return 0, 0, err
		}
		hi = lo
		for hi < n && bsonx.Compare(part[hi].keys[0], hv) <= 0 {
			hi++
		}
	}
	return lo, hi, nil
}

func (s *windowStage) partitionOutputs(rc *runCtx, part []windowDoc) ([]bson.D, error) {
	results := make([]bson.D, len(part))
	for i := range part {
		results[i] = part[i].doc
	}
	for oi := range s.outputs {
		o := &s.outputs[oi]
		vals := make([]any, len(part))
		switch o.op {
		case "$documentNumber", "$rank", "$denseRank":
			rank, dense := 1, 1
			for i := range part {
				if i > 0 && s.sort.CompareKeys(part[i-1].keys, part[i].keys) != 0 {
					rank = i + 1
					dense++
				}
				switch o.op {
				case "$documentNumber":
					vals[i] = int32(i + 1)
				case "$rank":
					vals[i] = int32(rank)
				default:
					vals[i] = int32(dense)
				}
			}
		case "$shift":
			for i := range part {
				j := i + int(o.by)
				var v any
				var err error
				if j >= 0 && j < len(part) {
					v, err = o.arg.Eval(rc.exprEnv(part[j].doc))
				} else if o.def != nil {
					v, err = o.def.Eval(rc.exprEnv(part[i].doc))
				}
				if err != nil {
					return nil, err
				}
				if bsonx.IsMissing(v) {
					v = nil
				}
				vals[i] = v
			}
		case "$locf":
			var last any
			for i := range part {
				v, err := o.arg.Eval(rc.exprEnv(part[i].doc))
				if err != nil {
					return nil, err
				}
				if !expr.IsNullish(v) {
					last = v
				}
				vals[i] = last
			}
		default:
			for i := range part {
				lo, hi, err := s.windowRange(o, part, i)
				if err != nil {
					return nil, err
				}
				acc, err := o.acc.make(rc.exprEnv(part[i].doc))
				if err != nil {
					return nil, err
				}
				for j := lo; j < hi; j++ {
					if err := acc.add(rc.exprEnv(part[j].doc)); err != nil {
						return nil, err
					}
				}
				v := acc.result()
				if bsonx.IsMissing(v) {
					v = nil
				}
				vals[i] = v
			}
		}
		for i := range part {
			results[i] = setPath(results[i], o.field, vals[i], false)
		}
	}
	return results, nil
}
