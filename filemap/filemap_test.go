package filemap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// writeFile writes n bytes of a pattern that differs from page to page.
func writeFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i/4096)
	}
	path := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// skipWithoutMaps skips the test where the platform has no memory maps.
func skipWithoutMaps(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := mapReadOnly(f, 1); errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
}

func TestMapReadsTheFileAndUnmaps(t *testing.T) {
	path, want := writeFile(t, 3*os.Getpagesize()+100)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Map(f, int64(len(want)))
	f.Close() // the mapping outlives the descriptor
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatal("mapped bytes differ from the file's")
	}
	if err := Unmap(data); err != nil {
		t.Fatal(err)
	}
}

func TestMapRefusesSizesItCannotMap(t *testing.T) {
	path, _ := writeFile(t, 10)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int64{0, -1} {
		if data, err := Map(f, size); err == nil {
			_ = Unmap(data)
			t.Errorf("Map(size %d) succeeded", size)
		}
	}
}

// Released pages read back as the file's bytes (the kernel reads them
// again), and releasing backwards or past the end is harmless.
func TestOpenReleaseClose(t *testing.T) {
	page := os.Getpagesize()
	path, want := writeFile(t, 4*page+123)
	m := Open(path, 1, int64(len(want)))
	if m == nil {
		skipWithoutMaps(t, path)
		t.Fatal("Open mapped nothing")
	}
	defer m.Close()
	if !bytes.Equal(m.Data, want) {
		t.Fatal("mapped bytes differ from the file's")
	}
	for _, n := range []int{page + 1, 3 * page, page, 10 * page} {
		m.Release(n)
		if !bytes.Equal(m.Data, want) {
			t.Fatalf("after Release(%d) the bytes differ from the file's", n)
		}
	}
	if m.released != 4*page {
		t.Errorf("released %d bytes, want the 4 whole pages (%d)", m.released, 4*page)
	}
}

// Open maps only regular files within the size bounds.
func TestOpenMapsOnlyWhatItShould(t *testing.T) {
	path, _ := writeFile(t, 1000)
	cases := map[string]struct {
		path     string
		min, max int64
	}{
		"below the minimum": {path, 1001, 2000},
		"above the maximum": {path, 1, 999},
		"a directory":       {filepath.Dir(path), 0, 1 << 30},
		"a missing file":    {path + ".missing", 0, 1 << 30},
	}
	for name, c := range cases {
		if m := Open(c.path, c.min, c.max); m != nil {
			m.Close()
			t.Errorf("%s: mapped", name)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if m := Open(empty, 0, 10); m != nil {
		m.Close()
		t.Error("an empty file was mapped")
	}
}
