package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// An AMD space has no CUDA kernel knobs and only whole wavefronts, on
// either device; an NVIDIA cuda space keeps its kernel knobs.
func TestSpaceIsPerVendor(t *testing.T) {
	for _, name := range []string{"mi300x", "mi325x", "mi355x"} {
		tg := mustTarget(t, name)
		for _, device := range []Device{DeviceCPU, DeviceCUDA} {
			for _, k := range Space(tg, device) {
				if strings.HasPrefix(k.Path, knobPrefix) {
					t.Errorf("%s/%s: CUDA kernel knob %s in an AMD space", name, device, k.Path)
				}
				if k.Scope == ScopeKernelBuild {
					t.Errorf("%s/%s: %s is a kernel-build lever on AMD", name, device, k.Path)
				}
				if k.Path == PathTPB {
					for _, c := range k.Choices {
						if n, _ := c.Int64(); n%64 != 0 {
							t.Errorf("%s: threads_per_block choice %d is not whole wavefronts", name, n)
						}
					}
				}
			}
		}
	}
	var cpasync bool
	for _, k := range Space(mustTarget(t, "h100"), "cuda") {
		cpasync = cpasync || k.Path == knobPrefix+"cpasync"
	}
	if !cpasync {
		t.Fatal("h100 cuda space lost kernel_knobs.cpasync")
	}
}

func TestAMDPointsAreLaunchable(t *testing.T) {
	tg := mustTarget(t, "mi300x")
	rng := rand.New(rand.NewPCG(1, 2))
	p := Default()
	for range 200 {
		p = Mutate(p, rng, tg, "cpu")
		if err := CheckLaunch(p, tg); err != nil {
			t.Fatalf("a drawn point does not launch on mi300x: %v", err)
		}
		if r := Random(rng, tg, "cpu"); CheckLaunch(r, tg) != nil {
			t.Fatalf("a random point does not launch on mi300x: %v", CheckLaunch(r, tg))
		}
	}
	p = Default()
	p.Config.ThreadsPerBlock = 96
	if err := CheckLaunch(p, tg); err == nil || !strings.Contains(err.Error(), "wavefront size (64)") {
		t.Fatalf("96 threads accepted on a 64-wide wavefront: %v", err)
	}
}

// The cost model reads the vendor fields: wavefronts per block, bytes in
// flight per wavefront, the Infinity Cache as prefetch room.
func TestCostModelReadsAMDFields(t *testing.T) {
	amd, nv := newCostModel(mustTarget(t, "mi300x"), Default()), newCostModel(mustTarget(t, "h100"), Default())
	if amd.warps*2 != nv.warps || amd.inflight != 2*nv.inflight {
		t.Errorf("mi300x: %d wavefronts x %g B vs h100 %d warps x %g B", amd.warps, amd.inflight, nv.warps, nv.inflight)
	}
	if want := float64(256<<20) / 304; amd.l2Share != want {
		t.Errorf("mi300x prefetch room per CU %g, want the Infinity Cache share %g", amd.l2Share, want)
	}
}
