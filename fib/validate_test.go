package fib

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func checkFile(t *testing.T, path string) ([]Problem, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, ps, err := CheckDefinition(data)
	return ps, err
}

func errorText(ps []Problem) string {
	var lines []string
	for _, p := range Errors(ps) {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

// The format description's examples: 1 holds as written; 5 and 6 hold once their JSON and
// their rule breaks are fixed; the breaks themselves are reported.
func TestSeedExamples(t *testing.T) {
	dir := filepath.Join("testdata", "seed003")
	for _, name := range []string{"example1_as_written.json", "example5_fixed.json", "example6_fixed.json"} {
		ps, err := checkFile(t, filepath.Join(dir, name))
		if err != nil || len(Errors(ps)) > 0 {
			t.Errorf("%s: want valid, got err=%v\n%s", name, err, errorText(ps))
		}
	}
	for _, name := range []string{"example2_as_written.json", "example3_as_written.json", "example4_as_written.json",
		"example5_as_written.json", "example6_as_written.json"} {
		_, err := checkFile(t, filepath.Join(dir, name))
		if !errors.Is(err, ErrNotDefinition) || !strings.Contains(err.Error(), "not JSON: line ") {
			t.Errorf("%s: want a not-JSON error with its line, got %v", name, err)
		}
	}
	ps, err := checkFile(t, filepath.Join(dir, "example5_comma_fixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := errorText(ps)
	for _, want := range []string{`error: op_type: required field missing (the file has "type": the field is "op_type")`,
		`error: type: not a Definition field`} {
		if !strings.Contains(got, want) {
			t.Errorf("example 5 with type: want %q in\n%s", want, got)
		}
	}
	ps, err = checkFile(t, filepath.Join(dir, "example6_comma_fixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := errorText(ps); got != "error: reference: has no top-level function run (the entry point: def run(...) at column 0)" {
		t.Errorf("example 6 with reference \"...\": got\n%s", got)
	}
}
