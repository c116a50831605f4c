package engine

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// The replSet* commands, as a one-member replica set's primary answers
// them (mongosh's rs.status(), rs.conf(), rs.initiate(), rs.reconfig(),
// rs.stepDown(), rs.freeze()); on a standalone they fail as mongod's do
// without --replSet.

func init() {
	Register(
		&Command{Name: "replSetGetStatus", Help: "report the status of the replica set from the POV of this server", AdminOnly: true, Run: cmdReplSetGetStatus},
		&Command{Name: "replSetGetConfig", Help: "return the replica set's configuration", AdminOnly: true, Run: cmdReplSetGetConfig},
		&Command{Name: "replSetInitiate", Help: "initiate the replica set (mayfly's set is initiated at startup)", AdminOnly: true, Run: cmdReplSetInitiate},
		&Command{Name: "replSetReconfig", Help: "change the replica set's configuration (one member: its settings and version)", AdminOnly: true, Run: cmdReplSetReconfig},
		&Command{Name: "replSetStepDown", Help: "step down as primary (a one-member set has no one to hand over to)", AdminOnly: true, Run: cmdReplSetStepDown},
		&Command{Name: "replSetFreeze", Help: "prevent this member from seeking election (refused on a primary)", AdminOnly: true, Run: cmdReplSetFreeze},
	)
}

// errNoRepl is mongod's answer to replSet* commands without --replSet.
func errNoRepl() error {
	return mongoerr.New(mongoerr.NoReplicationEnabled, "not running with --replSet")
}

func (rs *replState) configDoc() bson.D {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	settings := bson.D{
		{Key: "chainingAllowed", Value: true},
		{Key: "heartbeatIntervalMillis", Value: int32(2000)},
		{Key: "heartbeatTimeoutSecs", Value: int32(10)},
		{Key: "electionTimeoutMillis", Value: int32(10000)},
		{Key: "catchUpTimeoutMillis", Value: int32(-1)},
		{Key: "catchUpTakeoverDelayMillis", Value: int32(30000)},
		{Key: "getLastErrorModes", Value: bson.D{}},
		{Key: "getLastErrorDefaults", Value: bson.D{{Key: "w", Value: int32(1)}, {Key: "wtimeout", Value: int32(0)}}},
		{Key: "replicaSetId", Value: rs.replicaSetID},
	}
	for _, f := range rs.settings {
		if f.Key == "replicaSetId" {
			continue
		}
		replaced := false
		for i := range settings {
			if settings[i].Key == f.Key {
				settings[i].Value, replaced = f.Value, true
			}
		}
		if !replaced {
			settings = append(settings, f)
		}
	}
	return bson.D{
		{Key: "_id", Value: rs.name},
		{Key: "version", Value: rs.version},
		{Key: "term", Value: replTerm},
		{Key: "members", Value: bson.A{rs.memberDocLocked()}},
		{Key: "protocolVersion", Value: int64(1)},
		{Key: "writeConcernMajorityJournalDefault", Value: true},
		{Key: "settings", Value: settings},
	}
}

func (rs *replState) memberDocLocked() bson.D {
	return bson.D{
		{Key: "_id", Value: int32(0)},
		{Key: "host", Value: rs.me},
		{Key: "arbiterOnly", Value: false},
		{Key: "buildIndexes", Value: true},
		{Key: "hidden", Value: false},
		{Key: "priority", Value: 1.0},
		{Key: "tags", Value: bson.D{}},
		{Key: "secondaryDelaySecs", Value: int64(0)},
		{Key: "votes", Value: int32(1)},
	}
}

func cmdReplSetGetConfig(e *Engine, r *Request) (bson.D, error) {
	if e.repl == nil {
		return nil, errNoRepl()
	}
	out := bson.D{{Key: "config", Value: e.repl.configDoc()}}
	if v, ok := r.Arg("commitmentStatus"); ok && srvTruthy(v) {
		out = append(out, bson.E{Key: "commitmentStatus", Value: true})
	}
	return out, nil
}

