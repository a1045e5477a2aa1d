package schedule

import (
	"slices"
	"sync"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// Fusion is one fused lowering the search can turn on or off: the config's
// fusion_grouping lists it as its group of op-group names (in any order).
type Fusion struct {
	Name  string
	Group []string
	Note  string
}

// Fusion names.
const (
	FuseQKV         = "qkv"
	FuseGateUp      = "gate_up"
	FuseNormStaging = "norm_staging"
	FuseRoPEEpi     = "rope_epilogue"
	FuseResidualEpi = "residual_epilogue"
	FuseSiLUStaging = "silu_staging"
	FuseReshapeView = "reshape_view"
)

// Fusions is the table of fused lowerings, in canonical order. The
// reference's group ["gate", "up", "silu"] means gate_up + silu_staging.
var Fusions = []Fusion{
	{FuseQKV, []string{"q", "k", "v"}, "the q, k and v tiles form one phase on one counter"},
	{FuseGateUp, []string{"gate", "up"}, "gate and up tiles interleaved in one phase on one counter"},
	{FuseNormStaging, []string{"rmsnorm", "gemv"}, "RMSNorm folded into the QKV, gate/up and lm_head " +
		"activation staging (NORM_GEMV patterns); no RMSNORM task"},
	{FuseRoPEEpi, []string{"rope", "kv_append"}, "RoPE and the KV append in the q/k/v tile epilogues " +
		"(*_ROPE, *_APPEND patterns; tiles of whole heads); no ROPE or KV_APPEND task"},
	{FuseResidualEpi, []string{"gemv", "add"}, "the residual add in the o/down tile epilogue (GEMV_ADD); no ADD task"},
	{FuseSiLUStaging, []string{"silu", "down"}, "silu(gate)*up in the down projection's staging (SILU_GEMV); no SILU_MUL task"},
	{FuseReshapeView, []string{"reshape"}, "ROPE reads the flat projection as a view; no reshape task"},
}

// fusionSet is the set of fused lowerings a config turns on.
type fusionSet map[string]bool

// fusionsOf reads fusion_grouping: each group that matches a Fusion's group
// as a set turns it on; other groups are recorded and have no effect.
func fusionsOf(c *ir.ScheduleConfig) fusionSet {
	on := fusionSet{}
	for _, g := range c.FusionGrouping {
		if sameSet(g, []string{"gate", "up", "silu"}) {
			on[FuseGateUp], on[FuseSiLUStaging] = true, true
			continue
		}
		for _, f := range Fusions {
			if sameSet(g, f.Group) {
				on[f.Name] = true
			}
		}
	}
	return on
}

// any reports whether the device lowering applies at all.
func (s fusionSet) any() bool { return len(s) > 0 }

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// canonicalFusion writes the fusions that are on as groups in table order:
// what Normalize keeps of fusion_grouping. reshape_view is left out with
// rope_epilogue, which leaves no ROPE task to read a view.
func canonicalFusion(on fusionSet) [][]string {
	out := [][]string{}
	for _, f := range Fusions {
		if f.Name == FuseReshapeView && on[FuseRoPEEpi] {
			continue
		}
		if on[f.Name] {
			out = append(out, slices.Clone(f.Group))
		}
	}
	return out
}

// FusionGrouping is the canonical fusion_grouping of the named fusions.
func FusionGrouping(names ...string) [][]string {
	on := fusionSet{}
	for _, n := range names {
		on[n] = true
	}
	return canonicalFusion(on)
}

// AllFusions names every fused lowering.
func AllFusions() []string {
	out := make([]string, len(Fusions))
	for i, f := range Fusions {
		out[i] = f.Name
	}
	return out
}

// fusionChoices are the search's fusion_grouping values: none, all, and
// all but one (so every fusion can be turned off on its own), each once in
// its canonical form (all but reshape_view is all: see canonicalFusion).
func fusionChoices() []pyjson.Value {
	fusionChoicesOnce.Do(func() { fusionChoiceValues = makeFusionChoices() })
	return fusionChoiceValues
}

var (
	fusionChoicesOnce  sync.Once
	fusionChoiceValues []pyjson.Value
)

func makeFusionChoices() []pyjson.Value {
	all := AllFusions()
	lists := [][][]string{{}, FusionGrouping(all...)}
	for i := range all {
		rest := slices.Delete(slices.Clone(all), i, i+1)
		lists = append(lists, FusionGrouping(rest...))
	}
	var out []pyjson.Value
	seen := map[string]bool{}
	for _, groups := range lists {
		gs := make([]pyjson.Value, len(groups))
		for j, g := range groups {
			gs[j] = pyjson.ArrayValue(strs(g...)...)
		}
		v := pyjson.ArrayValue(gs...)
		if key := pyjson.Compact(v, true); !seen[key] {
			seen[key] = true
			out = append(out, v)
		}
	}
	return out
}

// DeviceDefault is the device-shaped default point: Default with one tile
// per SM in every projection phase, attention split per KV head,
// round_robin placement (one phase's tiles on distinct SMs; LPT over the
// whole program pairs some) and every fused lowering on except
// rope_epilogue: ROPE and KV_APPEND stay tasks (7 hops per layer, not 5).
// With paired q|k|v tiles FullyFused also fills the SMs (small: 120 of
// 132) and the uncalibrated cost model ranks it 3-5% faster, but its
// device path has only been compiled, never run, so the default stays the
// shape whose q|k|v path is the plain GEMV until a GPU times both
// (docs/results/roofline-design.md). Default stays the reference's
// default_config (docs/spec/rules.md R12, its schedule ids are pinned).
func DeviceDefault() Point {
	p := Default()
	p.Config.SetTile("gemv", "tiles_per_sm", 1)
	p.Config.SetTile("attention", "kv_head_split", 1)
	p.Config.SMAssignment = ir.SMAssignment{Policy: PolicyRoundRobin}
	var on []string
	for _, f := range AllFusions() {
		if f != FuseRoPEEpi {
			on = append(on, f)
		}
	}
	p.Config.FusionGrouping = FusionGrouping(on...)
	return p
}

// FullyFused is DeviceDefault with every fused lowering on: five hops per
// layer (q|k|v, attention, o, gate|up, down), the q|k|v phase on paired
// tiles (one head each, lower_device.go pairWidth) signalling one counter
// per KV head (tiling.attention.head_counters), so each attention slice
// waits for its own heads' tiles only.
func FullyFused() Point {
	p := DeviceDefault()
	p.Config.FusionGrouping = FusionGrouping(AllFusions()...)
	p.Config.SetTile("attention", "head_counters", 1)
	return p
}
