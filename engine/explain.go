package engine

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/agg"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func init() {
	Register(&Command{Name: "explain", Help: "explain how a command would run", Run: cmdExplain})
}

// cmdExplain explains find, count, distinct, aggregate, update, delete and
// findAndModify at queryPlanner, executionStats or allPlansExecution
// verbosity, in mongod's shape. Writes are planned and their matching part
// executed, but nothing is written.
func cmdExplain(e *Engine, r *Request) (bson.D, error) {
	inner, ok := r.Cmd[0].Value.(bson.D)
	if !ok || len(inner) == 0 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "explain command requires a nested object")
	}
	verbosity := "allPlansExecution"
	if v, ok := r.Arg("verbosity"); ok {
		s, isStr := v.(string)
		if !isStr || (s != "queryPlanner" && s != "executionStats" && s != "allPlansExecution") {
			return nil, mongoerr.New(mongoerr.FailedToParse, "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}")
		}
		verbosity = s
	}
	ir := &Request{Ctx: r.Ctx, Conn: r.Conn, DB: r.DB, Name: inner[0].Key, Cmd: append(bson.D(nil), inner...), Deadline: r.Deadline}
	if _, has := bsonx.Get(ir.Cmd, "$db"); !has {
		ir.Cmd = append(ir.Cmd, bson.E{Key: "$db", Value: r.DB})
	}
	coll, err := collName(ir)
	if err != nil && ir.Name != "aggregate" {
		return nil, err
	}
	exec := verbosity != "queryPlanner"
	var q *querySpec
	wrap := ""
	switch LookupCommand(ir.Name) {
	case LookupCommand("find"):
		if err := checkFields(ir, findFields); err != nil {
			return nil, err
		}
		if q, err = parseFind(ir); err != nil {
			return nil, err
		}
		if q.limit < 0 {
			q.limit = -q.limit
		}
	case LookupCommand("count"):
		q = &querySpec{}
		if q.filter, err = docArg(ir, "query"); err != nil {
			return nil, err
		}
		q.skip, _, _ = intArg(ir, "skip")
		q.limit, _, _ = intArg(ir, "limit")
		wrap = "COUNT"
	case LookupCommand("distinct"):
		q = &querySpec{}
		if q.filter, err = docArg(ir, "query"); err != nil {
			return nil, err
		}
		wrap = "PROJECTION_COVERED"
	case LookupCommand("aggregate"):
		ir.Cmd = append(ir.Cmd, bson.E{Key: "explain", Value: true})
		out, err := cmdAggregate(e, ir)
		if err != nil {
			return nil, err
		}
		return out, nil
	case LookupCommand("update"):
		stmts, err := arrayArg(ir, "updates")
		if err != nil || len(stmts) == 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "explain of update needs one update statement")
		}
		st, _ := stmts[0].(bson.D)
		f, _ := bsonx.Get(st, "q")
		fd, _ := f.(bson.D)
		q = &querySpec{filter: fd}
		if !stmtBool(st, "multi") {
			q.limit = 1
		}
		wrap = "UPDATE"
	case LookupCommand("delete"):
		stmts, err := arrayArg(ir, "deletes")
		if err != nil || len(stmts) == 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "explain of delete needs one delete statement")
		}
		st, _ := stmts[0].(bson.D)
		f, _ := bsonx.Get(st, "q")
		fd, _ := f.(bson.D)
		q = &querySpec{filter: fd}
		if l, _ := bsonx.Get(st, "limit"); l != nil {
			if n, _ := bsonx.ToInt64(l); n == 1 {
				q.limit = 1
			}
		}
		wrap = "DELETE"
	case LookupCommand("findAndModify"):
		q = &querySpec{limit: 1}
		q.filter, _ = docArg(ir, "query")
		q.sort, _ = docArg(ir, "sort")
		wrap = "UPDATE"
		if boolArg(ir, "remove") {
			wrap = "DELETE"
		}
	default:
		return nil, mongoerr.New(mongoerr.CommandNotFound, "Explain failed due to unknown command: %s", ir.Name)
	}
	if h, ok := ir.Arg("hint"); ok && q.hint == nil {
		if d, isDoc := h.(bson.D); !isDoc || len(d) > 0 {
			q.hint = h
		}
	}
	ns := r.DB + "." + coll
	c := e.cat.Get(r.DB, coll)
	var winning bson.D
	var execStats bson.D
	if c == nil {
		if err := validateQuery(q); err != nil {
			return nil, err
		}
		winning = bson.D{{Key: "stage", Value: "EOF"}}
		execStats = bson.D{{Key: "executionSuccess", Value: true}, {Key: "nReturned", Value: int32(0)}, {Key: "executionTimeMillis", Value: int32(0)},
			{Key: "totalKeysExamined", Value: int32(0)}, {Key: "totalDocsExamined", Value: int32(0)}, {Key: "executionStages", Value: winning}}
	} else {
		cq, err := c.compileQuery(ir, q)
		if err != nil {
			return nil, err
		}
		winning = cq.planTree(wrap)
		if exec {
			start := time.Now()
			if err := cq.drain(ir); err != nil {
				return nil, err
			}
			execStats = cq.execStats(time.Since(start), wrap)
		}
	}
	parsed := q.filter
	if parsed == nil {
		parsed = bson.D{}
	}
	out := bson.D{
		{Key: "explainVersion", Value: "1"},
		{Key: "queryPlanner", Value: bson.D{
			{Key: "namespace", Value: ns}, {Key: "indexFilterSet", Value: false}, {Key: "parsedQuery", Value: parsed},
			{Key: "maxIndexedOrSolutionsReached", Value: false}, {Key: "maxIndexedAndSolutionsReached", Value: false},
			{Key: "maxScansToExplodeReached", Value: false}, {Key: "winningPlan", Value: winning}, {Key: "rejectedPlans", Value: bson.A{}},
		}},
	}
	if exec {
		if verbosity == "allPlansExecution" {
			execStats = append(execStats, bson.E{Key: "allPlansExecution", Value: bson.A{}})
		}
		out = append(out, bson.E{Key: "executionStats", Value: execStats})
	}
	out = append(out, bson.E{Key: "command", Value: inner}, bson.E{Key: "serverInfo", Value: e.serverInfoDoc()})
	return out, nil
}

