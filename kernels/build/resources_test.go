package build

import (
	"strings"
	"testing"
)

// An excerpt of a real nvcc 11.8 sm_90 log of the kernels (one kernel with a
// stack frame, one with a spill added by hand).
const ptxasLog = `ptxas info    : 40 bytes gmem
ptxas info    : Compiling entry function 'amk_entry_rope' for 'sm_90'
ptxas info    : Function properties for amk_entry_rope
    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 68 registers, 224 bytes smem
ptxas info    : Compiling entry function 'amk_megakernel' for 'sm_90'
ptxas info    : Function properties for amk_megakernel
    32 bytes stack frame, 12 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 128 registers, 432 bytes smem
`

func TestParseResources(t *testing.T) {
	got := ParseResources(ptxasLog)
	want := []Resources{
		{Kernel: "amk_entry_rope", Registers: 68, StackBytes: 32},
		{Kernel: "amk_megakernel", Registers: 128, StackBytes: 32, SpillStoreBytes: 12, SpillLoadBytes: 36},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("kernel %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	if got[0].Spills() || !got[1].Spills() {
		t.Errorf("spills: %v %v", got[0].Spills(), got[1].Spills())
	}
	if r := ParseResources("no ptxas here\n    0 bytes stack frame, 4 bytes spill stores, 0 bytes spill loads"); len(r) != 0 {
		t.Errorf("lines outside a kernel: %+v", r)
	}
}

func FuzzParseResources(f *testing.F) {
	f.Add(ptxasLog)
	f.Add("Function properties for x\n1 bytes stack frame, 2 bytes spill stores, 3 bytes spill loads\nUsed 4 registers")
	f.Fuzz(func(t *testing.T, log string) {
		for _, r := range ParseResources(log) {
			if r.Kernel == "" || strings.ContainsAny(r.Kernel, "\n") || r.Registers < 0 || r.SpillLoadBytes < 0 || r.SpillStoreBytes < 0 {
				t.Fatalf("bad entry %+v", r)
			}
		}
	})
}
