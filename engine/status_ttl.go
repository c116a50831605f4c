package engine

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// serverStatus gets MongoDB's metrics.ttl (deletedDocuments, passes) and
// mayfly's own ttl section (spec §9): the backlog of expired-but-unpurged
// documents, the lag of the oldest, the purge rate and reclaimed bytes.
func init() {
	RegisterStatusSection("metrics", func(e *Engine) any {
		st := e.ReaperStats()
		return bson.D{{Key: "document", Value: e.documentStatus()}, {Key: "queryExecutor", Value: e.queryExecutorStatus()},
			{Key: "operation", Value: bson.D{{Key: "writeConflicts", Value: e.writeConflicts.Load()}}}, {Key: "ttl", Value: bson.D{
				{Key: "deletedDocuments", Value: st.DeletedDocuments},
				{Key: "passes", Value: st.Passes},
			}}}
	})
	RegisterStatusSection("ttl", func(e *Engine) any { return e.ttlStatus() })
}

func (e *Engine) ttlStatus() bson.D {
	st := e.ReaperStats()
	now := e.nowMS()
	var backlog, backlogBytes int64
	oldest := int64(math.MaxInt64)
	active := 0
	for _, c := range e.cat.All() {
		if c.st().policy == nil {
			continue
		}
		active++
		n, b, o := c.backlog(now)
		backlog += n
		backlogBytes += b
		if n > 0 && o < oldest {
			oldest = o
		}
	}
	lag := 0.0
	if backlog > 0 {
		lag = float64(now-oldest) / 1000
	}
	var lastPass any
	if !st.LastPassStart.IsZero() {
		lastPass = bson.NewDateTimeFromTime(st.LastPassStart)
	}
	return bson.D{
		{Key: "collectionsWithTTL", Value: int64(active)},
		{Key: "expiredBacklog", Value: backlog},
		{Key: "expiredBacklogBytes", Value: backlogBytes},
		{Key: "oldestExpiredLagSeconds", Value: lag},
		{Key: "purgeRatePerSecond", Value: st.PurgeRate},
		{Key: "deletedDocuments", Value: st.DeletedDocuments},
		{Key: "deletedBytes", Value: st.DeletedBytes},
		{Key: "reclaimedBytes", Value: st.ReclaimedBytes},
		{Key: "passes", Value: st.Passes},
		{Key: "backoffs", Value: st.Backoffs},
		{Key: "lastPassStart", Value: lastPass},
		{Key: "lastPassMillis", Value: st.LastPassDuration.Milliseconds()},
	}
}
