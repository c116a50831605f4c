package compat

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/ttl"
)

// externalURI is the server under test when set; otherwise every test talks
// to an in-process mayfly.
var externalURI = os.Getenv("MAYFLY_URI")

// epoch is where in-process fake clocks start: far from the real time, so a
// server that reads the wall clock instead of its Clock is caught.
var epoch = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// target is one server and a client connected to it.
type target struct {
	srv    *server.Server // nil when external
	clock  *ttl.FakeClock // nil when external
	client *mongo.Client
}

var shared *target

func TestMain(m *testing.M) {
	var err error
	shared, err = startTarget()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: cannot start the server under test:", err)
		os.Exit(2)
	}
	code := m.Run()
	shared.close()
	os.Exit(code)
}

func startTarget() (*target, error) {
	if externalURI != "" {
		cli, err := connect(externalURI)
		if err != nil {
			return nil, err
		}
		return &target{client: cli}, nil
	}
	return startInProcess(nil, "")
}

// startInProcess starts a private in-process server with a fake clock;
// mod adjusts its configuration, and query is added to the connection
// string (e.g. "replicaSet=rs0").
func startInProcess(mod func(*server.Config), query string) (*target, error) {
	clk := ttl.NewFakeClock(epoch)
	cfg := server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, Clock: clk}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.Start(cfg)
	if err != nil {
		return nil, err
	}
	uri := srv.URI()
	if query != "" {
		uri += "?" + query
	}
	cli, err := connect(uri)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &target{srv: srv, clock: clk, client: cli}, nil
}

func connect(uri string) (*mongo.Client, error) {
	cli, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cli.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		_ = cli.Disconnect(context.Background())
		return nil, fmt.Errorf("ping %s: %w", uri, err)
	}
	return cli, nil
}

func (tg *target) close() {
	if tg == nil {
		return
	}
	_ = tg.client.Disconnect(context.Background())
	if tg.srv != nil {
		tg.srv.Close()
	}
}

// env is one test's view of the server: its own database, a context, and
// control over time.
type env struct {
	t   *testing.T
	ctx context.Context
	tg  *target
	cli *mongo.Client
	db  *mongo.Database
	// aligned is when alignSecond last returned (real clock only).
	aligned time.Time
}

// newEnv gives a parallel test its own database on the shared server. The
// shared fake clock never moves, so such a test must not advance time.
func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	return makeEnv(t, shared, false)
}

// newClockEnv is newEnv for tests that move time: in-process it starts a
// private server with its own fake clock (so parallel tests don't age each
// other's documents); against MAYFLY_URI it shares the external server.
func newClockEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	if externalURI != "" {
		return makeEnv(t, shared, false)
	}
	tg, err := startTarget()
	if err != nil {
		t.Fatalf("start private server: %v", err)
	}
	return makeEnv(t, tg, true)
}

// newParamEnv is for tests that change server-wide settings
// (setParameter): in-process each gets a private server. Against MAYFLY_URI
// such a test would change the settings under every other test running in
// parallel on that server, so it runs only in-process (go test ./compat/
// in the test command).
func newParamEnv(t *testing.T) *env {
	t.Helper()
	if externalURI != "" {
		t.Skip("changes server-wide parameters: runs only against a private in-process server")
	}
	return newClockEnv(t)
}

// replSetName is the set newReplEnv's servers run.
const replSetName = "rs0"

