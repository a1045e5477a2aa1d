package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
)

// Knob describes one searchable dimension.
type Knob struct {
	Path      string         // "tiling.gemv.N_tile", "pipelining_depth", "kernel_knobs.cols_per_warp", ...
	Choices   []pyjson.Value // legal values to draw from
	Default   pyjson.Value
	Effective bool   // false = reserved: recorded, never drawn, not a feature, normalised to default
	Scope     string // "lowering", "cost-model", "kernel-build", or "" for reserved
	Note      string
}

// Scopes of an effective knob.
const (
	ScopeLowering    = "lowering"
	ScopeCostModel   = "cost-model"
	ScopeKernelBuild = "kernel-build"
)

// Knob paths.
const (
	PathNTile        = "tiling.gemv.N_tile"
	PathNPartitions  = "tiling.attention.n_partitions"
	PathKVBlock      = "tiling.attention.kv_block"
	PathFusion       = "fusion_grouping"
	PathTilesPerSM   = "tiling.gemv.tiles_per_sm"
	PathKVHeadSplit  = "tiling.attention.kv_head_split"
	PathHeadCounters = "tiling.attention.head_counters"
	PathSMAssignment = "sm_assignment"
	PathDepth        = "pipelining_depth"
	PathPages        = "page_allocation"
	PathTPB          = "threads_per_block"
	PathSmem         = "smem_bytes_per_block"
	knobPrefix       = "kernel_knobs."
)

// Choice sets.
var (
	nTileChoices      = []int{16, 32, 48, 64, 128, 256, 512}
	partitionChoices  = []int{1, 2, 4, 8}
	kvBlockChoices    = []int{64, 128, 256}
	depthChoices      = []int{0, 1, 2, 3, 4}
	tpbChoices        = []int{128, 256}
	smPolicyChoices   = []string{PolicyRoundRobin, PolicyLoadBalance}
	tilesPerSMChoices = []int{0, 1, 2}
)

// Device is the kind of evaluator a schedule is searched for: DeviceCPU
// (the cost model's latency, labelled predicted) or DeviceCUDA (a GPU run,
// measured). It is a string so specs and state files keep their JSON.
type Device string

// Devices.
const (
	DeviceCPU  Device = "cpu"
	DeviceCUDA Device = "cuda"
)

// Valid reports whether d is one of the devices.
func (d Device) Valid() bool { return d == DeviceCPU || d == DeviceCUDA }

// ParseDevice reads a device name as a user writes it: case and surrounding
// spaces do not matter, and an empty name is DeviceCPU.
func ParseDevice(s string) (Device, error) {
	d := Device(strings.ToLower(strings.TrimSpace(s)))
	if d == "" {
		return DeviceCPU, nil
	}
	if !d.Valid() {
		return "", fmt.Errorf("%q is not cpu or cuda", s)
	}
	return d, nil
}

// Space is the search space as data (docs/spec/rules.md R15) for a target and a device ("cpu"
// or "cuda"). Kernel-build knobs (smem_bytes_per_block and kernel_knobs.*)
// are effective only on "cuda": the CPU evaluator's cost model does not
// model them, so on "cpu" they are neither drawn nor presented as levers.
// The space is per vendor: threads_per_block offers multiples of the
// target's warp/wavefront only, and an AMD target has no kernel_knobs.*
// (they are the CUDA kernels' -D knobs: cp.async rings, per-warp columns)
// and no kernel build, so on AMD every point is predicted.
func Space(t *ir.GpuTarget, device Device) []Knob { return SpaceFor(t, device, false) }

// QuantizedSpec reports whether a model argument names a quantization
// scheme ("small:w4a16", model.SplitModelSpec): its campaigns search the
// quantised kernels' knobs too (SpaceFor).
func QuantizedSpec(modelSpec string) bool {
	_, q, err := model.SplitModelSpec(modelSpec)
	return err == nil && q.On()
}

