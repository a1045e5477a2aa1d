package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amk-dev/amk/fib"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/model"
)

func TestFibValidateExitCodes(t *testing.T) {
	dir := filepath.Join("..", "..", "fib", "testdata")
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{filepath.Join(dir, "seed003", "example1_as_written.json"), exitOK, "[VALID] 1 definitions hold"},
		{filepath.Join(dir, "seed003", "example5_comma_fixed.json"), exitRejected, `error: op_type: required field missing (the file has "type"`},
		{filepath.Join(dir, "seed003", "example6_as_written.json"), exitBadInput, "(a missing comma?)"},
		{filepath.Join(dir, "seed003", "example5_as_written.json"), exitBadInput, "(a trailing comma?)"},
		{filepath.Join(dir, "import"), exitOK, "[VALID] 4 definitions hold, 0 do not; 6 workloads hold"},
		{filepath.Join(dir, "public"), exitRejected, "has no top-level function run"},
		{filepath.Join(dir, "no-such-dir"), exitBadInput, "no such file"},
	} {
		code, out, errOut := runCmd(t, "fib", "validate", c.path)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("fib validate %s: exit %d, want %d with %q\n%s%s", c.path, code, c.code, c.want, out, errOut)
		}
	}
}

func TestFibImport(t *testing.T) {
	code, out, errOut := runCmd(t, "fib", "import", filepath.Join("..", "..", "fib", "testdata", "import"))
	for _, want := range []string{"[MAPPED]   gemm_n_4096_k_4096 (gemm) -> GEMV_TILE (M = 1), GEMM_TILE (M > 1), 2 kernel-tuning case(s)",
		"[MAPPED]   rmsnorm_d4096 (rmsnorm) -> RMSNORM, 2 kernel-tuning case(s)",
		"[UNMAPPED] gqa_hr4_dqk128_dvo128 (gqa)", "[UNMAPPED] gqa_paged_decode_h32_kv8_d128_ps1 (gqa_paged): paged KV cache",
		"2 of 4 Definitions map"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("exit %d, want %q in\n%s%s", code, want, out, errOut)
		}
	}
}

