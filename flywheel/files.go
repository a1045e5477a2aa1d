package flywheel

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/amk-dev/amk/inputfile"
)

// MaxInspectBytes bounds a corpus or results.tsv read whole for
// inspection (ReadAnyCorpusFile, ReadResultsFiles).
const MaxInspectBytes = 256 << 20

// ReadAnyCorpusFile reads a corpus in amk's format or AMK's ("-": standard
// input), of at most MaxInspectBytes; skipped counts the lines that are not
// corpus records. A missing file is an empty corpus.
func ReadAnyCorpusFile(path string) (recs []Record, skipped int, err error) {
	data, err := inputfile.Read(path, MaxInspectBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	recs, skipped = ParseAnyCorpus(data)
	return recs, skipped, nil
}

// ReadResultsFiles reads results.tsv files (amk's or AMK's), each of at
// most MaxInspectBytes, their rows in the order of the files. A file that
// does not parse is named in the error.
func ReadResultsFiles(paths ...string) ([]Row, error) {
	var rows []Row
	for _, p := range paths {
		data, err := inputfile.Read(p, MaxInspectBytes)
		if err != nil {
			return nil, err
		}
		r, err := ParseRows(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}
