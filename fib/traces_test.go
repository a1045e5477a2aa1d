package fib

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/model"
)

func stepExport(t *testing.T) (*Definition, Workload, map[string]*Definition, []Exported) {
	t.Helper()
	cfg, err := model.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Export("small", cfg, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]*Definition{}
	var step *Exported
	for i := range out {
		defs[out[i].Definition.Name] = out[i].Definition
		if out[i].Definition.OpType == "decode_step" {
			step = &out[i]
		}
	}
	return step.Definition, step.Workloads[0], defs, out
}

// Campaign verdicts exported as Traces and read back give the same facts,
// for every outcome; a PASS whose latency was withheld is left out, and
// the latency kind is carried, never blurred.
func TestTracesRoundTrip(t *testing.T) {
	def, w, defs, exported := stepExport(t)
	rows := []flywheel.Row{
		{Experiment: 0, Tag: flywheel.TagKept, Correctness: flywheel.CorrectPass, LatencyUS: new(812.25), ScheduleID: "s-base"},
		{Experiment: 1, Tag: flywheel.TagRevert, Correctness: flywheel.CorrectPass, LatencyUS: new(901.5), ScheduleID: "s-1"},
		{Experiment: 2, Tag: flywheel.TagFailed, Correctness: flywheel.CorrectFail, ScheduleID: "s-2"},
		{Experiment: 3, Tag: flywheel.TagRejected, Correctness: flywheel.CorrectRejected, ScheduleID: "s-3"},
		{Experiment: 4, Tag: flywheel.TagCrash, Correctness: flywheel.CorrectCrash, ScheduleID: "s-4"},
		{Experiment: 5, Tag: flywheel.TagTimeout, Correctness: flywheel.CorrectTimeout, ScheduleID: "s-5"},
		{Experiment: 6, Tag: flywheel.TagTried, Correctness: flywheel.CorrectPass, ScheduleID: "s-6"}, // withheld
	}
	for _, kind := range []string{KindPredicted, KindMeasuredGPU} {
		run := RunInfo{Kind: kind, Target: "h200", Timestamp: "2026-11-24T06:00:00Z",
			Env: flywheel.Env{Target: "h200", Device: "cpu", AMKVersion: "test"}}
		facts := FactsFromRows(rows)
		traces, sols, skipped, err := TracesFromFacts(def, w, run, facts)
		if err != nil {
			t.Fatal(err)
		}
		if skipped != 1 || len(traces) != 6 || len(sols) != 6 {
			t.Fatalf("%s: %d traces, %d solutions, %d skipped; want 6, 6, 1", kind, len(traces), len(sols), skipped)
		}
		dir := t.TempDir()
		if _, err := WriteDefinitions(dir, exported); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteTraces(dir, Author, defs, traces, sols); err != nil {
			t.Fatal(err)
		}
		ds, err := ReadDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ds.Reports {
			if r.Err != nil || len(Errors(r.Problems)) > 0 {
				t.Errorf("%s: %s: %v %v", kind, r.Where(), r.Err, Errors(r.Problems))
			}
		}
		back, err := Facts(ds.Traces[def.Name])
		if err != nil {
			t.Fatal(err)
		}
		var want []Fact
		for _, f := range facts[:6] {
			f.Definition, f.Kind, f.Target = def.Name, kind, "h200"
			want = append(want, f)
		}
		if !reflect.DeepEqual(back, want) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", kind, back, want)
		}
		for _, tr := range ds.Traces[def.Name] {
			hw := tr.Evaluation.Environment.Hardware
			if (kind == KindPredicted) != strings.HasPrefix(hw, "predicted:") {
				t.Errorf("%s: hardware %q", kind, hw)
			}
			if tr.Evaluation.Status != StatusPassed && tr.Evaluation.Performance != nil {
				t.Errorf("%s: a latency on a %s trace", kind, tr.Evaluation.Status)
			}
		}
	}
}

