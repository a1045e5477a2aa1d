//go:build !unix

package trial

import (
	"io"
	"os"
)

// mapFile reads f directly where memory maps are not available.
func mapFile(f *os.File, size int64) (io.ReaderAt, func(), error) {
	return f, func() {}, nil
}
