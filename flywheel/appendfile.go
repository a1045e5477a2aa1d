package flywheel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// appendLocked appends to the file at path under an exclusive lock. After
// the lock is taken, a torn tail (a last line without its newline, left by a
// crashed writer) is truncated away; then build is called with the repaired
// file's size and its first line (nil when the file is empty) and returns
// the bytes to append, which are written with one write call and fsynced.
func appendLocked(path string, build func(size int64, firstLine []byte) ([]byte, error)) (err error) {
	if path == "" {
		return errors.New("flywheel: empty path")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("flywheel: create %s: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("flywheel: open %s: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("flywheel: close %s: %w", path, cerr)
		}
	}()
	if err := lockFile(f); err != nil {
		return fmt.Errorf("flywheel: lock %s: %w", path, err)
	}
	defer func() {
		if uerr := unlockFile(f); uerr != nil && err == nil {
			err = fmt.Errorf("flywheel: unlock %s: %w", path, uerr)
		}
	}()
	size, err := repairTail(f)
	if err != nil {
		return fmt.Errorf("flywheel: repair %s: %w", path, err)
	}
	first, err := readFirstLine(f, size)
	if err != nil {
		return fmt.Errorf("flywheel: read %s: %w", path, err)
	}
	buf, err := build(size, first)
	if err != nil {
		return err
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := f.WriteAt(buf, size); err != nil {
		return fmt.Errorf("flywheel: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("flywheel: fsync %s: %w", path, err)
	}
	if size == 0 {
		// A new file's directory entry must survive a crash too.
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("flywheel: fsync %s: %w", dir, err)
		}
	}
	return nil
}

// repairTail truncates f after its last newline when it does not end with
// one, and returns the resulting size.
func repairTail(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if size == 0 {
		return 0, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return size, nil
	}
	keep, err := lastNewlineEnd(f, size)
	if err != nil {
		return 0, err
	}
	if err := f.Truncate(keep); err != nil {
		return 0, err
	}
	return keep, nil
}

// lastNewlineEnd returns the offset just past the last '\n' in f's first
// size bytes (0 when there is none).
func lastNewlineEnd(f *os.File, size int64) (int64, error) {
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(0, end-chunk)
		n := int(end - start)
		if _, err := f.ReadAt(buf[:n], start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// readFirstLine returns the first line of f without its newline (nil when
// size is 0). Only the first 64 KiB are looked at.
func readFirstLine(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	buf := make([]byte, min(size, 64<<10))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	buf = buf[:n]
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i]
	}
	return buf, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil && !errors.Is(serr, os.ErrInvalid) {
		return serr
	}
	return cerr
}
