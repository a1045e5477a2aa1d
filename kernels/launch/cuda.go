//go:build cuda

package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
)

// CUDAEnabled reports whether this binary was built with -tags cuda.
const CUDAEnabled = true

// Device attributes without a named constant in gorgonia.org/cu.
const (
	attrCooperativeLaunch = cu.DeviceAttribute(95)
	attrSmemOptin         = cu.DeviceAttribute(97)
)

// cudaDevice runs every CUDA call on one goroutine locked to one OS thread
// with the device's primary context current (cu's free functions act on the
// calling thread's context).
type cudaDevice struct {
	info   Info
	dev    cu.Device
	work   chan func()
	quit   chan struct{}
	progs  handles[*cudaProgram]
	closed bool
}

type cudaProgram struct {
	prog      *ir.Program
	tables    *kernels.Tables
	mod       cu.Module
	vm        cu.Function
	threads   int
	smem      int
	grid      int
	occupancy int // co-resident blocks per SM proven by the occupancy API
	allocs    []cu.DevicePtr

	arena, counters, status, prog0 cu.DevicePtr
	instr                          cu.DevicePtr
	ext                            map[int]cu.DevicePtr // host-bound buffers
	start, stop                    cu.Event
}

// Open opens CUDA device ordinal: it retains the primary context on a
// dedicated OS thread and reads the attributes Info reports.
func Open(ordinal int) (Device, error) {
	d := &cudaDevice{work: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go d.loop(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

func (d *cudaDevice) loop(ordinal int, ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the device
	if err := d.open(ordinal); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.quit:
			return
		}
	}
}

func (d *cudaDevice) do(f func() error) error {
	errc := make(chan error, 1)
	select {
	case d.work <- func() { errc <- f() }:
	case <-d.quit:
		return errors.New("device closed")
	}
	return <-errc
}

func (d *cudaDevice) open(ordinal int) error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("cuDeviceGetCount: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return fmt.Errorf("no CUDA device %d (%d present)", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return err
	}
	ctx, err := dev.RetainPrimaryCtx() // kept as a value: never wrapped in *cu.Ctx, whose finalizer destroys it
	if err != nil {
		return fmt.Errorf("retaining the primary context: %w", err)
	}
	if err := cu.SetCurrentContext(ctx); err != nil {
		return fmt.Errorf("making the primary context current: %w", err)
	}
	d.dev = dev
	name, err := dev.Name()
	if err != nil {
		return err
	}
	a, err := dev.Attributes(cu.MultiprocessorCount, cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor,
		cu.L2CacheSize, cu.ClockRate, attrCooperativeLaunch, attrSmemOptin)
	if err != nil {
		return fmt.Errorf("device attributes: %w", err)
	}
	mem, _ := dev.TotalMem()
	d.info = Info{Ordinal: ordinal, Name: name, SMs: a[0], CCMajor: a[1], CCMinor: a[2], L2Bytes: a[3], ClockKHz: a[4],
		// SmemOptinBytes is the dynamic cap: the opt-in cap less ir.StaticSmemReserve.
		Cooperative: a[5] != 0, SmemOptinBytes: ir.DynamicSmemCap(a[6]), TotalMemBytes: mem, DriverVersion: driverVersion()}
	if u, err := dev.UUID(); err == nil {
		d.info.UUID = u.String()
	}
	return nil
}

func (d *cudaDevice) Info() Info { return d.info }

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

func (p *cudaProgram) alloc(n int64) (cu.DevicePtr, error) {
	n = alignUp(max(n, 16), 256)
	ptr, err := cu.MemAlloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuMemAlloc(%d): %w", n, err)
	}
	p.allocs = append(p.allocs, ptr)
	return ptr, cu.MemsetD32(ptr, 0, n/4)
}

func upload(dst cu.DevicePtr, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	return cu.MemcpyHtoD(dst, unsafe.Pointer(&data[0]), int64(len(data)))
}

func download(src cu.DevicePtr, n int64) ([]byte, error) {
	out := make([]byte, n)
	if n == 0 {
		return out, nil
	}
	return out, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), src, n)
}

// allocUpload allocates a device copy of data.
func (p *cudaProgram) allocUpload(data []byte) (cu.DevicePtr, error) {
	ptr, err := p.alloc(int64(len(data)))
	if err != nil {
		return 0, err
	}
	return ptr, upload(ptr, data)
}

func (p *cudaProgram) free() {
	for _, a := range p.allocs {
		_ = cu.MemFree(a)
	}
	p.allocs = nil
	_ = cu.DestroyEvent(&p.start)
	_ = cu.DestroyEvent(&p.stop)
	_ = p.mod.Unload()
}

