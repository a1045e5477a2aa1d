package gpu

import (
	"fmt"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// ringStaticSmemBytes is the megakernel's largest static shared memory
// measured (ptxas 12.4, sm_90, the streaming ring at 12 x 2 KiB with paired
// tiles; docs/results/cuda-review.md L3): what ir.StaticSmemReserve covers.
const ringStaticSmemBytes = 1760

// A point the host accepts with its shared memory floor at the largest
// value schedule.CheckLaunch allows is one the launcher accepts too: the
// launcher plans against ir.DynamicSmemCap of the device's opt-in cap
// (kernels/launch reports it as Info.SmemOptinBytes), and the plan plus the
// kernel's static shared memory stays within the opt-in cap. One byte more
// is refused on the host already. Every NVIDIA target, the default variant
// and, where it fits, the ring at 12 x 2 KiB.
func TestHostSmemCapIsTheLaunchersCap(t *testing.T) {
	if ringStaticSmemBytes > ir.StaticSmemReserve {
		t.Fatalf("the reserve %d does not cover the measured static shared memory %d", ir.StaticSmemReserve, ringStaticSmemBytes)
	}
	cfg, err := model.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	ring := kernels.DefaultVariant()
	ring["ring_stages"], ring["ring_tile"] = 12, 2048
	checked := 0
	for _, name := range ir.TargetNames() {
		tg, err := ir.Target(name)
		if err != nil {
			t.Fatal(err)
		}
		if tg.IsAMD() {
			continue
		}
		launcherCap := ir.DynamicSmemCap(tg.SmemBytesPerBlockOptin) // kernels/launch cuda.go, Info.SmemOptinBytes
		pt := schedule.DeviceDefault()
		pt.Config.SmemBytesPerBlock = tg.DynamicSmemBytes()
		if err := schedule.CheckLaunch(pt, tg); err != nil {
			t.Fatalf("%s: the host refuses its own cap: %v", name, err)
		}
		over := pt
		over.Config.SmemBytesPerBlock++
		if err := schedule.CheckLaunch(over, tg); err == nil {
			t.Errorf("%s: the host accepts %d bytes, one more than the launcher's cap %d", name, over.Config.SmemBytesPerBlock, launcherCap)
		}
		prog, err := schedule.Lower(cfg, tg, pt, schedule.LowerOptions{Pos: 5, B: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		variants := []kernels.Variant{kernels.DefaultVariant()}
		if kernels.RingBytes(ring) < int64(launcherCap) { // 192 KiB: H100-class parts only
			variants = append(variants, ring)
		}
		for _, v := range variants {
			label := fmt.Sprintf("%s ring_stages %d", name, v["ring_stages"])
			plan, err := kernels.PlanSmem(prog, v, launcherCap)
			if err != nil {
				t.Errorf("%s: the launcher's plan refuses a point the host accepts: %v", label, err)
				continue
			}
			if plan.Bytes < tg.DynamicSmemBytes() {
				t.Errorf("%s: the plan (%d bytes) does not honour the floor %d", label, plan.Bytes, tg.DynamicSmemBytes())
			}
			if plan.Bytes+ringStaticSmemBytes > tg.SmemBytesPerBlockOptin {
				t.Errorf("%s: %d dynamic + %d static bytes exceed the opt-in cap %d", label, plan.Bytes, ringStaticSmemBytes, tg.SmemBytesPerBlockOptin)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no NVIDIA target checked")
	}
}
