package compat

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/server"
)

// TestIssue21WriteConcernParsing: mongod 7.0 parses writeConcern with its
// IDL (write_concern_options.idl): j and fsync are safeBool (bool or any
// number), w a number, string or tag document, wtimeout anything; other
// types and unknown fields fail with the IDL's codes and messages, and a
// standalone refuses what only a replica set can honour.
func TestIssue21WriteConcernParsing(t *testing.T) {
	e := newEnv(t)
	dec1, _ := bson.ParseDecimal128("1")
	insert := func(wc any) error {
		return e.runErr(bson.D{{Key: "insert", Value: "wc"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "writeConcern", Value: wc}})
	}
	for _, ok := range []bson.D{
		{},
		{{Key: "j", Value: true}},
		{{Key: "j", Value: int32(1)}},
		{{Key: "j", Value: int64(1)}},
		{{Key: "j", Value: 1.0}},
		{{Key: "j", Value: dec1}},
		{{Key: "j", Value: int32(0)}},
		{{Key: "j", Value: nil}},
		{{Key: "fsync", Value: int32(1)}},
		{{Key: "fsync", Value: 1.0}},
		{{Key: "j", Value: false}, {Key: "fsync", Value: true}},
		{{Key: "w", Value: 1.5}},
		{{Key: "w", Value: int64(0)}},
		{{Key: "w", Value: nil}},
		{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: "soon"}},
		{{Key: "w", Value: int32(1)}, {Key: "wtimeout", Value: int64(100)}, {Key: "provenance", Value: "clientSupplied"}},
		{{Key: "getLastError", Value: 1}, {Key: "wOpTime", Value: "x"}, {Key: "wElectionId", Value: 1}},
	} {
		if err := insert(ok); err != nil {
			t.Errorf("writeConcern %s refused: %v", ejson(ok), err)
		}
	}
	for _, c := range []struct {
		wc   any
		code int32
		name string
		msg  string
	}{
		{"x", 14, "TypeMismatch", `"writeConcern" had the wrong type. Expected object, found string`},
		{bson.D{{Key: "j", Value: "yes"}}, 14, "TypeMismatch", "BSON field 'WriteConcernOptions.j' is the wrong type 'string', expected types '[bool, long, int, decimal, double']"},
		{bson.D{{Key: "fsync", Value: bson.D{}}}, 14, "TypeMismatch", "BSON field 'WriteConcernOptions.fsync' is the wrong type 'object', expected types '[bool, long, int, decimal, double']"},
		{bson.D{{Key: "j", Value: int32(1)}, {Key: "fsync", Value: 1.0}}, 9, "FailedToParse", "fsync and j options cannot be used together"},
		{bson.D{{Key: "w", Value: true}}, 9, "FailedToParse", "w has to be a number, string, or object; found: bool"},
		{bson.D{{Key: "w", Value: int32(-1)}}, 9, "FailedToParse", "w has to be a non-negative number and not greater than 50; found: -1"},
		{bson.D{{Key: "w", Value: int32(51)}}, 9, "FailedToParse", "w has to be a non-negative number and not greater than 50; found: 51"},
		{bson.D{{Key: "w", Value: bson.D{}}}, 9, "FailedToParse", "tagged write concern requires tags"},
		{bson.D{{Key: "w", Value: int32(2)}}, 2, "BadValue", "cannot use 'w' > 1 when a host is not replicated"},
		{bson.D{{Key: "w", Value: "dc"}}, 2, "BadValue", "cannot use non-majority 'w' mode dc when a host is not a member of a replica set"},
		{bson.D{{Key: "wtimeoutMS", Value: int32(5)}}, 40415, "Location40415", "BSON field 'WriteConcernOptions.wtimeoutMS' is an unknown field."},
		{bson.D{{Key: "j", Value: true}, {Key: "j", Value: true}}, 40413, "Location40413", "BSON field 'WriteConcernOptions.j' is a duplicate field"},
		{bson.D{{Key: "provenance", Value: "me"}}, 2, "BadValue", "Enumeration value 'me' for field 'WriteConcernOptions.provenance' is not a valid value."},
	} {
		err := insert(c.wc)
		wantCode(t, err, c.code, c.name)
		if msg := errMsg(err); !strings.Contains(msg, c.msg) {
			t.Errorf("writeConcern %s: message %q, want %q", ejson(c.wc), msg, c.msg)
		}
	}
	if n := e.count("wc", nil); n != 17 {
		t.Fatalf("%d documents inserted, want 17 (one per accepted write concern)", n)
	}
}

// TestIssue21JournalCommitIntervalConfig: server.Config takes mongod's
// journalCommitInterval range (1 to 500 ms) and refuses to start outside
// it; inside it the server serves writes of every write concern.
func TestIssue21JournalCommitIntervalConfig(t *testing.T) {
	mayflyOnly(t)
	for _, bad := range []time.Duration{-time.Millisecond, 501 * time.Millisecond, time.Microsecond} {
		srv, err := server.Start(server.Config{Bind: "127.0.0.1", InMemory: true, JournalCommitInterval: bad})
		if err == nil {
			srv.Close()
			t.Fatalf("JournalCommitInterval %v accepted", bad)
		}
		if !strings.Contains(err.Error(), "between 1 and 500 milliseconds") {
			t.Errorf("JournalCommitInterval %v: %v", bad, err)
		}
	}
	srv, err := server.Start(server.Config{Bind: "127.0.0.1", InMemory: true, JournalCommitInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := connect(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, wc := range []bson.D{{}, {{Key: "w", Value: int32(1)}}, {{Key: "j", Value: int32(1)}}, {{Key: "fsync", Value: true}}} {
		if err := cli.Database("jci").RunCommand(ctx, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i}}}}, {Key: "writeConcern", Value: wc}}).Err(); err != nil {
			t.Fatalf("insert with writeConcern %s: %v", ejson(wc), err)
		}
	}
	time.Sleep(20 * time.Millisecond) // a few background syncs run meanwhile
	if n, err := cli.Database("jci").Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 4 {
		t.Fatalf("count %d, %v; want 4", n, err)
	}
}