// newReplEnv is for tests of replica-set mode (--replSet): each gets a
// private in-process server started with ReplSetName (mod may adjust its
// configuration further), reached through ?replicaSet= so that the
// driver's discovery runs. Against MAYFLY_URI (a standalone) such a test
// skips. The short heartbeat bounds the awaitable hello the driver's
// Disconnect may wait out when it races the monitor's next check (a
// driver race mongod's clients have too: 10 s with the default).
func newReplEnv(t *testing.T, mod ...func(*server.Config)) *env {
	t.Helper()
	if externalURI != "" {
		t.Skip("needs a replica-set member: runs only against a private in-process mayfly started with --replSet (MAYFLY_URI is a standalone)")
	}
	t.Parallel()
	tg, err := startInProcess(func(c *server.Config) {
		c.ReplSetName = replSetName
		for _, m := range mod {
			m(c)
		}
	}, "replicaSet="+replSetName+"&heartbeatFrequencyMS=500")
	if err != nil {
		t.Fatalf("start a replica-set server: %v", err)
	}
	return makeEnv(t, tg, true)
}

func makeEnv(t *testing.T, tg *target, private bool) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e := &env{t: t, ctx: ctx, tg: tg, cli: tg.client}
	e.db = tg.client.Database(dbName(t))
	// A previous run against the same external server may have left it.
	if err := dropDB(ctx, e.db); err != nil {
		t.Fatalf("drop %s before the test: %v", e.db.Name(), err)
	}
	t.Cleanup(func() {
		if !private {
			_ = dropDB(context.Background(), e.db)
		}
		cancel()
		if private {
			tg.close()
		}
	})
	return e
}

// dropDB drops db; a user without dropDatabase (mongod's readWrite and
// readWriteAnyDatabase lack it: the --auth pass of scripts/compat.sh) gets
// 13 Unauthorized, and then every collection is dropped instead.
func dropDB(ctx context.Context, db *mongo.Database) error {
	err := db.Drop(ctx)
	var ce mongo.CommandError
	if err == nil || !errors.As(err, &ce) || ce.Code != 13 {
		return err
	}
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, "system.") {
			continue
		}
		if err := db.Collection(n).Drop(ctx); err != nil {
			return err
		}
	}
	return nil
}

// authPass reports whether the suite runs as a user without admin
// privileges (scripts/compat.sh's --auth pass sets MAYFLY_COMPAT_AUTH_PASS).
var authPass = os.Getenv("MAYFLY_COMPAT_AUTH_PASS") != ""

// needsAdmin skips a test, only in the --auth pass, that runs commands a
// readWriteAnyDatabase user may not run in mongod (why says which).
func needsAdmin(t *testing.T, why string) {
	t.Helper()
	if authPass {
		t.Skip("--auth pass as a readWriteAnyDatabase user: needs " + why)
	}
}

// authenticated reports whether the suite connects with credentials: the
// --auth pass, or a MAYFLY_URI naming a user (docker-compose.yml's compat
// service runs the suite as root).
var authenticated = authPass || func() bool {
	if externalURI == "" {
		return false
	}
	o := options.Client().ApplyURI(externalURI)
	return o.Validate() == nil && o.Auth != nil && o.Auth.Username != ""
}()

// needsNoAuth skips a test, whenever the suite authenticates, that touches
// collections no built-in role reaches, root included (mongod's root has
// no privilege on a database's own system.version, nor find on
// config.system.sessions): it checks the behaviour without --auth.
func needsNoAuth(t *testing.T, why string) {
	t.Helper()
	if authenticated {
		t.Skip("authenticated run (even root may not): " + why)
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// dbName is a database name unique to the test (MongoDB allows 63 bytes).
func dbName(t *testing.T) string {
	n := unsafeName.ReplaceAllString(t.Name(), "_")
	if len(n) > 40 {
		h := fnv.New32a()
		h.Write([]byte(t.Name()))
		n = fmt.Sprintf("%s_%08x", n[:40], h.Sum32())
	}
	return "cx_" + n
}

// inProcess reports whether time is a fake clock this test controls.
func (e *env) inProcess() bool { return e.tg.clock != nil }

// advance lets d pass: it moves the fake clock in-process, and really sleeps
// against an external server.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	if e.tg.clock != nil {
		e.tg.clock.Advance(d)
		return
	}
	time.Sleep(d)
}

// now is the server's idea of the current time.
func (e *env) now() time.Time {
	if e.tg.clock != nil {
		return e.tg.clock.Now()
	}
	return time.Now()
}