func (d *cudaDevice) Load(spec *LoadSpec) (Handle, LoadInfo, error) {
	h := NoHandle
	var info LoadInfo
	err := d.do(func() error {
		p, err := d.load(spec)
		if err != nil {
			return err
		}
		h = d.progs.add(p)
		regs, _ := p.vm.Attribute(cu.NumRegs)
		info = LoadInfo{Grid: p.grid, BlocksPerSM: p.occupancy, Threads: p.threads, Smem: p.smem, Registers: regs}
		return nil
	})
	return h, info, err
}

func (d *cudaDevice) load(spec *LoadSpec) (_ *cudaProgram, err error) {
	if !d.info.Cooperative {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: d.info.Name + " does not support cooperative launches"}
	}
	t, err := kernels.MarshalProgram(spec.Program, kernels.MarshalOptions{Unchecked: spec.Unchecked})
	if err != nil {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: err.Error()}
	}
	t.WatchdogNS = spec.WatchdogNS
	p := &cudaProgram{prog: spec.Program, tables: t, threads: spec.Variant.Threads(), smem: spec.Smem, grid: t.NumQueues,
		ext: map[int]cu.DevicePtr{}}
	defer func() {
		if err != nil {
			p.free()
		}
	}()
	if p.mod, err = cu.LoadData(string(spec.Image)); err != nil {
		return nil, fmt.Errorf("loading the module: %w", err)
	}
	if p.vm, err = p.mod.Function(kernels.MegakernelName); err != nil {
		return nil, err
	}
	static, err := p.vm.Attribute(cu.SharedSizeBytes)
	if err != nil {
		return nil, err
	}
	if static > ir.StaticSmemReserve {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: fmt.Sprintf(
			"%s uses %d bytes of static shared memory, more than the %d reserved for it below the opt-in cap (ir.StaticSmemReserve)",
			kernels.MegakernelName, static, ir.StaticSmemReserve)}
	}
	if p.smem > 48<<10 {
		if err := setMaxDynamicSmem(p.vm, p.smem); err != nil {
			return nil, err
		}
	}
	// Co-residency (docs/spec/rules.md R24): every queue's block must be resident at once.
	occ, err := p.vm.MaxActiveBlocksPerMultiProcessor(p.threads, int64(p.smem))
	if err != nil {
		return nil, err
	}
	p.occupancy = occ
	if occ*d.info.SMs < p.grid {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: fmt.Sprintf(
			"co-residency: the program needs %d co-resident blocks but %s fits %d per SM x %d SMs at %d threads and %d bytes of dynamic shared memory",
			p.grid, d.info.Name, occ, d.info.SMs, p.threads, p.smem)}
	}
	if p.arena, err = p.alloc(t.ArenaBytes); err != nil {
		return nil, err
	}
	t.BindArena(uint64(p.arena))
	for id, off := range t.ArenaOffset {
		if off >= 0 {
			continue
		}
		b := &spec.Program.Buffers[id]
		ptr, err := p.alloc(b.NBytes())
		if err != nil {
			return nil, err
		}
		if data, ok := spec.Bindings[id]; ok {
			if int64(len(data)) != b.NBytes() {
				return nil, fmt.Errorf("buffer %d (%s): %d bytes bound, want %d", id, b.Name, len(data), b.NBytes())
			}
			if err := upload(ptr, data); err != nil {
				return nil, err
			}
		}
		p.ext[id] = ptr
		if err := t.SetBufferPointer(id, uint64(ptr)); err != nil {
			return nil, err
		}
	}
	var a kernels.DeviceAddrs
	a.Scratch = uint64(p.arena)
	if p.counters, err = p.alloc(int64(kernels.CounterSize * max(t.NCounters, 1))); err != nil {
		return nil, err
	}
	if p.status, err = p.alloc(statusBytes); err != nil {
		return nil, err
	}
	a.Counters, a.AbortFlag, a.Diag = uint64(p.counters), uint64(p.status), uint64(p.status)+diagOffset
	for _, tb := range []struct {
		data []byte
		dst  *uint64
	}{{t.Buffers, &a.Buffers}, {t.Instructions, &a.Instructions}, {t.QueueFlat, &a.QueueFlat},
		{t.QueueOff, &a.QueueOff}, {t.QueueLen, &a.QueueLen}} {
		ptr, err := p.allocUpload(tb.data)
		if err != nil {
			return nil, err
		}
		*tb.dst = uint64(ptr)
	}
	p.instr = cu.DevicePtr(a.Instructions)
	if p.prog0, err = p.allocUpload(t.ProgramRecord(a)); err != nil {
		return nil, err
	}
	if p.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, err
	}
	if p.stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, err
	}
	return p, nil
}

