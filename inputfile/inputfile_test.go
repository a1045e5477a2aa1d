package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file within the limit is read whole; one over it is refused, before a
// byte is read for a regular file; a missing one is the open's error.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{1000, 4096} {
		if data, err := Read(path, limit); err != nil || len(data) != 1000 {
			t.Errorf("limit %d: %d bytes, %v", limit, len(data), err)
		}
	}
	var tooLarge *TooLargeError
	if _, err := Read(path, 999); !errors.As(err, &tooLarge) || tooLarge.Limit != 999 || !strings.Contains(err.Error(), "larger than 999 bytes") {
		t.Errorf("limit 999: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// A stream (here a pipe) is cut off one byte past the limit.
func TestReadAStreamOverTheLimit(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = w.Write([]byte(strings.Repeat("y", 5000)))
		w.Close()
	}()
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin; r.Close() }()
	var tooLarge *TooLargeError
	if _, err := Read("-", 100); !errors.As(err, &tooLarge) || tooLarge.Path != "-" || !strings.Contains(err.Error(), "standard input is larger than 100 bytes") {
		t.Fatalf("a pipe over the limit: %v", err)
	}
}