// alignSecond waits, against a real clock, until just after the start of a
// second, so that the writes that follow share one whole-second _ts and the
// test knows how much of that second is left. With a fake clock it does
// nothing (the fake clock starts on a whole second and only moves on request).
func (e *env) alignSecond() {
	if e.tg.clock != nil {
		return
	}
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second + 30*time.Millisecond)
	time.Sleep(next.Sub(now))
	e.aligned = time.Now()
}

// timing describes, against a real clock, how far the test is past its last
// alignSecond, so that a failure on an overloaded machine says so.
func (e *env) timing() string {
	if e.tg.clock != nil || e.aligned.IsZero() {
		return ""
	}
	return fmt.Sprintf(" [real clock: %v after the aligned second start %s]", time.Since(e.aligned).Round(time.Millisecond), e.aligned.Truncate(time.Second).Format("15:04:05"))
}

// serverStatusWait is how long a test waits for background work (the reaper).
func (e *env) serverStatusWait() time.Duration { return 60 * time.Second }

// mayflyOnly skips tests of mayfly's own TTL model when the suite is
// pointed at a real mongod for reference (COMPAT_REFERENCE=mongod).
func mayflyOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("COMPAT_REFERENCE") == "mongod" {
		t.Skip("mayfly-specific behaviour (time to live as Azure Cosmos DB defines it); COMPAT_REFERENCE=mongod")
	}
}

func (e *env) coll(name string) *mongo.Collection { return e.db.Collection(name) }

// run runs a command on the test database and fails the test on error.
func (e *env) run(cmd bson.D) bson.Raw {
	e.t.Helper()
	return e.runOn(e.db.Name(), cmd)
}

func (e *env) runOn(db string, cmd bson.D) bson.Raw {
	e.t.Helper()
	raw, err := e.cli.Database(db).RunCommand(e.ctx, cmd).Raw()
	if err != nil {
		e.t.Fatalf("command %s on %s failed: %v", ejson(cmd), db, err)
	}
	return raw
}

// runWrite runs a write command whose reply may carry writeErrors, and
// returns the reply; any other failure fails the test.
func (e *env) runWrite(cmd bson.D) bson.Raw {
	e.t.Helper()
	raw, err := e.db.RunCommand(e.ctx, cmd).Raw()
	var we mongo.WriteException
	if err != nil && !errors.As(err, &we) {
		e.t.Fatalf("command %s failed: %v", ejson(cmd), err)
	}
	return raw
}

// runErr runs a command that is expected to fail and returns the error.
func (e *env) runErr(cmd bson.D) error {
	e.t.Helper()
	return e.cli.Database(e.db.Name()).RunCommand(e.ctx, cmd).Err()
}

func (e *env) admin(cmd bson.D) bson.Raw {
	e.t.Helper()
	return e.runOn("admin", cmd)
}

// insert inserts documents and fails the test on error.
func (e *env) insert(coll string, docs ...any) {
	e.t.Helper()
	if len(docs) == 0 {
		return
	}
	if _, err := e.coll(coll).InsertMany(e.ctx, docs); err != nil {
		e.t.Fatalf("insert into %s: %v", coll, err)
	}
}

// find returns every document the filter matches, in the order given.
func (e *env) find(coll string, filter any, opts ...options.Lister[options.FindOptions]) []bson.Raw {
	e.t.Helper()
	if filter == nil {
		filter = bson.D{}
	}
	cur, err := e.coll(coll).Find(e.ctx, filter, opts...)
	if err != nil {
		e.t.Fatalf("find in %s: %v", coll, err)
	}
	var out []bson.Raw
	if err := cur.All(e.ctx, &out); err != nil {
		e.t.Fatalf("find in %s, iterating: %v", coll, err)
	}
	return out
}

