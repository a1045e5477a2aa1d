package flywheel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// CorpusFollower reads a corpus.jsonl once and afterwards only what was
// appended to it, for a long-running process that needs the whole corpus
// again and again (the scheduler, at each campaign it creates). The corpus
// is append-only (AppendCorpus), so the records already parsed stay valid;
// a file that was replaced (another file renamed over it), shrank, or whose
// first or last parsed bytes changed is read again from the start. A file
// edited in place elsewhere, keeping its length, is not noticed: nothing
// amk runs does that.
type CorpusFollower struct {
	path string

	mu      sync.Mutex
	recs    []Record
	skipped int
	// offset is how many bytes of the file have been parsed: always just
	// after a newline (an unterminated last line is left for a later read).
	offset int64
	// file identifies the file read; head and tail are its first bytes and
	// the last bytes before offset, compared on each read to notice a
	// rewrite in place.
	file       os.FileInfo
	head, tail []byte
}

// followTail is how many bytes at the start and before the parsed offset
// are compared.
const followTail = 256

// NewCorpusFollower follows the corpus at path; nothing is read until
// Records.
func NewCorpusFollower(path string) *CorpusFollower { return &CorpusFollower{path: path} }

// Records returns every record of the corpus as of now, parsing only the
// lines appended since the previous call, and how many lines the whole
// corpus has that were not valid records. A missing file is an empty
// corpus. The slice is shared by every caller and must not be modified;
// later calls may append to the backing array beyond its length, never
// within it.
func (c *CorpusFollower) Records() (recs []Record, skipped int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		c.reset(nil)
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("flywheel: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("flywheel: %w", err)
	}
	if !c.continues(f, info) {
		c.reset(info)
	}
	c.file = info
	if info.Size() > c.offset {
		data := make([]byte, info.Size()-c.offset)
		n, err := f.ReadAt(data, c.offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("flywheel: %w", err)
		}
		data = data[:n]
		if end := bytes.LastIndexByte(data, '\n'); end >= 0 {
			got, bad := ParseCorpus(data[:end+1])
			c.recs = append(c.recs, got...)
			c.skipped += bad
			c.offset += int64(end + 1)
			if need := followTail - len(c.head); need > 0 {
				c.head = append(c.head, data[:min(need, end+1)]...)
			}
			c.tail = append(c.tail, data[:end+1]...)
			if len(c.tail) > followTail {
				c.tail = append([]byte(nil), c.tail[len(c.tail)-followTail:]...)
			}
		}
	}
	return c.recs[:len(c.recs):len(c.recs)], c.skipped, nil
}

// continues reports whether the open file is the one parsed so far, with
// its parsed bytes unchanged.
func (c *CorpusFollower) continues(f *os.File, info os.FileInfo) bool {
	if c.file == nil || !os.SameFile(c.file, info) || info.Size() < c.offset {
		return false
	}
	same := func(want []byte, at int64) bool {
		have := make([]byte, len(want))
		_, err := f.ReadAt(have, at)
		return err == nil && bytes.Equal(have, want)
	}
	return same(c.head, 0) && same(c.tail, c.offset-int64(len(c.tail)))
}

// reset forgets everything parsed.
func (c *CorpusFollower) reset(info os.FileInfo) {
	c.recs, c.skipped, c.offset, c.file, c.head, c.tail = nil, 0, 0, info, nil, nil
}
