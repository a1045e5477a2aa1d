package tune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

// Where the fixed cases come from: one task group of the lowering of this
// preset (the bandwidth target), at this decode position, with the
// --dtype given.
const (
	CaseModel      = "small"
	CasePos        = 127 // kv_len 128 for the attention cases (below every preset's max_seq)
	CaseToken      = 7
	gemmBatch      = 4    // GEMM_TILE is emitted for batch > 1
	combineShards  = 4    // ATTENTION_COMBINE is emitted for split-KV attention
	embedVocab     = 1024 // EMBED reads one row: a smaller table spares seeding 65M values
	caseSeedPrefix = 0xA3C1
)

// SupportedOps are the opcodes Loop 1 has a case for: every opcode the
// lowering emits.
func SupportedOps() []ir.Op {
	return []ir.Op{ir.OpEMBED, ir.OpRMSNORM, ir.OpGEMVTile, ir.OpGEMMTile, ir.OpROPE, ir.OpKVAppend,
		ir.OpAttentionTile, ir.OpAttentionCombine, ir.OpSiLUMul, ir.OpADD}
}

// ParseOp accepts an opcode name in any case ("gemv_tile", "GEMV_TILE").
func ParseOp(name string) (ir.Op, error) {
	op, err := ir.ParseOp(strings.ToUpper(strings.TrimSpace(name)))
	if err != nil || !slices.Contains(SupportedOps(), op) {
		names := make([]string, 0, len(SupportedOps()))
		for _, o := range SupportedOps() {
			names = append(names, OpName(o))
		}
		return 0, fmt.Errorf("no Loop-1 case for op %q (supported: %s)", name, strings.Join(names, ", "))
	}
	return op, nil
}

// OpName is the lower-case op name used on the command line and in rows.
func OpName(op ir.Op) string { return strings.ToLower(op.String()) }

// Case is one op's fixed, isolated test: a program holding only one task
// group of that op cut from the lowering of CaseModel — the same tasks,
// params and shapes the megakernel runs — whose external inputs are
// seeded values. Every task runs on queue 0 with no waits; the Loop-1
// entry kernel amk_entry_<op> runs them one per block.
type Case struct {
	Op    ir.Op
	DType ir.DType
	// Quant is the case model's weight quantization (GEMV_TILE only): its
	// tiles read int8 or packed int4 weights and their scales.
	Quant model.Quantization
	// Program holds only the op's tasks; produced buffers are IO outputs
	// (KV caches stay KV caches), consumed activations are IO inputs.
	Program *ir.Program
	// Inputs are the initial values of every buffer the tasks do not
	// produce (weights, IO inputs) and of every KV cache.
	Inputs map[int]*tensor.Tensor
	// Outputs are the buffers compared with the reference, in id order.
	Outputs []int
	// OpBytes is the HBM traffic of one run: what the tasks must read and
	// write (projection rows, KV windows and embedding rows counted as
	// touched, not whole).
	OpBytes int64
	// Describe says what the case is.
	Describe string
}

// NewCase builds op's case at dtype dt for a target's lowering of
// modelName ("" = CaseModel; tests use smaller presets; "NAME:SCHEME", a
// quantised model, for GEMV_TILE only: model.Load).
func NewCase(op ir.Op, dt ir.DType, target *ir.GpuTarget, modelName string) (*Case, error) {
	if _, err := ParseOp(op.String()); err != nil {
		return nil, err
	}
	if dt != ir.F32 && dt != ir.F16 && dt != ir.BF16 {
		return nil, fmt.Errorf("Loop-1 cases are fp32, fp16 or bf16, not %s", dt)
	}
	if modelName == "" {
		modelName = CaseModel
	}
	cfg, err := model.Load(modelName)
	if err != nil {
		return nil, err
	}
	if cfg.Quant.On() && op != ir.OpGEMVTile {
		return nil, fmt.Errorf("a quantised Loop-1 case is a GEMV_TILE case, not %s", op)
	}
	cfg.DType = dt
	if op == ir.OpEMBED {
		cfg.Vocab = min(cfg.Vocab, embedVocab)
	}
	point := schedule.Default()
	opts := schedule.LowerOptions{Pos: CasePos}
	switch op {
	case ir.OpGEMMTile:
		opts.B = gemmBatch
	case ir.OpAttentionCombine:
		point.Config.SetTile("attention", "n_partitions", combineShards)
	}
	return buildCase(op, target, cfg, point, opts, func(p *ir.Program) []int { return pickGroup(p, op) })
}