// SpaceFor is Space for a model whose projection weights are quantised
// (quant) or not: on cuda, a quantised model's space also draws the
// quantised GEMV's knobs (kernel_knobs.qc: weight rows a warp streams at
// once), which a float model's kernels never read.
func SpaceFor(t *ir.GpuTarget, device Device, quant bool) []Knob {
	amd := t != nil && t.IsAMD()
	cuda := device == DeviceCUDA && !amd
	smemCap, wave := 0, 32
	if t != nil {
		smemCap, wave = t.DynamicSmemBytes(), t.Wavefront()
	}
	knobs := []Knob{
		{Path: PathNTile, Choices: ints(nTileChoices...), Default: intV(defaultNTile), Effective: true,
			Scope: ScopeLowering, Note: "GEMV output-column tile width (clamped to the projection, at most 64 tiles " +
				"per projection): thinner tiles = more parallel weight streams but more tasks and sync transitions"},
		{Path: PathNPartitions, Choices: ints(partitionChoices...), Default: intV(1), Effective: true,
			Scope: ScopeLowering, Note: "split-KV attention shards (P = min(8, SMs, n_partitions, ceil(kv_len/16)), " +
				"pinned to SMs, plus one ATTENTION_COMBINE); no effect while kv_len <= 16"},
		{Path: PathKVBlock, Choices: ints(kvBlockChoices...), Default: intV(defaultKVBlock),
			Note: "reserved: attention is whole-window (or split by n_partitions); recorded only"},
		{Path: PathTilesPerSM, Choices: ints(tilesPerSMChoices...), Default: intV(0), Effective: cuda,
			Scope: deviceLoweringScope(cuda), Note: "tiles per SM in every projection phase (q|k|v, gate|up, o, down, " +
				"lm_head): the tile count is a multiple of the SM count so every SM streams; 0 = the " +
				"reference's N_tile rule (at most 64 tiles per projection)"},
		{Path: PathKVHeadSplit, Choices: ints(0, 1), Default: intV(0), Effective: cuda,
			Scope: deviceLoweringScope(cuda), Note: "1: one attention task per KV head (x split-KV shard) on " +
				"distinct SMs, the GQA group's query heads sharing its K/V rows; 0: all heads in one task"},
		{Path: PathHeadCounters, Choices: ints(0, 1), Default: intV(0), Effective: cuda,
			Scope: deviceLoweringScope(cuda), Note: "1: with rope_epilogue and kv_head_split, one q|k|v " +
				"counter per KV head (tiles cut at head-group boundaries), each attention slice waiting " +
				"for its own heads' tiles only; 0: one all-join counter over the phase"},
		{Path: PathFusion, Choices: fusionChoices(), Default: pyjson.ArrayValue(), Effective: cuda,
			Scope: deviceLoweringScope(cuda), Note: "fused lowerings (schedule.Fusions): none, all, or all " +
				"but one; each removes hops per layer (fused tasks are ir.FusedPatterns)"},
		{Path: PathSMAssignment, Choices: strs(smPolicyChoices...), Default: pyjson.StringValue(PolicyLoadBalance),
			Effective: true, Scope: ScopeLowering, Note: "the lowering sets every Task.sm: round_robin over the " +
				"topological order, or LPT load balance by (bytes, flops, count); the cost model runs the per-SM queues"},
		{Path: PathDepth, Choices: ints(depthChoices...), Default: intV(defaultDepth), Effective: true,
			Scope: ScopeCostModel, Note: "weight prefetch look-ahead while a task waits (the kernels read " +
				"config.pipelining_depth); hides part of each sync transition, costs issue slots per task"},
		{Path: PathPages, Choices: strs(pagePolicies...), Default: pyjson.StringValue(defaultPagePolicy),
			Note: "reserved: no page allocation is produced; activations live in one linear arena"},
		{Path: PathTPB, Choices: ints(multiplesOf(tpbChoices, wave)...), Default: intV(defaultTPB), Effective: true,
			Scope: ScopeCostModel, Note: "persistent VM block size; warps per block bound each SM's in-flight " +
				"weight loads (512 deadlocks the cooperative grid sync and is rejected, R24)"},
		{Path: PathSmem, Choices: ints(smemChoices(smemCap)...), Default: intV(0), Effective: cuda,
			Scope: kernelScope(cuda), Note: "dynamic SMEM opt-in per block, bytes (<= the target's dynamic shared memory cap)"},
	}
	for _, k := range kernelKnobs {
		if k.choices == nil || amd {
			continue
		}
		knobs = append(knobs, Knob{Path: knobPrefix + k.name, Choices: ints(k.choices...), Default: intV(k.def),
			Effective: cuda, Scope: kernelScope(cuda), Note: "GEMV build variant (nvcc -D); measured on the GPU only"})
	}
	for _, k := range kernelKnobs {
		if k.drawn == nil || !cuda || (k.quantOnly && !quant) {
			continue
		}
		note := "streaming weight ring (nvcc -D, kernels/cuda/ring.cuh; ring_stages 0 = off): cuda only; the cost " +
			"model streams the ring across waits, the GPU decides"
		if k.quantOnly {
			note = "quantised GEMV (nvcc -D, kernels/cuda/ops_gemv.cuh amk_gemv_q_row): weight rows one warp streams " +
				"at once; cuda only, quantised models only; the GPU decides"
		}
		knobs = append(knobs, Knob{Path: knobPrefix + k.name, Choices: ints(k.drawn...), Default: intV(k.def),
			Effective: true, Scope: ScopeKernelBuild, Note: note})
	}
	return knobs
}

