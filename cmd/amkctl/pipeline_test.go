package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func schedulePath(name string) string {
	return filepath.Join("..", "..", "pipeline", "testdata", name+".json")
}

func TestPipelineCheckVerb(t *testing.T) {
	cases := []struct {
		file string
		code int
		want string
	}{
		{"amd-4wave-fp8", exitOK, "[SAFE] amd-4wave-fp8"},
		{"pingpong-default", exitOK, "[SAFE] pingpong-default"},
		{"4wave-mutant-reorder", exitRejected, "[reorder] mini-iter 1, MMA(0,0)"},
		{"4wave-mutant-auto-prologue", exitRejected, "[prologue] half 0, mini-iter 1, MMA(0,0), stage 0: reads A_quad[0] holding k=1·BK data"},
		{"4wave-mutant-no-cross-half", exitRejected, "not drained at the half boundary"},
	}
	for _, c := range cases {
		code, out, errOut := runCmd(t, "pipeline", "check", schedulePath(c.file))
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %d; stdout %q stderr %q", c.file, code, c.code, out, errOut)
		}
	}
	if code, out, _ := runCmd(t, "pipeline", "check", "--listing", schedulePath("amd-4wave-fp8")); code != exitOK ||
		!strings.Contains(out, "s_waitcnt lgkmcnt(1)         MMA(0,0)") || !strings.Contains(out, "[SAFE]") {
		t.Errorf("--listing: exit %d %q", code, out)
	}
	code, out, _ := runCmd(t, "pipeline", "check", "--json", schedulePath("4wave-mutant-no-cross-half"))
	var rep struct {
		Schedule string
		Report   struct {
			Safe     bool
			Hazards  int
			Findings []struct{ Rule, Op string }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitRejected || rep.Report.Safe ||
		rep.Report.Hazards != 2 || rep.Report.Findings[0].Rule != "reg-raw" {
		t.Fatalf("--json: exit %d %v %q", code, err, out)
	}
}

func TestPipelineVerbsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"pipeline", "check"},
		{"pipeline", "check", "/nonexistent/schedule.json"},
		{"pipeline", "check", filepath.Join("..", "..", "go.mod")},
		{"pipeline", "simulate", schedulePath("amd-4wave-fp8"), "--gpu", "h100"},
		{"pipeline", "simulate", schedulePath("amd-4wave-fp8"), "--gpu", "nosuch"},
		{"pipeline"},
		{"tune-instruction", "gemm_pipeline", "--gpu", "h200"},
		{"tune-instruction", "gemv_tile", "--gpu", "mi300x"},
	} {
		if code, _, errOut := runCmd(t, args...); code != exitBadInput || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestPipelineSimulateVerb(t *testing.T) {
	code, out, errOut := runCmd(t, "pipeline", "simulate", schedulePath("amd-4wave-fp8"), "--gpu", "mi355x")
	if code != exitOK || !strings.Contains(out, "predicted MMA utilisation") || !strings.Contains(out, "LDS fragment 72/8/8") {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	code, out, _ = runCmd(t, "pipeline", "simulate", schedulePath("pingpong-default"), "--gpu", "mi355x", "--json")
	var tm struct {
		MMAUtilisation float64 `json:"mma_utilisation"`
		LatencyKind    string  `json:"latency_kind"`
	}
	if err := json.Unmarshal([]byte(out), &tm); err != nil || code != exitOK || tm.LatencyKind != "predicted" ||
		tm.MMAUtilisation <= 0 || tm.MMAUtilisation >= 1 {
		t.Fatalf("--json: exit %d %v %q", code, err, out)
	}
	if code, _, errOut := runCmd(t, "pipeline", "simulate", schedulePath("4wave-mutant-reorder"), "--gpu", "mi355x"); code != exitRejected ||
		!strings.Contains(errOut, "no prediction for an unsafe schedule") {
		t.Fatalf("an unsafe schedule: exit %d %q", code, errOut)
	}
}

// --budget bounds the variants proved and simulated, AMD's 4-wave variant
// first; a budget the size of the space covers it.
func TestTuneInstructionGemmPipeline(t *testing.T) {
	type summary struct {
		LatencyKind string `json:"latency_kind"`
		Variants    int
		Space       int
		Safe        int
		Best        []struct{ Rank int }
		Seed4Wave   *struct{ Rank int } `json:"seed_4wave"`
	}
	code, out, errOut := runCmd(t, "tune-instruction", "gemm_pipeline", "--gpu", "mi300x", "--budget", "5")
	var sum summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != exitOK || sum.LatencyKind != "predicted" ||
		sum.Variants != 5 || sum.Space != 144 || sum.Safe == 0 || len(sum.Best) != sum.Safe || sum.Seed4Wave == nil {
		t.Fatalf("--budget 5: exit %d %v: %q %q", code, err, out, errOut)
	}
	code, out, errOut = runCmd(t, "tune-instruction", "gemm_pipeline", "--gpu", "mi300x", "--budget", "1000")
	sum = summary{}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != exitOK || sum.Variants != 144 ||
		sum.Safe == 0 || sum.Safe == sum.Variants || len(sum.Best) != 10 || sum.Seed4Wave == nil || sum.Seed4Wave.Rank != 1 {
		t.Fatalf("--budget 1000: exit %d %v: %q %q", code, err, out, errOut)
	}
}

func TestTargetsListsTheAMDParts(t *testing.T) {
	code, out, _ := runCmd(t, "targets")
	for _, want := range []string{"mi300x   amd", "mi325x   amd", "mi355x   amd", "2516.6/5033.2"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("targets lacks %q", want)
		}
	}
}
