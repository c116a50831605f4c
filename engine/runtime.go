package engine

import (
	"errors"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// newExprRuntime makes the expression runtime of an operation: its
// interrupt check is the request's (maxTimeMS → 50 MaxTimeMSExpired, a
// cancelled request context → Interrupted, which is how a killed operation
// stops), and its expression memory limits are the server parameters.
func (e *Engine) newExprRuntime(r *Request) *expr.Runtime {
	var check func() error
	if r != nil {
		check = r.CheckDeadline
	}
	rt := expr.NewRuntime(check)
	rt.MaxRangeBytes = e.params.exprLimit(&e.params.rangeMem)
	rt.MaxPushBytes = e.params.exprLimit(&e.params.pushMem)
	rt.MaxAddToSetBytes = e.params.exprLimit(&e.params.addToSetMem)
	return rt
}

// Runtime gives the pipeline's expressions the operation's runtime
// (agg.RuntimeEnv).
func (a *aggEnv) Runtime() *expr.Runtime { return a.rt }

// bindRequest points the pipeline's interrupt check at the request now
// pulling from the cursor: a getMore runs under its own deadline.
func (s *aggSource) bindRequest(r *Request) {
	if s.rt != nil {
		s.rt.SetCheck(r.CheckDeadline)
	}
}

// bindSourceRequest tells a cursor's source which request is filling the
// next batch.
func bindSourceRequest(src docSource, r *Request) {
	for src != nil {
		switch s := src.(type) {
		case *pushback:
			src = s.docSource
			continue
		case interface{ bindRequest(*Request) }:
			s.bindRequest(r)
		}
		return
	}
}

// isInterrupt reports whether err is an operation being stopped
// (MaxTimeMSExpired or Interrupted) rather than a failure of its own.
func isInterrupt(err error) bool {
	var me *mongoerr.Error
	if errors.As(err, &me) {
		return me.Code == mongoerr.MaxTimeMSExpired || me.Code == mongoerr.Interrupted
	}
	return false
}
