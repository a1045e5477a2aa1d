package flywheel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The one file lock of a workspace: the flywheel's appends (appendLocked),
// a campaign's ledger lock and a scheduler's workspace lock (both in
// runner) all take an advisory flock, which the kernel releases when the
// process dies, so a crash never leaves a stale lock.

// errLockHeld: another open file holds the lock.
var errLockHeld = errors.New("lock held")

// HeldError says that another process (or another open file of this one)
// holds a lock, and what it wrote into the lock file about itself.
type HeldError struct {
	Path   string
	Holder string // e.g. "pid 123 on host"; "" when the holder wrote nothing
}

func (e *HeldError) Error() string {
	who := e.Holder
	if who == "" {
		who = "an unknown process"
	}
	return fmt.Sprintf("%s is locked by %s", e.Path, who)
}

// FileLock is a held lock; Close releases it.
type FileLock struct{ f *os.File }

// TryLock takes the exclusive lock of the file at path (creating it and its
// directory) without waiting, and writes holder into it for whoever finds
// it taken. When the lock is held it returns a *HeldError.
//
// The lock is held on a descriptor opened for reading only (flock does not
// need more), and the holder text is written through a second descriptor
// closed at once: a process holding a lock keeps nothing open for writing,
// so its disk can be remounted read-only (the kernel refuses that while a
// file on it is open for writing) and remounted writable again while the
// process goes on.
func TryLock(path, holder string) (*FileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if err := tryLockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLockHeld) {
			data, _ := os.ReadFile(path)
			return nil, &HeldError{Path: path, Holder: strings.TrimSpace(string(data))}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	writeHolder(path, holder)
	return &FileLock{f: f}, nil
}

// writeHolder replaces the lock file's text by holder (a failure leaves the
// lock held with an older or no text: the text only informs whoever finds
// the lock taken).
func writeHolder(path, holder string) {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	_, _ = w.Write([]byte(holder + "\n"))
	_ = w.Sync()
	_ = w.Close()
}

// LockHolder says whether another open file holds the lock at path, and
// what its holder wrote about itself, without writing to the file. A
// missing file is a lock no one holds. The look takes the lock for the
// moment it lasts when it is free (a TryLock at that moment finds it held).
func LockHolder(path string) (holder string, held bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	switch err := tryLockFile(f); {
	case errors.Is(err, errLockHeld):
		data, _ := os.ReadFile(path)
		return strings.TrimSpace(string(data)), true, nil
	case err != nil:
		return "", false, fmt.Errorf("lock %s: %w", path, err)
	}
	return "", false, nil
}

// Close releases the lock.
func (l *FileLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
