package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/programfile"
	"github.com/amk-dev/amk/validate"
)

const testdata = "../../validate/testdata"

func TestValidateVerb(t *testing.T) {
	good := filepath.Join(testdata, "good", "spec_2_3_vector.json")
	bad := filepath.Join(testdata, "bad", "race-raw__missing_happens_before.json")

	code, out, errOut := runCmd(t, "validate", good)
	want := "[VALID] {'tasks': 2, 'buffers': 4, 'counters': 2, 'edges': 1, 'acyclic': True, 'weight_MB': 0.0, 'sm_assigned': False}\n"
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("good: code %d\n%s%s", code, out, errOut)
	}

	code, out, _ = runCmd(t, "validate", bad)
	if code != 1 || !strings.HasPrefix(out, "[REJECTED] ") ||
		!strings.Contains(out, "\n  ERROR: task 2 (t2) reads buffer #2 ('actA') but writer task(s) [0] are NOT ordered before it, data RACE\n") {
		t.Fatalf("bad: code %d\n%s", code, out)
	}

	// Several files: each report is prefixed with its file name; any rejection gives 1.
	code, out, _ = runCmd(t, "validate", good, bad)
	if code != 1 || !strings.Contains(out, good+": [VALID] ") || !strings.Contains(out, bad+": [REJECTED] ") {
		t.Fatalf("two files: code %d\n%s", code, out)
	}

	// Warnings do not reject.
	code, out, _ = runCmd(t, "validate", filepath.Join(testdata, "bad", "gpu-label__meta_gpu_differs_from_target.json"))
	if code != 0 || !strings.Contains(out, "\n  warn:  meta['gpu']='h100' != target.name='rtx5090'") {
		t.Fatalf("warning: code %d\n%s", code, out)
	}
}

func TestValidateVerbJSON(t *testing.T) {
	bad := filepath.Join(testdata, "bad", "race-waw__unordered_whole_buffer_writers.json")
	code, out, _ := runCmd(t, "validate", bad, "--json")
	var rep struct {
		OK     bool `json:"ok"`
		Errors []struct {
			Code string `json:"code"`
			Task int    `json:"task"`
		} `json:"errors"`
		Stats map[string]any `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("code %d, %v:\n%s", code, err, out)
	}
	if rep.OK || len(rep.Errors) != 1 || rep.Errors[0].Code != "race-waw" || rep.Stats["tasks"] != 3.0 {
		t.Fatalf("report %+v", rep)
	}

	good := filepath.Join(testdata, "good", "ir_smoke_chain.json")
	code, out, _ = runCmd(t, "validate", "--json", good, bad)
	var many []struct {
		File   string          `json:"file"`
		Report json.RawMessage `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &many); err != nil || code != 1 || len(many) != 2 || many[0].File != good {
		t.Fatalf("code %d, %v:\n%s", code, err, out)
	}
}

