package kernels

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// miniProgram: EMBED -> RMSNORM -> two GEMV tiles of one all-join counter ->
// SAMPLE_ARGMAX, spread over two queues.
func miniProgram() *ir.Program {
	p := ir.NewProgram()
	tok := p.AddBuffer(ir.Buffer{Name: "token_id", Kind: ir.IOInput, DType: ir.I32, Shape: []int{1}})
	emb := p.AddBuffer(ir.Buffer{Name: "emb", Kind: ir.Weight, DType: ir.BF16, Shape: []int{16, 8}, Source: new("emb.weight")})
	h0 := p.AddBuffer(ir.Buffer{Name: "h0", Kind: ir.Activation, DType: ir.BF16, Shape: []int{1, 8}})
	nw := p.AddBuffer(ir.Buffer{Name: "norm.w", Kind: ir.Weight, DType: ir.BF16, Shape: []int{8}, Source: new("norm.weight")})
	hn := p.AddBuffer(ir.Buffer{Name: "hn", Kind: ir.Activation, DType: ir.BF16, Shape: []int{1, 8}, Space: ir.GlobalScratch})
	w := p.AddBuffer(ir.Buffer{Name: "lm_head", Kind: ir.Weight, DType: ir.BF16, Shape: []int{16, 8}, Source: new("lm_head.weight")})
	logits := p.AddBuffer(ir.Buffer{Name: "logits", Kind: ir.IOOutput, DType: ir.F32, Shape: []int{1, 16}})
	next := p.AddBuffer(ir.Buffer{Name: "next", Kind: ir.IOOutput, DType: ir.I32, Shape: []int{1}})
	c0, c1, c2, c3 := p.AddCounter("embed"), p.AddCounter("norm"), p.AddCounter("lm_head (2 tiles)"), p.AddCounter("argmax")
	p.AddTask(ir.Task{Op: ir.OpEMBED, Inputs: []int{tok, emb}, Outputs: []int{h0}, OutCounter: c0, SM: new(0),
		Params: ir.Params{ir.IntParam("hidden", 8)}, Label: "embed"})
	p.AddTask(ir.Task{Op: ir.OpRMSNORM, Inputs: []int{h0, nw}, Outputs: []int{hn}, OutCounter: c1, SM: new(1),
		Waits: []ir.Wait{{Counter: c0, Threshold: 1}}, Params: ir.Params{ir.FloatParam("eps", 1e-5), ir.IntParam("hidden", 8)}, Label: "norm"})
	for i := range 2 {
		p.AddTask(ir.Task{Op: ir.OpGEMVTile, Inputs: []int{hn, w}, Outputs: []int{logits}, OutCounter: c2, SM: new(i),
			Waits:  []ir.Wait{{Counter: c1, Threshold: 1}},
			Params: ir.Params{ir.IntParam("K", 8), ir.IntParam("N_tile", 8), ir.IntParam("n_off", int64(8*i))}, Label: "lm_head"})
	}
	p.AddTask(ir.Task{Op: ir.OpSampleArgmax, Inputs: []int{logits}, Outputs: []int{next}, OutCounter: c3, SM: new(1),
		Waits: []ir.Wait{{Counter: c2, Threshold: 2}}, Label: "argmax"})
	p.Config = &ir.ScheduleConfig{PipeliningDepth: 3, ThreadsPerBlock: 256}
	return p
}

var le = binary.LittleEndian

func i32at(b []byte, off int) int32 { return int32(le.Uint32(b[off:])) }
func i64at(b []byte, off int) int64 { return int64(le.Uint64(b[off:])) }

