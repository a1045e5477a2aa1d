// Package inputfile reads an input a user names: a file, or standard input
// for "-", bounded in size. A regular file over the limit is refused
// before a byte is read; a pipe or a file that grows is cut off one byte
// past it. What every front reads from the outside (program files, schedule
// configs, corpora, cost records) comes through here.
package inputfile

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError refuses an input over its limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Path, e.Limit)
}

// Read reads path, or standard input for "-", refusing more than limit
// bytes.
func Read(path string, limit int64) ([]byte, error) {
	var r io.Reader
	var size int64 // a regular file's size: its bytes are read into one buffer of that size
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if fi.Size() > limit {
				return nil, &TooLargeError{Path: path, Limit: limit} // refused before reading
			}
			size = fi.Size()
		}
		r = f
	}
	// One byte more than the size, so that the read ends on io.EOF with no
	// copy (io.ReadAll's doubling would copy a large file several times);
	// a file that grew meanwhile, or a pipe, grows the buffer as it comes.
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
			return nil, err
		}
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return data, nil
}
