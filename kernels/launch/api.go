package launch

import (
	"errors"
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
)

// ErrNoCUDA is what Open returns in the default build.
var ErrNoCUDA = errors.New("built without CUDA support (rebuild with -tags cuda)")

// Status is how one launch ended.
type Status string

// Launch statuses.
const (
	StatusOK       Status = "OK"
	StatusTrap     Status = "TRAP"     // a device trap (kernels.AbortCode >= TrapFirst)
	StatusWatchdog Status = "WATCHDOG" // the device spin watchdog ended the launch (docs/spec/rules.md R23)
	StatusTimeout  Status = "TIMEOUT"  // the driver/OS watchdog killed the kernel, or the supervisor's deadline expired
	StatusError    Status = "ERROR"    // the launch or a device call failed
)

// Failure classes (the same strings as trial.FailCrash, trial.FailTimeout,
// trial.FailInfra) plus "rejected" for a deterministic refusal before launch
// (the trial turns it into valid=false with the message as the reason).
const (
	ClassCrash    = "crash"
	ClassTimeout  = "timeout"
	ClassInfra    = "infra"
	ClassRejected = "rejected"
)

// Class maps a status to the failure class of a verdict ("" for OK): a trap
// or an error is a crash, the watchdog or a timeout is a timeout.
func (s Status) Class() string {
	switch s {
	case StatusOK:
		return ""
	case StatusWatchdog, StatusTimeout:
		return ClassTimeout
	default:
		return ClassCrash
	}
}

// StatusOf classifies the abort code a launch left in the device flag.
func StatusOf(code kernels.AbortCode) Status {
	switch {
	case code == kernels.AbortNone:
		return StatusOK
	case code == kernels.AbortWatchdog:
		return StatusWatchdog
	case code.IsTrap():
		return StatusTrap
	default:
		return StatusError
	}
}

// The status block every device allocates beside the counters: the abort
// flag at +0, amk_diag_t at +diagOffset.
const (
	statusBytes = 64
	diagOffset  = 8
)

// Info describes the live device (docs/spec/rules.md R1: grid, co-residency and SM assignment
// come from it, not from a target record).
type Info struct {
	Ordinal        int    `json:"ordinal"`
	Name           string `json:"name"`
	UUID           string `json:"uuid,omitempty"`
	SMs            int    `json:"sms"`
	CCMajor        int    `json:"cc_major"`
	CCMinor        int    `json:"cc_minor"`
	DriverVersion  int    `json:"driver_version"` // e.g. 12080 for 12.8
	TotalMemBytes  int64  `json:"total_mem_bytes"`
	L2Bytes        int    `json:"l2_bytes"`
	SmemOptinBytes int    `json:"smem_optin_bytes"` // max dynamic smem per block: ir.DynamicSmemCap of the opt-in cap
	Cooperative    bool   `json:"cooperative"`
	ClockKHz       int    `json:"clock_khz"`
	// Emulator marks the CPU emulator standing in for a GPU of the target
	// its name gives (OpenEmulator): it checks correctness, it times nothing.
	Emulator bool `json:"emulator,omitempty"`
}

// Arch is the nvcc architecture to build for: sm_90a / sm_100a for the
// families with arch-specific features, sm_XY otherwise.
func (i Info) Arch() string {
	a := fmt.Sprintf("sm_%d%d", i.CCMajor, i.CCMinor)
	if (i.CCMajor == 9 || i.CCMajor == 10) && i.CCMinor == 0 {
		a += "a"
	}
	return a
}

func (i Info) String() string {
	if i.Emulator {
		return fmt.Sprintf("emu %s (%d SMs, sm_%d%d code paths)", i.Name, i.SMs, i.CCMajor, i.CCMinor)
	}
	return fmt.Sprintf("cuda:%d %s (%d SMs, cc %d.%d, driver %d.%d)", i.Ordinal, i.Name, i.SMs, i.CCMajor, i.CCMinor,
		i.DriverVersion/1000, i.DriverVersion%1000/10)
}

// Handle names a program loaded on a device.
type Handle int

// NoHandle is the absent handle (TimeInterleaved without an incumbent).
const NoHandle Handle = -1

// LoadSpec is everything a device needs to run one program.
type LoadSpec struct {
	Program *ir.Program
	Image   []byte          // the compiled module (cubin or PTX) of Variant for this device
	Variant kernels.Variant // normalised; Threads() is the block size
	Smem    int             // dynamic shared memory per block (kernels.PlanSmem)
	// Bindings are the device bytes (kernels.EncodeTensor) of the buffers
	// the host binds once: weights and consts. IO inputs and KV caches may be
	// given here as initial values; absent KV caches start zeroed.
	Bindings   map[int][]byte
	WatchdogNS uint64 // per-wait budget; 0 = the build's AMK_WATCHDOG_NS
	// Unchecked marshals without the scheduling proofs, to launch a
	// deliberately deadlocking program at the watchdog (tests only).
	Unchecked bool
}

// LoadInfo describes how a loaded program will launch.
type LoadInfo struct {
	Grid        int `json:"grid"`          // blocks (queues) per launch
	BlocksPerSM int `json:"blocks_per_sm"` // co-residency the occupancy API proves for the VM kernel
	Threads     int `json:"threads"`
	Smem        int `json:"smem"`      // dynamic shared memory per block
	Registers   int `json:"registers"` // per thread, of the VM kernel
}

// RunResult is the outcome of one launch (one decode step).
type RunResult struct {
	Status  Status
	Diag    kernels.Diag   // filled when Status is TRAP or WATCHDOG
	Message string         // human-readable status detail
	Outputs map[int][]byte // device bytes of the buffers asked for, by buffer id
	Grid    int            // blocks launched
}

// Device is one GPU, driven from one OS thread. Implementations: the CUDA
// device (build tag cuda) and test fakes.
type Device interface {
	Info() Info
	// Load marshals, uploads and prepares a program (co-residency is
	// checked here, docs/spec/rules.md R24). Weights stay resident until Unload.
	Load(spec *LoadSpec) (Handle, LoadInfo, error)
	// Update re-marshals a loaded program's instruction params (a new
	// decode position) without touching weights or KV caches (docs/spec/rules.md R28).
	Update(h Handle, p *ir.Program) error
	// Run copies the given buffers (IO inputs, KV caches) to the device,
	// launches once and reads back the buffers in read.
	Run(h Handle, inputs map[int][]byte, read []int) (*RunResult, error)
	// TimeInterleaved times cand and inc (NoHandle: cand alone) on this
	// device with CUDA events, alternating ABBA after warmup launches each.
	TimeInterleaved(cand, inc Handle, warmup, samples int) (*Comparison, error)
	Unload(h Handle) error
	Close() error
}

// OpLaunch is one Loop-1 launch of an entry kernel: instructions
// [First, First+Count) of a loaded program, all of opcode Op, one block each,
// without counters, through the same device function the VM dispatches (docs/spec/rules.md R29).
type OpLaunch struct {
	Op              ir.Op
	First, Count    int
	Inputs          map[int][]byte // buffers to set first (by id)
	Read            []int          // buffers to read back after the last launch
	Warmup, Samples int            // timed launches (0 samples: run once, untimed)
}

// BufferReader is implemented by devices that can read buffers of a loaded
// program back without launching it: what the last launch left there (the
// launcher re-reads the logits after the timed launches this way).
type BufferReader interface {
	ReadBuffers(h Handle, read []int) (map[int][]byte, error)
}

// OpRunner is implemented by devices that can run the Loop-1 entry kernels.
type OpRunner interface {
	RunOp(h Handle, l OpLaunch) (*RunResult, Stats, error)
}
