package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func init() {
	Register(
		&Command{Name: "compact", Help: "compact a collection's storage, freeing the space of deleted documents", Run: cmdCompact},
		&Command{Name: "logRotate", Aliases: []string{"logrotate"}, Help: "rotate the server log", AdminOnly: true, Run: cmdLogRotate},
	)
}

// cmdCompact is mongod 7.0's compact ({compact: <coll>, force: <bool>},
// src/mongo/db/commands/compact.cpp): it compacts the collection's
// documents, secondary indexes and expiry index, the same Pebble key
// ranges the TTL reaper compacts after large purges (reap.go), so the
// space of deleted and overwritten documents really comes back. Writers
// are not blocked (mongod 4.4+ only blocks DDL). The reply is mongod's
// {bytesFreed}: the store's estimate of the collection's on-disk size
// before minus after (0 when nothing was freed). killOp and maxTimeMS stop
// it between ranges.
func cmdCompact(e *Engine, r *Request) (bson.D, error) {
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	for _, f := range r.Cmd[1:] {
		switch {
		case f.Key == "force", IsEnvelopeField(f.Key):
		default:
			return nil, mongoerr.New(40415, "BSON field 'compact.%s' is an unknown field.", f.Key)
		}
	}
	if v, ok := r.Arg("force"); ok {
		if _, isBool := v.(bool); !isBool {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'compact.force' is the wrong type '%s', expected type 'bool'", bsonx.TypeName(v))
		}
	}
	c := e.cat.Get(r.DB, coll)
	if c == nil {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "collection does not exist")
	}
	id := c.Meta().ID
	lo, hi := docstore.CollPrefix(docstore.PfxDoc, id), docstore.PrefixEnd(docstore.CollPrefix(docstore.PfxExpiry, id))
	if err := c.rangeDeleteConsumed(); err != nil {
		return nil, err
	}
	// Measured before the flush: recent deletions are still in the
	// memtable, and the tables hold the data they delete.
	before, _ := e.kv.EstimateDiskUsage(lo, hi)
	// Flush so the memtable's tombstones reach the tables compacted below.
	if err := e.kv.Flush(); err != nil {
		return nil, err
	}
	ctx := r.Ctx
	for _, kind := range []byte{docstore.PfxDoc, docstore.PfxIndex, docstore.PfxExpiry} {
		if err := r.CheckDeadline(); err != nil {
			return nil, err
		}
		p := docstore.CollPrefix(kind, id)
		if err := e.kv.Compact(ctx, p, docstore.PrefixEnd(p)); err != nil {
			if cerr := r.CheckDeadline(); cerr != nil {
				return nil, cerr
			}
			return nil, err
		}
	}
	after, _ := e.kv.EstimateDiskUsage(lo, hi)
	freed := int64(before) - int64(after)
	if freed < 0 {
		freed = 0
	}
	e.log.Info("compact", zap.String("ns", c.Meta().ns()), zap.Uint64("diskBefore", before), zap.Uint64("diskAfter", after))
	return bson.D{{Key: "bytesFreed", Value: freed}}, nil
}

// cmdLogRotate is logRotate ({logRotate: 1 | "server"}). mayfly writes its
// log to stderr unless Config.LogRotate is set by whoever opened a log
// file: with nothing to rotate the command succeeds, as mongod's does when
// it logs to the console (rotateLogs finds no file appender to rotate).
// "audit" is refused: mayfly keeps no audit log.
func cmdLogRotate(e *Engine, r *Request) (bson.D, error) {
	switch v := r.Cmd[0].Value.(type) {
	case string:
		if v == "audit" {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "mayfly keeps no audit log to rotate")
		}
		if v != "server" {
			return nil, mongoerr.New(mongoerr.BadValue, "Unknown log type for rotate: '%s'", v)
		}
	}
	if e.logRotate != nil {
		if err := e.logRotate(); err != nil {
			return nil, mongoerr.New(mongoerr.InternalError, "log rotation failed: %v", err)
		}
		e.log.Info("log rotated")
	}
	return bson.D{}, nil
}
