//go:build unix

package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within fails the test if f has not returned after a few seconds (a read
// that blocks on a FIFO never would).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5 s (blocked)", what)
		return nil
	}
}

func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "prog.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	for _, tc := range []struct{ path, says string }{
		{fifo, "a named pipe (FIFO), not a regular file"},
		{dir, "a directory, not a regular file"},
		{"/dev/zero", "a character device, not a regular file"},
	} {
		for fn, read := range map[string]func(string, int64) ([]byte, error){"ReadFile": ReadFile, "Read": Read} {
			err := within(t, fn+"("+tc.path+")", func() error { _, err := read(tc.path, 1<<20); return err })
			var nr *NotRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s(%s): err = %v, want %q", fn, tc.path, err, tc.says)
			}
		}
	}
}

func TestReadFileBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg.json")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(path, 10); err != nil || string(data) != "0123456789" {
		t.Fatalf("at the limit: %q, %v", data, err)
	}
	var tl *TooLargeError
	if _, err := ReadFile(path, 9); !errors.As(err, &tl) || !strings.Contains(err.Error(), "larger than 9 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing"), 9); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// A reader that yields more than its announced size is cut at the limit.
	if _, err := readAll(strings.NewReader("0123456789"), "pipe", 0, 5); !errors.As(err, &tl) {
		t.Fatalf("a growing input: %v", err)
	}
}
