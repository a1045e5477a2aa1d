package schedule

import (
	"testing"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
)

// FuzzParsePoint: arbitrary config JSON never panics ParsePoint, and a point
// that parses re-serialises and re-parses to the same id; its launch check,
// toy lowering and prediction never panic either.
func FuzzParsePoint(f *testing.F) {
	seeds := []string{
		`{}`, `null`, `[]`, `"x"`, `{"tiling": "not-a-dict"}`, `{"pipelining_depth": "deep"}`,
		`{"tiling": {"gemv": {"N_tile": -16}}}`, `{"threads_per_block": 7}`, `{"threads_per_block": 512}`,
		`{"smem_bytes_per_block": 1e9}`, `{"smem_bytes_per_block": 1000000000}`, `{"sm_assignment": {"99999": 9999}}`,
		`{"sm_assignment": {"0": 1, "5": 3}}`, `{"tiling": {"gemv": {"N_tile": 1}, "attention": {"n_partitions": 8}}}`,
		`{"tiling": {"gemv": {"base_width": 24}}}`, `{"kernel_knobs": {"cols_per_warp": 4, "cpasync": 0}}`,
		`{"kernel_knobs": {"lb_maxthreads": 256, "lb_minblocks": 1}}`, `{"fusion_grouping": [["gate", "up", "silu"]]}`,
		`{"page_allocation": "linear", "pipelining_depth": 8}`, `{"tiling": {"gemv": {"N_tile": 99999999999}}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	cfg, err := model.Preset("toy")
	if err != nil {
		f.Fatal(err)
	}
	tg := mustTarget(f, "h100")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePoint(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty rejection reason")
			}
			return
		}
		id := p.ID()
		again, err := ParsePoint([]byte(pyjson.Compact(p.Value(), false)))
		if err != nil {
			t.Fatalf("re-parse of %s: %v", pyjson.Compact(p.Value(), false), err)
		}
		if again.ID() != id {
			t.Fatalf("id %s became %s after a round trip", id, again.ID())
		}
		if norm := p.Normalize(); norm.ID() != norm.Normalize().ID() {
			t.Fatalf("normalising twice changed the id")
		}
		_ = CheckLaunch(p, tg)
		_ = Features(p)
		_ = p.Complexity()
		if prog, err := Lower(cfg, tg, p, LowerOptions{Pos: 20}); err == nil {
			_ = Predict(prog, tg, p)
		}
	})
}