// buildCase lowers cfg, cuts the group pick chooses, seeds its inputs and
// checks the cut program.
func buildCase(op ir.Op, target *ir.GpuTarget, cfg model.Config, point schedule.Point, opts schedule.LowerOptions,
	pick func(*ir.Program) []int) (*Case, error) {
	dt := cfg.DType
	full, err := schedule.Lower(cfg, target, point, opts)
	if err != nil {
		return nil, fmt.Errorf("lowering %s: %w", cfg.Name, err)
	}
	group := pick(full)
	if len(group) == 0 {
		return nil, fmt.Errorf("the lowering of %s emits no %s task", cfg.Name, op)
	}
	c := cut(full, group)
	c.Op, c.DType, c.Quant = op, dt, cfg.Quant
	c.Describe = fmt.Sprintf("%d %s task(s) of %s (%s, vocab %d, pos %d, batch %d) for %s: %s", len(group), op, cfg.Name, dt,
		cfg.Vocab, opts.Pos, max(opts.B, 1), target.Name, full.Tasks[group[0]].Label)
	if err := c.seed(); err != nil {
		return nil, err
	}
	if rep := validate.Validate(c.Program); !rep.OK {
		return nil, fmt.Errorf("case program rejected: %s", rep.Reason(3))
	}
	if err := kernels.CheckDevice(c.Program); err != nil {
		return nil, fmt.Errorf("case program cannot run on the device: %w", err)
	}
	c.OpBytes = opBytes(c.Program)
	return c, nil
}

// pickGroup returns the task ids of op's heaviest group (tasks with the same
// inputs: the tiles of one projection, the shards of one attention) by
// estimated bytes, then flops; ties go to the first. For the projections
// that is the lm_head, the one GEMV whose weights exceed every GPU's L2, so
// repeated launches still stream from HBM.
func pickGroup(p *ir.Program, op ir.Op) []int {
	var order []string
	groups := map[string][]int{}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if t.Op != op {
			continue
		}
		key := fmt.Sprint(t.Inputs)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], i)
	}
	var best []int
	var bestBytes, bestFlops int64 = -1, -1
	for _, key := range order {
		var b, f int64
		for _, i := range groups[key] {
			b += p.Tasks[i].EstBytes
			f += p.Tasks[i].EstFlops
		}
		if b > bestBytes || (b == bestBytes && f > bestFlops) {
			best, bestBytes, bestFlops = groups[key], b, f
		}
	}
	return best
}

// cut copies the group's tasks into a program of their own.
func cut(full *ir.Program, group []int) *Case {
	sub := ir.NewProgram()
	sub.Target = full.Target
	if full.Config != nil {
		sub.Config = full.Config.Clone()
		sub.Config.PipeliningDepth = 0
		sub.Config.ThreadsPerBlock = int(kernels.DefaultVariant()["threads"])
	}
	produced := map[int]bool{}
	for _, ti := range group {
		for _, o := range full.Tasks[ti].Outputs {
			produced[o] = true
		}
	}
	ids := map[int]int{}
	buffer := func(old int) int {
		if id, ok := ids[old]; ok {
			return id
		}
		b := full.Buffers[old]
		b.Shape = slices.Clone(b.Shape)
		switch {
		case produced[old] && b.Kind == ir.KVCache:
		case produced[old]:
			b.Kind = ir.IOOutput
		case b.Kind == ir.Activation:
			b.Kind = ir.IOInput
		}
		ids[old] = sub.AddBuffer(b)
		return ids[old]
	}
	counters := map[int]int{}
	zero := 0
	for _, ti := range group {
		t := full.Tasks[ti]
		nt := ir.Task{Op: t.Op, Params: slices.Clone(t.Params), SM: &zero, EstBytes: t.EstBytes, EstFlops: t.EstFlops, Label: t.Label}
		for _, in := range t.Inputs {
			nt.Inputs = append(nt.Inputs, buffer(in))
		}
		for _, o := range t.Outputs {
			nt.Outputs = append(nt.Outputs, buffer(o))
		}
		if _, ok := counters[t.OutCounter]; !ok {
			counters[t.OutCounter] = sub.AddCounter(full.Counters[t.OutCounter].Note)
		}
		nt.OutCounter = counters[t.OutCounter]
		sub.AddTask(nt)
	}
	c := &Case{Program: sub, Inputs: map[int]*tensor.Tensor{}}
	for old, id := range ids {
		if produced[old] {
			c.Outputs = append(c.Outputs, id)
		}
	}
	slices.Sort(c.Outputs)
	return c
}

