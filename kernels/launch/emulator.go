package launch

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
)

// The CPU emulator as a Device: the megakernel's own CUDA source, compiled
// for the host (build.BuildEmulator; the model is kernels/emu/emu.h), runs
// each launch in an emulator process over an image of device memory that
// Load lays out exactly as the CUDA device's Load does (arena, host-bound
// buffers, counters, status block, tables, program record), so the kernel
// reads the same bytes at the same relative places. It checks correctness
// only: it never times a kernel (TimeInterleaved refuses).

// Emulator defaults.
const (
	// EmulatorImageBase is the address the emulator maps device memory
	// at: inside the application range of plain and AddressSanitizer builds
	// on x86-64 and arm64 (48-bit), far from where programs, heaps and
	// stacks are placed.
	EmulatorImageBase = uint64(0x5000_0000_0000)
	// EmulatorMaxSmem is the dynamic shared memory the emulator provides
	// per block (AMK_EMU_SMEM_MAX in kernels/emu/runtime.cc).
	EmulatorMaxSmem = 256 << 10
	// DefaultEmulatorTimeout bounds one emulated launch (wall time).
	DefaultEmulatorTimeout = 5 * time.Minute
	// DefaultEmulatorWatchdogNS is the kernel's per-wait budget on the
	// emulator when a load asks for the build's default: an emulated
	// block runs 10^3 to 10^5 times slower than a GPU's and shares the CPU
	// with every other block, so the GPU's 1 s would fire on legitimate
	// waits.
	DefaultEmulatorWatchdogNS = uint64(30 * time.Second)
)

// EmulatorConfig configures the emulator device.
type EmulatorConfig struct {
	// Target is the GPU target record the emulator stands in for: its SM
	// count bounds the grid, its architecture selects the kernels' code
	// paths, its shared memory the launch's.
	Target string
	// Seed of the thread schedule: launch k of the device runs under seed
	// Seed + k (seed 0 resumes threads round robin, any other shuffles
	// them and preempts at memory operations), or under Seed alone with
	// FixedSeed.
	Seed      uint64
	FixedSeed bool
	// Timeout bounds one launch (0: DefaultEmulatorTimeout); WatchdogNS is
	// the kernel's per-wait budget when a load asks for the build's
	// default (0: DefaultEmulatorWatchdogNS).
	Timeout    time.Duration
	WatchdogNS uint64
	// Dir holds the device memory images ("": the system's temporary
	// directory).
	Dir string
}

// EmulatorInfo describes the emulator standing in for target.
func EmulatorInfo(target string) (Info, error) {
	t, err := ir.Target(target)
	if err != nil {
		return Info{}, err
	}
	if !t.IsCUDA() {
		return Info{}, fmt.Errorf("target %s is not a CUDA target: the CPU emulator runs amk's CUDA kernels", t.Name)
	}
	return Info{Name: "CPU emulator of " + t.Name, SMs: t.NumSMs, CCMajor: t.SMArch / 10, CCMinor: t.SMArch % 10,
		SmemOptinBytes: min(t.DynamicSmemBytes(), EmulatorMaxSmem), Cooperative: true, Emulator: true}, nil
}

// OpenEmulator opens the emulator device for cfg.Target.
func OpenEmulator(cfg EmulatorConfig) (Device, error) {
	info, err := EmulatorInfo(cfg.Target)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultEmulatorTimeout
	}
	if cfg.WatchdogNS == 0 {
		cfg.WatchdogNS = DefaultEmulatorWatchdogNS
	}
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
	}
	return &emuDevice{cfg: cfg, info: info}, nil
}

// EmulatorModules builds emulator executables through the shared build
// cache: the module image the emulator device loads is the path of the
// executable (build.Artifact.Path), not its bytes.
type EmulatorModules struct{ Builder *build.Builder }

// Module implements ModuleSource.
func (m EmulatorModules) Module(ctx context.Context, arch string, v kernels.Variant) ([]byte, string, error) {
	a, err := m.Builder.BuildEmulator(ctx, build.EmulatorRequest{Arch: arch, Variant: v})
	if err != nil {
		return nil, "", err
	}
	note := fmt.Sprintf("CPU emulator build %s (%s, cache %s)", a.Key[:12], arch, map[bool]string{true: "hit", false: "miss"}[a.Hit])
	return []byte(a.Path), note, nil
}

type emuDevice struct {
	cfg  EmulatorConfig
	info Info

	mu       sync.Mutex
	progs    handles[*emuProgram]
	launches uint64
	last     *EmulatorReport
}

