package proctest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFilesOpenForWritingSeesWritersOnly(t *testing.T) {
	dir := t.TempDir()
	reader, writer, other := filepath.Join(dir, "reader"), filepath.Join(dir, "writer"), filepath.Join(t.TempDir(), "other")
	for _, p := range []string{reader, writer, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.Open(reader)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(writer, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := os.OpenFile(other, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	got, err := FilesOpenForWriting(os.Getpid(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(writer); !slices.Equal(got, []string{real}) {
		t.Fatalf("open for writing under %s: %v, want only %s", dir, got, writer)
	}
	w.Close()
	if got, err := FilesOpenForWriting(os.Getpid(), dir); err != nil || len(got) != 0 {
		t.Fatalf("after the writer closed: %v %v", got, err)
	}
}
