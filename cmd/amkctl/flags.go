package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/amk-dev/amk/internal/atomicfile"
)

// newFlagSet returns a verb's flag set: errors and help go to stderr, and
// parsing never exits the process.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: amkctl %s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags that may appear before, between or after the
// positional arguments and returns the positionals. It returns flag.ErrHelp
// for -h.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// The flag package consumes a "--" terminator: everything after it
		// is positional, even if it starts with "-".
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		args = rest
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// flagExit maps a parse error to the exit code: 0 for -h, 2 otherwise.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// readInput reads a file, or standard input for "-".
func readInput(path string, limit int64) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a crash never leaves a half-written file.
func writeFileAtomic(path string, data []byte) error { return atomicfile.Write(path, data) }

// splitIDs parses "1,2,3" into token ids.
func splitIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var v int32
		if _, err := fmt.Sscan(f, &v); err != nil || v < 0 {
			return nil, fmt.Errorf("invalid token id %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}
