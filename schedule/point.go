package schedule

import (
	"fmt"
	"maps"
	"sort"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// SM assignment policies.
const (
	PolicyRoundRobin  = "round_robin"
	PolicyLoadBalance = "load_balance"
)

// Page allocation policies (reserved: recorded, not consumed).
var pagePolicies = []string{"graph_color", "linear", "none"}

// fusionNames are the op-group names a fusion_grouping may mention; the
// groups that match a schedule.Fusions entry are consumed by the lowering.
var fusionNames = []string{"rmsnorm", "gemv", "gate", "up", "silu", "swiglu", "down",
	"q", "k", "v", "o", "qkv", "rope", "kv_append", "attention", "add", "embed", "lm_head", "reshape"}

// Canonical defaults of the reserved and tiling knobs.
const (
	defaultNTile       = 64
	defaultKVBlock     = 128
	defaultDepth       = 2
	defaultPagePolicy  = "graph_color"
	defaultTPB         = 256
	maxPipeliningDepth = 8
	maxPartitions      = 8 // ATTENTION_COMBINE arity cap (== ir.MaxInputs)
	maxTilesPerSM      = 16
)

// kernelKnob is one kernel build knob (a -D define of the CUDA kernels, the
// "kernel_knobs" of a schedule point, docs/spec/ir.md §5): its default,
// its validated range and, for the searchable four, the values drawn.
type kernelKnob struct {
	name     string
	def      int
	min, max int
	choices  []int // nil: accepted but never searched
	// drawn: the values CUDA campaigns draw for a knob outside the always
	// embedded four (choices nil): it enters a point's kernel_knobs (and
	// its id) only when it differs from its default, so adding one leaves
	// every existing id unchanged.
	drawn []int
	// quantOnly: drawn only in the space of a model with quantised
	// weights (SpaceFor): only the quantised kernels read it.
	quantOnly bool
}

// kernelKnobs lists every known knob; the first four are the searched ones,
// always embedded in a point.
var kernelKnobs = []kernelKnob{
	{"cols_per_warp", 1, 1, 16, []int{1, 2, 4}, nil, false},
	{"cpasync", 1, 0, 1, []int{0, 1}, nil, false},
	{"cpa_stages", 4, 1, 16, []int{2, 3, 4}, nil, false},
	{"cpa_cols", 2, 1, 16, []int{2, 4}, nil, false},
	{"kunroll", 1, 1, 64, nil, nil, false},
	{"lb_maxthreads", 0, 0, 1024, nil, nil, false},
	{"lb_minblocks", 0, 0, 32, nil, nil, false},
	{"gemv_max_k", 0, 0, 65536, nil, nil, false},
	{"cpa_vpl", 1, 1, 8, nil, nil, false},
	{"qc", 2, 1, 16, nil, []int{1, 2, 4}, true}, // the kernels' default (kernels/cuda/common.cuh AMK_QGEMV_COLS)
	{"qcpasync", 0, 0, 1, nil, nil, false},
	{"ring_stages", 0, 0, 32, nil, []int{0, 8, 12}, false},
	{"ring_tile", 2048, 512, 8192, nil, []int{1024, 2048}, false},
}

func findKernelKnob(name string) (kernelKnob, bool) {
	for _, k := range kernelKnobs {
		if k.name == name {
			return k, true
		}
	}
	return kernelKnob{}, false
}

// Point is one search point: a ScheduleConfig plus the kernel build knobs
// (always embedded).
type Point struct {
	Config ir.ScheduleConfig
	Knobs  map[string]int // cols_per_warp, cpasync, cpa_stages, cpa_cols (defaults 1, 1, 4, 2)
}

// DefaultKnobs returns the searched kernel knobs at their defaults.
func DefaultKnobs() map[string]int {
	m := make(map[string]int, 4)
	for _, k := range kernelKnobs {
		if k.choices != nil {
			m[k.name] = k.def
		}
	}
	return m
}

// DefaultConfig is the canonical default ScheduleConfig (docs/spec/rules.md R12): the
// reference's default_config().
func DefaultConfig() ir.ScheduleConfig {
	return ir.ScheduleConfig{
		Tiling: []ir.TilingEntry{
			{Op: "gemv", Sizes: []ir.TileSize{{Name: "N_tile", Value: defaultNTile}}},
			{Op: "attention", Sizes: []ir.TileSize{{Name: "kv_block", Value: defaultKVBlock}}},
		},
		FusionGrouping:    [][]string{},
		SMAssignment:      ir.SMAssignment{Policy: PolicyLoadBalance},
		PipeliningDepth:   defaultDepth,
		PageAllocation:    defaultPagePolicy,
		ThreadsPerBlock:   defaultTPB,
		SmemBytesPerBlock: 0,
	}
}

// Default is THE canonical default point (docs/spec/rules.md R12): DefaultConfig with the
// default kernel knobs. Every entry point (lowering without a config, trial
// 0, propose, the baseline) uses it.
func Default() Point {
	return Point{Config: DefaultConfig(), Knobs: DefaultKnobs()}
}

// Clone returns a deep copy.
func (p Point) Clone() Point {
	out := Point{Config: *p.Config.Clone()}
	if p.Knobs != nil {
		out.Knobs = make(map[string]int, len(p.Knobs))
		maps.Copy(out.Knobs, p.Knobs)
	}
	return out
}

// Normalize returns the canonical form of the point (docs/spec/rules.md R11, R15): searched
// kernel knobs filled with their defaults, other knobs kept only when they
// differ from their defaults; reserved knobs (tiling.attention.kv_block,
// fusion_grouping, page_allocation) reset to their defaults; tiling reduced
// to the entries the lowering consumes (gemv.N_tile, or gemv.base_width when
// N_tile is absent; attention.n_partitions when > 1, capped at 8;
// attention.head_counters only where it acts); an
// explicit sm_assignment map sorted by task id (last pin wins), and an empty
// map read as the default policy.
func (p Point) Normalize() Point {
	c := p.Config
	out := ir.ScheduleConfig{
		FusionGrouping:    canonicalFusion(fusionsOf(&c)),
		PipeliningDepth:   c.PipeliningDepth,
		PageAllocation:    defaultPagePolicy,
		ThreadsPerBlock:   c.ThreadsPerBlock,
		SmemBytesPerBlock: c.SmemBytesPerBlock,
	}
	if nt, ok := c.Tile("gemv", "N_tile"); ok {
		out.SetTile("gemv", "N_tile", nt)
	} else if bw, ok := c.Tile("gemv", "base_width"); ok {
		out.SetTile("gemv", "base_width", bw)
	}
	if tps, ok := c.Tile("gemv", "tiles_per_sm"); ok {
		out.SetTile("gemv", "tiles_per_sm", min(tps, maxTilesPerSM))
	}
	if v, ok := c.Tile("attention", "kv_head_split"); ok && v > 0 {
		out.SetTile("attention", "kv_head_split", 1)
	}
	// head_counters acts only with kv_head_split and the RoPE epilogue
	// (lower_device.go headCounters); elsewhere it is dropped, so that
	// one program keeps one id.
	if v, ok := c.Tile("attention", "head_counters"); ok && v > 0 && fusionsOf(&out)[FuseRoPEEpi] {
		if s, ok := out.Tile("attention", "kv_head_split"); ok && s > 0 {
			out.SetTile("attention", "head_counters", 1)
		}
	}
	if np, ok := c.Tile("attention", "n_partitions"); ok && np > 1 {
		out.SetTile("attention", "n_partitions", min(np, maxPartitions))
	}
	out.SetTile("attention", "kv_block", defaultKVBlock)
	out.SMAssignment = normalizeSM(c.SMAssignment)

	knobs := DefaultKnobs()
	for name, v := range p.Knobs {
		k, ok := findKernelKnob(name)
		if !ok {
			continue // ParsePoint rejects unknown knobs; a hand-built map may carry junk
		}
		if k.choices != nil || v != k.def {
			knobs[name] = v
		}
	}
	return Point{Config: out, Knobs: knobs}
}

func normalizeSM(a ir.SMAssignment) ir.SMAssignment {
	if !a.IsExplicit() {
		return ir.SMAssignment{Policy: a.Policy}
	}
	if len(a.Explicit) == 0 {
		return ir.SMAssignment{Policy: PolicyLoadBalance}
	}
	last := make(map[int]int, len(a.Explicit))
	for _, pin := range a.Explicit {
		last[pin.Task] = pin.SM
	}
	pins := make([]ir.SMPin, 0, len(last))
	for t, sm := range last {
		pins = append(pins, ir.SMPin{Task: t, SM: sm})
	}
	sort.Slice(pins, func(i, j int) bool { return pins[i].Task < pins[j].Task })
	return ir.SMAssignment{Explicit: pins}
}

// knobsValue writes the kernel knobs: the searched four in their canonical
// order (defaults filled), then any other knob present, by name.
func knobsValue(knobs map[string]int) pyjson.Value {
	members := make([]pyjson.Member, 0, len(knobs)+4)
	for _, k := range kernelKnobs {
		v, ok := knobs[k.name]
		if !ok && k.choices == nil {
			continue
		}
		if !ok {
			v = k.def
		}
		members = append(members, pyjson.M(k.name, pyjson.IntValue(int64(v))))
	}
	return pyjson.ObjectValue(members...)
}

// Value is the config dict with "kernel_knobs" appended: what files and the
// corpus store. The config is written as it is (call Normalize first for the
// canonical form); the searched knobs are always present.
func (p Point) Value() pyjson.Value {
	v := ir.ConfigValue(&p.Config)
	v.Obj = append(v.Obj, pyjson.M("kernel_knobs", knobsValue(p.Knobs)))
	return v
}

// Complexity is the seed-001 simplicity score counting only effective knobs:
// pipelining depth, +1 for a non-zero SMEM opt-in, +1 for an explicit SM
// map. (The reference also counted fusion groups and a non-default page
// policy; those knobs are reserved in amk, docs/spec/rules.md R15.)
func (p Point) Complexity() int {
	n := p.Config.PipeliningDepth
	if p.Config.SmemBytesPerBlock != 0 {
		n++
	}
	if p.Config.SMAssignment.IsExplicit() && len(p.Config.SMAssignment.Explicit) > 0 {
		n++
	}
	return n
}

// gemvWidth is the configured GEMV tile width before per-projection clamping:
// N_tile when set, else the auto width max(16, base_width or 32).
func gemvWidth(c *ir.ScheduleConfig) (width int, explicit bool) {
	if nt, ok := c.Tile("gemv", "N_tile"); ok {
		return nt, true
	}
	bw, ok := c.Tile("gemv", "base_width")
	if !ok {
		bw = autoBaseWidth
	}
	return max(minAutoTile, bw), false
}

// Auto tile sizing constants of the Python reference's lowering.
const (
	autoBaseWidth = 32
	minAutoTile   = 16
	maxTiles      = 64
)

// MarshalJSON writes the point as its config dict, compact and in Python's
// json.dumps form: the bytes ParsePoint reads back to the same point.
func (p Point) MarshalJSON() ([]byte, error) {
	return []byte(pyjson.Compact(p.Value(), false)), nil
}

// UnmarshalJSON reads a point with ParsePoint (strict: every problem is an
// error).
func (p *Point) UnmarshalJSON(data []byte) error {
	q, err := ParsePoint(data)
	if err != nil {
		return fmt.Errorf("schedule point: %w", err)
	}
	*p = q
	return nil
}
