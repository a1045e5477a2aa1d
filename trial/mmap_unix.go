//go:build unix

package trial

import (
	"bytes"
	"io"
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only; unmap releases the mapping.
func mapFile(f *os.File, size int64) (io.ReaderAt, func(), error) {
	if size <= 0 || int64(int(size)) != size {
		return f, func() {}, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return f, func() {}, nil // a file that cannot be mapped is read instead
	}
	return bytes.NewReader(data), func() { _ = syscall.Munmap(data) }, nil
}
