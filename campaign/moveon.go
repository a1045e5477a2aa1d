package campaign

import (
	"fmt"
	"time"
)

// Criterion is the outcome of the move-on check.
type Criterion struct {
	Stop   bool   `json:"stop"`
	Reason string `json:"reason"`
}

const headroom = "headroom remains: keep optimizing"

// moveOn checks MOVE_ON_CRITERIA in the reference's order with its exact
// wording (§6.3), then the campaign budget. Overnight campaigns skip the
// plateau, roofline and speedup criteria: only time and budget end them.
func (c *Campaign) moveOn(now time.Time) (bool, string) {
	st := &c.st
	m := st.Settings.MoveOn
	night := st.Settings.Overnight
	if !night && m.ConsecutiveReverts > 0 && st.ConsecutiveReverts >= m.ConsecutiveReverts {
		return true, fmt.Sprintf("plateau: %d consecutive reverts (threshold %d)", st.ConsecutiveReverts, m.ConsecutiveReverts)
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
