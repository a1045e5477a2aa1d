package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
)

// The test binary doubles as the launcher child: with AMK_LAUNCH_FAKE_CHILD
// set, TestMain serves the protocol on stdin/stdout instead of running tests.
func TestMain(m *testing.M) {
	mode := os.Getenv("AMK_LAUNCH_FAKE_CHILD")
	if mode == "" {
		os.Exit(m.Run())
	}
	var err error
	switch mode {
	case "basic":
		err = Serve(context.Background(), os.Stdin, os.Stdout, HandlerFunc(fakeChildHandler))
	case "server":
		err = Serve(context.Background(), os.Stdin, os.Stdout, &Server{Device: newFakeDevice(), Modules: fakeModules{}})
	case "garbage": // what a child whose CUDA init fails prints before exiting
		fmt.Println("Error in initialization, please refer to the docs: UnknownErrorCode:34")
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func fakeChildHandler(ctx context.Context, op string, body json.RawMessage) (any, error) {
	switch op {
	case "echo":
		return body, nil
	case "pid":
		return os.Getpid(), nil
	case "hang": // a kernel that never returns
		time.Sleep(time.Hour)
	case "wedge": // a kernel that never returns, in a child that will not go when killed
		pid, err := leaveStuckHolder()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "holder %d\n", pid)
		time.Sleep(time.Hour)
	case "crash":
		fmt.Fprintln(os.Stderr, "simulated device fault: illegal address")
		os.Exit(3)
	case "fail":
		return nil, &RemoteError{Class: ClassRejected, Phase: "load", Message: "opcode FUSED cannot run on the device"}
	case "fatal":
		return nil, &Fatal{Err: &RemoteError{Class: ClassCrash, Phase: "run", Message: "launch failed: LaunchFailed"}}
	case "panic":
		panic("boom")
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

// childCommand re-executes the test binary as a fake child.
func childCommand(mode string) func() *exec.Cmd {
	return func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AMK_LAUNCH_FAKE_CHILD="+mode)
		return cmd
	}
}

// ---- a fake device --------------------------------------------------------------------------

type fakeProgram struct {
	spec *LoadSpec
	kv   map[int][]byte
	left map[int][]byte // the buffers the last launch wrote, by id
}

type fakeDevice struct {
	progs map[Handle]*fakeProgram
	next  Handle
}

func newFakeDevice() *fakeDevice { return &fakeDevice{progs: map[Handle]*fakeProgram{}} }

func (d *fakeDevice) Info() Info {
	return Info{Name: "Fake H200", SMs: 132, CCMajor: 9, CCMinor: 0, DriverVersion: 12080, SmemOptinBytes: ir.DynamicSmemCap(232448), Cooperative: true}
}

func (d *fakeDevice) Load(spec *LoadSpec) (Handle, LoadInfo, error) {
	if len(spec.Image) == 0 {
		return NoHandle, LoadInfo{}, errors.New("empty module")
	}
	t, err := kernels.MarshalProgram(spec.Program, kernels.MarshalOptions{Unchecked: spec.Unchecked})
	if err != nil {
		return NoHandle, LoadInfo{}, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: err.Error()}
	}
	h := d.next
	d.next++
	d.progs[h] = &fakeProgram{spec: spec, kv: map[int][]byte{}}
	return h, LoadInfo{Grid: t.NumQueues, BlocksPerSM: 1, Threads: spec.Variant.Threads(), Smem: spec.Smem, Registers: 200}, nil
}

func (d *fakeDevice) Update(h Handle, p *ir.Program) error {
	fp, ok := d.progs[h]
	if !ok {
		return errors.New("unknown handle")
	}
	fp.spec.Program = p
	return nil
}

// Run fills every IO output with the byte pattern of the first IO input;
// a task labelled "stuck" makes the launch end at the watchdog, one
// labelled "poison" fails the launch (a sticky device error).
func (d *fakeDevice) Run(h Handle, inputs map[int][]byte, read []int) (*RunResult, error) {
	fp, ok := d.progs[h]
	if !ok {
		return nil, errors.New("unknown handle")
	}
	p := fp.spec.Program
	for i := range p.Tasks {
		switch p.Tasks[i].Label {
		case "stuck":
			diag := kernels.Diag{Code: kernels.AbortWatchdog, Task: int32(i), Op: int32(p.Tasks[i].Op), Counter: 3,
				Observed: 1, Threshold: 2, WaitedNS: 1e9}
			return &RunResult{Status: StatusWatchdog, Diag: diag}, nil
		case "poison":
			return nil, errors.New("cuCtxSynchronize: IllegalAddress")
		}
	}
	res := &RunResult{Status: StatusOK, Outputs: map[int][]byte{}, Grid: 2}
	for _, id := range read {
		res.Outputs[id] = make([]byte, p.Buffers[id].NBytes())
		if in, ok := inputs[0]; ok {
			copy(res.Outputs[id], in)
		}
		if fp.left == nil {
			fp.left = map[int][]byte{}
		}
		fp.left[id] = res.Outputs[id]
	}
	return res, nil
}

// ReadBuffers implements BufferReader: what the last launch left.
func (d *fakeDevice) ReadBuffers(h Handle, read []int) (map[int][]byte, error) {
	fp, ok := d.progs[h]
	if !ok {
		return nil, errors.New("unknown handle")
	}
	out := map[int][]byte{}
	for _, id := range read {
		out[id] = fp.left[id]
	}
	return out, nil
}

func (d *fakeDevice) TimeInterleaved(cand, inc Handle, warmup, samples int) (*Comparison, error) {
	if _, ok := d.progs[cand]; !ok {
		return nil, errors.New("unknown candidate")
	}
	c := make([]float64, samples)
	i := make([]float64, samples)
	for k := range c {
		c[k], i[k] = 100+float64(k%3), 125+float64(k%3)
	}
	if inc == NoHandle {
		i = nil
	}
	return Compare(c, i), nil
}

func (d *fakeDevice) Unload(h Handle) error { delete(d.progs, h); return nil }
func (d *fakeDevice) Close() error          { return nil }

type fakeModules struct{}

func (fakeModules) Module(ctx context.Context, arch string, v kernels.Variant) ([]byte, string, error) {
	return []byte("FAKE-CUBIN " + arch + " " + v.String()), "fake module for " + arch, nil
}