// aggregate runs a pipeline and returns every result.
func (e *env) aggregate(coll string, pipeline any) []bson.Raw {
	e.t.Helper()
	cur, err := e.coll(coll).Aggregate(e.ctx, pipeline)
	if err != nil {
		e.t.Fatalf("aggregate on %s: %v", coll, err)
	}
	var out []bson.Raw
	if err := cur.All(e.ctx, &out); err != nil {
		e.t.Fatalf("aggregate on %s, iterating: %v", coll, err)
	}
	return out
}

// ids returns the _id of every document visible in the collection, sorted.
func (e *env) ids(coll string) []string {
	e.t.Helper()
	docs := e.find(coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	out := []string{}
	for _, d := range docs {
		out = append(out, d.Lookup("_id").String())
	}
	return out
}

// count is countDocuments with a filter.
func (e *env) count(coll string, filter any) int64 {
	e.t.Helper()
	if filter == nil {
		filter = bson.D{}
	}
	n, err := e.coll(coll).CountDocuments(e.ctx, filter)
	if err != nil {
		e.t.Fatalf("countDocuments on %s: %v", coll, err)
	}
	return n
}

// ---- assertions ----

// ejson renders a value as canonical extended JSON, so that types show.
func ejson(v any) string {
	switch x := v.(type) {
	case bson.Raw:
		return x.String()
	case bson.RawValue:
		return x.String()
	}
	b, err := bson.MarshalExtJSON(v, true, false)
	if err != nil {
		// Not a document: wrap it.
		b2, err2 := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
		if err2 != nil {
			return fmt.Sprintf("%#v", v)
		}
		s := string(b2)
		return strings.TrimSuffix(strings.TrimPrefix(s, `{"v":`), "}")
	}
	return string(b)
}

// canon re-renders a document so that two renderings compare equal exactly
// when the documents are equal, types and field order included.
func canon(t *testing.T, v any) string {
	t.Helper()
	var raw bson.Raw
	switch x := v.(type) {
	case bson.Raw:
		raw = x
	default:
		b, err := bson.Marshal(v)
		if err != nil {
			t.Fatalf("marshal %#v: %v", v, err)
		}
		raw = b
	}
	b, err := bson.MarshalExtJSON(raw, true, false)
	if err != nil {
		t.Fatalf("extjson: %v", err)
	}
	return string(b)
}

// docEq asserts that a document equals want exactly (values, types, order).
func docEq(t *testing.T, got bson.Raw, want any) {
	t.Helper()
	if got == nil {
		t.Fatalf("got no document, want %s", canon(t, want))
	}
	g, w := canon(t, got), canon(t, want)
	if g != w {
		t.Fatalf("document mismatch\n got: %s\nwant: %s", g, w)
	}
}

// docsEq asserts a list of documents exactly.
func docsEq(t *testing.T, got []bson.Raw, want ...bson.D) {
	t.Helper()
	gs := make([]string, len(got))
	for i, d := range got {
		gs[i] = canon(t, d)
	}
	ws := make([]string, len(want))
	for i, d := range want {
		ws[i] = canon(t, d)
	}
	if strings.Join(gs, "\n") != strings.Join(ws, "\n") {
		t.Fatalf("documents mismatch\n got (%d):\n  %s\nwant (%d):\n  %s", len(gs), strings.Join(gs, "\n  "), len(ws), strings.Join(ws, "\n  "))
	}
}

// eq asserts equality of comparable values.
func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %#v, want %#v", what, got, want)
	}
}

// strsEq asserts two string lists are equal.
func strsEq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") || len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// idList renders int _ids the way ids() does.
func idList(ids ...int) []string {
	out := []string{}
	for _, id := range ids {
		out = append(out, bson.RawValue{Type: bson.TypeInt32, Value: bsonInt32(int32(id))}.String())
	}
	return out
}

func bsonInt32(v int32) []byte {
	return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
}

