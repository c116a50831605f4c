package pebblekv

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mayflydb/mayfly/storage"
)

// crashAfterUnsyncedCommit commits one key without sync, waits, and
// returns whether the key survives a crash that keeps only what was synced
// (Pebble's crashable in-memory filesystem).
func crashAfterUnsyncedCommit(t *testing.T, interval, wait time.Duration) bool {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs, WALSyncInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	time.Sleep(wait)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	s2, err := Open("db", Options{FS: crashed, WALSyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, err = s2.Get([]byte("k"))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestIssue21BackgroundWALSync: an unsynced commit is not durable by
// itself (Pebble keeps it in its WAL buffer, neither written nor synced);
// the store's background syncer makes it durable within the interval.
func TestIssue21BackgroundWALSync(t *testing.T) {
	if crashAfterUnsyncedCommit(t, -1, 50*time.Millisecond) {
		t.Fatal("without the background sync an unsynced commit survived a crash: the test cannot tell the syncer's effect")
	}
	if !crashAfterUnsyncedCommit(t, 10*time.Millisecond, 200*time.Millisecond) {
		t.Fatal("an unsynced commit was lost to a crash 200ms later despite a 10ms background WAL sync")
	}
}

// TestIssue21WALSyncerStopsOnClose: Close stops the syncer before closing
// Pebble (which panics on use after Close), even with commits pending.
func TestIssue21WALSyncerStopsOnClose(t *testing.T) {
	for i := 0; i < 20; i++ {
		s, err := Open("", Options{InMemory: true, WALSyncInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		b := s.NewBatch()
		b.Set([]byte("k"), []byte("v"))
		b.Commit(false)
		b.Close()
		time.Sleep(time.Duration(i%3) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
