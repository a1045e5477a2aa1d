package gpu

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// ringplanHost is the host harness over kernels/cuda/ring.cuh's plan
// functions (its header comment lists what it checks).
//
//go:embed testdata/ringplan_host.cu
var ringplanHost []byte

// TestRingPlanOnTheHost runs the streaming weight ring's plan, the device's
// own __host__ __device__ functions compiled for the host by nvcc, over the
// marshalled tables of toy, small and llama-1b (and small at w8a16 and
// w4a16, llama-1b at w4a16: quantised tiles ride the ring on their stored
// bytes) at the device default (B = 1)
// and fully fused (B = 1 and 2; its q|k|v tiles are paired tiles), h100, with
// the ring at 8 x 1 KiB and 12 x 2 KiB and the dynamic shared memory
// kernels.PlanSmem gives the launch. The harness checks the issuer and the
// consumer agree chunk by chunk and that the chunks read exactly the tile's
// weight rows; this test checks the device agrees with the Go side: the
// ring's size is kernels.RingBytes, every fp projection tile (paired tiles
// included) with a whole chunk per row whose x cache (and RoPE/append tile)
// PlanSmem provisioned rides the ring, with M x N_tile x chunks-per-row
// chunks, reading the rows of its ir.TileRanges, and no other task does.
// Without an nvcc it is skipped with a message, like
// TestKernelsCompileWithoutSpills.
func TestRingPlanOnTheHost(t *testing.T) {
	found := build.FindNVCC()
	if found.Path == "" {
		t.Skip("no nvcc, so the ring's plan is not run on the host: " + build.NoNVCCHint)
	}
	nvcc := found.Path
	t.Logf("%s (from %s)", nvcc, found.From)
	src := t.TempDir()
	if err := os.CopyFS(src, kernels.Sources()); err != nil {
		t.Fatal(err)
	}
	harness := filepath.Join(src, "ringplan_host.cu")
	if err := os.WriteFile(harness, ringplanHost, 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	for _, ring := range [][2]int64{{8, 1024}, {12, 2048}} {
		v := kernels.DefaultVariant()
		v["ring_stages"], v["ring_tile"] = ring[0], ring[1]
		exe := compileRingHarness(t, nvcc, src, harness, v)
		for _, name := range []string{"toy", "small", "llama-1b", "small:w8a16", "small:w4a16", "llama-1b:w4a16-g32"} {
			cfg, err := model.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, pt := range []struct {
				name  string
				point schedule.Point
				b     int
			}{
				{"device-default", schedule.DeviceDefault(), 1},
				{"fully-fused", schedule.FullyFused(), 1},
				{"fully-fused B=2", schedule.FullyFused(), 2},
			} {
				label := fmt.Sprintf("%s %s ring %dx%d", name, pt.name, ring[0], ring[1])
				prog, err := schedule.Lower(cfg, tg, pt.point, schedule.LowerOptions{Pos: 5, B: pt.b})
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				riders, paired := checkRingPlan(t, label, exe, prog, v, tg.DynamicSmemBytes())
				if riders == 0 && name != "toy" {
					t.Errorf("%s: no task rides the ring; the check is vacuous", label)
				}
				// A q row shorter than one ring chunk (int4 rows of 2048
				// columns are 1024 bytes) keeps its tiles off the ring.
				qRow := cfg.DType.NBytes(int64(cfg.Hidden))
				if cfg.Quant.On() {
					qRow = cfg.Quant.WeightDType().NBytes(int64(cfg.Hidden))
				}
				if paired == 0 && name != "toy" && strings.HasPrefix(pt.name, "fully-fused") && qRow >= ring[1] {
					t.Errorf("%s: no paired tile rides the ring; the paired check is vacuous", label)
				}
			}
		}
	}
}

// compileRingHarness builds the harness for one variant (its -D knobs) and
// returns the executable.
func compileRingHarness(t *testing.T, nvcc, src, harness string, v kernels.Variant) string {
	t.Helper()
	defines, err := v.Defines()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "ringplan_host")
	args := append(append([]string{}, build.ToolchainFromEnv().HostArgs...),
		"-std=c++17", "-O1", "-arch=sm_80", "--cudart", "none", "-I", filepath.Join(src, "cuda"), "-o", exe, harness)
	out, err := exec.Command(nvcc, append(args, defines...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", nvcc, strings.Join(defines, " "), err, out)
	}
	return exe
}

// checkRingPlan marshals prog as the launcher does (fake, 256-byte aligned
// device addresses), runs the harness on it and compares its verdict per
// task with the Go side's: the ring decision, the chunk count, the weight
// rows the chunks read and those the megakernel's L2 prefetch covers
// (amk_tile_weight_bytes). It returns how many tasks ride the ring, and how many
// of them are paired tiles.
func checkRingPlan(t *testing.T, label, exe string, prog *ir.Program, v kernels.Variant, optin int) (int, int) {
	t.Helper()
	plan, err := kernels.PlanSmem(prog, v, optin)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	tables, err := kernels.MarshalProgram(prog, kernels.MarshalOptions{})
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	next := uint64(1) << 40
	tables.BindArena(next)
	next += uint64(tables.ArenaBytes+255) &^ 255
	for id, off := range tables.ArenaOffset {
		if off >= 0 {
			continue
		}
		if err := tables.SetBufferPointer(id, next); err != nil {
			t.Fatal(err)
		}
		next += uint64(prog.Buffers[id].NBytes()+255) &^ 255
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"buffers.bin": tables.Buffers, "instructions.bin": tables.Instructions,
		"queue_flat.bin": tables.QueueFlat, "queue_off.bin": tables.QueueOff, "queue_len.bin": tables.QueueLen} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ringBytes := kernels.RingBytes(v)
	out, err := exec.Command(exe, dir, strconv.Itoa(plan.Bytes), strconv.FormatInt(ringBytes, 10),
		strconv.Itoa(tables.NBuffers), strconv.Itoa(tables.NInstructions), strconv.Itoa(tables.NumQueues)).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: the harness failed (%v):\n%s", label, err, failLines(out))
	}
	ops := (int64(plan.Bytes) - ringBytes) &^ 15
	tile := v["ring_tile"]
	riders, seen := 0, map[int]bool{}
	paired := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var id, on int
		var chunks int64
		var rows, prefetch string
		if n, _ := fmt.Sscanf(line, "task %d ring %d chunks %d rows %s prefetch %s", &id, &on, &chunks, &rows, &prefetch); n != 5 {
			continue
		}
		seen[id] = true
		task := &prog.Tasks[id]
		want, wantChunks := ringExpectation(prog, task, ops, tile)
		if (on == 1) != want || chunks != wantChunks {
			t.Errorf("%s: task %s: the device plan says ring=%d with %d chunks, the Go side expects ring=%v with %d (ops share %d bytes, PlanSmem %d, notes %v)",
				label, task.Describe(), on, chunks, want, wantChunks, ops, plan.Bytes, plan.Notes)
		}
		if on == 1 {
			wantRows := tileRows(task)
			if rows != wantRows {
				t.Errorf("%s: task %s: the ring's chunks read weight rows %s, the tile's are %s (ir.TileRanges)",
					label, task.Describe(), rows, wantRows)
			}
			if prefetch != wantRows {
				t.Errorf("%s: task %s: the L2 prefetch covers weight rows %s, the tile's are %s (ir.TileRanges)",
					label, task.Describe(), prefetch, wantRows)
			}
			if ir.PairStride(task.Params) > 0 {
				paired++
			}
		}
		riders += on
	}
	if len(seen) != len(prog.Tasks) {
		t.Errorf("%s: the harness reported %d of %d tasks:\n%s", label, len(seen), len(prog.Tasks), out)
	}
	t.Logf("%s: %d of %d tasks on the ring (%d paired tiles), dynamic smem %d bytes (ring %d, ops share %d)",
		label, riders, len(prog.Tasks), paired, plan.Bytes, ringBytes, ops)
	return riders, paired
}