// LastReport is the report of the device's last launch (nil before one),
// for tests and diagnostics: reach it through a Device with
// dev.(interface{ LastReport() *EmulatorReport }).
func (d *emuDevice) LastReport() *EmulatorReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// emuProgram is one loaded program: its tables and its device memory image.
type emuProgram struct {
	prog    *ir.Program
	tables  *kernels.Tables
	exe     string
	threads int
	smem    int
	grid    int
	image   *os.File
	size    int64

	arena, counters, status, record, instr uint64
	ext                                    map[int]uint64 // host-bound buffers
}

func (d *emuDevice) Info() Info { return d.info }

func (d *emuDevice) Load(spec *LoadSpec) (Handle, LoadInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.load(spec)
	if err != nil {
		return NoHandle, LoadInfo{}, err
	}
	return d.progs.add(p), LoadInfo{Grid: p.grid, BlocksPerSM: 1, Threads: p.threads, Smem: p.smem}, nil
}

func (d *emuDevice) load(spec *LoadSpec) (_ *emuProgram, err error) {
	exe := string(spec.Image)
	if !filepath.IsAbs(exe) {
		return nil, fmt.Errorf("the emulator's module is the path of its executable (EmulatorModules), got %d bytes", len(spec.Image))
	}
	if st, err := os.Stat(exe); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("emulator executable %s: not an executable file (%v)", exe, err)
	}
	t, err := kernels.MarshalProgram(spec.Program, kernels.MarshalOptions{Unchecked: spec.Unchecked})
	if err != nil {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: err.Error()}
	}
	t.WatchdogNS = spec.WatchdogNS
	if t.WatchdogNS == 0 {
		t.WatchdogNS = d.cfg.WatchdogNS
	}
	p := &emuProgram{prog: spec.Program, tables: t, exe: exe, threads: spec.Variant.Threads(), smem: spec.Smem, grid: t.NumQueues,
		ext: map[int]uint64{}}
	// The GPU launcher's refusals, with the emulated device's limits: one
	// block per SM (the megakernel's launch bounds), the target's shared
	// memory.
	if p.grid > d.info.SMs {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: fmt.Sprintf(
			"co-residency: the program needs %d co-resident blocks but %s has %d SMs (one block each)", p.grid, d.info.Name, d.info.SMs)}
	}
	if p.smem < 0 || p.smem > d.info.SmemOptinBytes {
		return nil, &RemoteError{Class: ClassRejected, Phase: OpLoad, Message: fmt.Sprintf(
			"%d bytes of dynamic shared memory, more than the %d %s provides", p.smem, d.info.SmemOptinBytes, d.info.Name)}
	}
	// Lay the device memory out as the CUDA device's Load allocates it.
	next := EmulatorImageBase
	alloc := func(n int64) uint64 {
		at := next
		next += uint64((max(n, 16) + 255) / 256 * 256)
		return at
	}
	p.arena = alloc(t.ArenaBytes)
	t.BindArena(p.arena)
	for id, off := range t.ArenaOffset {
		if off >= 0 {
			continue
		}
		b := &spec.Program.Buffers[id]
		if data, ok := spec.Bindings[id]; ok && int64(len(data)) != b.NBytes() {
			return nil, fmt.Errorf("buffer %d (%s): %d bytes bound, want %d", id, b.Name, len(data), b.NBytes())
		}
		p.ext[id] = alloc(b.NBytes())
		if err := t.SetBufferPointer(id, p.ext[id]); err != nil {
			return nil, err
		}
	}
	var a kernels.DeviceAddrs
	a.Scratch = p.arena
	p.counters = alloc(int64(kernels.CounterSize * max(t.NCounters, 1)))
	p.status = alloc(statusBytes)
	a.Counters, a.AbortFlag, a.Diag = p.counters, p.status, p.status+diagOffset
	tables := []struct {
		data []byte
		dst  *uint64
	}{{t.Buffers, &a.Buffers}, {t.Instructions, &a.Instructions}, {t.QueueFlat, &a.QueueFlat},
		{t.QueueOff, &a.QueueOff}, {t.QueueLen, &a.QueueLen}}
	for _, tb := range tables {
		*tb.dst = alloc(int64(len(tb.data)))
	}
	p.instr = a.Instructions
	record := t.ProgramRecord(a)
	p.record = alloc(int64(len(record)))
	p.size = int64(next - EmulatorImageBase)

	if p.image, err = os.CreateTemp(d.cfg.Dir, "amk-emu-*.img"); err != nil {
		return nil, fmt.Errorf("the emulator's device memory image: %w", err)
	}
	defer func() {
		if err != nil {
			p.free()
		}
	}()
	if err := p.image.Truncate(p.size); err != nil { // zeroed, as the CUDA device's allocations
		return nil, fmt.Errorf("sizing the emulator's device memory image (%d bytes): %w", p.size, err)
	}
	for id, data := range spec.Bindings {
		if at, ok := p.ext[id]; ok {
			if err := p.write(at, data); err != nil {
				return nil, err
			}
		}
	}
	for _, tb := range tables {
		if err := p.write(*tb.dst, tb.data); err != nil {
			return nil, err
		}
	}
	return p, p.write(p.record, record)
}