// Input roles that need particular values.
const (
	roleProjection = "projection" // GEMV/GEMM weights: N(0,1)/sqrt(K) keeps outputs O(1)
	roleNorm       = "norm"       // norm weights: 1 + 0.1 N(0,1)
	rolePartial    = "partial"    // split-KV partials [acc | m | l], l > 0
	roleScales     = "scales"     // a quantised weight's scales: positive
)

func roles(p *ir.Program) map[int]string {
	r := map[int]string{}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		switch t.Op {
		case ir.OpGEMVTile, ir.OpGEMMTile:
			r[t.Inputs[1]] = roleProjection
			if _, si, ok := ir.TileQuant(t); ok {
				r[t.Inputs[si]] = roleScales
			}
		case ir.OpRMSNORM:
			r[t.Inputs[1]] = roleNorm
		case ir.OpAttentionCombine:
			for _, in := range t.Inputs {
				r[in] = rolePartial
			}
		}
	}
	return r
}

// seed fills Inputs with deterministic values (fixed per op, dtype and buffer).
func (c *Case) seed() error {
	p := c.Program
	role := roles(p)
	outputs := map[int]bool{}
	for _, o := range c.Outputs {
		outputs[o] = true
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if outputs[i] && b.Kind != ir.KVCache {
			continue
		}
		rng := rand.New(rand.NewPCG(caseSeedPrefix^uint64(c.Op)<<8^uint64(c.DType), uint64(i)))
		if b.DType == ir.I8 || b.DType == ir.I4 {
			c.Inputs[i] = seedQuantized(b, rng)
			continue
		}
		if role[i] == roleScales {
			// scales: positive, so that q * s keeps a projection's scale
			vals := make([]float32, b.Numel())
			for j := range vals {
				vals[j] = float32((0.5 + rng.Float64()) * 0.002)
			}
			t, err := tensor.FromFloats(b.DType, b.Shape, vals)
			if err != nil {
				return err
			}
			c.Inputs[i] = t
			continue
		}
		if b.DType == ir.I32 {
			vals := make([]int32, b.Numel())
			for j := range vals {
				switch b.Name {
				case schedule.TokenInput:
					vals[j] = CaseToken
				case schedule.PosInput:
					vals[j] = CasePos
				case schedule.ReshapeInput:
					vals[j] = int32(j)
				}
			}
			t, err := tensor.FromInts(ir.I32, b.Shape, vals)
			if err != nil {
				return err
			}
			c.Inputs[i] = t
			continue
		}
		vals := make([]float32, b.Numel())
		cols := b.Shape[len(b.Shape)-1]
		for j := range vals {
			n := rng.NormFloat64()
			switch role[i] {
			case roleProjection:
				n /= math.Sqrt(float64(cols))
			case roleNorm:
				n = 1 + 0.1*n
			case rolePartial:
				if j%cols == cols-1 {
					n = 1 + 3*rng.Float64() // l, the softmax denominator, > 0
				}
			}
			vals[j] = float32(n)
		}
		t, err := tensor.FromFloats(b.DType, b.Shape, vals)
		if err != nil {
			return err
		}
		c.Inputs[i] = t
	}
	return nil
}

