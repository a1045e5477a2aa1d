package tune

import (
	"slices"
	"sort"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
)

// activeWhen says when a knob is read at all: the register GEMV knobs only
// on the register path (cpasync=0; with cpasync=1 the cp.async ring is used
// on sm_80+, and older GPUs fall back to the register path at its defaults),
// the ring knobs only with cpasync=1. A variant that sets an inactive knob
// builds the same kernel as one that does not, so proposals reset inactive
// knobs to their defaults before deduplicating.
var activeWhen = map[string]struct {
	knob  string
	value int64
}{
	"cols_per_warp": {"cpasync", 0},
	"kunroll":       {"cpasync", 0},
	"cpa_stages":    {"cpasync", 1},
	"cpa_cols":      {"cpasync", 1},
}

// quantizedOnly knobs are read by the int8/int4 dequant-fused GEMV only
// (a quantised case tunes them); fpOnly knobs by the fp GEMV paths only (a
// quantised case leaves them at their defaults).
var (
	quantizedOnly = map[string]bool{"qc": true}
	fpOnly        = map[string]bool{"cols_per_warp": true, "kunroll": true, "cpasync": true, "cpa_stages": true, "cpa_cols": true}
)

// megakernelOnly knobs act in the persistent VM only: the streaming ring
// streams a queue's tiles across their waits, and the entry kernels Loop 1
// times have no queue (they run with the ring off), so Loop 2 and the GPU
// session compare them, not Loop 1.
var megakernelOnly = map[string]bool{"ring_stages": true, "ring_tile": true}

// Knobs are the knobs Loop 1 searches for op: the block size (which the
// schedule fixes for the VM but Loop 1 tunes per kernel) and every search
// knob the op's kernel reads, in KnobSpace order.
func Knobs(op ir.Op) []kernels.Knob { return KnobsFor(op, false) }

// KnobsFor is Knobs of a case whose projection weights are quantised
// (quant) or not: a quantised GEMV tunes the block size and qc.
func KnobsFor(op ir.Op, quant bool) []kernels.Knob {
	var out []kernels.Knob
	for _, k := range kernels.KnobSpace() {
		if k.Scope == kernels.ScopeFixed || quantizedOnly[k.Name] != quant && (quantizedOnly[k.Name] || fpOnly[k.Name]) ||
			megakernelOnly[k.Name] {
			continue
		}
		if k.Scope == kernels.ScopeConfig && k.Name != "threads" {
			continue
		}
		if len(k.Ops) > 0 && !slices.Contains(k.Ops, op) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// Proposals are the variants Loop 1 tries for op, at most budget of them:
// variant 0 is the built-in defaults (no -D: the incumbent), then the grid
// of the knobs' choices — inactive knobs reset to their defaults, duplicates
// dropped — ordered by how many knobs differ from the defaults (one focused
// change first); among equals, the variant whose first differing knob (in
// KnobSpace order) is set comes first, lower choices first. A variant holds
// only its non-default knobs.
func Proposals(op ir.Op, budget int) []kernels.Variant { return ProposalsFor(op, false, budget) }

// ProposalsFor is Proposals over KnobsFor(op, quant).
func ProposalsFor(op ir.Op, quant bool, budget int) []kernels.Variant {
	knobs := KnobsFor(op, quant)
	def := kernels.DefaultVariant()
	type cand struct {
		v   kernels.Variant
		key []int // per knob: its choice index when set, else len(choices) (after every set value)
	}
	cands := []cand{{v: kernels.Variant{}}}
	seen := map[string]bool{"": true}
	idx := make([]int, len(knobs))
	for {
		full := kernels.Variant{}
		for i, k := range knobs {
			full[k.Name] = k.Choices[idx[i]]
		}
		v := canonical(full, def)
		if key := v.String(); !seen[key] {
			seen[key] = true
			cands = append(cands, cand{v: v, key: sortKey(v, knobs)})
		}
		if !next(idx, knobs) {
			break
		}
	}
	cands[0].key = sortKey(cands[0].v, knobs)
	sort.SliceStable(cands, func(i, j int) bool {
		if len(cands[i].v) != len(cands[j].v) {
			return len(cands[i].v) < len(cands[j].v)
		}
		return slices.Compare(cands[i].key, cands[j].key) < 0
	})
	out := make([]kernels.Variant, 0, min(budget, len(cands)))
	for _, c := range cands {
		if len(out) >= budget {
			break
		}
		out = append(out, c.v)
	}
	return out
}

func sortKey(v kernels.Variant, knobs []kernels.Knob) []int {
	key := make([]int, len(knobs))
	for i, k := range knobs {
		key[i] = len(k.Choices)
		if val, ok := v[k.Name]; ok {
			key[i] = max(0, slices.Index(k.Choices, val))
		}
	}
	return key
}

// next advances a mixed-radix counter over the knobs' choices (last fastest).
func next(idx []int, knobs []kernels.Knob) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		idx[i]++
		if idx[i] < len(knobs[i].Choices) {
			return true
		}
		idx[i] = 0
	}
	return false
}

// canonical drops inactive knobs and knobs at their default.
func canonical(full, def kernels.Variant) kernels.Variant {
	out := kernels.Variant{}
	for name, val := range full {
		if cond, ok := activeWhen[name]; ok {
			if on, set := full[cond.knob]; set && on != cond.value {
				continue
			}
			if _, set := full[cond.knob]; !set && def[cond.knob] != cond.value {
				continue
			}
		}
		if val != def[name] {
			out[name] = val
		}
	}
	return out
}

// Label names a variant in kernel ids: "default" or its non-default knobs.
func Label(v kernels.Variant) string {
	if len(v) == 0 {
		return "default"
	}
	return v.String()
}
