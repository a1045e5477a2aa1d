//go:build unix

package trial

import (
	"os"

	"github.com/amk-dev/amk/internal/filemap"
)

// mapFile maps size bytes of f read-only (reading them into memory where
// the file cannot be mapped); unmap releases the mapping.
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	if size <= 0 || int64(int(size)) != size {
		return readWhole(f, size)
	}
	data, err = filemap.Map(f, size)
	if err != nil {
		return readWhole(f, size) // a file that cannot be mapped is read instead
	}
	return data, func() { _ = filemap.Unmap(data) }, nil
}
