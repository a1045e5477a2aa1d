package build

import (
	"slices"

	"github.com/amk-dev/amk/kernels"
)

// SpotVariants is the default variant followed by every variant that moves
// one knob (of the search and config scopes) to another of its choices: the
// variants a GPU visit builds on the device (scripts/gpu/visit.sh) and the
// nvcc check compiles. Fixed knobs stay at their defaults.
func SpotVariants() []kernels.Variant {
	out := []kernels.Variant{kernels.DefaultVariant()}
	for _, k := range kernels.KnobSpace() {
		if k.Scope == kernels.ScopeFixed {
			continue
		}
		for _, c := range k.Choices {
			if c == k.Default {
				continue
			}
			v := kernels.DefaultVariant()
			v[k.Name] = c
			out = append(out, v)
		}
	}
	return out
}

// ExtremeVariants is the default variant, the largest block size of the
// config scope (the tightest register cap) when it is not the default's, and
// the search knobs all at
// their smallest and all at their largest choices: the few builds with the
// least and the most register pressure, which `make test` compiles when an
// nvcc is at hand.
func ExtremeVariants() []kernels.Variant {
	out := []kernels.Variant{kernels.DefaultVariant()}
	lo, hi := kernels.DefaultVariant(), kernels.DefaultVariant()
	for _, k := range kernels.KnobSpace() {
		switch k.Scope {
		case kernels.ScopeConfig:
			if c := slices.Max(k.Choices); c != k.Default {
				v := kernels.DefaultVariant()
				v[k.Name] = c
				out = append(out, v)
			}
		case kernels.ScopeSearch:
			lo[k.Name], hi[k.Name] = slices.Min(k.Choices), slices.Max(k.Choices)
		}
	}
	return append(append(out, lo, hi), RingVariants()...)
}

// RingVariants are the default variant with the streaming weight ring on
// (kernels/cuda/ring.cuh) at its smallest and its largest search choices:
// the ring's code is compiled only when ring_stages > 0.
func RingVariants() []kernels.Variant {
	var out []kernels.Variant
	stages, _ := kernels.LookupKnob("ring_stages")
	tile, _ := kernels.LookupKnob("ring_tile")
	for _, pick := range []func([]int64) int64{slices.Min[[]int64], slices.Max[[]int64]} {
		v := kernels.DefaultVariant()
		on := stages.Choices[:0:0]
		for _, c := range stages.Choices {
			if c > 0 {
				on = append(on, c)
			}
		}
		v[stages.Name], v[tile.Name] = pick(on), pick(tile.Choices)
		out = append(out, v)
	}
	return out
}

// VisitVariants are the kernel variants of the points a GPU visit measures
// (scripts/gpu/points/*.json): the default, and the default with the
// streaming ring at 8 stages (ring.json). `make gpu-bin` compiles them with
// nvcc 12.4 so that the visit loads them instead of waiting on the device's
// compiler.
func VisitVariants() []kernels.Variant {
	ring := kernels.DefaultVariant()
	ring["ring_stages"] = 8
	return []kernels.Variant{kernels.DefaultVariant(), ring}
}
