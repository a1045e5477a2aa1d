package campaign

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/schedule"
)

func (c *Campaign) command(now time.Time, e Command) (Decision, error) {
	st := &c.st
	var d Decision
	if e.Budget != nil {
		if err := e.Budget.Check(); err != nil {
			return d, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if e.MoveOn != nil {
		if err := e.MoveOn.Check(); err != nil {
			return d, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	note := ""
	if e.Note != "" {
		note = ": " + e.Note
	}
	switch e.Op {
	case OpPause:
		if st.Status != StatusOptimizing {
			return d, fmt.Errorf("%w: pause: campaign is %s", ErrInvalid, st.Status)
		}
		st.Status = StatusPaused
		st.PausedAt = &now
		st.PauseReason = "paused by operator" + note
		d.Log = append(d.Log, "paused"+note)
	case OpResume:
		if st.Status != StatusPaused {
			return d, fmt.Errorf("%w: resume: campaign is %s", ErrInvalid, st.Status)
		}
		c.closePause(now)
		st.Status = StatusOptimizing
		st.PauseReason, st.Refusals = "", 0
		d.Log = append(d.Log, "resumed"+note)
		if msg := c.requeueDefault(); msg != "" {
			d.Log = append(d.Log, msg)
		}
	case OpStop:
		if st.Status == StatusDone {
			return d, fmt.Errorf("%w: stop: campaign is already done", ErrInvalid)
		}
		c.finish(now, "stopped by operator"+note)
		d.Log = append(d.Log, "campaign done: "+st.MoveOnReason)
	case OpReopen:
		return c.reopen(now, e, note)
	case OpBudget:
		if e.Budget == nil {
			return d, fmt.Errorf("%w: budget command without a budget", ErrInvalid)
		}
		st.Settings.Budget = *e.Budget
		d.Log = append(d.Log, fmt.Sprintf("budget set: %d experiments, %s minutes (0 = unbounded)", e.Budget.Iterations, num(e.Budget.Minutes)))
	case OpCriteria:
		if e.MoveOn == nil {
			return d, fmt.Errorf("%w: criteria command without criteria", ErrInvalid)
		}
		st.Settings.MoveOn = *e.MoveOn
		d.Log = append(d.Log, "move-on criteria set")
	case OpNote:
		text, err := noteText(e.Note)
		if err != nil {
			return d, fmt.Errorf("%w: note: %v", ErrInvalid, err)
		}
		st.Notes = append(st.Notes, Note{Time: now, Text: text})
		d.Log = append(d.Log, "note: "+text)
	case OpWithdraw:
		d.Log = append(d.Log, c.withdraw(e.Trials)...)
	case OpDriverOpened:
		var lim RunLimits
		if e.Run != nil {
			if err := e.Run.Check(); err != nil {
				return d, fmt.Errorf("%w: %v", ErrInvalid, err)
			}
			lim = *e.Run
		}
		if gap := now.Sub(st.LastEventAt).Seconds(); st.Status == StatusOptimizing && gap > 0 {
			st.PausedSeconds += gap
			d.Log = append(d.Log, fmt.Sprintf("resumed after %s with no driver: that time is not campaign time", time.Duration(gap*float64(time.Second)).Round(time.Second)))
		}
		st.LastRun = nil
		if !lim.Unlimited() {
			st.LastRun = &RunAllowance{RunLimits: lim, TrialsAtOpen: st.NextTrial, MinutesAtOpen: c.ElapsedMinutes(now)}
		}
	default:
		return d, fmt.Errorf("%w: unknown command %q", ErrInvalid, e.Op)
	}
	if st.Status != StatusDone {
		if stop, reason := c.moveOn(now); stop {
			c.finish(now, reason)
			d.Log = append(d.Log, "campaign done: "+reason)
		}
	}
	return d, nil
}

// requeueDefault puts the canonical default back at the head of the queue
// when the campaign has no baseline and has not evaluated the default
// (its trial was refused, say, and a refused point is not queued again):
// a resumed campaign measures its baseline first.
func (c *Campaign) requeueDefault() string {
	if c.st.Baseline != nil {
		return ""
	}
	def := c.project(schedule.Default())
	id := def.ID()
	if _, tried := c.st.Tried[id]; tried {
		return ""
	}
	for _, q := range c.st.Queue {
		if q.ScheduleID == id {
			return ""
		}
	}
	c.st.Queue = append([]Queued{{ScheduleID: id, Point: def, Source: SourceDefault}}, c.st.Queue...)
	return "the canonical default " + id + " is queued first (no baseline yet)"
}

// Note is an operator's note: free text kept in the campaign's state and
// shown in its reports, with when it was made.
type Note struct {
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// noteText is a note's text without surrounding blanks, refused when
// empty or longer than MaxNoteBytes.
func noteText(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", errors.New("the note is empty")
	case len(s) > MaxNoteBytes:
		return "", fmt.Errorf("the note has %d bytes, more than %d", len(s), MaxNoteBytes)
	}
	return s, nil
}

// reopen makes a done campaign live again (docs/spec/rules.md R3): the plateau counters start
// over and the budget and criteria may be replaced in the same command; a
// criterion that would stop it again at once refuses the reopen.
func (c *Campaign) reopen(now time.Time, e Command, note string) (Decision, error) {
	st := &c.st
	if st.Status != StatusDone {
		return Decision{}, fmt.Errorf("%w: reopen: campaign is %s", ErrInvalid, st.Status)
	}
	saved := *st
	if e.Budget != nil {
		st.Settings.Budget = *e.Budget
	}
	if e.MoveOn != nil {
		st.Settings.MoveOn = *e.MoveOn
	}
	st.ConsecutiveReverts, st.NonImprovement = 0, 0
	st.Exhausted = false
	if stop, reason := c.moveOn(now); stop {
		*st = saved
		hint := "change the budget or criteria"
		budget := st.Settings.Budget // the campaign's, or the one the reopen gives
		if e.Budget != nil {
			budget = *e.Budget
		}
		if budget.Iterations > 0 && st.ExperimentsRun >= budget.Iterations {
			// The budget is a total, not an addition.
			hint = fmt.Sprintf("a budget is a total that counts the %d experiments already run: for 20 more, reopen with a budget of %d experiments (0: unbounded)",
				st.ExperimentsRun, st.ExperimentsRun+20)
		}
		return Decision{}, fmt.Errorf("%w: reopen: %s still holds; %s", ErrInvalid, reason, hint)
	}
	if st.DoneAt != nil {
		st.PausedSeconds += max(0, now.Sub(*st.DoneAt).Seconds())
		st.DoneAt = nil
	}
	st.Status = StatusOptimizing
	st.MoveOnReason = ""
	return Decision{Log: []string{"reopened" + note}}, nil
}

// withdraw takes back trials in flight that no evaluator started: they
// leave the campaign's trials in flight, their points may be proposed
// again, and an opening point (a warm seed, the baseline) waits for its
// turn again. A trial not in flight is left out (it finished meanwhile).
func (c *Campaign) withdraw(trials []int) []string {
	st := &c.st
	var gone []string
	for _, id := range trials {
		inf, ok := st.InFlight[id]
		if !ok {
			continue
		}
		delete(st.InFlight, id)
		if st.Tried[inf.ScheduleID] == id {
			delete(st.Tried, inf.ScheduleID)
		}
		if inf.Opening {
			if p, err := parsePoint(inf.Spec.Point); err == nil {
				st.Queue = append([]Queued{{ScheduleID: inf.ScheduleID, Point: p, Source: inf.Spec.Source}}, st.Queue...)
			}
		}
		gone = append(gone, fmt.Sprint(id))
	}
	if len(gone) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("withdrew %d queued trial(s) no evaluator had started (%s): no outcome of theirs will come", len(gone), strings.Join(gone, ", "))}
}