func (e *Engine) serverInfoDoc() bson.D {
	return bson.D{{Key: "host", Value: hostName(e)}, {Key: "port", Value: int32(e.info.Port)},
		{Key: "version", Value: Version}, {Key: "gitVersion", Value: gitVersion()}}
}

// planTree renders the plan as mongod's winningPlan stages, outermost first.
func (cq *compiledQuery) planTree(wrap string) bson.D {
	leaf := cq.plan.tree(cq.c)
	if cq.srt != nil && !cq.plan.sorted {
		st := bson.D{{Key: "stage", Value: "SORT"}, {Key: "sortPattern", Value: cq.spec.sort}, {Key: "memLimit", Value: cq.c.e.params.sortMemLimit()},
			{Key: "type", Value: "simple"}}
		if cq.spec.limit > 0 {
			st = append(st, bson.E{Key: "limitAmount", Value: cq.spec.limit + cq.spec.skip})
		}
		leaf = append(st, bson.E{Key: "inputStage", Value: leaf})
	}
	if cq.spec.skip > 0 {
		leaf = bson.D{{Key: "stage", Value: "SKIP"}, {Key: "skipAmount", Value: cq.spec.skip}, {Key: "inputStage", Value: leaf}}
	}
	if cq.spec.limit > 0 && wrap == "" {
		leaf = bson.D{{Key: "stage", Value: "LIMIT"}, {Key: "limitAmount", Value: cq.spec.limit}, {Key: "inputStage", Value: leaf}}
	}
	if cq.proj != nil {
		leaf = bson.D{{Key: "stage", Value: "PROJECTION_DEFAULT"}, {Key: "transformBy", Value: cq.spec.projection}, {Key: "inputStage", Value: leaf}}
	}
	if wrap != "" {
		leaf = bson.D{{Key: "stage", Value: wrap}, {Key: "inputStage", Value: leaf}}
	}
	return leaf
}

