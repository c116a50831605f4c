package server

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// TestIssue15AuthMongosh: mongosh against --auth: db.createUser through
// the localhost exception, -u/-p/--authenticationDatabase, db.auth,
// db.getUsers, db.changeUserPassword, a refused command, and
// --authenticationMechanism SCRAM-SHA-1 and SCRAM-SHA-256 with the right
// and a wrong password. Like
// TestMongoshSmoke it needs mongosh in .cache.
func TestIssue15AuthMongosh(t *testing.T) {
	bin := needMongosh(t)
	dir := t.TempDir()
	s, err := Start(Config{InMemory: true, Logger: zaptest.NewLogger(t), Auth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mongosh := func(db string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{s.URI() + db + "?serverSelectionTimeoutMS=3000", "--quiet", "--norc"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "CI=1", "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1")
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := mongosh("admin", "--eval", "db.createUser({user: 'admin', pwd: 'adminpw', roles: ['root']}); 'created'")
	if err != nil || !strings.HasSuffix(out, "created") {
		t.Fatalf("db.createUser through the localhost exception: %v\n%s", err, out)
	}
	out, err = mongosh("app", "--eval", "db.c.findOne()")
	if err == nil || !strings.Contains(out, "requires authentication") {
		t.Fatalf("unauthenticated find: %v\n%s", err, out)
	}
	out, err = mongosh("app", "-u", "admin", "-p", "adminpw", "--authenticationDatabase", "admin", "--eval",
		"db.createUser({user: 'ann', pwd: 'annpw', roles: ['readWrite']}); db.getUsers().users.map(u => u._id + ':' + u.mechanisms.join('+')).join(',')")
	if err != nil || !strings.HasSuffix(out, "app.ann:SCRAM-SHA-1+SCRAM-SHA-256") {
		t.Fatalf("mongosh -u -p, db.createUser, db.getUsers: %v\n%s", err, out)
	}
	out, err = mongosh("app", "--eval", "db.auth('ann', 'annpw'); db.c.insertOne({_id: 1}); db.changeUserPassword('ann', 'newpw'); db.c.countDocuments()")
	if err == nil && strings.HasSuffix(out, "1") {
		t.Fatalf("ann changed her own password without changePassword: %s", out)
	}
	out, err = mongosh("app", "-u", "admin", "-p", "adminpw", "--authenticationDatabase", "admin", "--eval", "db.changeUserPassword('ann', 'newpw'); 'changed'")
	if err != nil || !strings.HasSuffix(out, "changed") {
		t.Fatalf("db.changeUserPassword: %v\n%s", err, out)
	}
	out, err = mongosh("app", "--eval", "db.auth('ann', 'newpw'); db.c.insertOne({_id: 2}); db.c.countDocuments()")
	if err != nil || !strings.HasSuffix(out, "2") {
		t.Fatalf("db.auth with the new password: %v\n%s", err, out)
	}
	out, err = mongosh("app", "--eval", "db.auth('ann', 'annpw')")
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("db.auth with the old password: %v\n%s", err, out)
	}
	// Both mechanisms from the command line, right and wrong password.
	for _, mech := range []string{"SCRAM-SHA-1", "SCRAM-SHA-256"} {
		out, err = mongosh("app", "-u", "ann", "-p", "newpw", "--authenticationMechanism", mech, "--eval",
			"db.runCommand({connectionStatus: 1}).authInfo.authenticatedUsers[0].user + '/' + db.c.countDocuments()")
		if err != nil || !strings.HasSuffix(out, "ann/2") {
			t.Fatalf("mongosh --authenticationMechanism %s: %v\n%s", mech, err, out)
		}
		out, err = mongosh("app", "-u", "ann", "-p", "wrong", "--authenticationMechanism", mech, "--eval", "'in'")
		if err == nil || !strings.Contains(out, "Authentication failed") {
			t.Fatalf("mongosh --authenticationMechanism %s with a wrong password: %v\n%s", mech, err, out)
		}
	}
}
