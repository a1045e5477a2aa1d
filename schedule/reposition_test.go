package schedule

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

func TestRepositionEqualsLower(t *testing.T) {
	for _, c := range []struct {
		model, gpu string
		p          Point
		b          int
	}{{"toy", "h100", Default(), 1}, {"toy-2L", "rtx5090", autoPoint(), 1}, {"small", "h200", Default(), 1},
		{"toy", "a100", Default(), 2}} {
		cfg := mustPreset(t, c.model)
		tg := mustTarget(t, c.gpu)
		prog := mustLower(t, cfg, tg, c.p, LowerOptions{Pos: 0, B: c.b})
		for _, pos := range []int{5, 200, 0, 255} {
			if err := Reposition(prog, pos); err != nil {
				t.Fatalf("%s: Reposition(%d): %v", c.model, pos, err)
			}
			want := ir.Encode(mustLower(t, cfg, tg, c.p, LowerOptions{Pos: pos, B: c.b}))
			if got := ir.Encode(prog); string(got) != string(want) {
				t.Fatalf("%s: Reposition(%d) differs from Lower(pos=%d)", c.model, pos, pos)
			}
		}
	}
}

func TestRepositionRefuses(t *testing.T) {
	tg := mustTarget(t, "h100")
	cfg := mustPreset(t, "toy")
	split := mustLower(t, cfg, tg, splitPoint(4), LowerOptions{Pos: 100})
	before := string(ir.Encode(split))
	if err := Reposition(split, 101); err == nil || !strings.Contains(err.Error(), "split-KV") {
		t.Errorf("split-KV program: %v", err)
	}
	if string(ir.Encode(split)) != before {
		t.Error("a refused Reposition changed the program")
	}
	// Lowered unsplit at kv_len 1, but the config splits at kv_len 101.
	prog := mustLower(t, cfg, tg, splitPoint(4), LowerOptions{Pos: 0})
	if err := Reposition(prog, 100); err == nil || !strings.Contains(err.Error(), "re-lower") {
		t.Errorf("config asking for split-KV: %v", err)
	}
	if err := Reposition(prog, 10); err != nil {
		t.Errorf("kv_len 11 stays unsplit: %v", err)
	}
	if err := Reposition(prog, 256); err == nil || !strings.Contains(err.Error(), "max_seq") {
		t.Errorf("pos 256: %v", err)
	}
}
