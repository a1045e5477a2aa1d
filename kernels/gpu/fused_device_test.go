package gpu

import (
	"strings"
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
					plan, err := kernels.PlanSmem(prog, kernels.DefaultVariant(), tg.DynamicSmemBytes())
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

// The device check refuses a paired tile amk_op_fused would trap on: its
// first range past the middle of its head, an odd width, or the flag on a
// pattern without head_dim.
func TestDeviceCheckRefusesMalformedPairedTiles(t *testing.T) {
	cfg, err := model.Preset("toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		mutate func(p *ir.Program, paired, o *ir.Task)
	}{
		{"first range in the second half", func(p *ir.Program, paired, o *ir.Task) {
			setInt(paired, "n_off", paired.Params.IntOr("head_dim", 0)/2)
		}},
		{"odd width", func(p *ir.Program, paired, o *ir.Task) { setInt(paired, "N_tile", 3) }},
		{"the flag on an o tile", func(p *ir.Program, paired, o *ir.Task) {
			setInt(o, "flags", o.Params.IntOr("flags", 0)|ir.FlagPairedTile)
		}},
	} {
		prog, err := schedule.Lower(cfg, tg, schedule.FullyFused(), schedule.LowerOptions{Pos: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := kernels.CheckDevice(prog); err != nil {
			t.Fatalf("unmutated: %v", err)
		}
		var paired, o *ir.Task
		for i := range prog.Tasks {
			tk := &prog.Tasks[i]
			if paired == nil && ir.PairStride(tk.Params) > 0 {
				paired = tk
			}
			if o == nil && ir.TaskFusedPattern(tk) == ir.FusedGEMVAdd {
				o = tk
			}
		}
		c.mutate(prog, paired, o)
		if err := kernels.CheckDevice(prog); err == nil || !strings.Contains(err.Error(), "paired") && !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// setInt overwrites an integer param of a task.
func setInt(t *ir.Task, key string, v int64) {
	ps := append(ir.Params(nil), t.Params...)
	for i := range ps {
		if ps[i].Key == key {
			ps[i] = ir.IntParam(key, v)
		}
	}
	t.Params = ps
}
