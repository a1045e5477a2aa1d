package programfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
)

// A task graph and an amk program are told apart by their content; a
// malformed file is an error, a file over the limit is refused.
func TestCheckTellsTheFormatsApart(t *testing.T) {
	dir := t.TempDir()
	graph := filepath.Join(dir, "task_graph.json")
	if err := os.WriteFile(graph, []byte(`{"all_events": [], "all_tasks": [], "first_tasks": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	checked, err := Check(graph, mpk.CheckOptions{}, ir.Limits{})
	if err != nil || !checked.MPK || !strings.Contains(checked.Text, "MPK task graph") {
		t.Fatalf("task graph: %+v %v", checked, err)
	}
	program := filepath.Join(dir, "program.json")
	if err := os.WriteFile(program, []byte(`{"ir_version": "1.0", "tasks": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if checked, err := Check(program, mpk.CheckOptions{}, ir.Limits{}); err == nil && checked.MPK {
		t.Fatalf("a program read as a task graph: %+v", checked)
	}
	malformed := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"tasks": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(malformed, mpk.CheckOptions{}, ir.Limits{}); err == nil {
		t.Error("a malformed file checked")
	}
	var tooLarge *inputfile.TooLargeError
	if _, err := Load(program, ir.Limits{MaxBytes: 10}); !errors.As(err, &tooLarge) {
		t.Errorf("a file over the limit: %v", err)
	}
}
