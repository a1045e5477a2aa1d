package schedule

import (
	"math/rand/v2"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

func valueKey(v pyjson.Value) string { return pyjson.Compact(v, true) }

func inChoices(k Knob, v pyjson.Value) bool {
	for _, c := range k.Choices {
		if valueKey(c) == valueKey(v) {
			return true
		}
	}
	return false
}

// changedKnobs lists the space's paths whose value differs between a and b.
func changedKnobs(space []Knob, a, b Point) []Knob {
	var out []Knob
	for _, k := range space {
		if valueKey(a.KnobValue(k.Path)) != valueKey(b.KnobValue(k.Path)) {
			out = append(out, k)
		}
	}
	return out
}

func TestSpaceShape(t *testing.T) {
	tg := mustTarget(t, "h100")
	effective := map[Device]map[string]bool{"cpu": {}, "cuda": {}}
	for _, dev := range []Device{DeviceCPU, DeviceCUDA} {
		for _, k := range Space(tg, dev) {
			if valueKey(Default().KnobValue(k.Path)) != valueKey(k.Default) {
				t.Errorf("%s: space default %s != Default() value %s", k.Path, valueKey(k.Default),
					valueKey(Default().KnobValue(k.Path)))
			}
			if !inChoices(k, k.Default) {
				t.Errorf("%s: default %s not among the choices", k.Path, valueKey(k.Default))
			}
			if k.Effective != (k.Scope != "") {
				t.Errorf("%s: effective=%v with scope %q", k.Path, k.Effective, k.Scope)
			}
			effective[dev][k.Path] = k.Effective
		}
	}
	for _, path := range []string{PathKVBlock, PathPages} {
		if effective["cpu"][path] || effective["cuda"][path] {
			t.Errorf("%s should be reserved", path)
		}
	}
	for _, path := range []string{PathNTile, PathNPartitions, PathSMAssignment, PathDepth, PathTPB, PathFusion,
		PathTilesPerSM, PathKVHeadSplit, PathHeadCounters, "kernel_knobs.ring_stages", "kernel_knobs.ring_tile"} {
		if !effective["cpu"][path] || !effective["cuda"][path] {
			t.Errorf("%s should be effective on both devices", path)
		}
	}
	for _, path := range []string{PathSmem, "kernel_knobs.cols_per_warp", "kernel_knobs.cpasync",
		"kernel_knobs.cpa_stages", "kernel_knobs.cpa_cols"} {
		if effective["cpu"][path] || !effective["cuda"][path] {
			t.Errorf("%s should be effective on cuda only", path)
		}
	}
	for _, k := range Space(tg, "cpu") {
		if k.Path == PathTPB {
			for _, c := range k.Choices {
				if n, _ := c.Int64(); n > 256 {
					t.Errorf("threads_per_block offers %d, which the VM cannot run (R24)", n)
				}
			}
		}
	}
	if len(Features(Default())) != len(FeatureNames()) {
		t.Errorf("%d features, %d names", len(Features(Default())), len(FeatureNames()))
	}
}

func TestRandomAndMutateDrawOnlyEffectiveLegalKnobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dev := range []Device{DeviceCPU, DeviceCUDA} {
		for _, tgName := range []string{"rtx5090", "t4", "h200"} {
			tg := mustTarget(t, tgName)
			space := Space(tg, dev)
			moved := map[string]bool{}
			p := Default()
			for range 300 {
				r := Random(rng, tg, dev)
				checkLegal(t, space, r, dev, tg)
				for _, k := range changedKnobs(space, Default(), r) {
					if !k.Effective {
						t.Fatalf("%s: Random moved non-effective knob %s", dev, k.Path)
					}
				}
				q := Mutate(p, rng, tg, dev)
				checkLegal(t, space, q, dev, tg)
				ch := changedKnobs(space, p, q)
				if len(ch) != 1 || !ch[0].Effective {
					t.Fatalf("%s: Mutate changed %d knobs (%v)", dev, len(ch), ch)
				}
				if q.ID() == p.ID() {
					t.Fatalf("%s: Mutate kept the id %s", dev, p.ID())
				}
				moved[ch[0].Path] = true
				p = q
			}
			for _, k := range space {
				if k.Effective && len(k.Choices) > 1 && !moved[k.Path] {
					t.Errorf("%s/%s: Mutate never moved %s", dev, tgName, k.Path)
				}
			}
		}
	}
}

