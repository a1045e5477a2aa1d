package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/amk-dev/amk/ir"
)

// Sizes of the POD records of abi.h. The header pins them with static
// asserts; abi_test.go checks that the two agree.
const (
	ParamsSize        = 88  // amk_params_t
	BufferRecordSize  = 96  // amk_buffer_t
	InstructionSize   = 224 // amk_instruction_t
	DiagSize          = 40  // amk_diag_t
	ProgramRecordSize = 112 // amk_program_t
	CounterSize       = 4   // amk_counter_t
)

// Field offsets of amk_buffer_t.
const (
	bufPtr    = 0
	bufNumel  = 8
	bufRank   = 16
	bufDType  = 20
	bufSpace  = 24
	bufKind   = 28
	bufShape  = 32
	bufStride = 64
)

// Field offsets of amk_instruction_t.
const (
	instOp            = 0
	instNInputs       = 4
	instNOutputs      = 8
	instNWaits        = 12
	instInputs        = 16
	instOutputs       = 48
	instWaitCounter   = 64
	instWaitThreshold = 96
	instOutCounter    = 128
	instSM            = 132
	instParams        = 136
)

// Field offsets of amk_diag_t.
const (
	diagCode      = 0
	diagBlock     = 4
	diagTask      = 8
	diagOp        = 12
	diagCounter   = 16
	diagObserved  = 20
	diagThreshold = 24
	diagDetail    = 28
	diagWaitedNS  = 32
)

// Field offsets of amk_program_t.
const (
	progBuffers       = 0
	progCounters      = 8
	progInstructions  = 16
	progQueueFlat     = 24
	progQueueOff      = 32
	progQueueLen      = 40
	progScratch       = 48
	progAbortFlag     = 56
	progDiag          = 64
	progScratchBytes  = 72
	progWatchdogNS    = 80
	progNBuffers      = 88
	progNCounters     = 92
	progNInstructions = 96
	progNumQueues     = 100
	progPrefetchDepth = 104
	progFlags         = 108
)

// layoutPins lists every size and offset the Go side relies on, spelled as
// the header's AMK_STATIC_ASSERT expressions.
func layoutPins() map[string]int {
	pins := map[string]int{
		"sizeof(void*)":                               8,
		"sizeof(amk_counter_t)":                       CounterSize,
		"sizeof(amk_params_t)":                        ParamsSize,
		"sizeof(amk_buffer_t)":                        BufferRecordSize,
		"sizeof(amk_instruction_t)":                   InstructionSize,
		"sizeof(amk_diag_t)":                          DiagSize,
		"sizeof(amk_program_t)":                       ProgramRecordSize,
		"offsetof(amk_buffer_t, numel)":               bufNumel,
		"offsetof(amk_buffer_t, rank)":                bufRank,
		"offsetof(amk_buffer_t, dtype)":               bufDType,
		"offsetof(amk_buffer_t, space)":               bufSpace,
		"offsetof(amk_buffer_t, kind)":                bufKind,
		"offsetof(amk_buffer_t, shape)":               bufShape,
		"offsetof(amk_buffer_t, stride)":              bufStride,
		"offsetof(amk_instruction_t, inputs)":         instInputs,
		"offsetof(amk_instruction_t, outputs)":        instOutputs,
		"offsetof(amk_instruction_t, wait_counter)":   instWaitCounter,
		"offsetof(amk_instruction_t, wait_threshold)": instWaitThreshold,
		"offsetof(amk_instruction_t, out_counter)":    instOutCounter,
		"offsetof(amk_instruction_t, sm)":             instSM,
		"offsetof(amk_instruction_t, params)":         instParams,
		"offsetof(amk_diag_t, observed)":              diagObserved,
		"offsetof(amk_diag_t, waited_ns)":             diagWaitedNS,
		"offsetof(amk_program_t, scratch)":            progScratch,
		"offsetof(amk_program_t, abort_flag)":         progAbortFlag,
		"offsetof(amk_program_t, diag)":               progDiag,
		"offsetof(amk_program_t, scratch_bytes)":      progScratchBytes,
		"offsetof(amk_program_t, watchdog_ns)":        progWatchdogNS,
		"offsetof(amk_program_t, n_buffers)":          progNBuffers,
		"offsetof(amk_program_t, num_queues)":         progNumQueues,
		"offsetof(amk_program_t, prefetch_depth)":     progPrefetchDepth,
		"offsetof(amk_program_t, flags)":              progFlags,
	}
	for i, f := range ir.ParamFields {
		switch f.Name {
		case "dim", "eps", "scale", "theta":
			pins["offsetof(amk_params_t, "+f.Name+")"] = 4 * i
		}
	}
	return pins
}

// Fused-pattern ids (params.flags bits 16-31 of a FUSED task): the table
// is ir.FusedPatterns; abi.h's amk_fused_pattern_t mirrors it (drift test).
const (
	FusedNone    = ir.FusedNone
	FusedGEMVAdd = ir.FusedGEMVAdd
)

// AbortCode is the value of the device abort flag after a launch.
type AbortCode int32

// Abort codes (amk_abort_code_t). Codes from TrapFirst on are device traps.
const (
	AbortNone           AbortCode = 0
	AbortWatchdog       AbortCode = 1
	AbortHost           AbortCode = 2
	TrapFirst           AbortCode = 16
	TrapUnimplementedOp AbortCode = 16
	TrapFusedPattern    AbortCode = 17
	TrapHeadDim         AbortCode = 18
	TrapKVPos           AbortCode = 19
	TrapOperand         AbortCode = 20
	TrapSmem            AbortCode = 21
	TrapLaunch          AbortCode = 22
	TrapIndex           AbortCode = 23
	TrapToken           AbortCode = 24
)