// deviceLoweringScope scopes the device lowering's knobs (tiles_per_sm,
// fusion_grouping): they change the program on every device, but the cost
// model has no costs for hops or per-SM streaming yet (until it is
// calibrated on the GPU), so a CPU campaign neither draws nor features
// them; an explicit config still lowers with them everywhere.
func deviceLoweringScope(cuda bool) string {
	if cuda {
		return ScopeLowering
	}
	return ""
}

// multiplesOf keeps the choices that are whole numbers of warps/wavefronts.
func multiplesOf(choices []int, wave int) []int {
	var out []int
	for _, c := range choices {
		if wave > 0 && c%wave == 0 {
			out = append(out, c)
		}
	}
	return out
}

func kernelScope(cuda bool) string {
	if cuda {
		return ScopeKernelBuild
	}
	return ""
}

func smemChoices(smemCap int) []int {
	out := []int{0}
	for _, v := range []int{16384, 49152} {
		if v = min(v, smemCap); v > 0 && v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

func intV(i int) pyjson.Value { return pyjson.IntValue(int64(i)) }

func ints(xs ...int) []pyjson.Value {
	out := make([]pyjson.Value, len(xs))
	for i, x := range xs {
		out[i] = intV(x)
	}
	return out
}

func strs(xs ...string) []pyjson.Value {
	out := make([]pyjson.Value, len(xs))
	for i, x := range xs {
		out[i] = pyjson.StringValue(x)
	}
	return out
}

// KnobValue reads a knob of the point by path (the default when absent;
// null for an auto-sized N_tile).
func (p Point) KnobValue(path string) pyjson.Value {
	c := &p.Config
	switch path {
	case PathNTile:
		if v, ok := c.Tile("gemv", "N_tile"); ok {
			return intV(v)
		}
		return pyjson.NullValue()
	case PathNPartitions:
		if v, ok := c.Tile("attention", "n_partitions"); ok {
			return intV(v)
		}
		return intV(1)
	case PathKVBlock:
		if v, ok := c.Tile("attention", "kv_block"); ok {
			return intV(v)
		}
		return intV(defaultKVBlock)
	case PathTilesPerSM:
		v, _ := c.Tile("gemv", "tiles_per_sm")
		return intV(v)
	case PathKVHeadSplit:
		v, _ := c.Tile("attention", "kv_head_split")
		return intV(min(max(v, 0), 1))
	case PathHeadCounters:
		v, _ := c.Tile("attention", "head_counters")
		return intV(min(max(v, 0), 1))
	case PathSMAssignment, PathFusion:
		v, _ := ir.ConfigValue(c).Get(path)
		return v
	case PathDepth:
		return intV(c.PipeliningDepth)
	case PathPages:
		return pyjson.StringValue(c.PageAllocation)
	case PathTPB:
		return intV(c.ThreadsPerBlock)
	case PathSmem:
		return intV(c.SmemBytesPerBlock)
	}
	if name, ok := cutPrefix(path, knobPrefix); ok {
		if v, ok := p.Knobs[name]; ok {
			return intV(v)
		}
		if k, ok := findKernelKnob(name); ok {
			return intV(k.def)
		}
	}
	return pyjson.NullValue()
}

// SetKnob sets a knob of the point by path to a value of the knob's type;
// it reports false for an unknown path or a value of the wrong type.
func (p *Point) SetKnob(path string, v pyjson.Value) bool {
	c := &p.Config
	if path == PathFusion {
		if v.Kind != pyjson.Array {
			return false
		}
		var chk checker
		groups := chk.fusion(v)
		if len(chk.errs) > 0 {
			return false
		}
		c.FusionGrouping = groups
		return true
	}
	if path == PathSMAssignment {
		var chk checker
		a := chk.smAssignment(v)
		if len(chk.errs) > 0 {
			return false
		}
		c.SMAssignment = a
		return true
	}
	if path == PathPages {
		if v.Kind != pyjson.String {
			return false
		}
		c.PageAllocation = v.S
		return true
	}
	n64, ok := v.Int64()
	if !ok || n64 < math.MinInt32 || n64 > math.MaxInt32 {
		return false
	}
	n := int(n64)
	switch path {
	case PathNTile:
		c.SetTile("gemv", "N_tile", n)
		c.DeleteTile("gemv", "base_width")
	case PathNPartitions:
		if n <= 1 {
			c.DeleteTile("attention", "n_partitions")
		} else {
			c.SetTile("attention", "n_partitions", n)
		}
	case PathKVBlock:
		c.SetTile("attention", "kv_block", n)
	case PathTilesPerSM:
		if n <= 0 {
			c.DeleteTile("gemv", "tiles_per_sm")
		} else {
			c.SetTile("gemv", "tiles_per_sm", n)
		}
	case PathKVHeadSplit:
		if n <= 0 {
			c.DeleteTile("attention", "kv_head_split")
		} else {
			c.SetTile("attention", "kv_head_split", 1)
		}
	case PathHeadCounters:
		if n <= 0 {
			c.DeleteTile("attention", "head_counters")
		} else {
			c.SetTile("attention", "head_counters", 1)
		}
	case PathDepth:
		c.PipeliningDepth = n
	case PathTPB:
		c.ThreadsPerBlock = n
	case PathSmem:
		c.SmemBytesPerBlock = n
	default:
		name, ok := cutPrefix(path, knobPrefix)
		if !ok {
			return false
		}
		if _, known := findKernelKnob(name); !known {
			return false
		}
		if p.Knobs == nil {
			p.Knobs = DefaultKnobs()
		}
		p.Knobs[name] = n
	}
	return true
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// Random draws every effective knob of the space uniformly; reserved and
// device-ineffective knobs stay at their defaults.
func Random(rng *rand.Rand, t *ir.GpuTarget, device Device) Point {
	return RandomIn(rng, Space(t, device))
}

// RandomIn is Random over a space (SpaceFor).
func RandomIn(rng *rand.Rand, space []Knob) Point {
	p := Default()
	for _, k := range space {
		if k.Effective && len(k.Choices) > 0 {
			p.SetKnob(k.Path, k.Choices[rng.IntN(len(k.Choices))])
		}
	}
	return p
}

// Mutate returns a copy of p with exactly one effective knob changed to a
// different legal value (a knob is picked uniformly among those with more
// than one choice, then a value uniformly among the other choices).
func Mutate(p Point, rng *rand.Rand, t *ir.GpuTarget, device Device) Point {
	return MutateIn(p, rng, Space(t, device))
}

// MutateIn is Mutate over a space (SpaceFor).
func MutateIn(p Point, rng *rand.Rand, space []Knob) Point {
	out := p.Clone()
	var movable []Knob
	for _, k := range space {
		if k.Effective && len(k.Choices) > 1 {
			movable = append(movable, k)
		}
	}
	if len(movable) == 0 {
		return out
	}
	k := movable[rng.IntN(len(movable))]
	cur := pyjson.Compact(out.KnobValue(k.Path), true)
	others := make([]pyjson.Value, 0, len(k.Choices))
	for _, c := range k.Choices {
		if pyjson.Compact(c, true) != cur {
			others = append(others, c)
		}
	}
	out.SetKnob(k.Path, others[rng.IntN(len(others))])
	return out
}

// FeatureNames names the columns of Features.
func FeatureNames() []string {
	names := []string{"log2_n_tile", "n_partitions", "sm_policy", "pipelining_depth", "warps_per_block", "smem_kib"}
	for _, k := range kernelKnobs {
		if k.choices != nil {
			names = append(names, k.name)
		}
	}
	return names
}

// Features encodes the point's effective knobs for the prior's ranker (docs/spec/rules.md R15:
// reserved knobs are not features). sm_policy: round_robin 0, load_balance
// 1, explicit map 2. The kernel knobs are constant on CPU campaigns.
func Features(p Point) []float64 {
	c := &p.Config
	width, _ := gemvWidth(c)
	np := 1
	if v, ok := c.Tile("attention", "n_partitions"); ok && v > 1 {
		np = min(v, maxPartitions)
	}
	policy := 1.0
	switch {
	case c.SMAssignment.IsExplicit():
		policy = 2
	case c.SMAssignment.Policy == PolicyRoundRobin:
		policy = 0
	}
	f := []float64{math.Log2(float64(max(width, 1))), float64(np), policy, float64(c.PipeliningDepth),
		float64(c.ThreadsPerBlock) / 32, float64(c.SmemBytesPerBlock) / 1024}
	for _, k := range kernelKnobs {
		if k.choices == nil {
			continue
		}
		v, ok := p.Knobs[k.name]
		if !ok {
			v = k.def
		}
		f = append(f, float64(v))
	}
	return f
}

// SpaceSize is the number of distinct points of a space: the product of the
// effective knobs' choice counts (reserved knobs are normalised away, so
// they add no points).
func SpaceSize(knobs []Knob) int {
	n := 1
	for _, k := range knobs {
		if k.Effective && len(k.Choices) > 0 {
			n *= len(k.Choices)
		}
	}
	return n
}
