package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/tensor"
)

// tuneFake is a Loop-1 device that returns the reference outputs (or wrong
// ones for the labels in wrong) and a latency that falls with the block size.
type tuneFake struct {
	wrong    map[string]bool
	released bool
}

func (d *tuneFake) Name() string                 { return "cuda:0 Fake H200" }
func (d *tuneFake) Notes(*ir.GpuTarget) []string { return nil }
func (d *tuneFake) release() error               { d.released = true; return nil }
func (d *tuneFake) Prepare(ctx context.Context, c *tune.Case, v kernels.Variant) (tune.Prepared, error) {
	return &tuneFakePrep{d: d, c: c, v: v}, nil
}

type tuneFakePrep struct {
	d *tuneFake
	c *tune.Case
	v kernels.Variant
}

func (p *tuneFakePrep) Run(context.Context) (map[int]*tensor.Tensor, error) {
	out, err := p.c.Reference()
	if err == nil && p.d.wrong[tune.Label(p.v)] {
		for _, t := range out {
			t.F[0] += 3
		}
	}
	return out, err
}

func (p *tuneFakePrep) Time(ctx context.Context, warmup, samples int) (launch.Stats, error) {
	n, _ := p.v.Normalize()
	// Fewer threads time faster here, so a non-default variant can win.
	us := 8 + float64(n.Threads())/256
	return launch.Stats{N: samples, MedianUS: us, P10US: us, P90US: us}, nil
}

func (p *tuneFakePrep) Close() error { return nil }

func withTuneDevice(t *testing.T, d *tuneFake, err error) {
	t.Helper()
	old := openTuneDevice
	openTuneDevice = func(ordinal int) (tune.Device, func() error, error) {
		if err != nil {
			return nil, nil, err
		}
		return d, d.release, nil
	}
	t.Cleanup(func() { openTuneDevice = old })
}

func TestTuneInstructionWithoutCUDA(t *testing.T) {
	old := openTuneDevice
	openTuneDevice = nil
	defer func() { openTuneDevice = old }()
	code, out, errOut := runCmd(t, "tune-instruction", "gemv_tile", "--gpu", "h200", "--budget", "2")
	if code != 2 || out != "" || !strings.Contains(errOut, "built without CUDA support") {
		t.Fatalf("code %d out %q err %q", code, out, errOut)
	}
}

func TestTuneInstructionUsage(t *testing.T) {
	withTuneDevice(t, &tuneFake{}, nil)
	for _, args := range [][]string{
		{"tune-instruction"},
		{"tune-instruction", "layernorm"},
		{"tune-instruction", "add", "--dtype", "int8"},
		{"tune-instruction", "add", "--budget", "0"},
		{"tune-instruction", "add", "--gpu", "h999"},
		{"tune-instruction", "add", "--device", "cpu"},
		{"tune-instruction", "add", "rmsnorm"},
	} {
		if code, out, _ := runCmd(t, args...); code != 2 || out != "" {
			t.Errorf("%v: code %d out %q", args, code, out)
		}
	}
	if code, _, _ := runCmd(t, "tune-instruction", "-h"); code != 0 {
		t.Errorf("-h: code %d", code)
	}
	withTuneDevice(t, nil, errors.New("no CUDA device 3 (1 present)"))
	if code, _, errOut := runCmd(t, "tune-instruction", "add", "--device", "cuda:3"); code != 2 || !strings.Contains(errOut, "CUDA device 3") {
		t.Errorf("open failure: code %d err %q", code, errOut)
	}
}

func TestTuneInstructionPrintsOnlyJSONAndLogsRows(t *testing.T) {
	d := &tuneFake{}
	withTuneDevice(t, d, nil)
	results := filepath.Join(t.TempDir(), "results.tsv")
	code, out, errOut := runCmd(t, "tune-instruction", "rmsnorm", "--gpu", "h200", "--budget", "3", "--dtype", "bf16", "--results", results)
	if code != 0 {
		t.Fatalf("code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var sum tune.Summary
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON summary: %v\n%s", err, out)
	}
	if sum.Op != "rmsnorm" || sum.GPU != "h200" || sum.DType != "bf16" || sum.Trials != 2 || !sum.AllCorrect ||
		sum.BestVariant == nil || *sum.BestVariant != "threads=128" || sum.ResultsTSV != results {
		t.Fatalf("summary %+v", sum)
	}
	if !strings.Contains(errOut, "tune-instruction rmsnorm") || !d.released {
		t.Fatalf("no progress on stderr or device not released: %q", errOut)
	}
	rows, err := flywheel.ReadRows(results)
	if err != nil || len(rows) != 2 || rows[0].KernelID != "rmsnorm[default]" || rows[0].Loop != "instruction" {
		t.Fatalf("rows %+v %v", rows, err)
	}
}

func TestTuneInstructionExitsOneOnAMismatch(t *testing.T) {
	withTuneDevice(t, &tuneFake{wrong: map[string]bool{"threads=128": true}}, nil)
	code, out, _ := runCmd(t, "tune-instruction", "add", "--gpu", "h200", "--budget", "3", "--results", "")
	if code != 1 || !strings.Contains(out, `"all_correct": false`) {
		t.Fatalf("code %d out %s", code, out)
	}
}

func TestCUDAOrdinal(t *testing.T) {
	for in, want := range map[string]int{"cuda": 0, "cuda:2": 2, "1": 1, " CUDA:3 ": 3} {
		if got, err := cudaOrdinal(in); err != nil || got != want {
			t.Errorf("%q: %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"cpu", "cuda:-1", "cuda:x"} {
		if _, err := cudaOrdinal(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
