package engine

import (
	"math"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// OpClock is the engine-wide hybrid logical clock that times writes, as
// mongod's oplog timestamps and cluster time do: a Timestamp is {T: Unix
// seconds of the wall clock, I: a counter within that second}. Next hands
// out a timestamp strictly greater than every one before it (when the
// wall clock stalls or steps back, the counter goes on); Last is the
// latest one handed out or learned. Replica-set replies carry it as
// operationTime and $clusterTime; transactions and change streams will
// read and order by it.
type OpClock struct {
	mu   sync.Mutex
	now  func() time.Time
	last bson.Timestamp
}

// maxClusterTimeDrift is mongod's maxAcceptableLogicalClockDriftSecs
// default: a gossiped cluster time further ahead of the wall clock than
// this is refused.
const maxClusterTimeDrift = 365 * 24 * time.Hour

// NewOpClock returns a clock reading the wall clock from now (nil: the
// system clock).
func NewOpClock(now func() time.Time) *OpClock {
	if now == nil {
		now = time.Now
	}
	return &OpClock{now: now}
}

// Next returns the timestamp of a new write: strictly greater than every
// timestamp Next returned or Advance accepted before.
func (c *OpClock) Next() bson.Timestamp {
	wall := c.wallSeconds() // outside the lock: the engine's clock may persist its lease
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case wall > c.last.T:
		c.last = bson.Timestamp{T: wall, I: 1}
	case c.last.I == math.MaxUint32:
		c.last = bson.Timestamp{T: c.last.T + 1, I: 1}
	default:
		c.last.I++
	}
	return c.last
}

// Last returns the latest timestamp: the last write's, or a later cluster
// time learned through Advance. Zero before the first write.
func (c *OpClock) Last() bson.Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Advance moves the clock up to a cluster time a client gossiped
// ($clusterTime), as mongod's LogicalClock::advanceClusterTime: a time
// behind the clock changes nothing; one more than a year ahead of the wall
// clock is refused (ClusterTimeFailsRateLimiter).
func (c *OpClock) Advance(ts bson.Timestamp) error {
	if !tsAfter(ts, c.Last()) {
		return nil // the common case: a client echoing a time the clock has passed
	}
	wall := c.wallSeconds()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !tsAfter(ts, c.last) {
		return nil
	}
	if int64(ts.T) > int64(wall)+int64(maxClusterTimeDrift/time.Second) {
		return mongoerr.New(mongoerr.ClusterTimeFailsRateLimiter, "New cluster time, %d, is too far from this node's wall clock time, %d.", ts.T, wall)
	}
	c.last = ts
	return nil
}

// seed raises the clock to ts at startup (the persisted clock lease).
func (c *OpClock) seed(ts bson.Timestamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tsAfter(ts, c.last) {
		c.last = ts
	}
}

func (c *OpClock) wallSeconds() uint32 {
	s := c.now().Unix()
	if s < 0 {
		return 0
	}
	if s > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(s)
}

// tsAfter reports whether a is later than b.
func tsAfter(a, b bson.Timestamp) bool {
	return a.T > b.T || a.T == b.T && a.I > b.I
}
