package engine

import (
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"

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

// maxUserDocBytes is mongod's BSONObjMaxInternalSize (16 MB + 16 KB), the
// largest document a reply may carry.
const maxUserDocBytes = 16*1024*1024 + 16*1024

// checkOutputDoc refuses a pipeline result over the BSON size limit as
// mongod does when it serializes it (BSONObj::_assertInvalid, 10334
// BSONObjectTooLarge), instead of sending it.
func checkOutputDoc(b bson.Raw, d bson.D) error {
	if len(b) <= maxUserDocBytes {
		return nil
	}
	first := ""
	if len(d) > 0 {
		v := expr.ExtJSON(d[0].Value)
		if len(v) > 80 {
			v = v[:80] + "..."
		}
		first = d[0].Key + ": " + v
	}
	return mongoerr.New(mongoerr.BSONObjectTooLarge, "BSONObj size: %d (0x%X) is invalid. Size must be between 0 and 16793600(16MB) First element: %s", len(b), len(b), first)
}