func TestValidateVerbBadInput(t *testing.T) {
	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"ir_version": "0.2.0", "tasks": [{"id": 0, "op": "FOO"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.json")
	if err := os.WriteFile(truncated, []byte(`{"tasks": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(testdata, "bad", "cycle__ir_smoke_back_edge.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{malformed}, malformed + `: tasks[0].op: unknown opcode "FOO"`},
		{[]string{truncated}, truncated + ": invalid JSON at byte"},
		{[]string{filepath.Join(dir, "absent.json")}, "absent.json"},
		{[]string{bad, malformed}, "malformed.json: tasks[0].op"}, // 2 wins over 1
	} {
		code, _, errOut := runCmd(t, append([]string{"validate"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stderr %q", tc.args, code, errOut)
		}
	}
	if code, _, _ := runCmd(t, "validate"); code != 2 {
		t.Errorf("no files: code %d", code)
	}
	if code, out, _ := runCmd(t, "validate", "-h"); code != 0 || !strings.Contains(out, "amkctl validate FILE... [--json]") {
		t.Errorf("-h: code %d, %q", code, out)
	}
	if code, _, _ := runCmd(t, "validate", "--bogus", bad); code != 2 {
		t.Errorf("unknown flag: code %d", code)
	}
}

func TestIRRoundtripVerb(t *testing.T) {
	for _, f := range []string{
		filepath.Join(testdata, "good", "ref_toy1L_default_pos3.json"),
		filepath.Join("..", "..", "ir", "testdata", "seed_example.canonical.json"),
	} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCmd(t, "ir", "roundtrip", f)
		if code != 0 || out != string(want) || errOut != "" {
			t.Errorf("%s: code %d, %d bytes (want %d), %s", f, code, len(out), len(want), errOut)
		}
	}
	code, out, _ := runCmd(t, "ir", "roundtrip", filepath.Join("..", "..", "ir", "testdata", "seed_example.json"))
	if canonical, _ := os.ReadFile(filepath.Join("..", "..", "ir", "testdata", "seed_example.canonical.json")); code != 0 || out != string(canonical) {
		t.Errorf("non-canonical input not canonicalised: code %d", code)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "v.json")
	if err := os.WriteFile(f, []byte(`{"ir_version": "7.0", "tasks": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "ir", "roundtrip", f); code != 2 || !strings.Contains(errOut, "IR major version mismatch: file 7.0 vs runtime 0.2.0") {
		t.Errorf("version: code %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"ir"}, {"ir", "frobnicate"}, {"ir", "roundtrip"}, {"ir", "roundtrip", "a", "b"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: code %d", args, code)
		}
	}
	if code, out, _ := runCmd(t, "ir", "-h"); code != 0 || !strings.Contains(out, "amkctl ir roundtrip|recipes|patterns FILE") {
		t.Errorf("ir -h: code %d %q", code, out)
	}
}

// TestValidateRefusesForeignAndOversizedInput: a JSON document that is not a
// program is malformed (exit 2), never an empty valid program; the size and
// item limits are flags with clear errors.
func TestValidateRefusesForeignAndOversizedInput(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{"empty.json": `{}`, "foo.json": `{"foo": 1}`, "list.json": `[]`,
		"dup.json": `{"ir_version": "0.2.0", "tasks": [], "tasks": []}`} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCmd(t, "validate", f)
		if code != 2 || strings.Contains(out, "[VALID]") || errOut == "" {
			t.Errorf("%s: code %d, stdout %q, stderr %q; want exit 2 and an error", doc, code, out, errOut)
		}
	}
	good := filepath.Join(testdata, "good", "ir_smoke_chain.json")
	if code, _, errOut := runCmd(t, "validate", "--max-bytes", "100", good); code != 2 || !strings.Contains(errOut, "--max-bytes") {
		t.Errorf("over --max-bytes: code %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "validate", "--max-items", "1", good); code != 2 || !strings.Contains(errOut, "--max-items") {
		t.Errorf("over --max-items: code %d, %q", code, errOut)
	}
	if code, _, _ := runCmd(t, "validate", "--max-bytes", "0", good); code != 2 {
		t.Errorf("--max-bytes 0: code %d", code)
	}
	if code, out, _ := runCmd(t, "validate", good); code != 0 || !strings.Contains(out, "[VALID]") {
		t.Errorf("default limits: code %d %q", code, out)
	}
}

// A program file over programfile.MapMinBytes is decoded from a memory map: its report
// is the one of the same program decoded in memory, and a large file the
// direct decoder leaves (here a syntax error at the very end) still gets the
// tree decoder's error with its position.
func TestValidateVerbLargeFileMapped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "llama-1b.json")
	if code, _, errOut := runCmd(t, "lower", "llama-1b", "--gpu", "h100", "--pos", "3", "--out", path); code != 0 {
		t.Fatalf("lower: code %d: %s", code, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) < programfile.MapMinBytes {
		t.Fatalf("%d bytes (%v): not large enough to be mapped", len(data), err)
	}
	p, err := ir.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	rep := validate.Validate(p)
	code, out, errOut := runCmd(t, "validate", path)
	if code != 0 || out != rep.String()+"\n" || errOut != "" {
		t.Fatalf("code %d, stderr %q, report:\n%.300s\nwant:\n%.300s", code, errOut, out, rep.String())
	}

	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, append(data[:len(data)-1:len(data)-1], ']'), 0o644); err != nil {
		t.Fatal(err)
	}
	_, wantErr := ir.Decode(append(data[:len(data)-1:len(data)-1], ']'))
	code, _, errOut = runCmd(t, "validate", broken)
	if code != 2 || wantErr == nil || !strings.Contains(errOut, wantErr.Error()) {
		t.Fatalf("broken: code %d, stderr %q, want the error %v", code, errOut, wantErr)
	}
}