func (d *cudaDevice) program(h Handle) (*cudaProgram, error) { return d.progs.get(h) }

func (d *cudaDevice) Update(h Handle, prog *ir.Program) error {
	return d.do(func() error {
		p, err := d.program(h)
		if err != nil {
			return err
		}
		if err := p.tables.RemarshalInstructions(prog); err != nil {
			return err
		}
		p.prog = prog
		return upload(p.instr, p.tables.Instructions)
	})
}

// classify turns a failed launch or synchronisation into a RemoteError: a
// driver watchdog timeout is a timeout, anything else a crash. Either leaves
// the context unusable, so the server answers and the child exits.
func classify(phase string, err error) error {
	var de *driverError
	if errors.Is(err, cu.LaunchTimeout) || (errors.As(err, &de) && de.code == cudaErrorLaunchTimeout) {
		return &RemoteError{Class: ClassTimeout, Phase: phase, Message: "the driver watchdog ended the kernel (CUDA_ERROR_LAUNCH_TIMEOUT): " + err.Error()}
	}
	return &RemoteError{Class: ClassCrash, Phase: phase, Message: err.Error()}
}

// reset zeroes the counters, the abort flag and the diagnostics (one launch
// == one pass).
func (p *cudaProgram) reset() error {
	if err := cu.MemsetD32(p.counters, 0, int64(max(p.tables.NCounters, 1))); err != nil {
		return err
	}
	return cu.MemsetD32(p.status, 0, statusBytes/4)
}

func (p *cudaProgram) launch() error {
	return launchCooperative(p.vm, p.grid, p.threads, p.smem, cu.Stream{}, p.prog0)
}

// abortState reads the abort flag and the diagnostics after a launch.
func (p *cudaProgram) abortState() (kernels.AbortCode, kernels.Diag, error) {
	raw, err := download(p.status, diagOffset+kernels.DiagSize)
	if err != nil {
		return 0, kernels.Diag{}, err
	}
	code := kernels.AbortCode(int32(binary.LittleEndian.Uint32(raw)))
	diag, err := kernels.DecodeDiag(raw[diagOffset:])
	return code, diag, err
}

func (d *cudaDevice) Run(h Handle, inputs map[int][]byte, read []int) (*RunResult, error) {
	var res *RunResult
	err := d.do(func() error {
		p, err := d.program(h)
		if err != nil {
			return err
		}
		if err := p.setInputs(inputs); err != nil {
			return err
		}
		if err := p.reset(); err != nil {
			return classify(OpRun, err)
		}
		if err := p.launch(); err != nil {
			return classify(OpRun, err)
		}
		if err := cu.Synchronize(); err != nil {
			return classify(OpRun, err)
		}
		code, diag, err := p.abortState()
		if err != nil {
			return classify(OpRun, err)
		}
		res = &RunResult{Status: StatusOf(code), Diag: diag, Grid: p.grid, Outputs: map[int][]byte{}}
		if code != kernels.AbortNone {
			res.Message = diag.Describe(p.prog)
		}
		if res.Outputs, err = p.readBack(read); err != nil {
			return err
		}
		return nil
	})
	return res, err
}

// timeOnce launches p once between two events and returns the kernel time
// in microseconds; an aborted launch is an error (a wrong kernel is never timed).
func (p *cudaProgram) timeOnce() (float64, error) {
	if err := p.reset(); err != nil {
		return 0, classify(OpTime, err)
	}
	if err := p.start.Record(cu.Stream{}); err != nil {
		return 0, classify(OpTime, err)
	}
	if err := p.launch(); err != nil {
		return 0, classify(OpTime, err)
	}
	if err := p.stop.Record(cu.Stream{}); err != nil {
		return 0, classify(OpTime, err)
	}
	if err := p.stop.Synchronize(); err != nil {
		return 0, classify(OpTime, err)
	}
	ms, err := p.start.Elapsed(p.stop)
	if err != nil {
		return 0, classify(OpTime, err)
	}
	code, diag, err := p.abortState()
	if err != nil {
		return 0, classify(OpTime, err)
	}
	if code != kernels.AbortNone {
		return 0, &RemoteError{Class: StatusOf(code).Class(), Phase: OpTime, Message: "launch aborted while timing: " + diag.Describe(p.prog)}
	}
	return ms * 1000, nil
}

