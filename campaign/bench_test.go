package campaign

import (
	"testing"
	"time"

	"github.com/amk-dev/amk/schedule"
)

// BenchmarkTrialCycle is the campaign's own cost per trial (propose one,
// record its outcome) on a warm campaign with a trained prior.
func BenchmarkTrialCycle(b *testing.B) {
	s := startEvent()
	s.GPU, s.Device = "h100", "cuda" // the CUDA space is large enough not to run dry
	s.Cold, s.Corpus = false, fakeCorpus(200, nearShape, s.GPU, s.Device)
	s.Settings.Overnight = true
	s.Settings.MoveOn.MaxMinutes = 0
	c := New()
	if _, err := c.Step(s); err != nil {
		b.Fatal(err)
	}
	now := epoch
	yes, kind, bound := true, c.st.LatencyKind, 1.0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := c.Step(Propose{Time: now, N: 1})
		if err != nil || len(d.Enqueue) == 0 {
			b.Skipf("stopped after %d trials: %v %v", i, err, d.Log)
		}
		p, _ := schedule.ParsePoint(d.Enqueue[0].Point)
		lat := fakeLatency(p)
		now = now.Add(time.Second)
		f := Finished{Time: now}
		f.Outcome.TrialID = d.Enqueue[0].TrialID
		f.Outcome.Verdict = verdictOf(&yes, &lat, &kind, &bound)
		if _, err := c.Step(f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalLoad is one checkpoint round trip of a campaign with 300
// experiments behind it.
func BenchmarkMarshalLoad(b *testing.B) {
	h := &harness{now: epoch}
	h.exec("start model=toy gpu=h200 seed=3 prior=50 overnight=true")
	h.exec("run n=300 workers=2 quiet=true")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, err := h.c.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}
