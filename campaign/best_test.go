package campaign

import (
	"testing"
	"time"

	"github.com/amk-dev/amk/schedule"
)

// simplerIsSlower is a landscape where every pipelining level below the
// default's costs 0.4%: each simpler point sits within the 1% tie band of
// the one above it, and the simplest is 0.8% slower than the default.
func simplerIsSlower(p schedule.Point) float64 {
	return 100 * (1 + 0.004*float64(max(0, 2-p.Config.PipeliningDepth))) * (1 + 0.05*float64(max(0, p.Config.PipeliningDepth-2)))
}

// TestBestNeverSlowerThanBaseline: the best of a campaign is never slower
// than its baseline nor than any best it had before, on a landscape where
// the simplicity tie-break alone would walk it down to slower, simpler
// points (overnight, with basin hops to reach them from fresh regions).
func TestBestNeverSlowerThanBaseline(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		s := startEvent()
		s.Seed, s.Settings.Overnight, s.Settings.RestartAfter = seed, true, 3
		c := New()
		if _, err := c.Step(s); err != nil {
			t.Fatal(err)
		}
		now := s.Time
		prev := 0.0
		for range 120 {
			d, err := c.Step(Propose{Time: now, N: 1})
			if err != nil || len(d.Enqueue) == 0 {
				break
			}
			spec := d.Enqueue[0]
			p, err := schedule.ParsePoint(spec.Point)
			if err != nil {
				t.Fatal(err)
			}
			lat := simplerIsSlower(p)
			yes, kind, bound := true, c.st.LatencyKind, 1.0
			now = now.Add(time.Second)
			f := Finished{Time: now}
			f.Outcome.TrialID = spec.TrialID
			f.Outcome.Verdict = verdictOf(&yes, &lat, &kind, &bound)
			if _, err := c.Step(f); err != nil {
				t.Fatal(err)
			}
			b := c.st.Best
			if prev > 0 && b.Score > prev {
				t.Fatalf("seed %d, trial %d: the best went from %.4f to %.4f us (%s)", seed, spec.TrialID, prev, b.Score, b.ScheduleID)
			}
			prev = b.Score
			if base := c.st.Baseline; base != nil && b.Score > base.Score {
				t.Fatalf("seed %d, trial %d: the best %.4f us is slower than the baseline %.4f us", seed, spec.TrialID, b.Score, base.Score)
			}
		}
		if sp := c.Speedup(); sp == nil || *sp < 1 {
			t.Errorf("seed %d: speedup %v below 1", seed, sp)
		}
	}
}

// TestFasterBaselineIsKept: a baseline within the tie band of the best but
// faster becomes the best, even when it is not simpler (here the best is a
// depth-1 point, simpler than the default's depth 2).
func TestFasterBaselineIsKept(t *testing.T) {
	c := New()
	s := startEvent()
	if _, err := c.Step(s); err != nil {
		t.Fatal(err)
	}
	lat, base := 100.0, 99.5
	kept := Record{Time: epoch, Status: "kept", LatencyUS: &lat, Kind: c.st.LatencyKind,
		Point: []byte(`{"pipelining_depth": 1}`), Description: "an agent's point"}
	if _, err := c.Step(kept); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Record{Time: epoch, Status: "baseline", LatencyUS: &base, Kind: c.st.LatencyKind,
		Point: []byte(`{}`), Description: "the default"}); err != nil {
		t.Fatal(err)
	}
	if b := c.st.Best; b.LatencyUS != base {
		t.Fatalf("best %.2f us (%s), want the baseline's %.2f us", b.LatencyUS, b.ScheduleID, base)
	}
	if sp := c.Speedup(); sp == nil || *sp != 1 {
		t.Fatalf("speedup %v, want 1", sp)
	}
}
