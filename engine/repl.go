package engine

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// Replica-set mode (mongod's --replSet): mayfly is the primary of a
// one-member replica set, initiated at startup. That is what drivers need
// to offer sessions with retryable writes, causal consistency and (later)
// transactions and change streams: hello describes the set, every reply
// carries operationTime and $clusterTime, and the replSet* commands answer
// as a one-member set's primary does. There is no oplog and no other
// member: writes are timed by the engine's OpClock (optime.go).

// ReplConfig is Config.Repl.
type ReplConfig struct {
	// SetName is the replica set's name; empty: a standalone.
	SetName string
	// Me is the host:port the member calls itself (hello's me, primary and
	// hosts): the address clients connect to, or the drivers' discovery
	// drops the server.
	Me string
	// ChangeHistory is how long the change history keeps a change
	// (--change-history-hours); 0: 24 hours.
	ChangeHistory time.Duration
}

// replTerm is the election term: the one election of a set that never
// changes primary.
const replTerm int64 = 1

// replState is a replica-set member's state; nil on a standalone.
type replState struct {
	name, me     string
	electionID   bson.ObjectID  // hello's electionId: the term in an OID, as mongod forms it
	electionTime bson.Timestamp // the election's optime
	processID    bson.ObjectID  // topologyVersion.processId
	replicaSetID bson.ObjectID  // settings.replicaSetId

	mu      sync.Mutex
	version int32 // config version
	members bson.A
	// settings as the last reconfig gave them (nil: the defaults).
	settings bson.D
	// topoCounter is topologyVersion.counter; topoChanged is closed (and
	// replaced) when it moves, waking awaitable hellos.
	topoCounter int64
	topoChanged chan struct{}
	// quiesce is closed at shutdown: awaitable hellos answer at once.
	quiesce     chan struct{}
	quiesceOnce sync.Once
}

func newReplState(cfg ReplConfig, election bson.Timestamp) *replState {
	var eid bson.ObjectID
	// mongod's OID::fromTerm: the maximal timestamp, then the term.
	copy(eid[:], []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, byte(replTerm)})
	return &replState{name: cfg.SetName, me: cfg.Me, electionID: eid, electionTime: election,
		processID: bson.NewObjectID(), replicaSetID: bson.NewObjectID(), version: 1,
		topoChanged: make(chan struct{}), quiesce: make(chan struct{})}
}

// ReplSetName is the replica set's name ("" on a standalone).
func (e *Engine) ReplSetName() string {
	if e.repl == nil {
		return ""
	}
	return e.repl.name
}

// OpTime is the engine's operation clock: Next times a write, Last is the
// last write's time.
func (e *Engine) OpTime() *OpClock { return e.opTime }

// Quiesce starts shutdown: awaitable hellos waiting for a topology change
// answer at once, so that they do not hold the shutdown up.
func (e *Engine) Quiesce() {
	if e.repl != nil {
		e.repl.quiesceOnce.Do(func() { close(e.repl.quiesce) })
	}
}

func (rs *replState) topologyVersion() (bson.D, chan struct{}) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return bson.D{{Key: "processId", Value: rs.processID}, {Key: "counter", Value: rs.topoCounter}}, rs.topoChanged
}

// bumpTopology moves topologyVersion and wakes the awaitable hellos
// (rs.mu held).
func (rs *replState) bumpTopologyLocked() {
	rs.topoCounter++
	close(rs.topoChanged)
	rs.topoChanged = make(chan struct{})
}

func opTimeDoc(ts bson.Timestamp) bson.D {
	return bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: replTerm}}
}

func tsDate(ts bson.Timestamp) bson.DateTime {
	return bson.DateTime(int64(ts.T) * 1000)
}

