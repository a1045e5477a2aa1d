package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// ArenaAlign is the alignment of every activation inside the scratch arena
// (enough for any vector access and for cp.async sources).
const ArenaAlign = 256

// MarshalOptions configures MarshalProgram.
type MarshalOptions struct {
	// Queues is the number of per-SM queues, i.e. the grid size of the VM
	// launch (at most the live device's proven co-residency). 0 means one
	// queue per SM the program uses (1 + the largest Task.SM).
	Queues int
	// Unchecked skips the scheduling proofs (acyclic DAG, satisfiable waits,
	// per-queue order). It exists only to launch deliberately broken
	// programs at the device watchdog; index and capacity checks, which keep
	// the device from reading out of bounds, always run.
	Unchecked bool
}

// Tables are the byte images of a program's device tables (abi.h layout,
// little-endian): what the launcher uploads. Buffer pointers are zero until
// the launcher binds them (BindArena, SetBufferPointer).
type Tables struct {
	Buffers      []byte // NBuffers x amk_buffer_t
	Instructions []byte // NInstructions x amk_instruction_t (at least one record)
	QueueFlat    []byte // int32 instruction indices, queue after queue (at least one entry)
	QueueOff     []byte // NumQueues x int32
	QueueLen     []byte // NumQueues x int32

	// Queues are the per-queue instruction indices (task ids) in execution
	// order: task-list order, the order the validator proves (docs/spec/rules.md R21).
	Queues [][]int32

	NumQueues     int
	NBuffers      int
	NCounters     int
	NInstructions int

	// ArenaOffset is each buffer's byte offset in the scratch arena, or -1
	// for buffers the host binds itself (weights, consts, IO inputs, KV
	// caches). ArenaBytes is the arena size (at least ArenaAlign).
	ArenaOffset []int64
	ArenaBytes  int64

	// PrefetchDepth (ScheduleConfig.pipelining_depth) and WatchdogNS (0 =
	// the build's AMK_WATCHDOG_NS) go into the program record.
	PrefetchDepth int
	WatchdogNS    uint64
}

// InArena reports whether a buffer kind lives in the scratch arena.
func InArena(k ir.BufferKind) bool { return k == ir.Activation || k == ir.IOOutput }

