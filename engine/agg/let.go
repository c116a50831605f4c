package agg

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// EvalLet evaluates a command's `let` document as Parse does for
// aggregate: names are checked as user variable names (16866-16868), each
// value is an expression evaluated once against an empty document, and a
// value may refer to the variables defined before it. Unlike aggregate's,
// these values may not read the document (4890500). The result maps each
// name to its value.
func EvalLet(let bson.D, now time.Time) (map[string]any, error) {
	vars, names, err := evalLet(let, now, true)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(names))
	for _, n := range names {
		out[n] = vars[n]
	}
	return out, nil
}

// evalLet evaluates let in order into a variable map that also holds NOW,
// and returns the names it defined.
func evalLet(let bson.D, now time.Time, noDocReads bool) (map[string]any, []string, error) {
	vars := map[string]any{"NOW": bson.NewDateTimeFromTime(now)}
	var names []string
	for _, e := range let {
		if err := checkVarName(e.Key); err != nil {
			return nil, nil, err
		}
		if noDocReads && readsDocument(e.Value) {
			return nil, nil, mongoerr.New(4890500, "Command let Expression tried to access a field, but this is not allowed because command let expressions run before the query examines any documents.")
		}
		c, err := expr.CompileWith(e.Value, expr.Options{Vars: append([]string{}, names...)})
		if err != nil {
			return nil, nil, err
		}
		v, err := c.Eval(&expr.Env{Root: bson.D{}, Vars: vars})
		if err != nil {
			return nil, nil, err
		}
		if bsonx.IsMissing(v) {
			v = nil
		}
		vars[e.Key] = v
		names = append(names, e.Key)
	}
	return vars, names, nil
}

// readsDocument reports whether an expression refers to the current
// document ("$field", $$CURRENT, $$ROOT), outside $literal.
func readsDocument(v any) bool {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$$") {
			name, _, _ := strings.Cut(x[2:], ".")
			return name == "CURRENT" || name == "ROOT"
		}
		return strings.HasPrefix(x, "$")
	case bson.D:
		for _, e := range x {
			if e.Key == "$literal" {
				continue
			}
			if readsDocument(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if readsDocument(e) {
				return true
			}
		}
	}
	return false
}