// awaitHello is the awaitable hello (the drivers' streaming monitor):
// given the topologyVersion the client knows and maxAwaitTimeMS, the
// reply waits until the topology changes, the time passes, or the server
// shuts down.
func (e *Engine) awaitHello(r *Request) error {
	tv, hasTV := r.Arg("topologyVersion")
	mv, hasMax := r.Arg("maxAwaitTimeMS")
	if !hasTV && !hasMax {
		return nil
	}
	if hasTV != hasMax {
		return mongoerr.New(31368, "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'")
	}
	ms, ok := bsonx.ToInt64(mv)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'hello.maxAwaitTimeMS' is the wrong type '%s', expected type 'long'", bsonx.TypeName(mv))
	}
	if ms < 0 {
		return mongoerr.New(31373, "maxAwaitTimeMS must be a non-negative integer")
	}
	td, ok := tv.(bson.D)
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'hello.topologyVersion' is the wrong type '%s', expected type 'object'", bsonx.TypeName(tv))
	}
	pid, _ := bsonx.Get(td, "processId")
	cnt, _ := bsonx.Get(td, "counter")
	counter, _ := bsonx.ToInt64(cnt)
	rs := e.repl
	cur, changed := rs.topologyVersion()
	if pid != cur[0].Value || counter != cur[1].Value.(int64) {
		return nil // the client's view is stale: answer at once
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case <-t.C:
	case <-changed:
	case <-rs.quiesce:
	case <-ctx.Done():
	}
	return nil
}

// replHello returns the replica-set fields of hello's reply, before the
// common ones, as a 7.0 primary orders them.
func (e *Engine) replHello(r *Request) (bson.D, error) {
	rs := e.repl
	if err := e.awaitHello(r); err != nil {
		return nil, err
	}
	select {
	case <-rs.quiesce:
		// mongod's quiesce mode: hello fails, so that the drivers' monitors
		// stop streaming and back off while the server shuts down.
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "The server is in quiesce mode and will shut down")
	default:
	}
	tv, _ := rs.topologyVersion()
	rs.mu.Lock()
	version := rs.version
	rs.mu.Unlock()
	last := e.opTime.Last()
	d := bson.D{
		{Key: "topologyVersion", Value: tv},
		{Key: "hosts", Value: bson.A{rs.me}},
		{Key: "setName", Value: rs.name},
		{Key: "setVersion", Value: version},
	}
	if r.Name == "hello" {
		d = append(d, bson.E{Key: "isWritablePrimary", Value: true})
	} else {
		d = append(d, bson.E{Key: "ismaster", Value: true})
	}
	d = append(d,
		bson.E{Key: "secondary", Value: false},
		bson.E{Key: "primary", Value: rs.me},
		bson.E{Key: "me", Value: rs.me},
		bson.E{Key: "electionId", Value: rs.electionID},
		bson.E{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: opTimeDoc(last)},
			{Key: "lastWriteDate", Value: tsDate(last)},
			{Key: "majorityOpTime", Value: opTimeDoc(last)},
			{Key: "majorityWriteDate", Value: tsDate(last)},
		}},
	)
	return d, nil
}

func init() {
	// serverStatus.repl: what hello says of the set, as mongod reports it
	// on a replica-set member (absent on a standalone).
	RegisterStatusSection("repl", func(e *Engine) any {
		if e.repl == nil {
			return nil
		}
		d, err := e.replHello(&Request{Name: "hello"})
		if err != nil {
			return nil
		}
		return append(d,
			bson.E{Key: "primaryOnlyServices", Value: bson.D{}},
			bson.E{Key: "rbid", Value: int32(1)},
			bson.E{Key: "userWriteBlockMode", Value: int32(1)},
		)
	})
}

// appendClusterTime adds operationTime and $clusterTime to a reply, as a
// replica-set member does on every reply. The signature is the dummy one
// mongod sends when it has no keys to sign with (keyId 0, zero hash).
func (e *Engine) appendClusterTime(d bson.D, opTime bson.Timestamp) bson.D {
	ct := e.opTime.Last()
	if opTime == (bson.Timestamp{}) {
		opTime = ct
	}
	return append(d,
		bson.E{Key: "$clusterTime", Value: bson.D{
			{Key: "clusterTime", Value: ct},
			{Key: "signature", Value: bson.D{
				{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
				{Key: "keyId", Value: int64(0)},
			}},
		}},
		bson.E{Key: "operationTime", Value: opTime},
	)
}
