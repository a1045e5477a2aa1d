package campaign

import (
	"testing"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/schedule"
)

// runFake drives a campaign with one worker on the fake landscape and
// returns the latencies in order and the corpus records it produced.
func runFake(t testing.TB, s Start, n int) ([]float64, []flywheel.Record) {
	c := New()
	if _, err := c.Step(s); err != nil {
		t.Fatal(err)
	}
	now := s.Time
	var lats []float64
	var corpus []flywheel.Record
	for len(lats) < n {
		d, err := c.Step(Propose{Time: now, N: 1})
		if err != nil || len(d.Enqueue) == 0 {
			break
		}
		p, err := schedule.ParsePoint(d.Enqueue[0].Point)
		if err != nil {
			t.Fatal(err)
		}
		lat := fakeLatency(p)
		yes, kind, bound := true, c.st.LatencyKind, 1.0
		now = now.Add(time.Minute)
		o := Finished{Time: now}
		o.Outcome.TrialID = d.Enqueue[0].TrialID
		o.Outcome.Verdict = verdictOf(&yes, &lat, &kind, &bound)
		d, err = c.Step(o)
		if err != nil {
			t.Fatal(err)
		}
		lats = append(lats, lat)
		corpus = append(corpus, d.Corpus...)
	}
	return lats, corpus
}

// trialsTo is how many trials it took to get within frac of target.
func trialsTo(lats []float64, target, frac float64) int {
	for i, l := range lats {
		if l <= target*(1+frac) {
			return i + 1
		}
	}
	return len(lats) + 1
}

// TestWarmStartReachesColdBestSooner: a warm campaign whose prior is an
// earlier campaign on a nearby shape reaches that campaign's best in fewer
// trials than a cold one (on the scripts' fake landscape; the embedded
// driver measures the same on the real evaluator).
func TestWarmStartReachesColdBestSooner(t *testing.T) {
	const n, runs = 40, 8
	coldSum, warmSum := 0, 0
	for seed := uint64(1); seed <= runs; seed++ {
		prev := startEvent()
		prev.Seed, prev.Shape = seed+100, nearShape
		prevLats, corpus := runFake(t, prev, n)
		best := prevLats[0]
		for _, l := range prevLats {
			best = min(best, l)
		}
		cold := startEvent()
		cold.Seed = seed
		coldLats, _ := runFake(t, cold, n)
		warm := cold
		warm.Cold, warm.Corpus = false, corpus
		warmLats, _ := runFake(t, warm, n)
		c, w := trialsTo(coldLats, best, 0.02), trialsTo(warmLats, best, 0.02)
		t.Logf("seed %d: earlier best %.3f us; trials to within 2%%: cold %d, warm %d", seed, best, c, w)
		coldSum += c
		warmSum += w
	}
	t.Logf("mean trials to within 2%% of the earlier best: cold %.1f, warm %.1f", float64(coldSum)/runs, float64(warmSum)/runs)
	if warmSum >= coldSum {
		t.Fatalf("warm start did not help: cold %d trials, warm %d", coldSum, warmSum)
	}
}