func (p *emuProgram) write(at uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if _, err := p.image.WriteAt(data, int64(at-EmulatorImageBase)); err != nil {
		return fmt.Errorf("writing the emulator's device memory: %w", err)
	}
	return nil
}

func (p *emuProgram) read(at uint64, n int64) ([]byte, error) {
	out := make([]byte, n)
	if n == 0 {
		return out, nil
	}
	if _, err := p.image.ReadAt(out, int64(at-EmulatorImageBase)); err != nil {
		return nil, fmt.Errorf("reading the emulator's device memory: %w", err)
	}
	return out, nil
}

func (p *emuProgram) free() {
	if p.image != nil {
		p.image.Close()
		_ = os.Remove(p.image.Name())
		p.image = nil
	}
}

func (d *emuDevice) program(h Handle) (*emuProgram, error) { return d.progs.get(h) }

func (d *emuDevice) Update(h Handle, prog *ir.Program) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.program(h)
	if err != nil {
		return err
	}
	if err := p.tables.RemarshalInstructions(prog); err != nil {
		return err
	}
	p.prog = prog
	return p.write(p.instr, p.tables.Instructions)
}

func (d *emuDevice) Run(h Handle, inputs map[int][]byte, read []int) (*RunResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.program(h)
	if err != nil {
		return nil, err
	}
	for id, data := range inputs {
		at, err := inputAddress(p.prog, p.ext, id, data)
		if err != nil {
			return nil, err
		}
		if err := p.write(at, data); err != nil {
			return nil, err
		}
	}
	// one launch == one pass: counters, abort flag and diagnostics zeroed
	if err := p.write(p.counters, make([]byte, kernels.CounterSize*max(p.tables.NCounters, 1))); err != nil {
		return nil, err
	}
	if err := p.write(p.status, make([]byte, statusBytes)); err != nil {
		return nil, err
	}
	seed := d.cfg.Seed
	if !d.cfg.FixedSeed {
		seed += d.launches
	}
	d.launches++
	rep, err := d.launch(p, seed)
	if err != nil {
		return nil, err
	}
	d.last = rep
	res := &RunResult{Grid: p.grid}
	switch rep.Outcome {
	case "ok":
		code, diag, err := p.abortState()
		if err != nil {
			return nil, err
		}
		res.Status, res.Diag = StatusOf(code), diag
		if code != kernels.AbortNone {
			res.Message = diag.Describe(p.prog) + fmt.Sprintf(" (CPU emulator, schedule seed %d)", seed)
		}
	case "deadlock", "timeout":
		res.Status, res.Message = StatusTimeout, rep.describe(p)
	default:
		res.Status, res.Message = StatusError, rep.describe(p)
	}
	if res.Outputs, err = p.readBack(read); err != nil {
		return nil, err
	}
	return res, nil
}

// EmulatorReport is what the emulator writes at the end of a launch
// (kernels/emu/runtime.cc): how it ended, where (block, thread, the task and
// opcode the block ran, the counter it last polled and the value it saw, the
// call site), its wall time, the schedule seed and what it exercised.
type EmulatorReport struct {
	Outcome  string  `json:"outcome"` // ok, error, deadlock, timeout
	Message  string  `json:"message"`
	Block    int     `json:"block"`
	Thread   int     `json:"thread"`
	Task     int     `json:"task"`
	Op       int     `json:"op"`
	Counter  int64   `json:"counter"`
	Observed uint32  `json:"observed"`
	Site     string  `json:"site"`
	MS       float64 `json:"ms"`
	Seed     uint64  `json:"seed"`
	Stats    struct {
		Barriers      uint64 `json:"barriers"`
		Collectives   uint64 `json:"collectives"`
		Switches      uint64 `json:"switches"`
		SpinPolls     uint64 `json:"spin_polls"`
		Preemptions   uint64 `json:"preemptions"`
		CPAsync       uint64 `json:"cp_async"`
		BulkCopies    uint64 `json:"bulk_copies"`
		MbarrierWaits uint64 `json:"mbarrier_waits"`
		CounterPolls  uint64 `json:"counter_polls"`
	} `json:"stats"`
}