func checkLegal(t *testing.T, space []Knob, p Point, dev Device, tg *ir.GpuTarget) {
	t.Helper()
	for _, k := range space {
		v := p.KnobValue(k.Path)
		if !inChoices(k, v) && !(k.Path == PathNTile && v.Kind == pyjson.Null) {
			t.Fatalf("%s: %s=%s is not a legal choice", dev, k.Path, valueKey(v))
		}
		if !k.Effective && valueKey(v) != valueKey(k.Default) {
			t.Fatalf("%s: reserved %s=%s moved off its default", dev, k.Path, valueKey(v))
		}
	}
	if _, err := PointFromValue(p.Value()); err != nil {
		t.Fatalf("%s: drawn point does not parse: %v", dev, err)
	}
	if err := CheckLaunch(p, tg); err != nil {
		t.Fatalf("%s: drawn point cannot launch: %v", dev, err)
	}
}

func TestSpaceSize(t *testing.T) {
	h200, err := ir.Target("h200")
	if err != nil {
		t.Fatal(err)
	}
	// The reference's knobs: N_tile 7 x n_partitions 4 x sm_assignment 2 x
	// depth 5 x threads 2 = 560 points; the device lowering's: tiles_per_sm
	// {0, 1, 2} (N_tile is unused, so one width, when it is not 0),
	// kv_head_split 2, head_counters 2 (distinct only with the KV-head split
	// and the RoPE epilogue), fusion_grouping 8 (none, all, all but one of 7
	// less "all but reshape_view", which is all); the streaming ring:
	// ring_stages {0, 8, 12} x ring_tile {1 KiB, 2 KiB}, the slot size
	// distinct only with the ring on.
	perHop := 2 * 5 * 2 * 4 // sm_assignment, depth, threads, n_partitions
	fusion := 0
	for _, f := range fusionChoices() {
		p := Default()
		p.SetKnob(PathFusion, f)
		if fusionsOf(&p.Config)[FuseRoPEEpi] {
			fusion += 3 // head_counters acts with kv_head_split 1: (split 0), (split 1, hc 0), (split 1, hc 1)
		} else {
			fusion += 2 // kv_head_split only
		}
	}
	widths := 7 + 2 // tiles_per_sm 0: seven widths; 1 and 2: one each
	ring := 1 + 2*2
	if want := perHop * widths * fusion * ring; SpaceSize(Space(h200, "cpu")) != want {
		t.Errorf("cpu space of h200 has %d points, want %d", SpaceSize(Space(h200, "cpu")), want)
	}
	// cuda adds SMEM (3 choices on h200) and the four kernel knobs (3x2x3x2).
	if want := SpaceSize(Space(h200, "cpu")) * 3 * 36; SpaceSize(Space(h200, "cuda")) != want {
		t.Errorf("cuda space of h200 has %d points, want %d", SpaceSize(Space(h200, "cuda")), want)
	}
	// the emulator runs the same kernels: the same space
	if SpaceSize(Space(h200, DeviceEmu)) != SpaceSize(Space(h200, DeviceCUDA)) {
		t.Errorf("emu space of h200 has %d points, the cuda one %d", SpaceSize(Space(h200, DeviceEmu)), SpaceSize(Space(h200, DeviceCUDA)))
	}
}

func TestParseDevice(t *testing.T) {
	for in, want := range map[string]Device{"": DeviceCPU, "cpu": DeviceCPU, " CUDA ": DeviceCUDA, "cuda": DeviceCUDA, "emu": DeviceEmu, "EMU ": DeviceEmu} {
		if got, err := ParseDevice(in); err != nil || got != want {
			t.Errorf("ParseDevice(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"gpu", "cuda:0", "rocm", "emulator", "emu:0"} {
		if got, err := ParseDevice(in); err == nil || got.Valid() {
			t.Errorf("ParseDevice(%q) = %q, %v; want an error", in, got, err)
		}
	}
}
