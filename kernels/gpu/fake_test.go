package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/vm"
)

// The test binary doubles as a launcher child serving a vmDevice: with
// AMK_GPU_FAKE_CHILD set to a mode, TestMain serves the protocol instead of
// running tests.
//
// With AMK_GPU_CUDA_CHILD=1 it is the real launcher child (ChildMain) for
// the cuda-tagged GPU tests.
func TestMain(m *testing.M) {
	if os.Getenv("AMK_GPU_CUDA_CHILD") == "1" {
		var args []string
		for _, a := range os.Args[1:] {
			if !strings.HasPrefix(a, "-test.") {
				args = append(args, a)
			}
		}
		os.Exit(ChildMain(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
	}
	mode, ok := os.LookupEnv("AMK_GPU_FAKE_CHILD")
	if !ok {
		code := m.Run()
		removeEmuCache()
		os.Exit(code)
	}
	srv := &launch.Server{Device: newVMDevice(mode), Modules: fakeModules{}, Weights: &WeightProvider{}}
	if err := launch.Serve(context.Background(), os.Stdin, os.Stdout, srv); err != nil {
		fmt.Fprintln(os.Stderr, "fake child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fakeChild re-executes the test binary as a launcher child in mode.
func fakeChild(mode string) func() *exec.Cmd {
	return func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AMK_GPU_FAKE_CHILD="+mode)
		return cmd
	}
}

type fakeModules struct{}

func (fakeModules) Module(ctx context.Context, arch string, v kernels.Variant) ([]byte, string, error) {
	return []byte("fake module " + arch + " " + v.String()), "module fake (" + arch + ")", nil
}

// vmDevice is a launch.Device that computes with the reference VM, so its
// outputs are exactly what a correct GPU would return. Modes:
// "corrupt" shifts every logit, "racy" leaves a different last logit after
// the timed launches than after a checked one, "watchdog" ends each launch
// at the device watchdog, "poison" fails the launch, "hang" never returns from a launch,
// "unknown" is a GPU without a target record, "emu" the CPU emulator of
// h200, and "emu-racy" an emulator whose every second launch of a program
// leaves the last logit one ulp off (a race a thread schedule exposed).
type vmDevice struct {
	mode string

	mu      sync.Mutex
	progs   map[launch.Handle]*vmProgram
	next    launch.Handle
	loads   []int // task counts of the programs loaded, in order
	runs    int
	updates int
	times   []launch.Handle // incumbents timed
}

type vmProgram struct {
	runs    int
	prog    *ir.Program
	weights map[string]*tensor.Tensor
	kv      map[string]*tensor.Tensor
	last    map[string]*tensor.Tensor // the IO outputs of the last launch
	timed   bool                      // launched by TimeInterleaved since the last Run
}

func newVMDevice(mode string) *vmDevice {
	return &vmDevice{mode: mode, progs: map[launch.Handle]*vmProgram{}}
}

func (d *vmDevice) Info() launch.Info {
	name := "NVIDIA H200"
	if d.mode == "unknown" {
		name = "NVIDIA Mystery 9000"
	}
	if strings.HasPrefix(d.mode, "emu") {
		info, _ := launch.EmulatorInfo("h200")
		return info
	}
	return launch.Info{Ordinal: 0, Name: name, SMs: 132, CCMajor: 9, CCMinor: 0, DriverVersion: 12080,
		SmemOptinBytes: ir.DynamicSmemCap(232448), Cooperative: true}
}

func (d *vmDevice) Load(spec *launch.LoadSpec) (launch.Handle, launch.LoadInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := kernels.MarshalProgram(spec.Program, kernels.MarshalOptions{})
	if err != nil {
		return launch.NoHandle, launch.LoadInfo{}, &launch.RemoteError{Class: launch.ClassRejected, Phase: launch.OpLoad, Message: err.Error()}
	}
	vp := &vmProgram{prog: spec.Program, weights: map[string]*tensor.Tensor{}, kv: map[string]*tensor.Tensor{}}
	for id, data := range spec.Bindings {
		b := &spec.Program.Buffers[id]
		tt, err := kernels.DecodeTensor(b, data)
		if err != nil {
			return launch.NoHandle, launch.LoadInfo{}, err
		}
		switch b.Kind {
		case ir.KVCache:
			vp.kv[b.Name] = tt
		default:
			key := b.Name
			if b.Source != nil {
				key = *b.Source
			}
			vp.weights[key] = tt
		}
	}
	h := d.next
	d.next++
	d.progs[h] = vp
	d.loads = append(d.loads, len(spec.Program.Tasks))
	return h, launch.LoadInfo{Grid: t.NumQueues, BlocksPerSM: 1, Threads: spec.Variant.Threads(), Smem: spec.Smem, Registers: 96}, nil
}

func (d *vmDevice) Update(h launch.Handle, p *ir.Program) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	vp, ok := d.progs[h]
	if !ok {
		return errors.New("unknown handle")
	}
	t, err := kernels.MarshalProgram(vp.prog, kernels.MarshalOptions{})
	if err != nil {
		return err
	}
	if err := t.RemarshalInstructions(p); err != nil {
		return err
	}
	vp.prog = p
	d.updates++
	return nil
}

func (d *vmDevice) Run(h launch.Handle, inputs map[int][]byte, read []int) (*launch.RunResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs++
	vp, ok := d.progs[h]
	if !ok {
		return nil, errors.New("unknown handle")
	}
	switch d.mode {
	case "watchdog":
		return &launch.RunResult{Status: launch.StatusWatchdog, Message: "task 3 waited 1s on counter 2 (observed 0, threshold 1)"}, nil
	case "poison":
		return nil, errors.New("cuLaunchCooperativeKernel: CUresult 719")
	case "hang":
		time.Sleep(time.Hour)
	}
	machine, err := vm.New(vp.prog, vm.Options{})
	if err != nil {
		return nil, err
	}
	if err := machine.BindWeights(vp.weights); err != nil {
		return nil, err
	}
	for id, data := range inputs {
		b := &vp.prog.Buffers[id]
		t, err := kernels.DecodeTensor(b, data)
		if err != nil {
			return nil, err
		}
		if b.Kind == ir.KVCache {
			vp.kv[b.Name] = t
		} else if err := machine.Bind(b.Name, t); err != nil {
			return nil, err
		}
	}
	if err := machine.BindKV(vp.kv); err != nil {
		return nil, err
	}
	res, err := machine.Run()
	if err != nil {
		return nil, err
	}
	vp.kv = res.KV
	vp.last, vp.timed = res.Outputs, false
	vp.runs++
	out := &launch.RunResult{Status: launch.StatusOK, Outputs: map[int][]byte{}, Grid: 1}
	for _, id := range read {
		b := &vp.prog.Buffers[id]
		t := res.Outputs[b.Name]
		if b.Kind == ir.KVCache {
			t = res.KV[b.Name]
		}
		if t == nil {
			return nil, fmt.Errorf("no tensor for buffer %s", b.Name)
		}
		if d.mode == "corrupt" && b.Name == schedule.LogitsOutput {
			t = t.Clone()
			for i := range t.F {
				t.F[i] = tensor.Round(b.DType, t.F[i]+0.5)
			}
		}
		if d.mode == "emu-racy" && vp.runs%2 == 0 && b.Name == schedule.LogitsOutput {
			t = t.Clone()
			t.F[len(t.F)-1] = math.Nextafter32(t.F[len(t.F)-1], float32(math.Inf(1)))
		}
		data, err := kernels.EncodeTensor(b, t)
		if err != nil {
			return nil, err
		}
		out.Outputs[id] = data
	}
	return out, nil
}

func (d *vmDevice) TimeInterleaved(cand, inc launch.Handle, warmup, samples int) (*launch.Comparison, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	vp, ok := d.progs[cand]
	if !ok {
		return nil, errors.New("unknown candidate")
	}
	vp.timed = true
	var cs, is []float64
	for i := range samples {
		cs = append(cs, 100+float64(i%5))
		if inc != launch.NoHandle {
			is = append(is, 120+float64(i%5))
		}
	}
	if inc != launch.NoHandle {
		d.times = append(d.times, inc)
	}
	return launch.Compare(cs, is), nil
}

// ReadBuffers implements launch.BufferReader: the IO outputs of the last
// launch (in mode "racy", one logit off by one ulp once a timing ran).
func (d *vmDevice) ReadBuffers(h launch.Handle, read []int) (map[int][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	vp, ok := d.progs[h]
	if !ok {
		return nil, errors.New("unknown handle")
	}
	out := map[int][]byte{}
	for _, id := range read {
		b := &vp.prog.Buffers[id]
		t := vp.last[b.Name]
		if t == nil {
			return nil, fmt.Errorf("buffer %s was never written", b.Name)
		}
		if d.mode == "racy" && vp.timed && b.Name == schedule.LogitsOutput {
			t = t.Clone()
			t.F[len(t.F)-1] = math.Nextafter32(t.F[len(t.F)-1], float32(math.Inf(1)))
		}
		data, err := kernels.EncodeTensor(b, t)
		if err != nil {
			return nil, err
		}
		out[id] = data
	}
	return out, nil
}

func (d *vmDevice) Unload(h launch.Handle) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.progs, h)
	return nil
}

func (d *vmDevice) Close() error { return nil }

func (d *vmDevice) resident() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.progs)
}