// val looks a dotted path up in a document and fails if it is missing.
func val(t *testing.T, doc bson.Raw, path string) bson.RawValue {
	t.Helper()
	v, err := doc.LookupErr(strings.Split(path, ".")...)
	if err != nil {
		t.Fatalf("field %q missing in %s", path, doc)
	}
	return v
}

// has reports whether a dotted path exists in a document.
func has(doc bson.Raw, path string) bool {
	_, err := doc.LookupErr(strings.Split(path, ".")...)
	return err == nil
}

// valEq asserts a field's value exactly, type included.
func valEq(t *testing.T, doc bson.Raw, path string, want any) {
	t.Helper()
	got := val(t, doc, path)
	g := canon(t, bson.D{{Key: "v", Value: got}})
	w := canon(t, bson.D{{Key: "v", Value: want}})
	if g != w {
		t.Fatalf("field %q: got %s, want %s (in %s)", path, g, w, doc)
	}
}

// num reads any BSON number as float64 (for fields whose numeric type the
// server may choose, such as sizes in stats).
func num(t *testing.T, doc bson.Raw, path string) float64 {
	t.Helper()
	v := val(t, doc, path)
	switch v.Type {
	case bson.TypeInt32:
		return float64(v.Int32())
	case bson.TypeInt64:
		return float64(v.Int64())
	case bson.TypeDouble:
		return v.Double()
	case bson.TypeDecimal128:
		f, err := stringToFloat(v.Decimal128().String())
		if err != nil {
			t.Fatalf("field %q: %v", path, err)
		}
		return f
	}
	t.Fatalf("field %q is %s, not a number (in %s)", path, v.Type, doc)
	return 0
}

func stringToFloat(s string) (float64, error) {
	var f float64
	_, err := fmt.Sscan(s, &f)
	return f, err
}

// errCode extracts the server's code and codeName from a driver error: a
// command error, or the first write error of a write or bulk write.
func errCode(err error) (int32, string, bool) {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code, ce.Name, true
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		if len(we.WriteErrors) > 0 {
			return int32(we.WriteErrors[0].Code), codeNameOf(we.WriteErrors[0].Raw), true
		}
		if we.WriteConcernError != nil {
			return int32(we.WriteConcernError.Code), we.WriteConcernError.Name, true
		}
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		if len(bwe.WriteErrors) > 0 {
			return int32(bwe.WriteErrors[0].Code), codeNameOf(bwe.WriteErrors[0].Raw), true
		}
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int{2, 9, 11000, 10334} {
			if se.HasErrorCode(c) {
				return int32(c), "", true
			}
		}
	}
	return 0, "", false
}

func codeNameOf(raw bson.Raw) string {
	if raw == nil {
		return ""
	}
	if v, err := raw.LookupErr("codeName"); err == nil {
		s, _ := v.StringValueOK()
		return s
	}
	return ""
}

// wantCode asserts that err carries the server error code (and codeName,
// when given and when the server sent one: write errors carry no codeName in
// mongod's replies).
func wantCode(t *testing.T, err error, code int32, codeName string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %d (%s)", code, codeName)
	}
	c, n, ok := errCode(err)
	if !ok {
		t.Fatalf("got error %T %v, want a server error with code %d (%s)", err, err, code, codeName)
	}
	if c != code {
		t.Fatalf("got code %d (%s): %v; want code %d (%s)", c, n, err, code, codeName)
	}
	var ce mongo.CommandError
	if codeName != "" && errors.As(err, &ce) && ce.Name != codeName {
		t.Fatalf("got codeName %q, want %q (%v)", ce.Name, codeName, err)
	}
}

// noErr fails the test on error.
func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// errMsg is the server's message of a driver error.
func errMsg(err error) string {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Message
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return we.WriteErrors[0].Message
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && len(bwe.WriteErrors) > 0 {
		return bwe.WriteErrors[0].Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// asBulk unwraps a BulkWriteException.
func asBulk(err error, out *mongo.BulkWriteException) bool { return errors.As(err, out) }
