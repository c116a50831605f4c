package engine

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// authProbe is a request for c as a test client would send it.
func authProbe(c *Command) *Request {
	cmd := bson.D{{Key: c.Name, Value: "c"}}
	switch c.Name {
	case "getMore":
		cmd = bson.D{{Key: "getMore", Value: int64(1)}, {Key: "collection", Value: "c"}}
	case "explain":
		cmd = bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}}}}
	case "renameCollection":
		cmd = bson.D{{Key: "renameCollection", Value: "app.c"}, {Key: "to", Value: "app.d"}}
	case "createUser", "grantRolesToUser", "revokeRolesFromUser", "updateUser":
		cmd = append(cmd, bson.E{Key: "roles", Value: bson.A{"read"}})
	case "aggregate":
		cmd = append(cmd, bson.E{Key: "pipeline", Value: bson.A{}})
	}
	return &Request{DB: "app", Name: c.Name, Cmd: cmd}
}

// TestIssue15AuthEveryCommandHasACheck is the property over the command
// table: every command either runs unauthenticated as in mongod or has an
// authorization entry; an entry that needs privileges refuses a user
// without roles and admits root; and a command without an entry is
// refused (authorization fails closed).
func TestIssue15AuthEveryCommandHasACheck(t *testing.T) {
	e := &Engine{cursors: newCursorTable()}
	e.auth.enabled = true
	nobody := []*userRec{{User: "nobody", DB: "app"}}
	root := []*userRec{{User: "root", DB: "admin", Roles: []roleRef{{"root", "admin"}}}}
	needing := 0
	for _, c := range Commands() {
		if AuthFree(c.Name) {
			if cmdAuth[c.Name] != nil {
				t.Errorf("%s runs unauthenticated yet has an authorization entry", c.Name)
			}
			continue
		}
		need := cmdAuth[c.Name]
		if need == nil {
			t.Errorf("command %s has no authorization entry", c.Name)
			continue
		}
		ps, err := need(e, authProbe(c))
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		err = e.authorize(c, authProbe(c), nobody)
		if len(ps) > 0 {
			needing++
			if mongoerr.From(err).Code != mongoerr.Unauthorized {
				t.Errorf("%s ran for a user without roles: %v", c.Name, err)
			}
		} else if err != nil {
			t.Errorf("%s (any user) refused: %v", c.Name, err)
		}
		if err := e.authorize(c, authProbe(c), root); err != nil {
			t.Errorf("%s refused to root: %v", c.Name, err)
		}
	}
	if needing < 30 {
		t.Errorf("only %d commands need privileges", needing)
	}
	ghost := &Command{Name: "noSuchEntry"}
	if err := e.authorize(ghost, &Request{DB: "app", Cmd: bson.D{{Key: "noSuchEntry", Value: 1}}}, root); mongoerr.From(err).Code != mongoerr.Unauthorized {
		t.Errorf("a command without an entry ran: %v", err)
	}
}

// TestIssue15AuthMessage: mongod's "not authorized" message renders the
// command as BSONObj::toString, never with the password.
func TestIssue15AuthMessage(t *testing.T) {
	e := &Engine{}
	r := &Request{DB: "app", Cmd: bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "secret"}, {Key: "roles", Value: bson.A{}}, {Key: "n", Value: int32(1)}, {Key: "$db", Value: "app"}}}
	got := e.notAuthorized(r).(*mongoerr.Error).Msg
	want := `not authorized on app to execute command { createUser: "u", pwd: "xxx", roles: [], n: 1, $db: "app" }`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
