package tune

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/tensor"
)

// LaunchDevice is the Device of a kernels/launch GPU in this process: each
// variant is built through the shared cache (a ModuleSource), loaded with
// the case program, and run by the amk_entry_<op> kernels (launch.OpRunner)
// — the same device functions the megakernel VM dispatches (docs/spec/rules.md R29). Entry
// kernels never wait on counters, so they cannot deadlock; a launch that
// faults poisons the CUDA context and the variants after it fail as
// crashes.
type LaunchDevice struct {
	dev    launch.Device
	runner launch.OpRunner
	mods   launch.ModuleSource
	info   launch.Info
	target *ir.GpuTarget
	notes  []string
}

// NewLaunchDevice wraps an open device. A GPU without a target record is
// refused (docs/spec/rules.md R1).
func NewLaunchDevice(dev launch.Device, mods launch.ModuleSource) (*LaunchDevice, error) {
	r, ok := dev.(launch.OpRunner)
	if !ok {
		return nil, errors.New("this device cannot run the kernel-tuning entry kernels")
	}
	info := dev.Info()
	t, notes, err := launch.MatchTarget(info, "")
	if err != nil {
		return nil, err
	}
	return &LaunchDevice{dev: dev, runner: r, mods: mods, info: info, target: t, notes: notes}, nil
}

// Name implements Device.
func (d *LaunchDevice) Name() string { return fmt.Sprintf("cuda:%d %s", d.info.Ordinal, d.info.Name) }

// Notes implements Device.
func (d *LaunchDevice) Notes(t *ir.GpuTarget) []string {
	out := append([]string(nil), d.notes...)
	if t.Name != d.target.Name {
		out = append(out, fmt.Sprintf("timed on %s (target record %s); the roofline uses --gpu %s", d.info.Name, d.target.Name, t.Name))
	}
	return out
}

// Close releases the device.
func (d *LaunchDevice) Close() error { return d.dev.Close() }

// Prepare implements Device.
func (d *LaunchDevice) Prepare(ctx context.Context, c *Case, v kernels.Variant) (Prepared, error) {
	n, err := v.Normalize()
	if err != nil {
		return nil, err
	}
	prog := *c.Program
	if prog.Config != nil {
		prog.Config = prog.Config.Clone()
		prog.Config.ThreadsPerBlock = n.Threads()
	}
	plan, err := kernels.PlanSmem(&prog, n, d.info.SmemOptinBytes)
	if err != nil {
		return nil, err
	}
	image, _, err := d.mods.Module(ctx, d.info.Arch(), n)
	if err != nil {
		var ce *build.CompileError
		if errors.As(err, &ce) {
			return nil, &BuildError{Err: err}
		}
		return nil, err
	}
	bind := map[int][]byte{}
	for id, t := range c.Inputs {
		data, err := kernels.EncodeTensor(&prog.Buffers[id], t)
		if err != nil {
			return nil, err
		}
		bind[id] = data
	}
	h, _, err := d.dev.Load(&launch.LoadSpec{Program: &prog, Image: image, Variant: n, Smem: plan.Bytes, Bindings: bind})
	if err != nil {
		return nil, err
	}
	return &launchPrepared{d: d, h: h, c: c, prog: &prog}, nil
}

type launchPrepared struct {
	d    *LaunchDevice
	h    launch.Handle
	c    *Case
	prog *ir.Program
}

func (p *launchPrepared) launch(warmup, samples int, read []int) (*launch.RunResult, launch.Stats, error) {
	res, st, err := p.d.runner.RunOp(p.h, launch.OpLaunch{Op: p.c.Op, First: 0, Count: len(p.prog.Tasks),
		Read: read, Warmup: warmup, Samples: samples})
	if err != nil {
		return nil, st, err
	}
	if res.Status != launch.StatusOK {
		return nil, st, fmt.Errorf("%s: %s", res.Status, res.Message)
	}
	return res, st, nil
}

// Run implements Prepared.
func (p *launchPrepared) Run(ctx context.Context) (map[int]*tensor.Tensor, error) {
	res, _, err := p.launch(0, 0, p.c.Outputs)
	if err != nil {
		return nil, err
	}
	out := map[int]*tensor.Tensor{}
	for _, id := range p.c.Outputs {
		data, ok := res.Outputs[id]
		if !ok {
			return nil, fmt.Errorf("the device returned no %s", p.prog.Buffers[id].Name)
		}
		t, err := kernels.DecodeTensor(&p.prog.Buffers[id], data)
		if err != nil {
			return nil, err
		}
		out[id] = t
	}
	return out, nil
}

// Time implements Prepared.
func (p *launchPrepared) Time(ctx context.Context, warmup, samples int) (launch.Stats, error) {
	if samples <= 0 {
		return launch.Stats{}, errors.New("timing needs samples > 0")
	}
	_, st, err := p.launch(warmup, samples, nil)
	if err == nil && st.N != samples {
		err = fmt.Errorf("the device returned %d samples, want %d", st.N, samples)
	}
	return st, err
}

// Close implements Prepared.
func (p *launchPrepared) Close() error { return p.d.dev.Unload(p.h) }

// ParseCUDADevice parses a Loop 1 device: cuda (ordinal 0), cuda:N or N.
func ParseCUDADevice(s string) (int, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "cuda" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s, "cuda:"))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--device must be cuda or cuda:N (kernel tuning needs a GPU), got %q", s)
	}
	return n, nil
}
