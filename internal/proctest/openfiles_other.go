//go:build !linux

package proctest

import "errors"

// FilesOpenForWriting needs /proc (Linux); elsewhere it returns
// errors.ErrUnsupported.
func FilesOpenForWriting(pid int, dir string) ([]string, error) { return nil, errors.ErrUnsupported }