func cmdReplSetGetStatus(e *Engine, r *Request) (bson.D, error) {
	rs := e.repl
	if rs == nil {
		return nil, errNoRepl()
	}
	rs.mu.Lock()
	version := rs.version
	rs.mu.Unlock()
	last := e.opTime.Last()
	lastDate := tsDate(last)
	elDate := tsDate(rs.electionTime)
	now := time.Now()
	ot := opTimeDoc(last)
	member := bson.D{
		{Key: "_id", Value: int32(0)},
		{Key: "name", Value: rs.me},
		{Key: "health", Value: 1.0},
		{Key: "state", Value: int32(1)},
		{Key: "stateStr", Value: "PRIMARY"},
		{Key: "uptime", Value: int32(now.Sub(e.start) / time.Second)},
		{Key: "optime", Value: ot},
		{Key: "optimeDate", Value: lastDate},
		{Key: "lastAppliedWallTime", Value: lastDate},
		{Key: "lastDurableWallTime", Value: lastDate},
		{Key: "syncSourceHost", Value: ""},
		{Key: "syncSourceId", Value: int32(-1)},
		{Key: "infoMessage", Value: ""},
		{Key: "electionTime", Value: rs.electionTime},
		{Key: "electionDate", Value: elDate},
		{Key: "configVersion", Value: version},
		{Key: "configTerm", Value: replTerm},
		{Key: "self", Value: true},
		{Key: "lastHeartbeatMessage", Value: ""},
	}
	return bson.D{
		{Key: "set", Value: rs.name},
		{Key: "date", Value: bson.NewDateTimeFromTime(now)},
		{Key: "myState", Value: int32(1)},
		{Key: "term", Value: replTerm},
		{Key: "syncSourceHost", Value: ""},
		{Key: "syncSourceId", Value: int32(-1)},
		{Key: "heartbeatIntervalMillis", Value: int64(2000)},
		{Key: "majorityVoteCount", Value: int32(1)},
		{Key: "writeMajorityCount", Value: int32(1)},
		{Key: "votingMembersCount", Value: int32(1)},
		{Key: "writableVotingMembersCount", Value: int32(1)},
		{Key: "optimes", Value: bson.D{
			{Key: "lastCommittedOpTime", Value: ot},
			{Key: "lastCommittedWallTime", Value: lastDate},
			{Key: "readConcernMajorityOpTime", Value: ot},
			{Key: "appliedOpTime", Value: ot},
			{Key: "durableOpTime", Value: ot},
			{Key: "lastAppliedWallTime", Value: lastDate},
			{Key: "lastDurableWallTime", Value: lastDate},
		}},
		{Key: "lastStableRecoveryTimestamp", Value: last},
		{Key: "electionCandidateMetrics", Value: bson.D{
			{Key: "lastElectionReason", Value: "electionTimeout"},
			{Key: "lastElectionDate", Value: elDate},
			{Key: "electionTerm", Value: replTerm},
			{Key: "lastCommittedOpTimeAtElection", Value: bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}},
			{Key: "lastSeenOpTimeAtElection", Value: opTimeDoc(rs.electionTime)},
			{Key: "numVotesNeeded", Value: int32(1)},
			{Key: "priorityAtElection", Value: 1.0},
			{Key: "electionTimeoutMillis", Value: int64(10000)},
			{Key: "newTermStartDate", Value: elDate},
			{Key: "wMajorityWriteAvailabilityDate", Value: elDate},
		}},
		{Key: "members", Value: bson.A{member}},
	}, nil
}

// cmdReplSetInitiate: mayfly's set is initiated at startup, so the answer
// is mongod's for an initiated set.
func cmdReplSetInitiate(e *Engine, r *Request) (bson.D, error) {
	if e.repl == nil {
		return nil, mongoerr.New(mongoerr.NoReplicationEnabled, "This node was not started with replication enabled.")
	}
	return nil, mongoerr.New(mongoerr.AlreadyInitialized, "already initialized")
}

