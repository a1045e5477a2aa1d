package build

import "github.com/amk-dev/amk/kernels"

// SpotVariants is the default variant followed by every variant that moves
// one knob (of the search and config scopes) to another of its choices: the
// variants a GPU visit builds ahead (scripts/gpu/run-1.sh) and the nvcc check
// compiles. Fixed knobs stay at their defaults.
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
