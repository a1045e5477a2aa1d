package schedule

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// The design figures of docs/results/roofline-design.md: hops per layer,
// SMs streaming each projection phase and bytes in flight per SM, for the
// reference default and the device default. Regenerate the table with
//
//	go test ./schedule -run TestRooflineDesignFigures -v
func TestRooflineDesignFigures(t *testing.T) {
	points := []struct {
		name string
		p    Point
	}{{"reference default", Default()}, {"device default", DeviceDefault()},
		{"fully fused, all-join qkv", allJoin()}, {"fully fused", FullyFused()},
		{"fully fused, 2 tiles/SM", func() Point { p := FullyFused(); p.Config.SetTile("gemv", "tiles_per_sm", 2); return p }()}}
	var b strings.Builder
	b.WriteString("| model | gpu | point | hops/layer | tasks | SMs streaming per phase (layer 0, lm_head) | bytes in flight/SM | predicted µs (cost model) | streamed floor µs |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range []string{"small", "llama-1b"} {
		cfg := mustPreset(t, m)
		for _, g := range []string{"h100", "h200"} {
			tg := mustTarget(t, g)
			for _, pt := range points {
				prog := mustLower(t, cfg, tg, pt.p, LowerOptions{})
				hops := HopsPerLayer(cfg, tg, pt.p)
				tiles := PhaseTiles(prog)
				// Per-KV-head counters ("L0.qkv.kv3 (...)") are shown as
				// their phase: its tiles and its counters.
				sum, ctrs := map[string]int{}, map[string]int{}
				for name, n := range tiles {
					if strings.HasPrefix(name, "L0.") || strings.HasPrefix(name, "lm_head") {
						ph := strings.Fields(name)[0]
						if i := strings.Index(ph, ".kv"); i > 0 {
							ph = ph[:i]
						}
						sum[ph] += n
						ctrs[ph]++
					}
				}
				var phases []string
				for ph, n := range sum {
					if ctrs[ph] > 1 {
						phases = append(phases, fmt.Sprintf("%s %d (%d counters)", ph, n, ctrs[ph]))
					} else {
						phases = append(phases, fmt.Sprintf("%s %d", ph, n))
					}
				}
				sort.Strings(phases)
				c := Predict(prog, tg, pt.p)
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %s | %d KiB | %.1f | %.1f |\n", m, g, pt.name, hops, len(prog.Tasks),
					strings.Join(phases, ", "), BytesInFlightPerSM(pt.p)/1024, c.PredictedUS, c.BandwidthBoundUS)
				switch pt.name {
				case "reference default":
					if hops < 12 {
						t.Errorf("%s on %s: reference default has %d hops per layer, the review counted ~13", m, g, hops)
					}
				case "device default":
					if hops != 7 {
						t.Errorf("%s on %s: device default has %d hops per layer, want 7", m, g, hops)
					}
				case "fully fused", "fully fused, all-join qkv", "fully fused, 2 tiles/SM":
					if hops != 5 {
						t.Errorf("%s on %s: fully fused has %d hops per layer, want 5", m, g, hops)
					}
					// Paired q|k|v tiles: more tiles than heads, at most
					// tiles_per_sm per SM.
					heads := cfg.NHeads + 2*cfg.NKVHeads
					tps, _ := pt.p.Config.Tile("gemv", "tiles_per_sm")
					if n := sum["L0.qkv"]; n <= heads || n > tps*tg.NumSMs {
						t.Errorf("%s on %s, %s: %d q|k|v tiles for %d heads and %d SMs", m, g, pt.name, n, heads, tg.NumSMs)
					}
				}
				if pt.name == "device default" {
					for name, n := range tiles {
						if n < tg.NumSMs-8 {
							t.Errorf("%s on %s, %s: phase %q streams from %d of %d SMs", m, g, pt.name, name, n, tg.NumSMs)
						}
					}
				}
			}
		}
	}
	t.Log("\n" + b.String())
}
