//go:build unix

package filemap

import (
	"os"
	"syscall"
)

func mapReadOnly(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmap(data []byte) error { return syscall.Munmap(data) }

// evict drops the mapped pages of data (whole pages) from the process; an
// advice, so a failure changes nothing but the memory held.
func evict(data []byte) { _ = syscall.Madvise(data, syscall.MADV_DONTNEED) }