// MarshalProgram resolves a program into its device tables. It refuses
// anything the device could not index safely (ids out of range, capacities,
// unassigned or out-of-range SMs) and, unless opts.Unchecked, anything that
// could deadlock the persistent kernel (a cycle, an unsatisfiable wait, a
// queue that is not a linear extension of the DAG).
func MarshalProgram(p *ir.Program, opts MarshalOptions) (*Tables, error) {
	if p == nil {
		return nil, fmt.Errorf("nil program")
	}
	nq, err := queueCount(p, opts.Queues)
	if err != nil {
		return nil, err
	}
	t := &Tables{
		NumQueues:     nq,
		NBuffers:      len(p.Buffers),
		NCounters:     len(p.Counters),
		NInstructions: len(p.Tasks),
	}
	if p.Config != nil {
		t.PrefetchDepth = p.Config.PipeliningDepth
	}
	if err := t.marshalBuffers(p); err != nil {
		return nil, err
	}
	if err := t.marshalInstructions(p); err != nil {
		return nil, err
	}
	t.buildQueues(p)
	if !opts.Unchecked {
		if err := checkSchedule(p, t.Queues); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func queueCount(p *ir.Program, want int) (int, error) {
	maxSM := -1
	for i := range p.Tasks {
		task := &p.Tasks[i]
		if task.SM == nil {
			return 0, fmt.Errorf("task %s has no SM assignment (lower with an sm_assignment policy before launch)", task.Describe())
		}
		if *task.SM < 0 {
			return 0, fmt.Errorf("task %s has negative sm %d", task.Describe(), *task.SM)
		}
		maxSM = max(maxSM, *task.SM)
	}
	if want < 0 {
		return 0, fmt.Errorf("negative queue count %d", want)
	}
	if want == 0 {
		return max(maxSM+1, 1), nil
	}
	if maxSM >= want {
		return 0, fmt.Errorf("a task is assigned to sm %d but the launch has only %d co-resident blocks (re-lower for this device)", maxSM, want)
	}
	return want, nil
}

func (t *Tables) marshalBuffers(p *ir.Program) error {
	t.Buffers = make([]byte, BufferRecordSize*len(p.Buffers))
	t.ArenaOffset = make([]int64, len(p.Buffers))
	le := binary.LittleEndian
	var cursor int64
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.ID != i {
			return fmt.Errorf("buffer at position %d has id %d (ids must be dense)", i, b.ID)
		}
		if len(b.Shape) > ir.MaxRank {
			return fmt.Errorf("buffer %d (%s) has rank %d > %d", i, b.Name, len(b.Shape), ir.MaxRank)
		}
		if !b.DType.Valid() || !b.Space.Valid() || !b.Kind.Valid() {
			return fmt.Errorf("buffer %d (%s) has an invalid dtype, space or kind", i, b.Name)
		}
		for _, d := range b.Shape {
			if d < 0 {
				return fmt.Errorf("buffer %d (%s) has a negative dimension in %v", i, b.Name, b.Shape)
			}
		}
		rec := t.Buffers[i*BufferRecordSize : (i+1)*BufferRecordSize]
		le.PutUint64(rec[bufNumel:], uint64(b.Numel()))
		le.PutUint32(rec[bufRank:], uint32(len(b.Shape)))
		le.PutUint32(rec[bufDType:], uint32(b.DType))
		le.PutUint32(rec[bufSpace:], uint32(b.Space))
		le.PutUint32(rec[bufKind:], uint32(b.Kind))
		for d, s := range b.Shape {
			le.PutUint64(rec[bufShape+8*d:], uint64(s))
		}
		for d, s := range b.Strides() {
			le.PutUint64(rec[bufStride+8*d:], uint64(s))
		}
		t.ArenaOffset[i] = -1
		if InArena(b.Kind) {
			cursor = alignUp(cursor, ArenaAlign)
			t.ArenaOffset[i] = cursor
			cursor += b.NBytes()
		}
	}
	t.ArenaBytes = max(alignUp(cursor, ArenaAlign), ArenaAlign)
	return nil
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

func (t *Tables) marshalInstructions(p *ir.Program) error {
	t.Instructions = make([]byte, InstructionSize*max(len(p.Tasks), 1))
	for i := range p.Tasks {
		if err := encodeInstruction(t.Instructions[i*InstructionSize:(i+1)*InstructionSize], p, i); err != nil {
			return err
		}
	}
	return nil
}

// RemarshalInstructions re-encodes the instruction table from p (same tasks,
// new params, e.g. after schedule.Reposition moved the decode position), so a
// loaded program is reused across tokens (docs/spec/rules.md R28).
func (t *Tables) RemarshalInstructions(p *ir.Program) error {
	if len(p.Tasks) != t.NInstructions || len(p.Buffers) != t.NBuffers || len(p.Counters) != t.NCounters {
		return fmt.Errorf("program shape changed (%d tasks, %d buffers, %d counters); marshal it again",
			len(p.Tasks), len(p.Buffers), len(p.Counters))
	}
	for i := range p.Tasks {
		if p.Tasks[i].SM == nil || *p.Tasks[i].SM != int(int32(binary.LittleEndian.Uint32(t.Instructions[i*InstructionSize+instSM:]))) {
			return fmt.Errorf("task %s moved to another queue; marshal it again", p.Tasks[i].Describe())
		}
	}
	return t.marshalInstructions(p)
}

func encodeInstruction(rec []byte, p *ir.Program, i int) error {
	task := &p.Tasks[i]
	le := binary.LittleEndian
	if task.ID != i {
		return fmt.Errorf("task at position %d has id %d (ids must be dense)", i, task.ID)
	}
	if !task.Op.Valid() {
		return fmt.Errorf("task %s has unknown opcode %d", task.Describe(), int(task.Op))
	}
	if len(task.Inputs) > ir.MaxInputs || len(task.Outputs) > ir.MaxOutputs || len(task.Waits) > ir.MaxWaits {
		return fmt.Errorf("task %s exceeds the ABI caps (%d inputs, %d outputs, %d waits; max %d/%d/%d)",
			task.Describe(), len(task.Inputs), len(task.Outputs), len(task.Waits), ir.MaxInputs, ir.MaxOutputs, ir.MaxWaits)
	}
	if spec, _ := task.Op.Spec(); len(task.Inputs) < spec.MinInputs || len(task.Outputs) != spec.NOutputs {
		return fmt.Errorf("task %s has %d inputs and %d outputs; %s needs at least %d inputs and exactly %d outputs",
			task.Describe(), len(task.Inputs), len(task.Outputs), spec.Name, spec.MinInputs, spec.NOutputs)
	}
	le.PutUint32(rec[instOp:], uint32(task.Op))
	le.PutUint32(rec[instNInputs:], uint32(len(task.Inputs)))
	le.PutUint32(rec[instNOutputs:], uint32(len(task.Outputs)))
	le.PutUint32(rec[instNWaits:], uint32(len(task.Waits)))
	for k, b := range task.Inputs {
		if b < 0 || b >= len(p.Buffers) {
			return fmt.Errorf("task %s reads unknown buffer %d", task.Describe(), b)
		}
		le.PutUint32(rec[instInputs+4*k:], uint32(b))
	}
	for k, b := range task.Outputs {
		if b < 0 || b >= len(p.Buffers) {
			return fmt.Errorf("task %s writes unknown buffer %d", task.Describe(), b)
		}
		le.PutUint32(rec[instOutputs+4*k:], uint32(b))
	}
	for k, w := range task.Waits {
		if w.Counter < 0 || w.Counter >= len(p.Counters) {
			return fmt.Errorf("task %s waits on unknown counter %d", task.Describe(), w.Counter)
		}
		if w.Threshold < 1 || w.Threshold > math.MaxInt32 {
			return fmt.Errorf("task %s waits on counter %d with threshold %d", task.Describe(), w.Counter, w.Threshold)
		}
		le.PutUint32(rec[instWaitCounter+4*k:], uint32(w.Counter))
		le.PutUint32(rec[instWaitThreshold+4*k:], uint32(w.Threshold))
	}
	if task.OutCounter < 0 || task.OutCounter >= len(p.Counters) {
		return fmt.Errorf("task %s signals unknown counter %d", task.Describe(), task.OutCounter)
	}
	le.PutUint32(rec[instOutCounter:], uint32(task.OutCounter))
	le.PutUint32(rec[instSM:], uint32(*task.SM))
	return encodeParams(rec[instParams:instParams+ParamsSize], task)
}

// paramDefaults are the values the reference numerics use when a param is
// absent; the device cannot tell an absent field from zero, so the
// marshaller writes them.
var paramDefaults = []struct {
	op  ir.Op
	key string
	val pyjson.Value
}{
	{ir.OpMUL, "scale", pyjson.FloatValue(1.0)},
	{ir.OpSOFTMAX, "dim", pyjson.IntValue(-1)},
	{ir.OpRMSNORM, "eps", pyjson.FloatValue(1e-6)},
	{ir.OpLAYERNORM, "eps", pyjson.FloatValue(1e-5)},
}

func paramValue(task *ir.Task, key string) (pyjson.Value, bool) {
	if v, ok := task.Params.Get(key); ok {
		return v, true
	}
	for _, d := range paramDefaults {
		if d.op == task.Op && d.key == key {
			return d.val, true
		}
	}
	return pyjson.Value{}, false
}

// encodeParams writes amk_params_t: ir.ParamFields order, int32 then float32.
// Unknown keys (e.g. FUSED's recipe) do not marshal, as in the reference.
func encodeParams(rec []byte, task *ir.Task) error {
	le := binary.LittleEndian
	for i, f := range ir.ParamFields {
		v, ok := paramValue(task, f.Name)
		if !ok {
			continue
		}
		switch f.Type {
		case ir.ParamInt32:
			x, ok := v.Int64()
			if !ok {
				return fmt.Errorf("task %s: param %s must be an int, got %s", task.Describe(), f.Name, v.Repr())
			}
			if x < math.MinInt32 || x > math.MaxInt32 {
				return fmt.Errorf("task %s: param %s = %d does not fit int32", task.Describe(), f.Name, x)
			}
			le.PutUint32(rec[4*i:], uint32(int32(x)))
		case ir.ParamReal:
			x, ok := v.Float64()
			if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("task %s: param %s must be a real number, got %s", task.Describe(), f.Name, v.Repr())
			}
			le.PutUint32(rec[4*i:], math.Float32bits(float32(x)))
		}
	}
	return nil
}

func (t *Tables) buildQueues(p *ir.Program) {
	t.Queues = make([][]int32, t.NumQueues)
	for i := range p.Tasks {
		q := *p.Tasks[i].SM
		t.Queues[q] = append(t.Queues[q], int32(i))
	}
	le := binary.LittleEndian
	t.QueueOff = make([]byte, 4*t.NumQueues)
	t.QueueLen = make([]byte, 4*t.NumQueues)
	t.QueueFlat = make([]byte, 4*max(len(p.Tasks), 1))
	off := 0
	for q, queue := range t.Queues {
		le.PutUint32(t.QueueOff[4*q:], uint32(off))
		le.PutUint32(t.QueueLen[4*q:], uint32(len(queue)))
		for _, idx := range queue {
			le.PutUint32(t.QueueFlat[4*off:], uint32(idx))
			off++
		}
	}
}

// checkSchedule proves the queues cannot deadlock a co-resident grid: the
// DAG is acyclic, every wait can be satisfied, and every queue is a linear
// extension of the dependency order, transitively: the dependency graph
// plus each queue's order has no cycle (docs/spec/rules.md R21, R32). The
// queues are the ones buildQueues makes, each SM's tasks in task-list order,
// which is what ir.QueueNext describes.
func checkSchedule(p *ir.Program, queues [][]int32) error {
	prod := ir.ProducersByCounter(p)
	for i := range p.Tasks {
		for _, w := range p.Tasks[i].Waits {
			if n := len(prod[w.Counter]); w.Threshold > n {
				return fmt.Errorf("task %s waits for counter %d to reach %d but it has %d producers (deadlock)",
					p.Tasks[i].Describe(), w.Counter, w.Threshold, n)
			}
		}
	}
	g := ir.BuildGraph(p)
	if g.TopologicalOrder() == nil {
		return fmt.Errorf("the dependency graph has a cycle through tasks %v", g.FindCycle())
	}
	pos := make([]int, len(p.Tasks))
	for _, queue := range queues {
		for k, idx := range queue {
			pos[idx] = k
		}
	}
	for i := range p.Tasks {
		for _, pr := range g.Pred(i) {
			if *p.Tasks[pr].SM == *p.Tasks[i].SM && pos[pr] > pos[i] {
				return fmt.Errorf("queue %d runs task %s before its producer %s (deadlock)",
					*p.Tasks[i].SM, p.Tasks[i].Describe(), p.Tasks[pr].Describe())
			}
		}
	}
	if cyc := ir.QueueCycle(p, g); cyc != nil {
		return fmt.Errorf("queue %d runs task %s before task %s, which it waits for through other queues (deadlock)",
			*p.Tasks[cyc[0]].SM, p.Tasks[cyc[0]].Describe(), p.Tasks[cyc[1]].Describe())
	}
	return nil
}

// BindArena points every arena buffer at base + its offset.
func (t *Tables) BindArena(base uint64) {
	for id, off := range t.ArenaOffset {
		if off >= 0 {
			binary.LittleEndian.PutUint64(t.Buffers[id*BufferRecordSize+bufPtr:], base+uint64(off))
		}
	}
}

// SetBufferPointer sets the device pointer of one buffer.
func (t *Tables) SetBufferPointer(id int, ptr uint64) error {
	if id < 0 || id >= t.NBuffers {
		return fmt.Errorf("buffer id %d out of range [0, %d)", id, t.NBuffers)
	}
	binary.LittleEndian.PutUint64(t.Buffers[id*BufferRecordSize+bufPtr:], ptr)
	return nil
}

// BufferPointer returns the device pointer currently recorded for a buffer.
func (t *Tables) BufferPointer(id int) uint64 {
	return binary.LittleEndian.Uint64(t.Buffers[id*BufferRecordSize+bufPtr:])
}

// DeviceAddrs are the device addresses of the uploaded tables.
type DeviceAddrs struct {
	Buffers, Counters, Instructions uint64
	QueueFlat, QueueOff, QueueLen   uint64
	Scratch, AbortFlag, Diag        uint64
}

// ProgramRecord encodes the amk_program_t the kernels receive.
func (t *Tables) ProgramRecord(a DeviceAddrs) []byte {
	b := make([]byte, ProgramRecordSize)
	le := binary.LittleEndian
	le.PutUint64(b[progBuffers:], a.Buffers)
	le.PutUint64(b[progCounters:], a.Counters)
	le.PutUint64(b[progInstructions:], a.Instructions)
	le.PutUint64(b[progQueueFlat:], a.QueueFlat)
	le.PutUint64(b[progQueueOff:], a.QueueOff)
	le.PutUint64(b[progQueueLen:], a.QueueLen)
	le.PutUint64(b[progScratch:], a.Scratch)
	le.PutUint64(b[progAbortFlag:], a.AbortFlag)
	le.PutUint64(b[progDiag:], a.Diag)
	le.PutUint64(b[progScratchBytes:], uint64(t.ArenaBytes))
	le.PutUint64(b[progWatchdogNS:], t.WatchdogNS)
	le.PutUint32(b[progNBuffers:], uint32(t.NBuffers))
	le.PutUint32(b[progNCounters:], uint32(t.NCounters))
	le.PutUint32(b[progNInstructions:], uint32(t.NInstructions))
	le.PutUint32(b[progNumQueues:], uint32(t.NumQueues))
	le.PutUint32(b[progPrefetchDepth:], uint32(int32(t.PrefetchDepth)))
	le.PutUint32(b[progFlags:], 0)
	return b
}
