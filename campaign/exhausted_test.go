package campaign

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// The widen message names every knob a GPU evaluation adds, read from
// schedule.Space, and none on an AMD target (no kernel build there).
func TestGPUOnlyKnobsComeFromTheSpace(t *testing.T) {
	h200, err := ir.Target("h200")
	if err != nil {
		t.Fatal(err)
	}
	joined := gpuOnlyKnobs(h200)
	cpu := map[string]bool{}
	for _, k := range schedule.Space(h200, schedule.DeviceCPU) {
		cpu[k.Path] = k.Effective
	}
	named := 0
	for _, k := range schedule.Space(h200, schedule.DeviceCUDA) {
		gpuOnly := k.Effective && !cpu[k.Path]
		if gpuOnly {
			named++
		}
		if in := strings.Contains(joined, k.Path); in != gpuOnly {
			t.Errorf("%s named: %v, want %v (effective on cuda %v, on cpu %v)", k.Path, in, gpuOnly, k.Effective, cpu[k.Path])
		}
	}
	if named == 0 || !strings.Contains(joined, "kernel-build knobs (") {
		t.Errorf("h200: %q, want the kernel-build knobs named", joined)
	}
	mi300x, err := ir.Target("mi300x")
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuOnlyKnobs(mi300x); got != "" {
		t.Errorf("mi300x: %q, want no GPU-only knobs", got)
	}
	if got := reservedKnobs(); got != schedule.PathKVBlock+" and "+schedule.PathPages+" are" {
		t.Errorf("reserved knobs: %q", got)
	}
}