func (d *cudaDevice) TimeInterleaved(cand, inc Handle, warmup, samples int) (*Comparison, error) {
	var cmp *Comparison
	err := d.do(func() error {
		a, err := d.program(cand)
		if err != nil {
			return err
		}
		var b *cudaProgram
		if inc != NoHandle {
			if b, err = d.program(inc); err != nil {
				return err
			}
		}
		order := []*cudaProgram{a}
		if b != nil {
			order = append(order, b)
		}
		for i := 0; i < warmup; i++ {
			for _, p := range order {
				if _, err := p.timeOnce(); err != nil {
					return err
				}
			}
		}
		var ca, cb []float64
		for i := 0; i < samples; i++ {
			seq := order
			if b != nil && i%2 == 1 { // ABBA: alternate who goes first to cancel drift
				seq = []*cudaProgram{b, a}
			}
			for _, p := range seq {
				us, err := p.timeOnce()
				if err != nil {
					return err
				}
				if p == a {
					ca = append(ca, us)
				} else {
					cb = append(cb, us)
				}
			}
		}
		cmp = Compare(ca, cb)
		return nil
	})
	return cmp, err
}

// upload copies host-bound buffers to the device.
func (p *cudaProgram) setInputs(inputs map[int][]byte) error {
	for id, data := range inputs {
		ptr, err := inputAddress(p.prog, p.ext, id, data)
		if err != nil {
			return err
		}
		if err := upload(ptr, data); err != nil {
			return classify(OpRun, err)
		}
	}
	return nil
}

// readBack copies buffers back to the host.
func (p *cudaProgram) readBack(read []int) (map[int][]byte, error) {
	out := map[int][]byte{}
	for _, id := range read {
		src, err := bufferAddress(p.prog, p.tables, p.ext, p.arena, id)
		if err != nil {
			return nil, err
		}
		data, err := download(src, p.prog.Buffers[id].NBytes())
		if err != nil {
			return nil, classify(OpRun, err)
		}
		out[id] = data
	}
	return out, nil
}

// ReadBuffers implements BufferReader: the buffers as the last launch left them.
func (d *cudaDevice) ReadBuffers(h Handle, read []int) (map[int][]byte, error) {
	var out map[int][]byte
	err := d.do(func() error {
		p, err := d.program(h)
		if err != nil {
			return err
		}
		out, err = p.readBack(read)
		return err
	})
	return out, err
}

// RunOp implements OpRunner.
func (d *cudaDevice) RunOp(h Handle, l OpLaunch) (*RunResult, Stats, error) {
	var res *RunResult
	var st Stats
	err := d.do(func() error {
		p, err := d.program(h)
		if err != nil {
			return err
		}
		name, ok := kernels.EntryKernel(l.Op)
		if !ok || l.Count <= 0 || l.First < 0 || l.First+l.Count > p.tables.NInstructions {
			return fmt.Errorf("no entry kernel launch for %s over [%d, %d)", l.Op, l.First, l.First+l.Count)
		}
		fn, err := p.mod.Function(name)
		if err != nil {
			return err
		}
		if p.smem > 48<<10 {
			if err := setMaxDynamicSmem(fn, p.smem); err != nil {
				return err
			}
		}
		if err := p.setInputs(l.Inputs); err != nil {
			return err
		}
		var us []float64
		for i := 0; i < l.Warmup+max(l.Samples, 1); i++ {
			if err := p.reset(); err != nil {
				return classify(OpRun, err)
			}
			_ = p.start.Record(cu.Stream{})
			if err := launchEntry(fn, l.Count, p.threads, p.smem, cu.Stream{}, p.prog0, int64(l.First), int64(l.Count)); err != nil {
				return classify(OpRun, err)
			}
			_ = p.stop.Record(cu.Stream{})
			if err := p.stop.Synchronize(); err != nil {
				return classify(OpRun, err)
			}
			code, diag, err := p.abortState()
			if err != nil {
				return classify(OpRun, err)
			}
			if code != kernels.AbortNone {
				res = &RunResult{Status: StatusOf(code), Diag: diag, Message: diag.Describe(p.prog), Grid: l.Count}
				return nil
			}
			if l.Samples > 0 && i >= l.Warmup {
				ms, err := p.start.Elapsed(p.stop)
				if err != nil {
					return classify(OpRun, err)
				}
				us = append(us, ms*1000)
			}
		}
		outs, err := p.readBack(l.Read)
		if err != nil {
			return err
		}
		res = &RunResult{Status: StatusOK, Outputs: outs, Grid: l.Count}
		st = Summarize(us)
		return nil
	})
	return res, st, err
}

func (d *cudaDevice) Unload(h Handle) error {
	return d.do(func() error { return d.progs.remove(h) })
}

func (d *cudaDevice) Close() error {
	if d.closed {
		return nil
	}
	err := d.do(func() error {
		d.progs.clear()
		return d.dev.ReleasePrimaryCtx()
	})
	d.closed = true
	close(d.quit)
	return err
}
