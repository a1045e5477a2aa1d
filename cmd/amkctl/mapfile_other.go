//go:build !unix

package main

// mappedFile is a mapped file where memory maps are available (mapfile_unix.go).
type mappedFile struct{ data []byte }

// mapFile maps nothing here: the caller reads the file.
func mapFile(string, int64) *mappedFile { return nil }

func (m *mappedFile) drop(int) {}
func (m *mappedFile) close()   {}
