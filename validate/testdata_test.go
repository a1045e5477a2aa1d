package validate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

var update = flag.Bool("update", false, "rewrite testdata/{good,bad}/*.json from the Go builders")

var warningCodes = map[string]bool{CodeUnknownParam: true, CodeOnChipUnplaced: true, CodeGPULabel: true}

// encodeCase renders a golden case as its file bytes.
func encodeCase(t *testing.T, g goldenCase) []byte {
	t.Helper()
	v := ir.ToValue(g.build(t))
	if g.raw != nil {
		g.raw(&v)
	}
	return pyjson.Indent(v)
}

// TestGoldenFilesUpToDate keeps the committed files equal to the builders
// (go test ./validate -run GoldenFilesUpToDate -update rewrites them).
func TestGoldenFilesUpToDate(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range goldenCases {
		path := filepath.Join("testdata", g.file())
		if seen[path] {
			t.Fatalf("duplicate golden case %s", path)
		}
		seen[path] = true
		want := encodeCase(t, g)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its builder (run with -update)", path)
		}
	}
}

// TestGoldenFiles validates every file of testdata/good (must be valid, with
// no errors) and testdata/bad (must carry the code its name starts with).
func TestGoldenFiles(t *testing.T) {
	for _, dir := range []string{"good", "bad"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no testdata in %s: %v", dir, err)
		}
		for _, f := range files {
			t.Run(dir+"/"+filepath.Base(f), func(t *testing.T) {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				p, err := ir.Decode(data)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				rep := Validate(p)
				if dir == "good" {
					if !rep.OK {
						t.Fatalf("want valid:\n%s", rep.String())
					}
					return
				}
				code, _, ok := strings.Cut(filepath.Base(f), "__")
				if !ok {
					t.Fatalf("bad file name %s lacks <code>__", f)
				}
				if !rep.Has(code) {
					t.Fatalf("want code %s:\n%s", code, rep.String())
				}
				if !warningCodes[code] && rep.OK {
					t.Fatalf("want rejected with %s:\n%s", code, rep.String())
				}
				if warningCodes[code] && !rep.OK {
					t.Fatalf("a warning case should otherwise be valid:\n%s", rep.String())
				}
			})
		}
	}
}
