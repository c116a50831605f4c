package engine

import (
	"testing"

	"github.com/mayflydb/mayfly/wire"
)

// TestIssue15AuthLocalhostExceptionLoopbackOnly: the exception is for
// loopback clients creating a user in admin while no user exists.
func TestIssue15AuthLocalhostExceptionLoopbackOnly(t *testing.T) {
	e := &Engine{}
	create := &Command{Name: "createUser"}
	for _, tc := range []struct {
		cmd    *Command
		db     string
		remote string
		want   bool
	}{
		{create, "admin", "127.0.0.1:5000", true},
		{create, "admin", "[::1]:5000", true},
		{create, "admin", "10.1.2.3:5000", false},
		{create, "admin", "192.168.0.7:5000", false},
		{create, "app", "127.0.0.1:5000", false},
		{&Command{Name: "find"}, "admin", "127.0.0.1:5000", false},
	} {
		r := &Request{DB: tc.db, Conn: &wire.ConnInfo{RemoteAddr: tc.remote}}
		if got := e.localhostException(tc.cmd, r); got != tc.want {
			t.Errorf("%s on %s from %s: exception %v, want %v", tc.cmd.Name, tc.db, tc.remote, got, tc.want)
		}
	}
	e.users.users = map[string]*userRec{"admin.root": {User: "root", DB: "admin"}}
	if e.localhostException(create, &Request{DB: "admin", Conn: &wire.ConnInfo{RemoteAddr: "127.0.0.1:1"}}) {
		t.Error("the exception stays open once a user exists")
	}
}
