package schedule

import (
	"fmt"
	"slices"

	"github.com/amk-dev/amk/ir"
)

// CheckLaunch checks the launch configuration against the target before
// anything is lowered or launched (docs/spec/rules.md R24), returning one clear reason: the
// block size must be one the persistent VM supports (128 or 256: larger
// blocks deadlock the cooperative grid sync), the SMEM opt-in must be
// within [0, the target's dynamic shared memory cap] (ir.GpuTarget.DynamicSmemBytes:
// the per-block opt-in cap less the kernels' static reserve, the limit the
// launcher plans against; the reference allows the whole opt-in cap), the
// streaming ring of an NVIDIA point must fit that cap as the kernels plan it,
// and explicit SM pins must name SMs of the target.
func CheckLaunch(p Point, t *ir.GpuTarget) error {
	if t == nil {
		return fmt.Errorf("no GPU target to check the launch configuration against")
	}
	c := &p.Config
	tpb, wave := c.ThreadsPerBlock, t.Wavefront()
	switch {
	case tpb < 32 || tpb > 1024:
		return fmt.Errorf("threads_per_block=%d out of range [32,1024]", tpb)
	case tpb%wave != 0 && t.IsAMD():
		return fmt.Errorf("threads_per_block=%d is not a multiple of the wavefront size (%d) of '%s'", tpb, wave, t.Name)
	case tpb%wave != 0:
		return fmt.Errorf("threads_per_block=%d is not a multiple of the warp size (%d)", tpb, wave)
	case !slices.Contains(tpbChoices, tpb):
		return fmt.Errorf("threads_per_block=%d is not supported by the persistent VM, which runs 128 or 256 "+
			"threads per block (larger blocks deadlock the cooperative grid sync)", tpb)
	}
	smem := c.SmemBytesPerBlock
	if smem < 0 {
		return fmt.Errorf("smem_bytes_per_block=%d must be a non-negative int", smem)
	}
	if smem > t.DynamicSmemBytes() {
		return fmt.Errorf("smem_bytes_per_block=%d exceeds target '%s' dynamic shared memory cap %d (the opt-in cap %d less %d for the kernels' static shared memory)",
			smem, t.Name, t.DynamicSmemBytes(), t.SmemBytesPerBlockOptin, t.SmemBytesPerBlockOptin-t.DynamicSmemBytes())
	}
	if ring := ringBytes(p); ring > 0 && !t.IsAMD() && ring+ringReserve > t.DynamicSmemBytes() {
		return fmt.Errorf("the streaming ring (%d warps x ring_stages %d x ring_tile %d = %d bytes) does not fit target '%s' dynamic shared memory cap %d",
			tpb/32, p.knob("ring_stages"), p.knob("ring_tile"), ring, t.Name, t.DynamicSmemBytes())
	}
	if t.MaxThreadsPerSM > 0 && tpb > t.MaxThreadsPerSM {
		return fmt.Errorf("threads_per_block=%d exceeds target '%s' limit of %d threads per SM", tpb, t.Name,
			t.MaxThreadsPerSM)
	}
	for _, pin := range c.SMAssignment.Explicit {
		if pin.SM < 0 || pin.SM >= t.NumSMs {
			return fmt.Errorf("sm_assignment pins task %d to SM %d, out of range [0,%d) on '%s'", pin.Task, pin.SM,
				t.NumSMs, t.Name)
		}
	}
	return nil
}

// ringReserve is what the kernels' shared-memory plan keeps beside the
// streaming ring (kernels.PlanSmem: the ring plus 16 bytes must fit).
const ringReserve = 16

// ringBytes is the streaming ring's shared memory per block (warps x
// ring_stages x ring_tile, kernels.RingBytes); 0 when it is off.
func ringBytes(p Point) int {
	stages := p.knob("ring_stages")
	if stages <= 0 {
		return 0
	}
	return max(p.Config.ThreadsPerBlock/32, 1) * stages * p.knob("ring_tile")
}
