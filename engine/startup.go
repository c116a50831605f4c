package engine

import (
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// SetParameterAtStartup applies one setParameter given at startup (the
// configuration file's setParameter section) as mongod's
// server_options_helpers: the value is the option's text, read as the
// parameter's type. Errors carry mongod's wording: an unknown name is
// `Illegal --setParameter parameter: "x"`, one mayfly cannot change is
// `Cannot use --setParameter to set "x" at startup`, a value that does not
// parse or is refused is `Bad value for parameter "x": …`.
func (e *Engine) SetParameterAtStartup(name, value string) error {
	if name == "localLogicalSessionTimeoutMinutes" {
		// Startup only (mongod: not settable at runtime); sessions.go.
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return fmt.Errorf("Bad value for parameter %q: Failed to parse number from %q", name, value)
		}
		if n < 1 {
			return fmt.Errorf("Bad value for parameter %q: Invalid value for parameter %s: %d is not greater than or equal to 1", name, name, n)
		}
		if e.sessions != nil {
			e.sessions.SetTimeout(time.Duration(n) * time.Minute)
		}
		return nil
	}
	settable := e.runtimeParams()
	cur, ok := bsonx.Get(settable, name)
	if !ok {
		if _, fixed := bsonx.Get(serverParameters(nil), name); fixed {
			return fmt.Errorf("Cannot use --setParameter to set %q at startup", name)
		}
		return fmt.Errorf("Illegal --setParameter parameter: %q", name)
	}
	var v any
	switch cur.(type) {
	case bson.D:
		// logComponentVerbosity: a JSON object, as mongod reads it
		// ("{verbosity: 1, query: {verbosity: 2}}" in relaxed JSON).
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(value), false, &d); err != nil {
			return fmt.Errorf("Bad value for parameter %q: %v", name, err)
		}
		v = d
	case bool:
		// mongod's IDL bool parameters read "true"/"false"/"1"/"0" from text.
		switch value {
		case "true", "1":
			v = true
		case "false", "0":
			v = false
		default:
			return fmt.Errorf("Bad value for parameter %q: Failed to parse bool from %q", name, value)
		}
	default:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("Bad value for parameter %q: Failed to parse number from %q", name, value)
		}
		v = n
	}
	if err := e.setParam(name, v); err != nil {
		return fmt.Errorf("Bad value for parameter %q: %s", name, mongoerr.From(err).Msg)
	}
	return nil
}

// CheckParameterAtStartup reports what SetParameterAtStartup would say,
// without an engine: the command line is checked before the store opens,
// so that a bad parameter fails fast with the bad-options exit code.
func CheckParameterAtStartup(name, value string) error {
	var scratch Engine // setParam and runtimeParams only touch params
	return scratch.SetParameterAtStartup(name, value)
}

// SetDefaultProfile sets, at startup, what mongod's operationProfiling
// options set: the profiling level of every database that has not been
// given one by the profile command (serverGlobalParams.defaultProfile),
// slowms and sampleRate. A negative slowMS or sampleRate keeps the default.
func (e *Engine) SetDefaultProfile(level int32, slowMS int32, sampleRate float64) error {
	if level < 0 || level > 2 {
		return fmt.Errorf("profiling level must be 0, 1 or 2, got %d", level)
	}
	if sampleRate > 1 {
		return fmt.Errorf("'sampleRate' must be between 0.0 and 1.0 inclusive")
	}
	p := e.prof
	p.mu.Lock()
	defer p.mu.Unlock()
	if level > 0 && p.defaultLevel == 0 {
		// Every database without a setting is profiled: the fast path in
		// profileOp must never see zero active databases.
		p.active.Add(1)
	} else if level == 0 && p.defaultLevel > 0 {
		p.active.Add(-1)
	}
	p.defaultLevel = level
	if slowMS >= 0 {
		p.slowMS = slowMS
	}
	if sampleRate >= 0 {
		p.sampleRate = sampleRate
	}
	return nil
}

// openRetryStore sets up the durable retryable-write store and loads the
// records persisted before the restart (retry.go), so that a retry after a
// restart answers from them.
func (e *Engine) openRetryStore() error {
	k := newKVRetryStore(e.kv, e.clock.Now, e.sessions.Timeout)
	n, err := k.load()
	if err != nil {
		return err
	}
	if n > 0 {
		e.log.Info("loaded retryable-write records", zap.Int("records", n), zap.Int("sessions", len(k.m)))
	}
	e.retry = k
	// Transactions that committed before the restart answer a retried
	// commitTransaction as committed (transactions.go's committed phase).
	for id, number := range k.committedTxns {
		st := e.txns.session(string(id[:]))
		st.number, st.phase, st.lastUse = number, txnCommitted, e.clock.Now()
	}
	k.committedTxns = nil
	return nil
}

// sweepRetryRecords drops the retryable-write records of expired sessions
// (cursorLoop, once a minute).
func (e *Engine) sweepRetryRecords() {
	k, ok := e.retry.(*kvRetryStore)
	if !ok {
		return
	}
	n, err := k.sweep(e.sessions.Timeout(), func(id bson.Binary) bool { return e.sessions.Get(id) != nil })
	if err != nil {
		e.log.Error("cannot drop the retryable-write records of expired sessions", zap.Error(err))
	} else if n > 0 {
		e.log.Debug("dropped the retryable-write records of expired sessions", zap.Int("sessions", n))
	}
}
