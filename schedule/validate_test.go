package schedule

import (
	"math/rand/v2"
	"testing"

	"github.com/amk-dev/amk/validate"
)

// Every lowered program validates: many random points, several models,
// positions (split-KV needs kv_len > 16) and batch sizes.
func TestLoweredProgramsValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	cases := []struct {
		model  string
		points int
	}{{"toy", 40}, {"toy-2L", 30}, {"small", 8}}
	targets := []string{"rtx5090", "h100", "l4", "t4"}
	for _, c := range cases {
		cfg := mustPreset(t, c.model)
		for i := 0; i < c.points; i++ {
			tg := mustTarget(t, targets[i%len(targets)])
			device := DeviceCPU
			if i%2 == 0 {
				device = DeviceCUDA
			}
			p := Random(rng, tg, device)
			opts := LowerOptions{Pos: rng.IntN(cfg.MaxSeq)}
			if i%5 == 4 {
				opts.B = 2 + rng.IntN(3)
			}
			prog := mustLower(t, cfg, tg, p, opts)
			if rep := validate.Validate(prog); !rep.OK {
				t.Fatalf("%s %s %s pos=%d B=%d rejected: %s", c.model, tg.Name, p.Value().Repr(), opts.Pos, opts.B,
					rep.Reason(4))
			}
		}
	}
}
