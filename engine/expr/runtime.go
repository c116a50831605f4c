package expr

import (
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Runtime is what one running operation shares with the expressions it
// evaluates: the interrupt check (maxTimeMS, a killed operation or a closed
// connection) and the operation's memory limits. Env.RT carries it; an Env
// without one (nil) evaluates with the defaults and is never interrupted.
//
// Expression loops that can run long ($reduce, $map, $filter, $zip,
// $range, array and string operators, accumulators) report their work with
// Poll, which calls the check once every pollWork units, so a runaway
// expression stops within a few milliseconds of its deadline at a cost of
// an atomic add per unit of work.
type Runtime struct {
	check atomic.Pointer[func() error]
	work  atomic.Int64

	// Limits, in bytes (0: mongod's default, 100 MB each). Their names
	// are mongod's server parameters (query_knobs.idl).
	MaxRangeBytes    int64 // internalQueryMaxRangeBytes ($range)
	MaxPushBytes     int64 // internalQueryMaxPushBytes ($push accumulator)
	MaxAddToSetBytes int64 // internalQueryMaxAddToSetBytes ($addToSet accumulator)
}

// DefaultExprMemoryLimit is mongod's default for internalQueryMaxRangeBytes,
// internalQueryMaxPushBytes and internalQueryMaxAddToSetBytes.
const DefaultExprMemoryLimit int64 = 100 * 1024 * 1024

// MaxStringBytes bounds every string an expression builds: mongod's
// RCString::create refuses a string whose allocation (a 16-byte header, the
// bytes and a NUL) reaches BSONObjMaxUserSize (16 MB) with 16493 "Tried to
// create string longer than 16MB".
const MaxStringBytes = 16*1024*1024 - 17

// pollWork is how much work passes between two interrupt checks.
const pollWork = 1 << 14

// NewRuntime makes a runtime whose interrupt check is check (nil: none).
func NewRuntime(check func() error) *Runtime {
	rt := &Runtime{}
	rt.SetCheck(check)
	return rt
}

// SetCheck replaces the interrupt check: a cursor's getMore runs under its
// own request, with its own deadline.
func (rt *Runtime) SetCheck(check func() error) {
	if check == nil {
		rt.check.Store(nil)
		return
	}
	rt.check.Store(&check)
}

// Check runs the interrupt check now.
func (rt *Runtime) Check() error {
	if rt == nil {
		return nil
	}
	if f := rt.check.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// Poll records work units of evaluation and runs the interrupt check once
// every pollWork units.
func (rt *Runtime) Poll(work int) error {
	if rt == nil {
		return nil
	}
	if work < 1 {
		work = 1
	}
	if rt.work.Add(int64(work)) < pollWork {
		return nil
	}
	rt.work.Store(0)
	return rt.Check()
}

func limitOr(v int64) int64 {
	if v > 0 {
		return v
	}
	return DefaultExprMemoryLimit
}

// RangeLimit, PushLimit and AddToSetLimit are the effective limits.
func (rt *Runtime) RangeLimit() int64 {
	if rt == nil {
		return DefaultExprMemoryLimit
	}
	return limitOr(rt.MaxRangeBytes)
}

func (rt *Runtime) PushLimit() int64 {
	if rt == nil {
		return DefaultExprMemoryLimit
	}
	return limitOr(rt.MaxPushBytes)
}

func (rt *Runtime) AddToSetLimit() int64 {
	if rt == nil {
		return DefaultExprMemoryLimit
	}
	return limitOr(rt.MaxAddToSetBytes)
}

// poll is Env's shorthand for RT.Poll.
func (e *Env) poll(work int) error {
	if e == nil {
		return nil
	}
	return e.RT.Poll(work)
}

// Poll lets code outside the package (accumulators, stages) report work.
func (e *Env) Poll(work int) error { return e.poll(work) }

// StringTooLong is mongod's 16493 for a string over MaxStringBytes.
func StringTooLong() error {
	return mongoerr.New(16493, "Tried to create string longer than 16MB")
}

// valueWork is the work an operator does on its evaluated arguments: the
// elements of array arguments and the bytes (/64) of string arguments.
func valueWork(vals []any) int {
	w := 1
	for _, v := range vals {
		switch x := v.(type) {
		case bson.A:
			w += len(x)
		case string:
			w += len(x) / 64
		}
	}
	return w
}

// checkResult applies the size rules every expression result obeys: no
// string over MaxStringBytes (16493).
func checkResult(v any) error {
	if s, ok := v.(string); ok && len(s) > MaxStringBytes {
		return StringTooLong()
	}
	return nil
}
