package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/tensor"
)

// fakeDevice answers with the reference outputs and a fixed latency per
// variant label; wrong, crash and broken labels misbehave.
type fakeDevice struct {
	lat                  map[string]float64
	wrong, crash, broken map[string]bool
	timed                []string // labels, in Time order
	open                 int
}

func (d *fakeDevice) Name() string                   { return "cuda:0 Fake H200" }
func (d *fakeDevice) Notes(t *ir.GpuTarget) []string { return nil }
func (d *fakeDevice) latency(label string) float64   { return d.lat[label] }

func (d *fakeDevice) Prepare(ctx context.Context, c *Case, v kernels.Variant) (Prepared, error) {
	label := Label(v)
	if d.broken[label] {
		return nil, &BuildError{Err: errors.New("nvcc: error: identifier undefined")}
	}
	d.open++
	return &fakePrepared{d: d, c: c, label: label}, nil
}

type fakePrepared struct {
	d     *fakeDevice
	c     *Case
	label string
}

func (p *fakePrepared) Run(ctx context.Context) (map[int]*tensor.Tensor, error) {
	if p.d.crash[p.label] {
		return nil, errors.New("TRAP: operand shape")
	}
	ref, err := p.c.Reference()
	if err != nil {
		return nil, err
	}
	if p.d.wrong[p.label] {
		for _, t := range ref {
			t.F[0] += 1
		}
	}
	return ref, nil
}

func (p *fakePrepared) Time(ctx context.Context, warmup, samples int) (launch.Stats, error) {
	p.d.timed = append(p.d.timed, p.label)
	us := p.d.latency(p.label)
	return launch.Stats{N: samples, MedianUS: us, P10US: us * 0.99, P90US: us * 1.01}, nil
}

func (p *fakePrepared) Close() error { p.d.open--; return nil }

// gemvCase is the loop tests' case: a GEMV tile has the knobs for three
// proposals (default, threads=128, cpasync=0).
func gemvCase(t *testing.T) *Case {
	t.Helper()
	c, err := NewCase(ir.OpGEMVTile, ir.F32, h200(t), "toy")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tune(t *testing.T, d *fakeDevice, budget int, results string) *Summary {
	t.Helper()
	var log bytes.Buffer
	s, err := Tune(context.Background(), d, Options{Target: h200(t), Budget: budget, Results: results, Case: gemvCase(t), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if d.open != 0 {
		t.Fatalf("%d prepared variants left open", d.open)
	}
	if !strings.Contains(log.String(), "tune-instruction gemv_tile") {
		t.Fatalf("no progress log: %q", log.String())
	}
	return s
}

func TestTuneKeepsOnlyStrictWinsTimedSideBySide(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"default": 10, "threads=128": 9.5, "cpasync=0": 9.45}}
	results := filepath.Join(t.TempDir(), "ws", "results.tsv")
	s := tune(t, d, 3, results)
	if !s.OK() || !s.AllCorrect || s.NCorrect != 3 || s.Trials != 3 {
		t.Fatalf("summary %+v", s)
	}
	if *s.BestVariant != "threads=128" || *s.BestUS != 9.5 || *s.BaselineUS != 10 || *s.Speedup != 1.0526 {
		t.Fatalf("best %s %v baseline %v speedup %v", *s.BestVariant, *s.BestUS, *s.BaselineUS, *s.Speedup)
	}
	kept := []bool{}
	for _, tr := range s.TrialsDetail {
		kept = append(kept, tr.Kept)
	}
	if !slices.Equal(kept, []bool{true, true, false}) {
		t.Fatalf("kept %v (cpasync=0 is only 0.5%% faster)", kept)
	}
	// default alone; then 4 ABBA rounds against the best; then best vs baseline.
	want := []string{"default",
		"threads=128", "default", "default", "threads=128", "threads=128", "default", "default", "threads=128",
		"cpasync=0", "threads=128", "threads=128", "cpasync=0", "cpasync=0", "threads=128", "threads=128", "cpasync=0",
		"threads=128", "default", "default", "threads=128", "threads=128", "default", "default", "threads=128"}
	if !slices.Equal(d.timed, want) {
		t.Fatalf("timing order %v", d.timed)
	}
	if tr := s.TrialsDetail[2]; *tr.IncumbentUS != 9.5 || *tr.Ratio != 0.9947 || *tr.LatencyUS != 9.45 {
		t.Fatalf("side-by-side figures of trial 2: %+v", tr)
	}
	rows, err := flywheel.ReadRows(results)
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %v %v", rows, err)
	}
	for i, tag := range []string{flywheel.TagKept, flywheel.TagKept, flywheel.TagTried} {
		r := rows[i]
		if r.Tag != tag || r.Loop != flywheel.LoopInstruction || r.Model != "inst:gemv_tile" || r.GPU != "h200" ||
			r.Correctness != flywheel.CorrectPass || r.LatencyUS == nil || r.Regime != flywheel.RegimeSingle {
			t.Fatalf("row %d: %+v", i, r)
		}
		// docs/spec/rules.md R9: latency / floor x 100.
		wantPct := ir.RoundTo(*r.LatencyUS / *s.BoundUS * 100, 4)
		if r.PctOfRoofline == nil || relDiff(*r.PctOfRoofline, wantPct) > 1e-3 {
			t.Fatalf("row %d pct %v, want %v", i, r.PctOfRoofline, wantPct)
		}
	}
	if rows[0].KernelID != "gemv_tile[default]" || rows[1].KernelID != "gemv_tile[threads=128]" {
		t.Fatalf("kernel ids %q %q", rows[0].KernelID, rows[1].KernelID)
	}
	if *s.PctOfRoofline < 100 {
		t.Fatalf("pct_of_roofline %v is not latency/floor", *s.PctOfRoofline)
	}
}

