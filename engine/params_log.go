package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mlog"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// verbosity is the engine's log verbosity; an engine built without Open
// (CheckParameterAtStartup's scratch engine) gets a fresh one.
func (e *Engine) verbosity() *mlog.Verbosity {
	if e.verb == nil {
		e.verb = mlog.NewVerbosity(0)
	}
	return e.verb
}

// logComponentVerbosity renders the verbosity as mongod's getParameter
// does: {verbosity: <global>, <component>: {verbosity: <level or -1>}, …}.
func (e *Engine) logComponentVerbosity() bson.D {
	v := e.verbosity()
	d := bson.D{{Key: "verbosity", Value: int32(v.Level())}}
	for _, c := range mlog.Components {
		l, _ := v.ComponentLevel(c.Param)
		d = append(d, bson.E{Key: c.Param, Value: bson.D{{Key: "verbosity", Value: int32(l)}}})
	}
	return d
}

// setLogLevel is setParameter logLevel: the global verbosity, a number
// (mongod coerces it to an int).
func (e *Engine) setLogLevel(v any) error {
	n, ok := bsonx.ToInt64(v)
	if !ok {
		return mongoerr.New(mongoerr.BadValue, "Invalid value for logLevel: %v", v)
	}
	if n < 0 {
		return mongoerr.New(mongoerr.BadValue, "logLevel must be non-negative, got %d", n)
	}
	e.verbosity().SetLevel(int(min(n, 1<<30)))
	return nil
}

// setLogComponentVerbosity is setParameter logComponentVerbosity, as
// mongod's parseLogComponentSettings: a document whose "verbosity" sets
// the level of the component it is in (the top level: the global one)
// and whose other fields name components, with either a number or a
// document of the same shape; a negative level makes a component inherit
// again. Everything is checked before anything changes.
func (e *Engine) setLogComponentVerbosity(v any) error {
	doc, ok := v.(bson.D)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "Expected an object for logComponentVerbosity, but found %s", srvTypeName(v))
	}
	type setting struct {
		comp  string // "" is the global level
		level int
	}
	var sets []setting
	num := func(path string, x any) (int, error) {
		n, ok := bsonx.ToInt64(x)
		if !ok {
			return 0, mongoerr.New(mongoerr.BadValue, "Expected %s to be a number, but found %s", path, srvTypeName(x))
		}
		return int(max(min(n, 1<<30), -1)), nil
	}
	for _, f := range doc {
		if f.Key == "verbosity" {
			n, err := num("default.verbosity", f.Value)
			if err != nil {
				return err
			}
			sets = append(sets, setting{"", max(n, 0)})
			continue
		}
		if _, ok := e.verbosity().ComponentLevel(f.Key); !ok {
			return mongoerr.New(mongoerr.BadValue, "Invalid component name default.%s", f.Key)
		}
		sub, isDoc := f.Value.(bson.D)
		if !isDoc {
			n, err := num(f.Key, f.Value)
			if err != nil {
				return err
			}
			sets = append(sets, setting{f.Key, n})
			continue
		}
		for _, g := range sub {
			if g.Key != "verbosity" {
				// mayfly keeps no subcomponents (storage.journal…).
				return mongoerr.New(mongoerr.BadValue, "Invalid component name %s.%s", f.Key, g.Key)
			}
			n, err := num(f.Key+".verbosity", g.Value)
			if err != nil {
				return err
			}
			sets = append(sets, setting{f.Key, n})
		}
	}
	for _, s := range sets {
		if s.comp == "" {
			e.verbosity().SetLevel(s.level)
		} else {
			e.verbosity().SetComponentLevel(s.comp, s.level)
		}
	}
	return nil
}
