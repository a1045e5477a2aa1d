package inputfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError refuses a path that is not a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, describe(e.Mode))
}

// describe names a file type in plain words.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}

// TooLargeError refuses an input over its limit. Path is "-" for standard
// input.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", name(e.Path), e.Limit)
}

// name is how an error names an input: standard input in words.
func name(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// Open opens a regular file for reading, with its file info. Anything else
// is a *NotRegularError, returned without blocking: the file is opened
// non-blocking (which a regular file ignores), so a FIFO with no writer
// cannot hang the open.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	return f, fi, nil
}

// ReadFile reads a whole regular file of at most limit bytes: a larger one
// is a *TooLargeError (before any byte is read when its size says so), a
// file that is not regular a *NotRegularError.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, fi.Size(), limit)
}

// Read is ReadFile, or a read of standard input for "-", refusing more
// than limit bytes either way.
func Read(path string, limit int64) ([]byte, error) {
	if path == "-" {
		return readAll(os.Stdin, path, 0, limit)
	}
	return ReadFile(path, limit)
}

// readAll reads r, of the given expected size, up to limit bytes: one
// buffer of size+1 bytes, so that the read ends on io.EOF with no copy
// (io.ReadAll's doubling would copy a large file several times); a reader
// that yields more than its size (a file that grew, standard input) grows
// the buffer as it comes, and more than limit bytes is a *TooLargeError
// naming path.
func readAll(r io.Reader, path string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, &TooLargeError{Path: path, Limit: limit} // refused before reading
	}
	r = io.LimitReader(r, limit+1)
	data := make([]byte, 0, max(size+1, 512))
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name(path), err)
		}
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return data, nil
}