func TestTracesRefuseDishonestInput(t *testing.T) {
	def, w, _, _ := stepExport(t)
	run := RunInfo{Kind: KindPredicted, Target: "h200", Timestamp: "t"}
	if _, _, _, err := TracesFromFacts(def, w, run, []Fact{{Correctness: flywheel.CorrectFail, LatencyUS: new(float64(3))}}); err == nil {
		t.Error("a latency on a FAIL was exported")
	}
	run.Kind = "guessed"
	if _, _, _, err := TracesFromFacts(def, w, run, nil); err == nil {
		t.Error("an unknown latency kind was accepted")
	}
}

// Facts refuses a Trace whose hardware says measured while its kind says
// predicted.
func TestFactsCatchBlurredKinds(t *testing.T) {
	def, w, _, _ := stepExport(t)
	run := RunInfo{Kind: KindPredicted, Target: "h200", Timestamp: "t"}
	traces, _, _, err := TracesFromFacts(def, w, run, []Fact{{Correctness: flywheel.CorrectPass, LatencyUS: new(float64(5)), Solution: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	traces[0].Evaluation.Environment.Hardware = "NVIDIA_H200"
	if _, err := Facts(traces); err == nil || !strings.Contains(err.Error(), "disagrees") {
		t.Errorf("want a disagreement, got %v", err)
	}
}

func TestCampaignAndLoop1Traces(t *testing.T) {
	_, _, defs, exported := stepExport(t)
	rows := []flywheel.Row{
		{Experiment: 0, Loop: flywheel.LoopSchedule, Tag: flywheel.TagKept, Correctness: flywheel.CorrectPass, LatencyUS: new(float64(700)), ScheduleID: "a"},
		{Experiment: 1, Loop: flywheel.LoopSchedule, Tag: flywheel.TagFailed, Correctness: flywheel.CorrectFail, ScheduleID: "b"},
		{Experiment: 0, Loop: flywheel.LoopInstruction, Model: "inst:rmsnorm", Tag: flywheel.TagKept, Correctness: flywheel.CorrectPass, LatencyUS: new(2.5), KernelID: "rmsnorm[v0]"},
		{Experiment: 0, Loop: flywheel.LoopInstruction, Model: "inst:gemm_tile", Tag: flywheel.TagKept, Correctness: flywheel.CorrectPass, LatencyUS: new(float64(90)), KernelID: "gemm_tile[v0]"},
		{Experiment: 1, Loop: flywheel.LoopInstruction, Model: "inst:attention_combine", Tag: flywheel.TagKept, Correctness: flywheel.CorrectPass, LatencyUS: new(float64(3)), KernelID: "attention_combine[v0]"},
	}
	traces, sols, w, skipped, err := CampaignTraces(exported, CampaignRun{Kind: KindPredicted, Target: "h200", Pos: 127, Timestamp: "t", Rows: rows})
	if err != nil || skipped != 0 || len(traces) != 2 || len(sols) != 2 {
		t.Fatalf("campaign: %v, %d traces, %d skipped", err, len(traces), skipped)
	}
	if v, _ := w.Inputs.Get("pos"); v.Value != 127 {
		t.Errorf("campaign workload pos %v", v.Value)
	}
	for _, tr := range traces {
		if ps := ValidateTrace(defs[tr.Definition], &tr); len(ps) > 0 {
			t.Error(ps)
		}
	}
	lt, _, _, unmatched, err := InstructionTraces(exported, "h200", flywheel.Env{}, "t", rows)
	if err != nil || unmatched != 1 || len(lt) != 2 {
		t.Fatalf("loop 1: %v, %d traces, %d unmatched", err, len(lt), unmatched)
	}
	if lt[0].Definition != "rmsnorm_h2048" || lt[1].Definition != "gemm_n32000_k2048" {
		t.Errorf("loop 1 traces of %s and %s", lt[0].Definition, lt[1].Definition)
	}
	if m, _ := lt[1].Workload.Axes.Get("M"); m != 4 {
		t.Errorf("gemm_tile case at M=%d, want 4", m)
	}
	for _, tr := range lt {
		if tr.Evaluation.Environment.Hardware != "NVIDIA_H200" {
			t.Errorf("a Loop-1 trace on %s", tr.Evaluation.Environment.Hardware)
		}
	}
}