type abortInfo struct {
	code  AbortCode
	cname string // enumerator in abi.h
	name  string // short name used in messages
}

var abortTable = []abortInfo{
	{AbortNone, "AMK_ABORT_NONE", "none"},
	{AbortWatchdog, "AMK_ABORT_WATCHDOG", "watchdog"},
	{AbortHost, "AMK_ABORT_HOST", "host-abort"},
	{TrapFirst, "AMK_TRAP_FIRST", "unimplemented-op"},
	{TrapUnimplementedOp, "AMK_TRAP_UNIMPLEMENTED_OP", "unimplemented-op"},
	{TrapFusedPattern, "AMK_TRAP_FUSED_PATTERN", "fused-pattern"},
	{TrapHeadDim, "AMK_TRAP_HEAD_DIM", "head-dim"},
	{TrapKVPos, "AMK_TRAP_KV_POS", "kv-pos"},
	{TrapOperand, "AMK_TRAP_OPERAND", "operand"},
	{TrapSmem, "AMK_TRAP_SMEM", "smem"},
	{TrapLaunch, "AMK_TRAP_LAUNCH", "launch"},
	{TrapIndex, "AMK_TRAP_INDEX", "index"},
	{TrapToken, "AMK_TRAP_TOKEN", "token"},
}

// IsTrap reports whether the code is a device trap (not the watchdog).
func (c AbortCode) IsTrap() bool { return c >= TrapFirst }

func (c AbortCode) String() string {
	for _, a := range abortTable {
		if a.code == c {
			if c.IsTrap() {
				return "trap:" + a.name
			}
			return a.name
		}
	}
	return fmt.Sprintf("abort(%d)", int32(c))
}

// RingWaitCounter is the counter a watchdog abort names when it was raised
// in the streaming ring's wait for a chunk (ring.cuh amk_ring_wait), not in
// a counter wait: Observed is then the chunk, Threshold the chunks issued
// and Detail the ring slot.
const RingWaitCounter = -1

// Diag is amk_diag_t: what the aborting block recorded.
type Diag struct {
	Code      AbortCode `json:"code"`
	Block     int32     `json:"block"`
	Task      int32     `json:"task"`
	Op        int32     `json:"op"`
	Counter   int32     `json:"counter"`
	Observed  uint32    `json:"observed"`
	Threshold uint32    `json:"threshold"`
	Detail    int32     `json:"detail"`
	WaitedNS  uint64    `json:"waited_ns"`
}

// DecodeDiag reads an amk_diag_t record.
func DecodeDiag(b []byte) (Diag, error) {
	if len(b) < DiagSize {
		return Diag{}, fmt.Errorf("diag record is %d bytes, want %d", len(b), DiagSize)
	}
	le := binary.LittleEndian
	i32 := func(off int) int32 { return int32(le.Uint32(b[off:])) }
	return Diag{
		Code:      AbortCode(i32(diagCode)),
		Block:     i32(diagBlock),
		Task:      i32(diagTask),
		Op:        i32(diagOp),
		Counter:   i32(diagCounter),
		Observed:  le.Uint32(b[diagObserved:]),
		Threshold: le.Uint32(b[diagThreshold:]),
		Detail:    i32(diagDetail),
		WaitedNS:  le.Uint64(b[diagWaitedNS:]),
	}, nil
}

// Encode writes the record (used by tests and fakes).
func (d Diag) Encode() []byte {
	b := make([]byte, DiagSize)
	le := binary.LittleEndian
	le.PutUint32(b[diagCode:], uint32(d.Code))
	le.PutUint32(b[diagBlock:], uint32(d.Block))
	le.PutUint32(b[diagTask:], uint32(d.Task))
	le.PutUint32(b[diagOp:], uint32(d.Op))
	le.PutUint32(b[diagCounter:], uint32(d.Counter))
	le.PutUint32(b[diagObserved:], d.Observed)
	le.PutUint32(b[diagThreshold:], d.Threshold)
	le.PutUint32(b[diagDetail:], uint32(d.Detail))
	le.PutUint64(b[diagWaitedNS:], d.WaitedNS)
	return b
}

func opName(op int32) string { return ir.Op(op).String() }

// Describe renders the diagnostics as one line naming the task and, for the
// watchdog, the counter, its value and the threshold it never reached, or
// for the streaming ring's wait the chunk that never landed.
func (d Diag) Describe(p *ir.Program) string {
	task := fmt.Sprintf("task %d", d.Task)
	if p != nil && d.Task >= 0 && int(d.Task) < len(p.Tasks) {
		task = "task " + p.Tasks[d.Task].Describe()
	}
	switch {
	case d.Code == AbortNone:
		return "no abort"
	case d.Code == AbortWatchdog && d.Counter == RingWaitCounter:
		return fmt.Sprintf("watchdog: %s (%s) on block %d waited %.3f ms in the streaming ring wait: chunk %d of a warp's stream never landed (%d issued, ring slot %d)",
			task, opName(d.Op), d.Block, float64(d.WaitedNS)/1e6, d.Observed, d.Threshold, d.Detail)
	case d.Code == AbortWatchdog:
		return fmt.Sprintf("watchdog: %s (%s) on block %d waited %.3f ms on counter %d: observed %d < threshold %d",
			task, opName(d.Op), d.Block, float64(d.WaitedNS)/1e6, d.Counter, d.Observed, d.Threshold)
	case d.Code == AbortHost:
		return "aborted by the host"
	default:
		return fmt.Sprintf("%s: %s (%s) on block %d, detail %d", d.Code, task, opName(d.Op), d.Block, d.Detail)
	}
}