// cmdReplSetReconfig takes a configuration that keeps the set's one
// member: its version moves (or force) and its settings apply; members
// cannot be added, since mayfly does not replicate.
func cmdReplSetReconfig(e *Engine, r *Request) (bson.D, error) {
	rs := e.repl
	if rs == nil {
		return nil, errNoRepl()
	}
	cfg, ok := r.Cmd[0].Value.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'replSetReconfig' is the wrong type '%s', expected type 'object'", bsonx.TypeName(r.Cmd[0].Value))
	}
	force := false
	if v, ok := r.Arg("force"); ok {
		force = srvTruthy(v)
	}
	name, _ := bsonx.Get(cfg, "_id")
	if s, _ := name.(string); s != rs.name {
		return nil, mongoerr.New(mongoerr.InvalidReplicaSetConfig, "Attempting to reconfigure a replica set with name %v, but command line reports %s; rejecting", name, rs.name)
	}
	vv, _ := bsonx.Get(cfg, "version")
	version, isNum := bsonx.ToInt64(vv)
	if !isNum || version < 1 || version > 1<<31-1 {
		return nil, mongoerr.New(mongoerr.InvalidReplicaSetConfig, "version field value of %v is out of range", vv)
	}
	mv, _ := bsonx.Get(cfg, "members")
	members, _ := mv.(bson.A)
	if len(members) != 1 {
		return nil, mongoerr.New(mongoerr.NewReplicaSetConfigurationIncompatible, "mayfly runs a one-member replica set: the configuration must list exactly this member (%s), got %d members", rs.me, len(members))
	}
	m, _ := members[0].(bson.D)
	host, _ := bsonx.Get(m, "host")
	if h, _ := host.(string); h != rs.me {
		return nil, mongoerr.New(mongoerr.NewReplicaSetConfigurationIncompatible, "Our replica set configuration is invalid or does not include us: the one member must be %s, got %v", rs.me, host)
	}
	var settings bson.D
	if sv, ok := bsonx.Get(cfg, "settings"); ok {
		if settings, ok = sv.(bson.D); !ok {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'settings' is the wrong type '%s', expected type 'object'", bsonx.TypeName(sv))
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !force && int32(version) <= rs.version {
		return nil, mongoerr.New(mongoerr.NewReplicaSetConfigurationIncompatible, "New replica set config version %d must be greater than old version %d", version, rs.version)
	}
	rs.version = int32(version)
	if force && int32(version) <= rs.version {
		rs.version++
	}
	rs.settings = settings
	rs.bumpTopologyLocked()
	return bson.D{}, nil
}

// cmdReplSetStepDown: a one-member set has no electable secondary to
// catch up, which is mongod's refusal without force. mayfly refuses force
// too: it cannot hand the set over nor run without a primary.
func cmdReplSetStepDown(e *Engine, r *Request) (bson.D, error) {
	if e.repl == nil {
		return nil, errNoRepl()
	}
	if v, ok := r.Cmd[0].Value.(bson.D); ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'replSetStepDown' is the wrong type '%s', expected a number", bsonx.TypeName(v))
	}
	if v, ok := r.Arg("force"); ok && srvTruthy(v) {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "replSetStepDown with force: true is not supported by mayfly: a one-member replica set has no other member to become primary")
	}
	return nil, mongoerr.New(mongoerr.ExceededTimeLimit, "No electable secondaries caught up as of %s. Please use the replSetStepDown command with the argument {force: true} to force node to step down.",
		time.Now().UTC().Format("2006-01-02T15:04:05.000+00:00"))
}

func cmdReplSetFreeze(e *Engine, r *Request) (bson.D, error) {
	if e.repl == nil {
		return nil, errNoRepl()
	}
	return nil, mongoerr.New(mongoerr.NotSecondary, "cannot freeze node when primary or running for election. state: Primary")
}
