package loop1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/amk-dev/amk/fib"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/tune"
)

// Options configures Run.
type Options struct {
	// Target is the GPU target record the run is for. Unless
	// TargetChosen, a dataset that names one target (an amk export does)
	// runs for that one instead; a chosen target the dataset contradicts
	// is an error.
	Target       *ir.GpuTarget
	TargetChosen bool
	// Device times kernels on a GPU; nil runs on the CPU (predicted).
	Device tune.Device
	// Budget is the -D variants per case on a GPU (tune.Options.Budget).
	Budget int
	// Results is the results.tsv GPU trials append to ("" = none). CPU
	// runs write no rows: Loop-1 rows are measured-gpu.
	Results string
	// Definition limits the run to one Definition ("" = every mapped one).
	Definition string
	// MaxCases caps the cases run (0 = 16).
	MaxCases int
	// Dump, when set, receives each case's inputs and amk's outputs (the
	// reference VM's, and on a GPU the default kernel variant's) for
	// scripts/gpu/fib_check.py.
	Dump string
	Log  io.Writer
}

// Report is a Loop-1 run on a dataset's workloads.
type Report struct {
	Dataset     string          `json:"dataset"`
	GPU         string          `json:"gpu"`
	Device      string          `json:"device"`
	LatencyKind string          `json:"latency_kind"`
	Unmapped    []string        `json:"unmapped"`
	Skipped     []string        `json:"skipped"`
	Predicted   []Result        `json:"predicted,omitempty"`
	Tuned       []*tune.Summary `json:"tuned,omitempty"`
	OK          bool            `json:"ok"`
}

// datasetTarget returns the target a run on ds is for: the one the dataset
// names unless the user chose one, which must then agree with it.
func datasetTarget(ds *fib.Dataset, target *ir.GpuTarget, chosen bool) (*ir.GpuTarget, error) {
	named := fib.DatasetTargets(ds)
	switch {
	case len(named) == 0 || (chosen && slices.Contains(named, target.Name)):
		return target, nil
	case chosen:
		return nil, fmt.Errorf("the dataset was exported for %s, not %s: drop --gpu, or export it again with --gpu %s",
			strings.Join(named, " and "), target.Name, target.Name)
	case len(named) > 1:
		return nil, fmt.Errorf("the dataset names several GPU targets (%s): choose one with --gpu", strings.Join(named, ", "))
	}
	return ir.Target(named[0])
}

// ErrNothingToRun is returned when no workload of the dataset maps onto an
// amk micro-kernel.
var ErrNothingToRun = errors.New("no workload maps onto an amk micro-kernel")

// Run reads a dataset, maps it, and runs Loop 1 on each mapped workload:
// on the CPU the reference VM against the Definition and the cost model's
// prediction (Predict); on a GPU the same semantic check, then tune.Tune
// with the workload's case (measured-gpu). OK is every case correct (and
// on a GPU every tune run OK).
func Run(ctx context.Context, dir string, opts Options) (*Report, error) {
	if opts.Target == nil {
		return nil, errors.New("loop1: no target")
	}
	if opts.MaxCases <= 0 {
		opts.MaxCases = 16
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	ds, err := fib.ReadDataset(dir)
	if err != nil {
		return nil, err
	}
	if opts.Target, err = datasetTarget(ds, opts.Target, opts.TargetChosen); err != nil {
		return nil, err
	}
	r := &Report{Dataset: dir, GPU: opts.Target.Name, Device: "cpu (reference VM + cost model)", LatencyKind: fib.KindPredicted,
		Unmapped: []string{}, Skipped: []string{}, OK: true}
	if opts.Device != nil {
		r.Device, r.LatencyKind = opts.Device.Name(), fib.KindMeasuredGPU
	}
	var cases []fib.CaseSpec
	for _, m := range fib.Map(ds) {
		if opts.Definition != "" && m.Definition != opts.Definition {
			continue
		}
		if !m.Mapped() {
			r.Unmapped = append(r.Unmapped, fmt.Sprintf("%s: %v", m.Definition, m.Reasons))
			continue
		}
		for _, reason := range m.Reasons {
			r.Skipped = append(r.Skipped, m.Definition+": "+reason)
		}
		cases = append(cases, m.Cases...)
	}
	if len(cases) == 0 {
		return r, ErrNothingToRun
	}
	if len(cases) > opts.MaxCases {
		for _, c := range cases[opts.MaxCases:] {
			r.Skipped = append(r.Skipped, fmt.Sprintf("%s workload %s: over the %d-case cap", c.Definition, c.Workload, opts.MaxCases))
		}
		cases = cases[:opts.MaxCases]
	}
	for _, s := range cases {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		if opts.Device == nil {
			res := newResult(s, opts.Target)
			c, err := Build(s, opts.Target)
			if err != nil {
				res.Notes = append(res.Notes, err.Error())
			} else {
				res = predictCase(res, c, opts.Target)
				if opts.Dump != "" {
					if err := Dump(opts.Dump, ds.Definitions[s.Definition], s, c, nil, ""); err != nil {
						res.Notes = append(res.Notes, "dump: "+err.Error())
					}
				}
			}
			fmt.Fprintf(opts.Log, "  [%s] %s workload %s: %s\n", res.Correctness, s.Definition, s.Workload, res.Op)
			r.Predicted = append(r.Predicted, res)
			r.OK = r.OK && res.Correct
			continue
		}
		sum, err := tuneCase(ctx, ds.Definitions[s.Definition], s, opts)
		if err != nil {
			fmt.Fprintf(opts.Log, "  %s workload %s: %v\n", s.Definition, s.Workload, err)
			r.OK = false
		}
		if sum != nil {
			r.Tuned = append(r.Tuned, sum)
			r.OK = r.OK && sum.OK()
		}
	}
	return r, nil
}

// tuneCase checks the case's reference against the Definition, then tunes
// it on the device.
func tuneCase(ctx context.Context, d *fib.Definition, s fib.CaseSpec, opts Options) (*tune.Summary, error) {
	c, err := Build(s, opts.Target)
	if err != nil {
		return nil, err
	}
	cmp, err := Check(c)
	if err != nil {
		return nil, err
	}
	if !cmp.Pass {
		return nil, fmt.Errorf("the reference VM disagrees with the Definition: %s", cmp.Reason)
	}
	if opts.Dump != "" {
		if err := dumpDevice(ctx, d, s, c, opts); err != nil {
			fmt.Fprintf(opts.Log, "  dump of %s workload %s: %v\n", s.Definition, s.Workload, err)
		}
	}
	budget := max(1, opts.Budget)
	return tune.Tune(ctx, opts.Device, tune.Options{Op: c.Op, DType: c.DType, Target: opts.Target, Budget: budget,
		Results: opts.Results, Case: c, Log: opts.Log})
}

// dumpDevice runs the default variant once and dumps its outputs with the
// case.
func dumpDevice(ctx context.Context, d *fib.Definition, s fib.CaseSpec, c *tune.Case, opts Options) error {
	prep, err := opts.Device.Prepare(ctx, c, tune.Proposals(c.Op, 1)[0])
	if err != nil {
		return err
	}
	defer prep.Close()
	out, err := prep.Run(ctx)
	if err != nil {
		return err
	}
	return Dump(opts.Dump, d, s, c, out, opts.Device.Name())
}
