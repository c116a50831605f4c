package engine

import (
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

func testSessionID(b byte) bson.Binary {
	d := make([]byte, 16)
	d[0] = b
	return bson.Binary{Subtype: 4, Data: d}
}

func TestSessionRegistryTouchGetExpiry(t *testing.T) {
	now := time.Unix(2_000_000_000, 0)
	g := NewSessionRegistry(func() time.Time { return now })
	g.SetTimeout(10 * time.Minute)
	a := testSessionID(1)
	if g.Get(a) != nil {
		t.Fatal("Get of an unknown session")
	}
	s := g.Touch(a)
	if g.Get(a) != s || g.Touch(a) != s {
		t.Fatal("Touch and Get must return the same session")
	}
	now = now.Add(9 * time.Minute)
	if g.Get(a) != s {
		t.Fatal("a session used 9 minutes ago expired (timeout 10)")
	}
	g.Touch(a) // refreshed
	now = now.Add(9 * time.Minute)
	if g.Get(a) != s {
		t.Fatal("a refreshed session expired")
	}
	now = now.Add(time.Minute)
	if g.Get(a) != nil {
		t.Fatal("a session unused for the timeout is still there")
	}
	if n := g.Touch(a); n == s {
		t.Fatal("touching an expired session must start a new one (its state gone)")
	}
}

func TestSessionRegistryEndAndKill(t *testing.T) {
	now := time.Unix(2_000_000_000, 0)
	g := NewSessionRegistry(func() time.Time { return now })
	a, b, c := testSessionID(1), testSessionID(2), testSessionID(3)
	g.Touch(a)
	g.Touch(b)
	g.Touch(c)
	g.End(a)
	if len(g.list()) != 3 {
		t.Fatal("an ended session stays listed until the next refresh, as in mongod")
	}
	live, ended := g.sweep()
	if len(live) != 2 || len(ended) != 1 || string(ended[0].Data) != string(a.Data) {
		t.Fatalf("sweep: live %v ended %v", live, ended)
	}
	g.Kill([]bson.Binary{b})
	if g.Get(b) != nil || g.Get(c) == nil {
		t.Fatal("Kill dropped the wrong sessions")
	}
	if got := g.Kill(nil); len(got) != 1 || g.Get(c) != nil {
		t.Fatalf("Kill(nil) = %v", got)
	}
}

func TestMemRetryStore(t *testing.T) {
	g := NewSessionRegistry(nil)
	s := g.Touch(testSessionID(9))
	var st memRetryStore
	release := s.CheckOut()
	defer release()
	if err := st.Begin(s, 5); err != nil {
		t.Fatal(err)
	}
	st.Record(s, 5, 0, StmtResult{N: 1})
	if r, ok := st.Lookup(s, 5, 0); !ok || r.N != 1 {
		t.Fatalf("Lookup after Record: %v %v", r, ok)
	}
	if _, ok := st.Lookup(s, 5, 1); ok {
		t.Fatal("an unrecorded statement was found")
	}
	if err := st.Begin(s, 5); err != nil {
		t.Fatalf("continuing the same txnNumber: %v", err)
	}
	if _, ok := st.Lookup(s, 5, 0); !ok {
		t.Fatal("continuing the same txnNumber lost its statements")
	}
	err := st.Begin(s, 4)
	if !mongoerr.Is(err, mongoerr.TransactionTooOld) {
		t.Fatalf("older txnNumber: %v", err)
	}
	if err := st.Begin(s, 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Lookup(s, 5, 0); ok {
		t.Fatal("a newer txnNumber must forget the older statements")
	}
	st.Record(s, 5, 3, StmtResult{N: 1}) // a stale writer's record is dropped
	if _, ok := st.Lookup(s, 5, 3); ok {
		t.Fatal("a record for an older txnNumber was kept")
	}
}

// TestSessionCheckOutSerializes: one command at a time holds a session.
func TestSessionCheckOutSerializes(t *testing.T) {
	s := NewSessionRegistry(nil).Touch(testSessionID(1))
	var mu sync.Mutex
	inside := 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := s.CheckOut()
			mu.Lock()
			inside++
			if inside != 1 {
				t.Errorf("%d commands hold the session", inside)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
}