// Reference runs the case in the CPU reference VM and returns its outputs.
func (c *Case) Reference() (map[int]*tensor.Tensor, error) {
	machine, err := vm.New(c.Program, vm.Options{})
	if err != nil {
		return nil, err
	}
	weights := map[string]*tensor.Tensor{}
	kv := map[string]*tensor.Tensor{}
	for id, t := range c.Inputs {
		b := &c.Program.Buffers[id]
		switch b.Kind {
		case ir.Weight, ir.Const:
			key := b.Name
			if b.Source != nil {
				key = *b.Source
			}
			weights[key] = t
		case ir.KVCache:
			kv[b.Name] = t
		default:
			if err := machine.Bind(b.Name, t); err != nil {
				return nil, err
			}
		}
	}
	if err := machine.BindWeights(weights); err != nil {
		return nil, err
	}
	if err := machine.BindKV(kv); err != nil {
		return nil, err
	}
	res, err := machine.Run()
	if err != nil {
		return nil, err
	}
	out := map[int]*tensor.Tensor{}
	for _, id := range c.Outputs {
		b := &c.Program.Buffers[id]
		t := res.Outputs[b.Name]
		if b.Kind == ir.KVCache {
			t = res.KV[b.Name]
		}
		if t == nil {
			return nil, fmt.Errorf("the reference VM produced no %s", b.Name)
		}
		out[id] = t
	}
	return out, nil
}

// opBytes is the HBM traffic of one run of the case's tasks: every input
// read once and every output written once, except that a projection reads
// only its tiles' weight rows, attention only its KV windows, EMBED only the
// looked-up rows, and KV_APPEND writes one row per sequence into its cache.
func opBytes(p *ir.Program) int64 {
	seen := map[int]bool{}
	once := func(id int) int64 {
		if seen[id] {
			return 0
		}
		seen[id] = true
		return p.Buffers[id].NBytes()
	}
	var total int64
	for i := range p.Tasks {
		t := &p.Tasks[i]
		switch t.Op {
		case ir.OpGEMVTile, ir.OpGEMMTile:
			w := &p.Buffers[t.Inputs[1]]
			seen[w.ID] = true
			total += once(t.Inputs[0]) + w.DType.NBytes(t.Params.IntOr("N_tile", 0)*t.Params.IntOr("K", 0))
		case ir.OpAttentionTile:
			total += once(t.Inputs[0])
			window := t.Params.IntOr("kv_len", 0) * t.Params.IntOr("n_kv_heads", 0) * t.Params.IntOr("head_dim", 0)
			for _, kvc := range t.Inputs[1:3] {
				seen[kvc] = true
				total += p.Buffers[kvc].DType.NBytes(window)
			}
		case ir.OpEMBED:
			table := &p.Buffers[t.Inputs[1]]
			seen[table.ID] = true
			ids := once(t.Inputs[0]) / 4
			total += 4*ids + table.DType.NBytes(ids*t.Params.IntOr("hidden", int64(table.Cols())))
		case ir.OpKVAppend:
			cache := t.Outputs[0]
			seen[cache] = true
			total += 2 * once(t.Inputs[0]) // the new rows, read then written into the cache
			continue
		default:
			for _, in := range t.Inputs {
				total += once(in)
			}
		}
		for _, o := range t.Outputs {
			total += once(o)
		}
	}
	return total
}

// seedQuantized is a quantised weight of symmetric values: int8 in
// [-127, 127], int4 nibbles in [1, 15] (q + 8), packed low nibble first.
func seedQuantized(b *ir.Buffer, rng *rand.Rand) *tensor.Tensor {
	n := int(b.Numel())
	t := &tensor.Tensor{DType: b.DType, Shape: append([]int(nil), b.Shape...)}
	if b.DType == ir.I4 {
		t.Packed = make([]byte, (n+1)/2)
		for j := range n {
			t.Packed[j/2] |= byte(1+rng.IntN(15)) << (4 * (j % 2))
		}
		return t
	}
	t.Bytes = make([]byte, n)
	for j := range t.Bytes {
		t.Bytes[j] = byte(int8(rng.IntN(255) - 127))
	}
	return t
}
