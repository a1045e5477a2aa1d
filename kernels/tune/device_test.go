package tune

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/vm"
)

// vmLaunchDevice is a launch.Device and OpRunner that computes with the
// reference VM. A module whose variant sets cpasync=0 traps.
type vmLaunchDevice struct {
	name  string
	progs map[launch.Handle]*vmLoaded
	next  launch.Handle
	ops   []launch.OpLaunch
}

type vmLoaded struct {
	spec *launch.LoadSpec
}

func newVMLaunchDevice(name string) *vmLaunchDevice {
	return &vmLaunchDevice{name: name, progs: map[launch.Handle]*vmLoaded{}}
}

func (d *vmLaunchDevice) Info() launch.Info {
	return launch.Info{Ordinal: 1, Name: d.name, SMs: 132, CCMajor: 9, CCMinor: 0, SmemOptinBytes: ir.DynamicSmemCap(232448), Cooperative: true}
}

func (d *vmLaunchDevice) Load(spec *launch.LoadSpec) (launch.Handle, launch.LoadInfo, error) {
	if _, err := kernels.MarshalProgram(spec.Program, kernels.MarshalOptions{}); err != nil {
		return launch.NoHandle, launch.LoadInfo{}, err
	}
	h := d.next
	d.next++
	d.progs[h] = &vmLoaded{spec: spec}
	return h, launch.LoadInfo{Grid: 1, Threads: spec.Variant.Threads()}, nil
}

func (d *vmLaunchDevice) RunOp(h launch.Handle, l launch.OpLaunch) (*launch.RunResult, launch.Stats, error) {
	d.ops = append(d.ops, l)
	lp, ok := d.progs[h]
	if !ok {
		return nil, launch.Stats{}, errors.New("unknown handle")
	}
	p := lp.spec.Program
	if l.First != 0 || l.Count != len(p.Tasks) || l.Op != p.Tasks[0].Op {
		return nil, launch.Stats{}, errors.New("bad entry launch")
	}
	if c, set := lp.spec.Variant["cpasync"]; set && c == 0 {
		return &launch.RunResult{Status: launch.StatusTrap, Message: "trap: launch shape"}, launch.Stats{}, nil
	}
	machine, err := vm.New(p, vm.Options{})
	if err != nil {
		return nil, launch.Stats{}, err
	}
	weights, kv := map[string]*tensor.Tensor{}, map[string]*tensor.Tensor{}
	for id, data := range lp.spec.Bindings {
		b := &p.Buffers[id]
		t, err := kernels.DecodeTensor(b, data)
		if err != nil {
			return nil, launch.Stats{}, err
		}
		switch b.Kind {
		case ir.Weight, ir.Const:
			weights[*b.Source] = t
		case ir.KVCache:
			kv[b.Name] = t
		default:
			if err := machine.Bind(b.Name, t); err != nil {
				return nil, launch.Stats{}, err
			}
		}
	}
	_ = machine.BindWeights(weights)
	_ = machine.BindKV(kv)
	res, err := machine.Run()
	if err != nil {
		return nil, launch.Stats{}, err
	}
	out := &launch.RunResult{Status: launch.StatusOK, Outputs: map[int][]byte{}}
	for _, id := range l.Read {
		b := &p.Buffers[id]
		t := res.Outputs[b.Name]
		if b.Kind == ir.KVCache {
			t = res.KV[b.Name]
		}
		if out.Outputs[id], err = kernels.EncodeTensor(b, t); err != nil {
			return nil, launch.Stats{}, err
		}
	}
	var samples []float64
	for i := 0; i < l.Samples; i++ {
		samples = append(samples, float64(lp.spec.Variant.Threads())/10+float64(i%3))
	}
	return out, launch.Summarize(samples), nil
}

func (d *vmLaunchDevice) Update(launch.Handle, *ir.Program) error { return errors.New("not used") }
func (d *vmLaunchDevice) Run(launch.Handle, map[int][]byte, []int) (*launch.RunResult, error) {
	return nil, errors.New("not used")
}
func (d *vmLaunchDevice) TimeInterleaved(launch.Handle, launch.Handle, int, int) (*launch.Comparison, error) {
	return nil, errors.New("not used")
}
func (d *vmLaunchDevice) Unload(h launch.Handle) error { delete(d.progs, h); return nil }
func (d *vmLaunchDevice) Close() error                 { return nil }

// modules compiles everything but threads=128.
type modules struct{}

func (modules) Module(ctx context.Context, arch string, v kernels.Variant) ([]byte, string, error) {
	if arch != "sm_90a" {
		return nil, "", errors.New("wrong arch " + arch)
	}
	if v.Threads() == 128 {
		return nil, "", &build.CompileError{Arch: arch, Err: errors.New("exit status 1"), Log: "ptxas error"}
	}
	return []byte("module"), "", nil
}

func TestLaunchDeviceRunsTheLoop(t *testing.T) {
	dev := newVMLaunchDevice("NVIDIA H200")
	ld, err := NewLaunchDevice(dev, modules{})
	if err != nil {
		t.Fatal(err)
	}
	if ld.Name() != "cuda:1 NVIDIA H200" || len(ld.Notes(h200(t))) != 0 {
		t.Fatalf("name %q notes %v", ld.Name(), ld.Notes(h200(t)))
	}
	h100, _ := ir.Target("h100")
	if n := ld.Notes(h100); len(n) != 1 || !strings.Contains(n[0], "--gpu h100") {
		t.Fatalf("notes for another target %v", n)
	}
	c, err := NewCase(ir.OpGEMVTile, ir.BF16, h200(t), "toy")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Tune(context.Background(), ld, Options{Target: h200(t), Budget: 3, Case: c, Samples: 8, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, tr := range s.TrialsDetail {
		got = append(got, tr.Variant+":"+tr.Correctness)
	}
	want := []string{"default:PASS", "threads=128:CRASH", "cpasync=0:CRASH"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("trials %v, want %v", got, want)
	}
	if s.TrialsDetail[1].Built || !s.TrialsDetail[2].Built || !strings.Contains(s.TrialsDetail[2].Note, "TRAP") {
		t.Fatalf("details %+v", s.TrialsDetail)
	}
	if s.AllCorrect || *s.BestVariant != "default" || *s.BestUS != 26.6 {
		t.Fatalf("summary %+v best %v", s, *s.BestUS)
	}
	// The entry kernel runs every task of the case, one per block.
	for _, op := range dev.ops {
		if op.Op != ir.OpGEMVTile || op.Count != len(c.Program.Tasks) {
			t.Fatalf("entry launch %+v", op)
		}
	}
	if len(dev.progs) != 0 {
		t.Fatalf("%d programs left loaded", len(dev.progs))
	}
}

func TestNewLaunchDeviceRefusals(t *testing.T) {
	if _, err := NewLaunchDevice(newVMLaunchDevice("NVIDIA Mystery"), modules{}); err == nil || !strings.Contains(err.Error(), "no target record") {
		t.Fatalf("unknown GPU: %v", err)
	}
	if _, err := NewLaunchDevice(noOps{newVMLaunchDevice("NVIDIA H200")}, modules{}); err == nil {
		t.Fatal("a device without entry kernels was accepted")
	}
}

// noOps hides the OpRunner.
type noOps struct{ launch.Device }