func (p *plan) tree(c *Collection) bson.D {
	switch p.kind {
	case planCollScan:
		dir := "forward"
		if p.reverse {
			dir = "backward"
		}
		return bson.D{{Key: "stage", Value: "COLLSCAN"}, {Key: "direction", Value: dir}}
	case planIDScan:
		return bson.D{{Key: "stage", Value: "IDHACK"}, {Key: "indexName", Value: "_id_"}, {Key: "keyPattern", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "indexBounds", Value: p.explainBounds()}}
	case planEOF:
		return bson.D{{Key: "stage", Value: "EOF"}}
	case planOr:
		var in bson.A
		for _, s := range p.subs {
			in = append(in, s.tree(c))
		}
		return bson.D{{Key: "stage", Value: "FETCH"}, {Key: "inputStage", Value: bson.D{{Key: "stage", Value: "OR"}, {Key: "inputStages", Value: in}}}}
	}
	dir := "forward"
	if p.reverse {
		dir = "backward"
	}
	ix := bson.D{{Key: "stage", Value: "IXSCAN"}, {Key: "keyPattern", Value: p.ix.Key}, {Key: "indexName", Value: p.ix.Name},
		{Key: "isMultiKey", Value: p.ix.Multikey}, {Key: "isUnique", Value: p.ix.Unique}, {Key: "isSparse", Value: p.ix.Sparse},
		{Key: "isPartial", Value: len(p.ix.Partial) > 0}, {Key: "indexVersion", Value: int32(2)}, {Key: "direction", Value: dir},
		{Key: "indexBounds", Value: p.explainBounds()}}
	return bson.D{{Key: "stage", Value: "FETCH"}, {Key: "inputStage", Value: ix}}
}

// drain runs the query to the end, counting its work.
func (cq *compiledQuery) drain(r *Request) error {
	src, err := cq.open()
	if err != nil {
		return err
	}
	defer src.close()
	var n int64
	for {
		if cq.spec.limit > 0 && n >= cq.spec.limit {
			return nil
		}
		d, err := src.next()
		if err != nil || d == nil {
			return err
		}
		n++
		if n%1024 == 0 {
			if err := r.CheckDeadline(); err != nil {
				return err
			}
		}
	}
}

func (cq *compiledQuery) execStats(took time.Duration, wrap string) bson.D {
	st := cq.stats
	stages := cq.planTree(wrap)
	stages = annotate(stages, st)
	return bson.D{
		{Key: "executionSuccess", Value: true}, {Key: "nReturned", Value: st.nReturned},
		{Key: "executionTimeMillis", Value: took.Milliseconds()}, {Key: "totalKeysExamined", Value: st.keysExamined},
		{Key: "totalDocsExamined", Value: st.docsExamined}, {Key: "executionStages", Value: stages},
	}
}

// annotate adds counters to the stage tree (the leaf gets the scan's).
func annotate(stage bson.D, st scanStats) bson.D {
	out := append(bson.D(nil), stage...)
	out = append(out, bson.E{Key: "nReturned", Value: st.nReturned})
	name, _ := bsonx.Get(stage, "stage")
	switch name {
	case "IXSCAN", "IDHACK":
		out = append(out, bson.E{Key: "keysExamined", Value: st.keysExamined})
	case "COLLSCAN", "FETCH":
		out = append(out, bson.E{Key: "docsExamined", Value: st.docsExamined})
	}
	for i, f := range out {
		if f.Key == "inputStage" {
			if d, ok := f.Value.(bson.D); ok {
				out[i].Value = annotate(d, st)
			}
		}
	}
	return out
}

// explainAggregate renders mongod's aggregate explain: a $cursor stage
// holding the pushed-down query's plan, then the remaining stages.
func (e *Engine) explainAggregate(r *Request, ns string, pipeline bson.A, cq *compiledQuery, rest *agg.Pipeline) (bson.D, error) {
	cursorStage := bson.D{}
	qp := bson.D{{Key: "namespace", Value: ns}, {Key: "indexFilterSet", Value: false}}
	if cq != nil {
		parsed := cq.spec.filter
		if parsed == nil {
			parsed = bson.D{}
		}
		qp = append(qp, bson.E{Key: "parsedQuery", Value: parsed}, bson.E{Key: "winningPlan", Value: cq.planTree("")}, bson.E{Key: "rejectedPlans", Value: bson.A{}})
	} else {
		qp = append(qp, bson.E{Key: "winningPlan", Value: bson.D{{Key: "stage", Value: "EOF"}}}, bson.E{Key: "rejectedPlans", Value: bson.A{}})
	}
	cursorStage = append(cursorStage, bson.E{Key: "queryPlanner", Value: qp})
	stages := bson.A{bson.D{{Key: "$cursor", Value: cursorStage}}}
	n := rest.Len()
	if n <= len(pipeline) {
		for _, s := range pipeline[len(pipeline)-n:] {
			stages = append(stages, s)
		}
	}
	return bson.D{{Key: "explainVersion", Value: "1"}, {Key: "stages", Value: stages}, {Key: "serverInfo", Value: e.serverInfoDoc()}}, nil
}