func TestMarshalLayout(t *testing.T) {
	p := miniProgram()
	tb, err := MarshalProgram(p, MarshalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tb.NumQueues != 2 || tb.NBuffers != 8 || tb.NCounters != 4 || tb.NInstructions != 5 {
		t.Fatalf("counts: %+v", tb)
	}
	if len(tb.Buffers) != 8*BufferRecordSize || len(tb.Instructions) != 5*InstructionSize {
		t.Fatalf("table sizes %d %d", len(tb.Buffers), len(tb.Instructions))
	}
	// Buffer 1: emb BF16 [16, 8] WEIGHT HBM.
	b1 := tb.Buffers[BufferRecordSize : 2*BufferRecordSize]
	if i64at(b1, bufNumel) != 128 || i32at(b1, bufRank) != 2 || i32at(b1, bufDType) != int32(ir.BF16) ||
		i32at(b1, bufSpace) != int32(ir.HBM) || i32at(b1, bufKind) != int32(ir.Weight) {
		t.Errorf("emb record header wrong: % x", b1[:32])
	}
	if i64at(b1, bufShape) != 16 || i64at(b1, bufShape+8) != 8 || i64at(b1, bufShape+16) != 0 ||
		i64at(b1, bufStride) != 8 || i64at(b1, bufStride+8) != 1 || i64at(b1, bufStride+16) != 0 {
		t.Errorf("emb shape/stride wrong: % x", b1[32:])
	}
	b4 := tb.Buffers[4*BufferRecordSize:]
	if i32at(b4, bufSpace) != int32(ir.GlobalScratch) || i32at(b4, bufKind) != int32(ir.Activation) {
		t.Errorf("hn space/kind wrong")
	}
	// Instruction 1: RMSNORM.
	in1 := tb.Instructions[InstructionSize : 2*InstructionSize]
	if i32at(in1, instOp) != int32(ir.OpRMSNORM) || i32at(in1, instNInputs) != 2 || i32at(in1, instNOutputs) != 1 ||
		i32at(in1, instNWaits) != 1 || i32at(in1, instInputs) != 2 || i32at(in1, instInputs+4) != 3 ||
		i32at(in1, instOutputs) != 4 || i32at(in1, instWaitCounter) != 0 || i32at(in1, instWaitThreshold) != 1 ||
		i32at(in1, instOutCounter) != 1 || i32at(in1, instSM) != 1 {
		t.Errorf("rmsnorm record wrong: % x", in1[:instParams])
	}
	if got := math.Float32frombits(le.Uint32(in1[instParams+76:])); got != float32(1e-5) {
		t.Errorf("eps = %v", got)
	}
	if i32at(in1, instParams+4*7) != 8 { // hidden is field 7
		t.Errorf("hidden = %d", i32at(in1, instParams+4*7))
	}
	// Instruction 3: second GEMV tile: K=8 (field 0), N_tile=8 (3), n_off=8 (5); unset fields 0.
	in3 := tb.Instructions[3*InstructionSize : 4*InstructionSize]
	if i32at(in3, instParams) != 8 || i32at(in3, instParams+12) != 8 || i32at(in3, instParams+20) != 8 ||
		i32at(in3, instParams+16) != 0 || i32at(in3, instSM) != 1 {
		t.Errorf("gemv params wrong: % x", in3[instParams:])
	}
	// Queues in task-list order.
	if got := tb.Queues; len(got) != 2 || !eqI32(got[0], []int32{0, 2}) || !eqI32(got[1], []int32{1, 3, 4}) {
		t.Errorf("queues %v", got)
	}
	if i32at(tb.QueueOff, 0) != 0 || i32at(tb.QueueOff, 4) != 2 || i32at(tb.QueueLen, 0) != 2 || i32at(tb.QueueLen, 4) != 3 {
		t.Errorf("queue off/len % x % x", tb.QueueOff, tb.QueueLen)
	}
	for k, want := range []int32{0, 2, 1, 3, 4} {
		if i32at(tb.QueueFlat, 4*k) != want {
			t.Errorf("flat[%d] = %d, want %d", k, i32at(tb.QueueFlat, 4*k), want)
		}
	}
	// Arena: h0 at 0, hn at 256, logits at 512, next at 768; externals -1.
	wantOff := []int64{-1, -1, 0, -1, 256, -1, 512, 768}
	for i, w := range wantOff {
		if tb.ArenaOffset[i] != w {
			t.Errorf("arena offset of buffer %d = %d, want %d", i, tb.ArenaOffset[i], w)
		}
	}
	if tb.ArenaBytes != 1024 || tb.PrefetchDepth != 3 {
		t.Errorf("arena bytes %d, depth %d", tb.ArenaBytes, tb.PrefetchDepth)
	}
}

func eqI32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBindAndProgramRecord(t *testing.T) {
	tb, err := MarshalProgram(miniProgram(), MarshalOptions{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	if tb.NumQueues != 4 || len(tb.QueueOff) != 16 || i32at(tb.QueueLen, 8) != 0 {
		t.Fatalf("4 queues expected, empty ones included: %d % x", tb.NumQueues, tb.QueueLen)
	}
	tb.BindArena(0x7000_0000)
	if err := tb.SetBufferPointer(1, 0xdead_0000); err != nil {
		t.Fatal(err)
	}
	if tb.BufferPointer(2) != 0x7000_0000 || tb.BufferPointer(4) != 0x7000_0100 || tb.BufferPointer(1) != 0xdead_0000 || tb.BufferPointer(0) != 0 {
		t.Errorf("pointers %x %x %x %x", tb.BufferPointer(2), tb.BufferPointer(4), tb.BufferPointer(1), tb.BufferPointer(0))
	}
	if tb.SetBufferPointer(8, 1) == nil || tb.SetBufferPointer(-1, 1) == nil {
		t.Error("out-of-range buffer id accepted")
	}
	tb.WatchdogNS = 5_000_000
	rec := tb.ProgramRecord(DeviceAddrs{Buffers: 1, Counters: 2, Instructions: 3, QueueFlat: 4, QueueOff: 5,
		QueueLen: 6, Scratch: 7, AbortFlag: 8, Diag: 9})
	if len(rec) != ProgramRecordSize {
		t.Fatalf("record %d bytes", len(rec))
	}
	for k := range 9 {
		if le.Uint64(rec[8*k:]) != uint64(k+1) {
			t.Errorf("pointer field %d = %d", k, le.Uint64(rec[8*k:]))
		}
	}
	if i64at(rec, progScratchBytes) != tb.ArenaBytes || le.Uint64(rec[progWatchdogNS:]) != 5_000_000 ||
		i32at(rec, progNBuffers) != 8 || i32at(rec, progNCounters) != 4 || i32at(rec, progNInstructions) != 5 ||
		i32at(rec, progNumQueues) != 4 || i32at(rec, progPrefetchDepth) != 3 || i32at(rec, progFlags) != 0 {
		t.Errorf("program record scalars wrong: % x", rec[progScratchBytes:])
	}
}

func TestMarshalRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p *ir.Program)
		opts   MarshalOptions
		want   string
	}{
		{"unassigned sm", func(p *ir.Program) { p.Tasks[2].SM = nil }, MarshalOptions{}, "no SM assignment"},
		{"negative sm", func(p *ir.Program) { p.Tasks[2].SM = new(-1) }, MarshalOptions{}, "negative sm"},
		{"sm beyond grid", func(p *ir.Program) {}, MarshalOptions{Queues: 1}, "only 1 co-resident"},
		{"bad counter", func(p *ir.Program) { p.Tasks[1].Waits[0].Counter = 9 }, MarshalOptions{}, "unknown counter 9"},
		{"bad buffer", func(p *ir.Program) { p.Tasks[1].Inputs[1] = 99 }, MarshalOptions{}, "unknown buffer 99"},
		{"bad out counter", func(p *ir.Program) { p.Tasks[0].OutCounter = -1 }, MarshalOptions{}, "signals unknown counter"},
		{"zero threshold", func(p *ir.Program) { p.Tasks[1].Waits[0].Threshold = 0 }, MarshalOptions{}, "threshold 0"},
		{"too many inputs", func(p *ir.Program) { p.Tasks[4].Inputs = make([]int, 9) }, MarshalOptions{}, "ABI caps"},
		{"rank 5", func(p *ir.Program) { p.Buffers[2].Shape = []int{1, 1, 1, 1, 8} }, MarshalOptions{}, "rank 5"},
		{"sparse ids", func(p *ir.Program) { p.Tasks[3].ID = 7 }, MarshalOptions{}, "dense"},
		{"float for int param", func(p *ir.Program) { p.Tasks[2].Params[0] = ir.FloatParam("K", 8) }, MarshalOptions{}, "param K must be an int"},
		{"bool param", func(p *ir.Program) {
			p.Tasks[1].Params[0] = ir.Param{Key: "eps", Val: pyjson.BoolValue(true)}
		}, MarshalOptions{}, "must be a real number"},
		{"nan param", func(p *ir.Program) { p.Tasks[1].Params[0] = ir.FloatParam("eps", math.NaN()) }, MarshalOptions{}, "must be a real number"},
		{"int32 overflow", func(p *ir.Program) { p.Tasks[2].Params[0] = ir.IntParam("K", 1<<40) }, MarshalOptions{}, "does not fit int32"},
		{"unsatisfiable", func(p *ir.Program) { p.Tasks[4].Waits[0].Threshold = 3 }, MarshalOptions{}, "has 2 producers"},
		{"cycle", func(p *ir.Program) {
			p.Tasks[0].Waits = []ir.Wait{{Counter: 3, Threshold: 1}}
		}, MarshalOptions{}, "cycle"},
		{"queue order", func(p *ir.Program) {
			// argmax (queue 1) now also runs before the norm it waits on, in the same queue.
			p.Tasks[1], p.Tasks[4] = p.Tasks[4], p.Tasks[1]
			p.Tasks[1].ID, p.Tasks[4].ID = 1, 4
			p.Tasks[1].Waits = append(p.Tasks[1].Waits, ir.Wait{Counter: 1, Threshold: 1})
		}, MarshalOptions{}, "before its producer"},
		{"queue order through another queue", func(p *ir.Program) {
			// embed and argmax swap places in the list, both on queue 0; the
			// rest on queue 1. No dependency joins two tasks of queue 0
			// directly, but queue 0 runs argmax first, which waits (through
			// queue 1's norm and tiles) for the embed behind it.
			p.Tasks[0], p.Tasks[4] = p.Tasks[4], p.Tasks[0]
			p.Tasks[0].ID, p.Tasks[4].ID = 0, 4
			for i, q := range []int{0, 1, 1, 1, 0} {
				p.Tasks[i].SM = new(q)
			}
		}, MarshalOptions{}, "queue 0 runs task 0:argmax before task 4:embed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := miniProgram()
			c.mutate(p)
			_, err := MarshalProgram(p, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestMarshalUncheckedAllowsDeadlockButNotBadIndices(t *testing.T) {
	p := miniProgram()
	p.Tasks[4].Waits[0].Threshold = 3 // never satisfied: the device watchdog's job
	if _, err := MarshalProgram(p, MarshalOptions{Unchecked: true}); err != nil {
		t.Fatalf("unchecked marshal refused a deadlocking program: %v", err)
	}
	p.Tasks[4].Waits[0].Counter = 42
	if _, err := MarshalProgram(p, MarshalOptions{Unchecked: true}); err == nil {
		t.Fatal("unchecked marshal accepted an out-of-range counter")
	}
}

func TestParamDefaultsAndRemarshal(t *testing.T) {
	p := miniProgram()
	a := p.AddBuffer(ir.Buffer{Name: "scaled", Kind: ir.Activation, DType: ir.F32, Shape: []int{1, 16}})
	s := p.AddBuffer(ir.Buffer{Name: "probs", Kind: ir.IOOutput, DType: ir.F32, Shape: []int{1, 16}})
	c := p.AddCounter("mul")
	d := p.AddCounter("softmax")
	p.AddTask(ir.Task{Op: ir.OpMUL, Inputs: []int{6}, Outputs: []int{a}, OutCounter: c, SM: new(0),
		Waits: []ir.Wait{{Counter: 2, Threshold: 2}}})
	p.AddTask(ir.Task{Op: ir.OpSOFTMAX, Inputs: []int{a}, Outputs: []int{s}, OutCounter: d, SM: new(0),
		Waits: []ir.Wait{{Counter: c, Threshold: 1}}})
	tb, err := MarshalProgram(p, MarshalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mul := tb.Instructions[5*InstructionSize:]
	if got := math.Float32frombits(le.Uint32(mul[instParams+80:])); got != 1 {
		t.Errorf("MUL scale default = %v, want 1", got)
	}
	soft := tb.Instructions[6*InstructionSize:]
	if got := i32at(soft, instParams+72); got != -1 {
		t.Errorf("SOFTMAX dim default = %d, want -1", got)
	}
	// Move the decode position of the second GEMV tile (a param-only change).
	p.Tasks[3].Params = append(p.Tasks[3].Params, ir.IntParam("pos", 5))
	if err := tb.RemarshalInstructions(p); err != nil {
		t.Fatal(err)
	}
	if got := i32at(tb.Instructions[3*InstructionSize:], instParams+4*14); got != 5 {
		t.Errorf("pos after remarshal = %d", got)
	}
	p.Tasks[3].SM = new(0)
	if err := tb.RemarshalInstructions(p); err == nil {
		t.Error("remarshal accepted a task that moved queue")
	}
	p.AddCounter("extra")
	if err := tb.RemarshalInstructions(p); err == nil {
		t.Error("remarshal accepted a changed program shape")
	}
}
