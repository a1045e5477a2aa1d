package tune

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

func h200(t testing.TB) *ir.GpuTarget {
	t.Helper()
	target, err := ir.Target("h200")
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// Every supported op has a case on the toy model that validates, passes the
// device checks and runs in the reference VM.
func TestCasesForEverySupportedOp(t *testing.T) {
	for _, op := range SupportedOps() {
		for _, dt := range []ir.DType{ir.F32, ir.BF16} {
			c, err := NewCase(op, dt, h200(t), "toy")
			if err != nil {
				t.Errorf("%s %s: %v", op, dt, err)
				continue
			}
			for i := range c.Program.Tasks {
				tk := &c.Program.Tasks[i]
				if tk.Op != op || len(tk.Waits) != 0 || tk.SM == nil || *tk.SM != 0 {
					t.Fatalf("%s: task %d is not a standalone %s task on queue 0: %+v", op, i, op, tk)
				}
			}
			ref, err := c.Reference()
			if err != nil || len(ref) == 0 || len(c.Outputs) == 0 {
				t.Errorf("%s %s: reference %v (%d outputs)", op, dt, err, len(ref))
				continue
			}
			if c.OpBytes <= 0 {
				t.Errorf("%s %s: op bytes %d", op, dt, c.OpBytes)
			}
			for _, id := range c.Outputs {
				if _, seeded := c.Inputs[id]; seeded && c.Program.Buffers[id].Kind != ir.KVCache {
					t.Errorf("%s: output %d was seeded as an input", op, id)
				}
			}
		}
	}
}

func TestCaseGEMVIsTheLMHeadWithItsBytes(t *testing.T) {
	c, err := NewCase(ir.OpGEMVTile, ir.F32, h200(t), "toy")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := model.Preset("toy")
	if !strings.Contains(c.Describe, "lm_head") {
		t.Fatalf("case %q is not the lm_head", c.Describe)
	}
	// x [1, H] read once, W [V, H] read once, logits [1, V] written once.
	want := int64(4 * (cfg.Hidden + cfg.Vocab*cfg.Hidden + cfg.Vocab))
	if c.OpBytes != want {
		t.Fatalf("op bytes %d, want %d", c.OpBytes, want)
	}
	// The small preset's pick is its lm_head too (checked on the lowering; seeding it is slow).
	small, _ := model.Preset("small")
	full, err := schedule.Lower(small, h200(t), schedule.Default(), schedule.LowerOptions{Pos: CasePos})
	if err != nil {
		t.Fatal(err)
	}
	g := pickGroup(full, ir.OpGEMVTile)
	if len(g) == 0 || !strings.HasPrefix(full.Tasks[g[0]].Label, "lm_head") {
		t.Fatalf("small's GEMV pick starts at %q", full.Tasks[g[0]].Label)
	}
}

func TestCaseAttentionBytesCountTheWindow(t *testing.T) {
	c, err := NewCase(ir.OpAttentionTile, ir.BF16, h200(t), "toy")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := model.Preset("toy")
	kv := int64(CasePos+1) * int64(cfg.KVDim()) * 2 * 2 // K and V windows, bf16
	q := int64(cfg.QDim()) * 2
	if c.OpBytes != kv+2*q {
		t.Fatalf("attention bytes %d, want window %d + q and out %d", c.OpBytes, kv, 2*q)
	}
}

func TestParseOpAndDType(t *testing.T) {
	if op, err := ParseOp("gemv_tile"); err != nil || op != ir.OpGEMVTile {
		t.Fatalf("%v %v", op, err)
	}
	for _, bad := range []string{"layernorm", "nope", ""} {
		if _, err := ParseOp(bad); err == nil || !strings.Contains(err.Error(), "supported: embed") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if dt, err := ParseDType("bf16"); err != nil || dt != ir.BF16 || DTypeName(dt) != "bf16" {
		t.Fatalf("%v %v", dt, err)
	}
	if _, err := ParseDType("int8"); err == nil {
		t.Fatal("int8 accepted")
	}
	if _, err := NewCase(ir.OpADD, ir.I8, h200(t), "toy"); err == nil {
		t.Fatal("an int8 case was built")
	}
}
