package engine

import (
	"math/rand/v2"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// docSource produces a query's result documents one at a time, already
// filtered, projected and checked against the TTL rule at the moment each is
// produced.
type docSource interface {
	next() (bson.Raw, error)
	close()
}

// cursor is a server-side cursor. Like mongod's, it belongs to no
// connection: any connection may getMore or kill it.
type cursor struct {
	id        int64
	ns        string
	src       docSource
	remaining int64 // documents still allowed by limit; -1 = unlimited
	lastUse   time.Time
	busy      bool
	info      *cursorInfo // for $currentOp's idleCursors (ops.go)
}

// cursorTable holds open cursors and reaps idle ones (10 minutes, as
// mongod's cursorTimeoutMillis).
type cursorTable struct {
	mu      sync.Mutex
	cursors map[int64]*cursor
	timeout time.Duration
}

func newCursorTable() *cursorTable {
	return &cursorTable{cursors: map[int64]*cursor{}, timeout: 10 * time.Minute}
}

func (t *cursorTable) add(c *cursor) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		id := rand.Int64N(1<<62) + 1
		if _, dup := t.cursors[id]; !dup {
			c.id = id
			c.lastUse = time.Now()
			t.cursors[id] = c
			return id
		}
	}
}

// checkout takes a cursor for a getMore; it is unavailable to others until
// checkin.
func (t *cursorTable) checkout(id int64, ns string) (*cursor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cursors[id]
	if c == nil {
		return nil, mongoerr.New(mongoerr.CursorNotFound, "cursor id %d not found", id)
	}
	if c.ns != ns {
		return nil, mongoerr.New(mongoerr.Unauthorized, "Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.ns)
	}
	if c.busy {
		return nil, mongoerr.New(mongoerr.OperationFailed, "cursor id %d is already in use", id)
	}
	c.busy = true
	return c, nil
}

func (t *cursorTable) checkin(c *cursor, exhausted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.busy = false
	c.lastUse = time.Now()
	if exhausted {
		delete(t.cursors, c.id)
		c.src.close()
	}
}

func (t *cursorTable) kill(id int64) bool {
	t.mu.Lock()
	c := t.cursors[id]
	if c != nil {
		delete(t.cursors, id)
	}
	t.mu.Unlock()
	if c != nil {
		c.src.close()
	}
	return c != nil
}

func (t *cursorTable) killNamespace(ns string) {
	t.mu.Lock()
	var dead []*cursor
	for id, c := range t.cursors {
		if _, stream := c.src.(*changeStream); stream {
			continue // a change stream reports the drop and invalidates itself
		}
		if c.ns == ns {
			delete(t.cursors, id)
			dead = append(dead, c)
		}
	}
	t.mu.Unlock()
	for _, c := range dead {
		c.src.close()
	}
}

func (t *cursorTable) reapIdle(now time.Time) int {
	t.mu.Lock()
	var dead []*cursor
	for id, c := range t.cursors {
		if !c.busy && now.Sub(c.lastUse) > t.timeout {
			delete(t.cursors, id)
			dead = append(dead, c)
		}
	}
	t.mu.Unlock()
	for _, c := range dead {
		c.src.close()
	}
	return len(dead)
}

func (t *cursorTable) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cursors)
}

// maxBatchBytes caps a reply batch, as mongod's 16 MiB.
const maxBatchBytes = 16 * 1024 * 1024

// fillBatch pulls up to n documents (n <= 0: no count limit) within the
// byte cap. It reports whether the source is exhausted.
func fillBatch(r *Request, c *cursor, n int64) (bson.A, bool, error) {
	bindSourceRequest(c.src, r)
	batch := bson.A{}
	size := 0
	for n <= 0 || int64(len(batch)) < n {
		if c.remaining == 0 {
			return batch, true, nil
		}
		if len(batch)%64 == 63 {
			if err := r.CheckDeadline(); err != nil {
				return nil, false, err
			}
		}
		doc, err := c.src.next()
		if err != nil {
			return nil, false, err
		}
		if doc == nil {
			return batch, true, nil
		}
		if size+len(doc) > maxBatchBytes && len(batch) > 0 {
			c.src = &pushback{doc: doc, docSource: c.src}
			return batch, false, nil
		}
		size += len(doc)
		batch = append(batch, doc)
		if c.remaining > 0 {
			c.remaining--
		}
	}
	if c.remaining == 0 {
		return batch, true, nil
	}
	if s, ok := c.src.(interface{ eof() bool }); ok && s.eof() {
		return batch, true, nil
	}
	return batch, false, nil
}

// pushback returns one document again before its source's next.
type pushback struct {
	docSource
	doc bson.Raw
}

func (p *pushback) next() (bson.Raw, error) {
	if p.doc != nil {
		d := p.doc
		p.doc = nil
		return d, nil
	}
	return p.docSource.next()
}

// cursorReply renders {cursor: {firstBatch|nextBatch, id, ns}}.
func cursorReply(batchName string, batch bson.A, id int64, ns string) bson.D {
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: batchName, Value: batch},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}
}

// exists reports whether a cursor is open.
func (t *cursorTable) exists(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.cursors[id]
	return ok
}
