package campaign

import (
	"go/format"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPure: the state machine's own code does no I/O, reads no clock and
// starts no goroutines (the packages it may use for that are not imported,
// and time.Now / go statements do not appear).
func TestPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	banned := []string{"os", "io", "io/fs", "bufio", "net", "net/http", "os/exec", "syscall", "sync", "log", "log/slog", "math/rand", "crypto/rand"}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range banned {
				if path == b {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := readSource(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"time.Now(", "time.Since(", "time.Sleep(", "go func", "\tgo "} {
			if strings.Contains(src, bad) {
				t.Errorf("%s contains %q", f, bad)
			}
		}
	}
}

func readSource(path string) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return "", err
	}
	// Comments may mention time.Now; only code counts.
	f.Comments = nil
	var b strings.Builder
	if err := format.Node(&b, fset, f); err != nil {
		return "", err
	}
	return b.String(), nil
}