// A campaign's verdicts exported as Traces and read back give the facts of
// its results.tsv.
func TestFibExportCampaignRoundTrip(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	if code, _, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "6", "--workspace", ws); code != exitOK {
		t.Fatalf("autoresearch: %d %s", code, errOut)
	}
	code, stdout, errOut := runCmd(t, "fib", "export", "toy", "--gpu", "h200", "-o", out, "--campaign", "toy-h200-cpu", "--workspace", ws)
	if code != exitOK || !strings.Contains(stdout, "verdicts as Traces (latency_kind predicted)") {
		t.Fatalf("fib export: %d\n%s%s", code, stdout, errOut)
	}
	if code, stdout, _ := runCmd(t, "fib", "validate", out); code != exitOK {
		t.Fatalf("the export does not validate:\n%s", stdout)
	}
	ds, err := fib.ReadDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	var traces []fib.Trace
	for _, ts := range ds.Traces {
		traces = append(traces, ts...)
	}
	back, err := fib.Facts(traces)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := flywheel.ReadRows(filepath.Join(ws, "campaigns", "toy-h200-cpu", "results.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	want := fib.FactsFromRows(rows)
	for i := range want {
		want[i].Definition, want[i].Kind, want[i].Target = fib.StepName("toy", mustPreset(t, "toy")), fib.KindPredicted, "h200"
	}
	if len(want) == 0 || !reflect.DeepEqual(back, want) {
		t.Errorf("read back\n%+v\nresults.tsv\n%+v", back, want)
	}
	if code, _, errOut := runCmd(t, "fib", "export", "toy", "--gpu", "h100", "-o", out, "--campaign", "toy-h200-cpu", "--workspace", ws); code != exitBadInput {
		t.Errorf("a campaign of another GPU: exit %d %s", code, errOut)
	}
}

func mustPreset(t *testing.T, name string) model.Config {
	t.Helper()
	cfg, err := model.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Loop 1 on imported workloads, on the CPU: predicted, never measured.
func TestTuneInstructionFibOnTheCPU(t *testing.T) {
	dir := filepath.Join("..", "..", "fib", "testdata", "import")
	code, out, errOut := runCmd(t, "tune-instruction", "--fib", dir, "--device", "cpu", "--gpu", "h200", "--definition", "rmsnorm_d4096")
	if code != exitOK || !strings.Contains(out, `"latency_kind": "predicted"`) || strings.Contains(out, "measured-gpu") ||
		strings.Count(out, `"correctness": "PASS"`) != 2 {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCmd(t, "tune-instruction", "--fib", dir, "--device", "cpu", "--definition", "gqa_hr4_dqk128_dvo128")
	if code != exitRejected || !strings.Contains(errOut, "no workload maps") {
		t.Errorf("unmapped only: exit %d %s", code, errOut)
	}
	if code, _, _ := runCmd(t, "tune-instruction", "rmsnorm", "--fib", dir); code != exitBadInput {
		t.Errorf("OP with --fib: exit %d", code)
	}
}

// Loop 1 on an amk export runs for the GPU the export was for, and a --gpu
// that contradicts the export is refused.
func TestTuneInstructionFibFollowsTheExport(t *testing.T) {
	out := t.TempDir()
	if code, _, errOut := runCmd(t, "fib", "export", "toy", "--gpu", "h200", "-o", out); code != exitOK {
		t.Fatalf("fib export: exit %d %s", code, errOut)
	}
	code, stdout, errOut := runCmd(t, "tune-instruction", "--fib", out, "--device", "cpu", "--definition", "rmsnorm_h64")
	if code != exitOK || !strings.Contains(stdout, `"gpu": "h200"`) {
		t.Errorf("no --gpu: exit %d\n%s%s", code, stdout, errOut)
	}
	code, _, errOut = runCmd(t, "tune-instruction", "--fib", out, "--device", "cpu", "--gpu", "h100", "--definition", "rmsnorm_h64")
	if code != exitBadInput || !strings.Contains(errOut, "exported for h200, not h100") {
		t.Errorf("--gpu h100 on an h200 export: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "tune-instruction", "--fib", out, "--device", "cpu", "--gpu", "h200", "--definition", "rmsnorm_h64"); code != exitOK {
		t.Errorf("--gpu h200 on an h200 export: exit %d %s", code, errOut)
	}
}

// Loop-1 rows (loop=instruction) become measured-gpu Traces of the small
// export's op Definitions; other models are refused.
func TestFibExportLoop1Rows(t *testing.T) {
	results, out := filepath.Join(t.TempDir(), "results.tsv"), t.TempDir()
	us := 41.5
	if err := flywheel.AppendRows(results,
		flywheel.Row{Experiment: 0, Tag: flywheel.TagKept, Loop: flywheel.LoopInstruction, Model: "inst:rmsnorm", GPU: "h200",
			Regime: flywheel.RegimeSingle, Correctness: flywheel.CorrectPass, LatencyUS: &us, KernelID: "rmsnorm[v0]"},
		flywheel.Row{Experiment: 1, Tag: flywheel.TagRevert, Loop: flywheel.LoopInstruction, Model: "inst:gemv_tile", GPU: "h200",
			Regime: flywheel.RegimeSingle, Correctness: flywheel.CorrectFail, KernelID: "gemv_tile[v1 threads=512]"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := runCmd(t, "fib", "export", "small", "--gpu", "h200", "-o", out, "--results", results)
	if code != exitOK || !strings.Contains(stdout, "2 kernel-tuning verdicts as Traces (measured-gpu)") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errOut)
	}
	if code, stdout, _ := runCmd(t, "fib", "validate", out); code != exitOK || !strings.Contains(stdout, "2 traces hold") {
		t.Errorf("exit %d\n%s", code, stdout)
	}
	if code, _, _ := runCmd(t, "fib", "export", "llama-8b", "--gpu", "h200", "-o", t.TempDir(), "--results", results); code != exitBadInput {
		t.Errorf("Loop-1 rows on llama-8b: exit %d", code)
	}
}
