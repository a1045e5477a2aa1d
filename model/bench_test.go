package model

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// benchEager builds the eager pass of a preset with seeded weights.
func benchEager(b *testing.B, preset string) *Eager {
	b.Helper()
	cfg, err := Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	w, err := InitWeights(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	e, err := NewEager(cfg, w)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkEagerStep times one decode step; positions cycle through the
// whole max_seq window (the cache is reset when full). SetBytes is the
// model's weight bytes, so MB/s is the effective weight-read bandwidth.
func BenchmarkEagerStep(b *testing.B) {
	for _, preset := range []string{"toy", "small"} {
		b.Run(preset, func(b *testing.B) {
			e := benchEager(b, preset)
			b.SetBytes(e.cfg.WeightBytes())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if e.Len() == e.cfg.MaxSeq {
					e.Reset()
				}
				if _, err := e.Step(int32(i%e.cfg.Vocab), e.Len()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWeightReadFloor reads every weight byte of the model once per
// iteration from memory, on every core, in the storage the eager pass uses
// (bf16 at its stored width for small): the physical floor of a CPU decode step.
func BenchmarkWeightReadFloor(b *testing.B) {
	b.Run("small", func(b *testing.B) {
		e := benchEager(b, "small")
		var mats []*matrix
		mats = append(mats, e.embed)
		if e.lmHead != e.embed {
			mats = append(mats, e.lmHead)
		}
		for _, l := range e.layers {
			mats = append(mats, l.q, l.k, l.v, l.o, l.gate, l.up, l.down)
		}
		const perSpan = 1 << 18
		var spans [][]uint16
		for _, m := range mats {
			for lo := 0; lo < len(m.half); lo += perSpan {
				spans = append(spans, m.half[lo:min(lo+perSpan, len(m.half))])
			}
		}
		var total int64
		for _, s := range spans {
			total += int64(len(s)) * 2
		}
		b.SetBytes(total)
		workers := runtime.GOMAXPROCS(0)
		var sink atomic.Uint64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			parallelForN(workers, len(spans), func(j int) {
				var s0, s1, s2, s3 uint64
				w := spans[j]
				for k := 0; k+4 <= len(w); k += 4 {
					s := w[k : k+4 : k+4]
					s0 += uint64(s[0])
					s1 += uint64(s[1])
					s2 += uint64(s[2])
					s3 += uint64(s[3])
				}
				sink.Add(s0 + s1 + s2 + s3)
			})
		}
	})
}

// BenchmarkInitWeights times seeded generation of small's weights.
func BenchmarkInitWeights(b *testing.B) {
	cfg, _ := Preset("small")
	for i := 0; i < b.N; i++ {
		if _, err := InitWeights(cfg, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}
