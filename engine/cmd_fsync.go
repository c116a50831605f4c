package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func init() {
	Register(&Command{Name: "fsync", Help: "flush all pending writes to the data files", AdminOnly: true, Run: cmdFsync})
}

// cmdFsync flushes the memtable to data files, which makes every write
// acknowledged before it durable (an unjournaled one otherwise waits for
// the background WAL sync, every journalCommitInterval). lock: true is not
// supported.
func cmdFsync(e *Engine, r *Request) (bson.D, error) {
	if boolArg(r, "lock") {
		return nil, mongoerr.New(mongoerr.NotImplemented, "fsync with lock: true is not supported by mayfly")
	}
	if err := e.kv.Flush(); err != nil {
		return nil, err
	}
	return bson.D{{Key: "numFiles", Value: int32(1)}}, nil
}
