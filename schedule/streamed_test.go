package schedule

import (
	"math/rand/v2"
	"testing"
)

// The honest floor counts one gathered embedding row per sequence (the table
// in full only when lm_head reuses it), the weights once, and the K and V
// rows of the attention window; the all-weights figure stays the seed's.
func TestStreamedBytesCountsWhatAStepReads(t *testing.T) {
	tg := mustTarget(t, "h100")
	for _, name := range []string{"toy", "toy-2L", "small", "llama-1b"} {
		for _, b := range []int{1, 2} {
			cfg := mustPreset(t, name)
			const pos = 5
			prog := mustLower(t, cfg, tg, Default(), LowerOptions{Pos: pos, B: b})
			d := int64(cfg.DType.Bits() / 8)
			table := int64(cfg.Vocab*cfg.Hidden) * d
			want := prog.TotalWeightBytes()
			if !cfg.TiedEmbeddings {
				want += int64(b*cfg.Hidden)*d - table
			}
			want += int64(cfg.NLayers) * int64(b) * 2 * (pos + 1) * int64(cfg.KVDim()) * d
			if got := prog.StreamedBytes(); got != want {
				t.Errorf("%s B=%d: streamed %d bytes, want %d (all weights %d)", name, b, got, want, prog.TotalWeightBytes())
			}
		}
	}
}

// Split-KV shards read disjoint windows: the streamed bytes do not change
// with the partition count.
func TestStreamedBytesIndependentOfSplitKV(t *testing.T) {
	tg := mustTarget(t, "h100")
	cfg := mustPreset(t, "small")
	base := mustLower(t, cfg, tg, Default(), LowerOptions{Pos: 200}).StreamedBytes()
	p := Default()
	p.Config.SetTile("attention", "n_partitions", 4)
	split := mustLower(t, cfg, tg, p, LowerOptions{Pos: 200})
	if got := split.StreamedBytes(); got != base {
		t.Fatalf("split-KV streams %d bytes, whole-window %d", got, base)
	}
	if c := Predict(split, tg, p); c.BandwidthBoundUS >= c.AllWeightsBoundUS && !cfg.TiedEmbeddings {
		t.Fatalf("floor %.3f us not below the all-weights figure %.3f us for an untied model", c.BandwidthBoundUS, c.AllWeightsBoundUS)
	}
}

// The streamed bytes depend on the model, the decode position and the
// batch, never on the schedule point: the scheduler states a campaign's
// floor once, from its default point, for every trial of it.
func TestStreamedBytesIndependentOfThePoint(t *testing.T) {
	tg := mustTarget(t, "h100")
	for _, name := range []string{"toy-2L", "small"} {
		cfg := mustPreset(t, name)
		for _, pos := range []int{0, 200} {
			for _, b := range []int{1, 2} {
				opts := LowerOptions{Pos: pos, B: b}
				want := mustLower(t, cfg, tg, Default(), opts).StreamedBytes()
				rng := rand.New(rand.NewPCG(uint64(pos), uint64(b)))
				for _, dev := range []Device{DeviceCPU, DeviceCUDA} {
					for range 12 {
						p := Random(rng, tg, dev)
						prog, err := Lower(cfg, tg, p, opts)
						if err != nil {
							t.Fatalf("%s pos %d B=%d: a random %s point does not lower: %v", name, pos, b, dev, err)
						}
						if got := prog.StreamedBytes(); got != want {
							t.Errorf("%s pos %d B=%d: point %s streams %d bytes, the default %d", name, pos, b, p.ID(), got, want)
						}
					}
				}
			}
		}
	}
}