// describe renders a failed launch: the emulator's message, where it
// happened (block, thread, the task in the program's own words and its
// opcode, the counter last polled) and the seed that reproduces it.
func (r *EmulatorReport) describe(p *emuProgram) string {
	var where []string
	if r.Block >= 0 {
		where = append(where, fmt.Sprintf("block %d", r.Block))
	}
	if r.Thread >= 0 {
		where = append(where, fmt.Sprintf("thread %d", r.Thread))
	}
	if r.Task >= 0 && r.Task < len(p.prog.Tasks) {
		where = append(where, fmt.Sprintf("task %s (%s)", p.prog.Tasks[r.Task].Describe(), ir.Op(r.Op)))
	}
	if r.Counter >= 0 {
		where = append(where, fmt.Sprintf("counter %d last seen at %d", r.Counter, r.Observed))
	}
	msg := fmt.Sprintf("CPU emulator %s: %s", r.Outcome, r.Message)
	if len(where) > 0 {
		msg += " [" + strings.Join(where, ", ") + "]"
	}
	return msg + fmt.Sprintf(" (schedule seed %d)", r.Seed)
}

// launch runs the emulator once over p's image and returns its report; an
// emulator that cannot run or ends without one is an error.
func (d *emuDevice) launch(p *emuProgram, seed uint64) (*EmulatorReport, error) {
	report := p.image.Name() + ".report"
	defer os.Remove(report)
	_ = os.Remove(report)
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout+30*time.Second)
	defer cancel()
	hex := func(x uint64) string { return "0x" + strconv.FormatUint(x, 16) }
	cmd := exec.CommandContext(ctx, p.exe, "--image", p.image.Name(), "--base", hex(EmulatorImageBase), "--program", hex(p.record),
		"--counters", hex(p.counters), "--counters-n", strconv.Itoa(p.tables.NCounters), "--grid", strconv.Itoa(p.grid),
		"--threads", strconv.Itoa(p.threads), "--smem", strconv.Itoa(p.smem), "--seed", strconv.FormatUint(seed, 10),
		"--timeout-s", strconv.Itoa(max(1, int(d.cfg.Timeout.Seconds()))), "--report", report)
	setProcessGroup(cmd)
	cmd.Cancel = func() error { killProcess(cmd); return nil }
	cmd.WaitDelay = 10 * time.Second
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	runErr := cmd.Run()
	data, err := os.ReadFile(report)
	if err != nil || len(data) == 0 {
		msg := "the CPU emulator ended without a report"
		if ctx.Err() != nil {
			return nil, &RemoteError{Class: ClassTimeout, Phase: OpRun, Message: fmt.Sprintf("%s: killed after %s: %s", msg, d.cfg.Timeout, stderr.String())}
		}
		var ee *exec.ExitError
		if errors.As(runErr, &ee) && ee.ExitCode() == 2 {
			return nil, &RemoteError{Class: ClassInfra, Phase: OpRun, Message: fmt.Sprintf("%s: %s", msg, stderr.String())}
		}
		return nil, &RemoteError{Class: ClassCrash, Phase: OpRun, Message: fmt.Sprintf("%s (%v): %s", msg, runErr, stderr.String())}
	}
	if len(data) > 1<<20 {
		data = data[:1<<20]
	}
	var rep EmulatorReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, &RemoteError{Class: ClassCrash, Phase: OpRun, Message: fmt.Sprintf("the CPU emulator's report: %v", err)}
	}
	return &rep, nil
}

// abortState reads the abort flag and the diagnostics after a launch.
func (p *emuProgram) abortState() (kernels.AbortCode, kernels.Diag, error) {
	raw, err := p.read(p.status, diagOffset+kernels.DiagSize)
	if err != nil {
		return 0, kernels.Diag{}, err
	}
	diag, err := kernels.DecodeDiag(raw[diagOffset:])
	return kernels.AbortCode(int32(binary.LittleEndian.Uint32(raw))), diag, err
}

func (p *emuProgram) readBack(read []int) (map[int][]byte, error) {
	out := map[int][]byte{}
	for _, id := range read {
		at, err := bufferAddress(p.prog, p.tables, p.ext, p.arena, id)
		if err != nil {
			return nil, err
		}
		data, err := p.read(at, p.prog.Buffers[id].NBytes())
		if err != nil {
			return nil, err
		}
		out[id] = data
	}
	return out, nil
}

// ReadBuffers implements BufferReader.
func (d *emuDevice) ReadBuffers(h Handle, read []int) (map[int][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.program(h)
	if err != nil {
		return nil, err
	}
	return p.readBack(read)
}

// TimeInterleaved refuses: the emulator checks correctness, it never times.
func (d *emuDevice) TimeInterleaved(cand, inc Handle, warmup, samples int) (*Comparison, error) {
	return nil, &RemoteError{Class: ClassRejected, Phase: OpTime, Message: "the CPU emulator checks correctness only: it times no kernel (latencies on it are the cost model's, predicted)"}
}

func (d *emuDevice) Unload(h Handle) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.progs.remove(h)
}

func (d *emuDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.progs.clear()
	return nil
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct{ b bytes.Buffer }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 16<<10 {
		keep := append([]byte(nil), t.b.Bytes()[t.b.Len()-8<<10:]...)
		t.b.Reset()
		t.b.Write(keep)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(t.b.String()) }
