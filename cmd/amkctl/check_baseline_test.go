package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/baseline"
)

// export-weights writes a HuggingFace directory amk reads back as the same
// model; check-baseline passes amk's own decode of it and fails a perturbed one.
func TestExportWeightsAndCheckBaseline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hf")
	if code, out, errOut := runCmd(t, "export-weights", "toy-2L", "--out", dir); code != 0 || !strings.Contains(out, "model.safetensors") {
		t.Fatalf("export: %d %s %s", code, out, errOut)
	}
	m, err := baseline.LoadModel(filepath.Join(dir, baseline.ConfigFile), filepath.Join(dir, baseline.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	f, err := baseline.FromEager(m.Config, m.Weights, []int32{1, 2, 3}, 6, "toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	write := func(f *baseline.File) string {
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	code, out, errOut := runCmd(t, "check-baseline", "toy-2L", "--file", write(f))
	if code != 0 || !strings.Contains(out, "PASS: the same model (argmax agrees at 8 of 8 positions)") {
		t.Fatalf("own decode: %d\n%s%s", code, out, errOut)
	}
	f.Logits[4][0] += 1
	code, out, _ = runCmd(t, "check-baseline", "toy-2L", "--file", write(f), "--json")
	var rep baseline.Report
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Pass || rep.Steps[4].Pass {
		t.Fatalf("perturbed: %d %s", code, out)
	}
	if code, _, errOut := runCmd(t, "check-baseline", "small", "--file", write(f)); code != 2 || !strings.Contains(errOut, "vocabulary") {
		t.Fatalf("another model's file: %d %s", code, errOut)
	}
	for _, args := range [][]string{
		{"check-baseline", "toy-2L"},
		{"check-baseline", "toy-2L", "--file", filepath.Join(dir, "missing.json")},
		{"check-baseline", "toy-2L", "--file", filepath.Join(dir, baseline.ConfigFile)},
		{"export-weights", "toy-2L"},
		{"export-weights", "no-such-model", "--out", dir},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, _ := runCmd(t, "export-weights", "small", "--out", dir, "--config-only"); code != 0 {
		t.Fatalf("config only: %d", code)
	}
}
