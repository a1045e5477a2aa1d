//go:build !unix

package doctor

// freeBytes is unknown off unix.
func freeBytes(string) (uint64, bool) { return 0, false }