// tileRows is the weight rows a projection tile streams, as the harness
// prints them: its ir.TileRanges as half-open "lo-hi" runs joined by commas.
func tileRows(t *ir.Task) string {
	var runs []string
	for _, r := range ir.TileRanges(t.Params.IntOr("n_off", 0), t.Params.IntOr("N_tile", 0), ir.PairStride(t.Params)) {
		runs = append(runs, fmt.Sprintf("%d-%d", r[0], r[1]))
	}
	return strings.Join(runs, ",")
}

// ringExpectation is the Go side's view of one task: an fp GEMV or FUSED
// projection rides the ring when its weight rows hold at least one whole
// ring_tile chunk, are 16-byte aligned, and its x cache (+ the RoPE/append
// tile, N_tile floats, a paired tile's two ranges included) fits the ops'
// share of the dynamic shared memory; it then streams M x N_tile x (row
// bytes / ring_tile) chunks (a paired tile: N_tile/2 rows of each range).
func ringExpectation(p *ir.Program, t *ir.Task, ops, tile int64) (bool, int64) {
	wi, tileBytes := 1, int64(0)
	qd, _, quant := ir.TileQuant(t)
	switch t.Op {
	case ir.OpGEMVTile:
		if quant && len(t.Inputs) != 3 { // zero points: off the ring
			return false, 0
		}
	case ir.OpFUSED:
		pat, ok := ir.FusedPatternByID(ir.TaskFusedPattern(t))
		if !ok || len(t.Inputs) != pat.TaskArity(t) {
			return false, 0
		}
		wi = pat.Role(ir.RoleW)
		if pat.Epilogue == ir.EpilogueRoPE || pat.WritesCache() {
			tileBytes = (t.Params.IntOr("N_tile", 0)*4 + 15) &^ 15
		}
	default:
		return false, 0
	}
	w, x := &p.Buffers[t.Inputs[wi]], &p.Buffers[t.Inputs[0]]
	k, nTile := t.Params.IntOr("K", 0), t.Params.IntOr("N_tile", 0)
	ldw := k
	if len(w.Shape) >= 2 {
		ldw = w.Strides()[0]
	}
	if k <= 0 {
		return false, 0
	}
	if quant {
		// A quantised row streams its stored bytes; each 16-byte vector
		// (16 int8 or 32 int4 weights) must lie in one scale group.
		perVec := int64(16)
		if qd == ir.I4 {
			perVec = 32
		}
		if w.DType != qd || ldw != k || k%perVec != 0 || t.Params.IntOr("group", k)%perVec != 0 {
			return false, 0
		}
	} else if !w.DType.IsFloat() || w.DType.Bits() > 32 || w.DType.Bits() < 16 {
		return false, 0
	}
	bits := int64(w.DType.Bits())
	rowBytes := k * bits / 8
	xBytes := (k*4 + 15) &^ 15
	if (ldw*bits/8)%16 != 0 || rowBytes < tile || xBytes+tileBytes > ops {
		return false, 0
	}
	return true, x.Numel() / k * nTile * (rowBytes / tile)
}

// failLines keeps the harness's FAIL lines (all of its output if none).
func failLines(out []byte) string {
	var keep []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(l, "FAIL") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return string(out)
	}
	if len(keep) > 20 {
		keep = append(keep[:20], fmt.Sprintf("... and %d more", len(keep)-20))
	}
	return strings.Join(keep, "\n")
}
