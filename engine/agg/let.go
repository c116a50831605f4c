package agg

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
)

// EvalLet evaluates a command's `let` document as Parse does for
// aggregate: names are checked as user variable names (16866-16868), each
// value is an expression evaluated once against an empty document, and a
// value may refer to the variables defined before it. The result maps each
// name to its value.
func EvalLet(let bson.D, now time.Time) (map[string]any, error) {
	vars := map[string]any{"NOW": bson.NewDateTimeFromTime(now)}
	out := map[string]any{}
	var names []string
	for _, e := range let {
		if err := checkVarName(e.Key); err != nil {
			return nil, err
		}
		c, err := expr.CompileWith(e.Value, expr.Options{Vars: append([]string{}, names...)})
		if err != nil {
			return nil, err
		}
		v, err := c.Eval(&expr.Env{Root: bson.D{}, Vars: vars})
		if err != nil {
			return nil, err
		}
		if bsonx.IsMissing(v) {
			v = nil
		}
		vars[e.Key] = v
		out[e.Key] = v
		names = append(names, e.Key)
	}
	return out, nil
}