// serverClient is an in-process Client: every request goes through a real
// launch.Server as JSON, as it would across the process boundary.
type serverClient struct {
	srv *launch.Server
	dev *vmDevice
	gen int
}

func newServerClient(mode string) *serverClient {
	dev := newVMDevice(mode)
	return &serverClient{srv: &launch.Server{Device: dev, Modules: fakeModules{}, Weights: &WeightProvider{}}, dev: dev, gen: 1}
}

func (c *serverClient) call(ctx context.Context, op string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	out, err := c.srv.Handle(ctx, op, body)
	if err != nil {
		var re *launch.RemoteError
		if errors.As(err, &re) {
			return re
		}
		return &launch.RemoteError{Class: launch.ClassCrash, Phase: op, Message: err.Error()}
	}
	if resp == nil {
		return nil
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, resp)
}

func (c *serverClient) Hello(ctx context.Context) (*launch.HelloResponse, error) {
	var r launch.HelloResponse
	return &r, c.call(ctx, launch.OpHello, struct{}{}, &r)
}

func (c *serverClient) Load(ctx context.Context, req *launch.LoadRequest) (*launch.LoadResponse, error) {
	var r launch.LoadResponse
	return &r, c.call(ctx, launch.OpLoad, req, &r)
}

func (c *serverClient) Update(ctx context.Context, req *launch.UpdateRequest) error {
	return c.call(ctx, launch.OpUpdate, req, nil)
}

func (c *serverClient) Run(ctx context.Context, req *launch.RunRequest) (*launch.RunResponse, error) {
	var r launch.RunResponse
	return &r, c.call(ctx, launch.OpRun, req, &r)
}

func (c *serverClient) Time(ctx context.Context, req *launch.TimeRequest) (*launch.Comparison, error) {
	var r launch.Comparison
	return &r, c.call(ctx, launch.OpTime, req, &r)
}

func (c *serverClient) Read(ctx context.Context, req *launch.ReadRequest) (*launch.RunResponse, error) {
	var r launch.RunResponse
	return &r, c.call(ctx, launch.OpRead, req, &r)
}

func (c *serverClient) Unload(ctx context.Context, handle string) error {
	return c.call(ctx, launch.OpUnload, &launch.UnloadRequest{Handle: handle}, nil)
}
