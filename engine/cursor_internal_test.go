package engine

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type nopSource struct{ closed bool }

func (n *nopSource) next() (bson.Raw, error) { return nil, nil }
func (n *nopSource) close()                  { n.closed = true }

// Idle cursors are reaped after the timeout (10 minutes, as mongod);
// cursors in use by a getMore are not.
func TestCursorTableReapsIdle(t *testing.T) {
	tab := newCursorTable()
	idle, busy := &nopSource{}, &nopSource{}
	a := tab.add(&cursor{ns: "d.c", src: idle})
	b := tab.add(&cursor{ns: "d.c", src: busy})
	if _, err := tab.checkout(b, "d.c"); err != nil {
		t.Fatal(err)
	}
	if n := tab.reapIdle(time.Now().Add(9 * time.Minute)); n != 0 {
		t.Fatalf("reaped %d before the timeout", n)
	}
	if n := tab.reapIdle(time.Now().Add(11 * time.Minute)); n != 1 || !idle.closed || busy.closed {
		t.Fatalf("reaped %d (idle closed %v, busy closed %v)", n, idle.closed, busy.closed)
	}
	if _, err := tab.checkout(a, "d.c"); err == nil {
		t.Fatal("reaped cursor still usable")
	}
	if _, err := tab.checkout(b, "other.ns"); err == nil {
		t.Fatal("cursor used from another namespace")
	}
}
