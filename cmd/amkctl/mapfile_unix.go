//go:build unix

package main

import (
	"os"
	"syscall"
)

// mappedFile is a regular file mapped read-only: amkctl validate decodes a
// large program from the page cache with no copy, and hands the pages it
// has decoded back as it goes (drop), so the file never sits in the
// process's memory whole.
type mappedFile struct {
	data    []byte
	dropped int // data[:dropped] has been handed back
}

// mapFile maps path when it is a regular file of at least mapMinBytes and
// at most limit bytes; nil (and no error) where it is not: the caller reads
// it instead, which also reports every error.
func mapFile(path string, limit int64) *mappedFile {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < mapMinBytes || fi.Size() > limit || int64(int(fi.Size())) != fi.Size() {
		return nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return &mappedFile{data: data}
}

// drop hands back the whole pages of data[:n] (the kernel reads them again
// from the file should they be touched later).
func (m *mappedFile) drop(n int) {
	n &^= os.Getpagesize() - 1
	if n > m.dropped {
		_ = syscall.Madvise(m.data[m.dropped:n], syscall.MADV_DONTNEED)
		m.dropped = n
	}
}

func (m *mappedFile) close() { _ = syscall.Munmap(m.data) }
