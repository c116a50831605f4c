package mlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// RotateTimeFormat is the suffix mongod's rename-mode rotation gives the
// old file: FILE.2026-11-25T10-00-00 (terseUTCCurrentTime).
const RotateTimeFormat = "2006-01-02T15-04-05"

// File is a log file that can be rotated (mongod's --logpath with
// --logRotate rename|reopen). It is a zapcore.WriteSyncer.
type File struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	reopen bool
	now    func() time.Time
}

// OpenFile opens the log file at path. Without appendMode an existing
// non-empty file is first renamed aside as a rotation would, as mongod does
// without --logappend. reopen selects --logRotate reopen: rotation only
// closes and reopens the file (an outside tool such as logrotate has
// renamed it).
func OpenFile(path string, appendMode, reopen bool) (*File, error) {
	f := &File{path: path, reopen: reopen, now: time.Now}
	if !appendMode {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			if err := f.renameAside(); err != nil {
				return nil, err
			}
		}
	}
	if err := f.open(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) open() error {
	fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open log file %s: %w", f.path, err)
	}
	f.f = fh
	return nil
}

// renameAside renames the file to path.<UTC timestamp>; like mongod it
// fails rather than overwrite a file rotated within the same second.
func (f *File) renameAside() error {
	target := f.path + "." + f.now().UTC().Format(RotateTimeFormat)
	if _, err := os.Stat(target); err == nil {
		return fmt.Errorf("Renaming file %s to %s failed; file already exists", f.path, target)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(f.path, target); err != nil {
		return fmt.Errorf("Failed to rename %s to %s: %w", f.path, target, err)
	}
	return nil
}

// Rotate renames the file aside (rename mode) and opens a new one, or just
// reopens it (reopen mode).
func (f *File) Rotate() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.reopen {
		if err := f.renameAside(); err != nil {
			return err
		}
	}
	old := f.f
	if err := f.open(); err != nil {
		f.f = old
		return err
	}
	return old.Close()
}

func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Write(p)
}

// Sync flushes the file to disk.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Sync()
}

// Close closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Close()
}
