// Package expr compiles and evaluates MongoDB aggregation expressions.
package expr

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Expr is a compiled aggregation expression.
type Expr interface {
	Eval(env *Env) (any, error)
}

// Env is what an expression is evaluated against: $$ROOT/$$CURRENT and the
// user and system variables.
type Env struct {
	Root bson.D
	Vars map[string]any
}

// Compile parses an expression value (a literal, a "$field" path, an
// operator document {$op: args}, or a document/array of expressions).
// PLACEHOLDER: replaced by the aggregation work.
func Compile(v any) (Expr, error) {
	return nil, mongoerr.New(mongoerr.NotImplemented, "aggregation expressions are not implemented yet")
}

// Truthy is MongoDB's expression truthiness: false, null, missing, undefined
// and numeric zero are false; everything else is true.
func Truthy(v any) bool {
	return v != nil && v != false
}
