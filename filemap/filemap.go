package filemap

import (
	"errors"
	"fmt"
	"os"

	"github.com/amk-dev/amk/inputfile"
)

// ErrUnsupported is Map's error where the platform has no memory maps.
var ErrUnsupported = errors.New("filemap: memory maps are not available on this platform")

// Map maps the first size bytes of f read-only. The mapping outlives f's
// descriptor; Unmap releases it. A file truncated while mapped faults on
// access to the lost pages (see runtime/debug.SetPanicOnFault).
func Map(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("filemap: %s: cannot map %d bytes", f.Name(), size)
	}
	return mapReadOnly(f, int(size))
}

// Unmap releases a mapping Map returned; its bytes must not be touched
// afterwards.
func Unmap(data []byte) error { return unmap(data) }

// File is a regular file mapped whole by Open, consumed front to back:
// Release hands the pages already read back to the kernel, so that the
// file never sits in the process's memory whole.
type File struct {
	// Data is the file's bytes, read-only.
	Data     []byte
	released int // Data[:released] has been handed back
}

// Open maps the file at path when it is a regular file of minBytes to
// maxBytes bytes; nil (and no error) where it is not or cannot be mapped:
// the caller reads it instead, which also reports every error.
func Open(path string, minBytes, maxBytes int64) *File {
	f, fi, err := inputfile.Open(path) // never blocks, regular files only
	if err != nil {
		return nil
	}
	defer f.Close() // the mapping outlives the descriptor
	if fi.Size() < minBytes || fi.Size() > maxBytes {
		return nil
	}
	data, err := Map(f, fi.Size())
	if err != nil {
		return nil
	}
	return &File{Data: data}
}

// Release hands back the whole pages of Data[:n] (the kernel reads them
// again from the file should they be touched later). It only ever moves
// forward: a smaller n than before does nothing.
func (m *File) Release(n int) {
	n = min(n, len(m.Data)) &^ (os.Getpagesize() - 1)
	if n > m.released {
		evict(m.Data[m.released:n])
		m.released = n
	}
}

// Close unmaps the file; Data must not be touched afterwards.
func (m *File) Close() { _ = unmap(m.Data) }
