package campaign

import (
	"fmt"
	"math"
	"time"
)

// Criterion is the outcome of the move-on check.
type Criterion struct {
	Stop   bool   `json:"stop"`
	Reason string `json:"reason"`
}

const headroom = "headroom remains: keep optimizing"

// moveOn checks MOVE_ON_CRITERIA in the reference's order with its exact
// wording (docs/spec/loop.md §5), then the campaign budget. Overnight campaigns skip the
// plateau, roofline and speedup criteria: only time and budget end them.
func (c *Campaign) moveOn(now time.Time) (bool, string) {
	st := &c.st
	m := st.Settings.MoveOn
	night := st.Settings.Overnight
	if limit := c.plateauThreshold(); !night && limit > 0 && st.ConsecutiveReverts >= limit {
		return true, fmt.Sprintf("plateau: %d consecutive reverts (threshold %d%s)", st.ConsecutiveReverts, limit, c.plateauScalingNote())
	}
	if pct := c.bestPct(); !night && m.PctRooflineTarget > 0 && pct != nil && *pct <= m.PctRooflineTarget {
		return true, fmt.Sprintf("near roofline: best at %.1f%% of the streamed-bytes floor (target <= %.0f%%)", *pct, m.PctRooflineTarget)
	}
	elapsed := c.ElapsedMinutes(now)
	if m.MaxMinutes > 0 && elapsed >= m.MaxMinutes {
		return true, fmt.Sprintf("time budget exhausted: %.0f min (max %s min)", elapsed, num(m.MaxMinutes))
	}
	if sp := c.Speedup(); !night && m.SpeedupTarget > 0 && sp != nil && *sp >= m.SpeedupTarget {
		return true, fmt.Sprintf("strong speedup achieved: %.2fx vs baseline (target %.1fx)", *sp, m.SpeedupTarget)
	}
	b := st.Settings.Budget
	if b.Iterations > 0 && st.ExperimentsRun >= b.Iterations {
		return true, fmt.Sprintf("budget exhausted: %d experiments (budget %d)", st.ExperimentsRun, b.Iterations)
	}
	if b.Minutes > 0 && elapsed >= b.Minutes {
		return true, fmt.Sprintf("budget exhausted: %.0f min (budget %s min)", elapsed, num(b.Minutes))
	}
	return false, headroom
}

// Plateau scaling bounds: an evaluator at or above costlyTrialSeconds per
// trial keeps the configured threshold; one at or below cheapTrialSeconds
// doubles it. An untried space of smallSpace points or fewer keeps it; one
// of largeSpace or more doubles it. Between, both scale with the logarithm.
const (
	cheapTrialSeconds  = 1.0
	costlyTrialSeconds = 60.0
	smallSpace         = 64.0
	largeSpace         = 4096.0
)

// plateauThreshold is the number of consecutive reverts that ends a
// non-overnight campaign: MoveOn.ConsecutiveReverts, or with
// PlateauScaling that base × cost factor × space factor (each in [1, 2],
// so at most 4× the base). A cheap evaluator makes patience cheap, and a
// large untried space makes a run of reverts weaker evidence of a
// plateau. The cost is the mean issue-to-outcome time of the campaign's
// evaluated trials (factor 1 until one is timed).
func (c *Campaign) plateauThreshold() int {
	base, cost, space := c.plateauFactors()
	return int(math.Round(float64(base) * cost * space))
}

// plateauFactors are plateauThreshold's base and its two factors (1 and 1
// when the threshold is not scaled).
func (c *Campaign) plateauFactors() (base int, cost, space float64) {
	st := &c.st
	base = st.Settings.MoveOn.ConsecutiveReverts
	if base <= 0 || !st.Settings.PlateauScaling {
		return base, 1, 1
	}
	logBetween := func(x, lo, hi float64) float64 {
		x = min(max(x, lo), hi)
		return math.Log(x/lo) / math.Log(hi/lo)
	}
	cost = 1.0
	if st.TimedTrials > 0 {
		mean := st.TrialSeconds / float64(st.TimedTrials)
		cost = 2 - logBetween(mean, cheapTrialSeconds, costlyTrialSeconds)
	}
	space = 1 + logBetween(c.remainingPoints(), smallSpace, largeSpace)
	return base, cost, space
}

// plateauScalingNote says how a scaled plateau threshold came from the
// configured one, for the texts a user reads beside it ("" when the
// threshold is the configured number itself): a campaign started with
// --max-reverts 5 that moves on after 15 reverts says why.
func (c *Campaign) plateauScalingNote() string {
	base, cost, space := c.plateauFactors()
	if limit := c.plateauThreshold(); limit == base {
		return ""
	}
	return fmt.Sprintf(" = max-reverts %d × %.2f for trial cost × %.2f for untried space", base, cost, space)
}

// finish marks the campaign done.
func (c *Campaign) finish(now time.Time, reason string) {
	c.closePause(now)
	c.st.DoneAt = &now
	c.st.Status = StatusDone
	c.st.MoveOnReason = reason
}

// closePause ends an open pause window at now.
func (c *Campaign) closePause(now time.Time) {
	if c.st.PausedAt != nil {
		c.st.PausedSeconds += max(0, now.Sub(*c.st.PausedAt).Seconds())
		c.st.PausedAt = nil
	}
}

func (c *Campaign) tick(now time.Time) Decision {
	var d Decision
	if c.st.Status == StatusDone {
		return d
	}
	if stop, reason := c.moveOn(now); stop {
		c.finish(now, reason)
		d.Log = append(d.Log, "campaign done: "+reason)
	}
	return d
}

// bestPct is the best's pct_of_roofline, if known.
func (c *Campaign) bestPct() *float64 {
	if c.st.Best == nil {
		return nil
	}
	return c.st.Best.PctOfRoofline
}

// Speedup is baseline / best (rounded to 3 places, as the reference
// stores it), comparing the scores keep/revert used; nil until both exist.
func (c *Campaign) Speedup() *float64 {
	b, base := c.st.Best, c.st.Baseline
	if b == nil || base == nil || b.Score <= 0 || base.Score <= 0 {
		return nil
	}
	return new(round3(base.Score / b.Score))
}
