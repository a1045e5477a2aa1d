//go:build !unix

package filemap

import "os"

func mapReadOnly(*os.File, int) ([]byte, error) { return nil, ErrUnsupported }

func unmap([]byte) error { return nil }

func evict([]byte) {}
