//go:build unix

package flywheel

import (
	"errors"
	"path/filepath"
	"testing"
)

// A second TryLock, even from this process, finds the lock held and names
// the holder; once released, the lock can be taken again.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "lock")
	first, err := TryLock(path, "pid 1 on here")
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(path, "pid 2")
	var held *HeldError
	if !errors.As(err, &held) || held.Holder != "pid 1 on here" || held.Path != path {
		t.Fatalf("second lock: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := TryLock(path, "pid 3")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := again.Close(); err != nil || again.Close() != nil {
		t.Fatalf("close: %v", err)
	}
}
