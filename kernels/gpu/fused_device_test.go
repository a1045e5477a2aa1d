package gpu

import (
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// The device lowering's fused programs pass the device check (every task
// is a pattern amk_op_fused runs) and their shared-memory plan holds the
// RoPE/append tiles, for small and llama-1b on h100 and h200, B = 1 and 2,
// with attention per KV head (and x 4 split-KV shards at B = 1), the fully
// fused points on per-KV-head q|k|v counters and paired q|k|v tiles (one
// and two per SM; the device default has none).
func TestDeviceDefaultProgramsFitTheDevice(t *testing.T) {
	for _, name := range []string{"small", "llama-1b"} {
		cfg, err := model.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{"h100", "h200"} {
			tg, err := ir.Target(g)
			if err != nil {
				t.Fatal(err)
			}
			split := schedule.DeviceDefault()
			split.Config.SetTile("attention", "n_partitions", 4)
			splitFused := schedule.FullyFused() // per-KV-head q|k|v counters, waited on by every shard
			splitFused.Config.SetTile("attention", "n_partitions", 4)
			narrow := schedule.FullyFused() // paired q|k|v tiles two per SM
			narrow.Config.SetTile("gemv", "tiles_per_sm", 2)
			for i, pt := range []schedule.Point{schedule.DeviceDefault(), schedule.FullyFused(), split, splitFused, narrow} {
				for _, b := range []int{1, 2} {
					prog, err := schedule.Lower(cfg, tg, pt, schedule.LowerOptions{Pos: 40, B: b})
					if err != nil {
						t.Fatal(err)
					}
					if paired := pairedTiles(prog); (i != 0 && i != 2) != (paired > 0) {
						t.Fatalf("%s on %s B=%d, point %d: %d paired q|k|v tiles", name, g, b, i, paired)
					}
					if err := kernels.CheckDevice(prog); err != nil {
						t.Fatalf("%s on %s B=%d: %v", name, g, b, err)
					}
					plan, err := kernels.PlanSmem(prog, kernels.DefaultVariant(), tg.SmemBytesPerBlockOptin)
					if err != nil {
						t.Fatal(err)
					}
					if len(plan.Notes) > 0 {
						t.Errorf("%s on %s B=%d: a tile leaves its fast path: %v", name, g, b, plan.Notes)
					}
				}
			}
		}
	}
}

// pairedTiles counts a program's paired tiles (ir.FlagPairedTile).
func pairedTiles(p *ir.Program) int {
	n := 0
	for i := range p.Tasks {
		if ir.PairStride(p.Tasks[i].Params) > 0 && ir.TaskFusedPattern(&p.Tasks[i]) != ir.FusedNone {
			n++
		}
	}
	return n
}
