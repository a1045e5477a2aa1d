//go:build !unix

package trial

import "os"

// mapFile reads f into memory where memory maps are not available.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	return readWhole(f, size)
}