func relDiff(a, b float64) float64 {
	if b == 0 {
		return a
	}
	d := (a - b) / b
	if d < 0 {
		return -d
	}
	return d
}

func TestTuneMismatchAndCrashAreNeverTimed(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"default": 10, "threads=128": 1, "cpasync=0": 1},
		wrong: map[string]bool{"threads=128": true}, crash: map[string]bool{"cpasync=0": true}}
	results := filepath.Join(t.TempDir(), "results.tsv")
	s := tune(t, d, 3, results)
	if s.OK() || s.AllCorrect || s.NCorrect != 1 || *s.BestVariant != "default" || *s.Speedup != 1 {
		t.Fatalf("summary %+v", s)
	}
	if !slices.Equal(d.timed, []string{"default"}) {
		t.Fatalf("an incorrect variant was timed: %v", d.timed)
	}
	rows, _ := flywheel.ReadRows(results)
	if rows[1].Tag != flywheel.TagRevert || rows[1].Correctness != flywheel.CorrectFail || rows[1].LatencyUS != nil {
		t.Fatalf("mismatch row %+v", rows[1])
	}
	if rows[2].Tag != flywheel.TagCrash || rows[2].Correctness != flywheel.CorrectCrash || rows[2].LatencyUS != nil {
		t.Fatalf("crash row %+v", rows[2])
	}
	if tr := s.TrialsDetail[1]; tr.MaxRelErr == nil || !strings.Contains(tr.Note, "numerics mismatch") {
		t.Fatalf("mismatch detail %+v", tr)
	}
}

func TestTuneBuildFailureIsRejectedNotIncorrect(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"default": 10, "cpasync=0": 10}, broken: map[string]bool{"threads=128": true}}
	s := tune(t, d, 3, "")
	if !s.OK() || s.NCorrect != 2 || s.TrialsDetail[1].Built || s.TrialsDetail[1].Correctness != flywheel.CorrectCrash {
		t.Fatalf("summary %+v", s)
	}
	if s.ResultsTSV != "" {
		t.Fatalf("results %q", s.ResultsTSV)
	}
}

func TestTuneWithoutACorrectDefaultHasNoBaseline(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"threads=128": 8}, wrong: map[string]bool{"default": true}}
	s := tune(t, d, 2, "")
	if s.OK() || *s.BestVariant != "threads=128" || s.BaselineUS != nil || s.Speedup != nil || *s.BestUS != 8 {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(strings.Join(s.Notes, " "), "no baseline") {
		t.Fatalf("notes %v", s.Notes)
	}
}

func TestTuneWithholdsReadingsBelowTheFloor(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"default": 1e-9}}
	s := tune(t, d, 1, "")
	tr := s.TrialsDetail[0]
	if s.BestVariant != nil || tr.LatencyUS != nil || tr.Kept || !strings.Contains(tr.Note, "below the op-bytes floor") {
		t.Fatalf("a sub-floor reading was used: %+v %+v", s, tr)
	}
}

func TestSummaryJSONOrder(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"default": 10}}
	data, err := json.Marshal(tune(t, d, 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"op", "gpu", "dtype", "device", "trials", "n_correct", "best_variant", "best_us", "baseline_us",
		"speedup", "all_correct", "pct_of_roofline", "bound_us", "op_bytes", "results_tsv", "trials_detail"}
	last := -1
	for _, k := range keys {
		i := strings.Index(string(data), `"`+k+`":`)
		if i <= last {
			t.Fatalf("key %s out of the seed-001 order in %s", k, data)
		}
		last = i
	}
	if !strings.Contains(string(data), `"dtype":"fp32"`) || !strings.Contains(string(data), `"op":"gemv_tile"`) {
		t.Fatalf("%s", data)
	}
}

func TestTuneRefusesABadBudget(t *testing.T) {
	if _, err := Tune(context.Background(), &fakeDevice{}, Options{Target: h200(t), Budget: 0, Case: gemvCase(t)}); err == nil {
		t.Fatal("budget 0 accepted")
	}
}

func TestTuneSummaryEncodesWithDegenerateTimings(t *testing.T) {
	d := &fakeDevice{lat: map[string]float64{"default": 0}} // median 0: no spread, no latency
	s := tune(t, d, 1, "")
	if _, err := json.Marshal(s); err != nil {
		t.Fatalf("summary does not encode: %v", err)
	}
	if s.TrialsDetail[0].Spread != nil || s.TrialsDetail[0].LatencyUS != nil {
		t.Fatalf("detail %+v", s.TrialsDetail[0])
	}
}
