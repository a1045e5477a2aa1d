package mpk

import (
	"fmt"
	"strconv"
	"strings"
)

// simulate runs one iteration the way MPK's runtime does: the begin task (or,
// in a graph without one, first_tasks) starts it; a task runs once its
// dependent_event has fired; an event fires when its count reaches
// num_triggers and then, by type, enqueues its task range round-robin on
// the workers. It reports events that never fire, launch and queue
// problems, and iteration-number inconsistencies.
func (c *checker) simulate() {
	g := c.g
	n := len(g.Tasks)
	launched := make([]int, n)
	ran := make([]bool, n)
	count := make([]int, len(g.Events))
	fired := make([]bool, len(g.Events))
	waiting := make([][]int, len(g.Events))
	var ready []int
	hasBegin, hasDependent, end := false, false, -1
	for t := range g.Tasks {
		hasBegin = hasBegin || g.Tasks[t].TaskType == TaskBeginTaskGraph
	}
	for e, ev := range g.Events {
		switch ev.Kind() {
		case KindLaunchDependentTasks:
			hasDependent = true
		case KindEndOfTaskGraph:
			if end < 0 {
				end = e
			}
		}
	}
	launch := func(t int) {
		launched[t]++
		if launched[t] == 2 {
			what := "it runs twice"
			if trig := g.Tasks[t].TriggerEvent; trig.Valid() {
				what += " and over-counts e" + strconv.Itoa(trig.Index())
			}
			c.errf(CodeLaunch, "%s is launched twice in one iteration: %s", c.taskName(t), what)
		}
		if launched[t] > 1 {
			return
		}
		if dep := g.Tasks[t].DependentEvent; dep.Valid() && !fired[dep.Index()] {
			waiting[dep.Index()] = append(waiting[dep.Index()], t)
			return
		}
		ready = append(ready, t)
	}
	nextWorker, dependentFired := 0, 0
	fire := func(e int) {
		fired[e] = true
		ev := g.Events[e]
		k := ev.Kind()
		switch {
		case k == KindLaunchDependentTasks:
			dependentFired++
			if dependentFired == 2 {
				c.errf(CodeIteration, "a second EVENT_LAUNCH_DEPENDENT_TASKS event (e%d) fires in one iteration: the iteration number advances twice per pass, so waits for num_triggers x iteration outrun the counts", e)
			}
		case k.Launches() && hasDependent && dependentFired == 0:
			c.errf(CodeIteration, "event %s launches tasks [%d, %d) before the iteration's EVENT_LAUNCH_DEPENDENT_TASKS event fires: they carry the previous iteration number, so the last pass's counts already satisfy their waits",
				c.eventName(e), ev.FirstTaskID, ev.LastTaskID)
		}
		if k.Launches() {
			size := int(ev.LastTaskID - ev.FirstTaskID)
			if per := (size + c.opt.Workers - 1) / c.opt.Workers; per > c.opt.QueueLen {
				c.errf(CodeQueue, "event %s enqueues %d tasks round-robin on %d workers: worker %d receives %d, and its queue holds %d",
					c.eventName(e), size, c.opt.Workers, nextWorker, per, c.opt.QueueLen)
			}
			nextWorker = (nextWorker + size) % c.opt.Workers
			for t := ev.FirstTaskID; t < ev.LastTaskID; t++ {
				launch(int(t))
			}
		}
		ready = append(ready, waiting[e]...)
		waiting[e] = nil
	}
	if hasBegin {
		for t := range g.Tasks {
			if g.Tasks[t].TaskType == TaskBeginTaskGraph {
				launch(t)
			}
		}
	} else {
		for _, f := range g.FirstTasks {
			launch(int(f))
		}
	}
	for len(ready) > 0 {
		t := ready[0]
		ready = ready[1:]
		ran[t] = true
		if trig := g.Tasks[t].TriggerEvent; trig.Valid() {
			e := trig.Index()
			count[e]++
			if count[e] == g.Events[e].NumTriggers && !fired[e] {
				fire(e)
			}
		}
	}
	c.deadlocks(launched, ran, count, fired, end)
}

// deadlocks reports the events that never fire although tasks need them:
// tasks wait on them, they would launch tasks, or (the end-of-graph event)
// the next iteration needs them. A root event is one whose shortfall no
// other stuck event explains; the events stuck only because of a root are
// summarised.
func (c *checker) deadlocks(launched []int, ran []bool, count []int, fired []bool, end int) {
	g := c.g
	launchers := make([][]int, len(g.Tasks))
	for e, ev := range g.Events {
		if ev.Kind().Launches() {
			for t := ev.FirstTaskID; t < ev.LastTaskID; t++ {
				launchers[t] = append(launchers[t], e)
			}
		}
	}
	// blocked: task t did not run because an event it needs did not fire.
	blocked := func(t int) bool {
		if dep := g.Tasks[t].DependentEvent; launched[t] > 0 && dep.Valid() && !fired[dep.Index()] {
			return true
		}
		for _, e := range launchers[t] {
			if launched[t] == 0 && !fired[e] {
				return true
			}
		}
		return false
	}
	var consequences []int
	for e, ev := range g.Events {
		launches := ev.Kind().Launches() && ev.LastTaskID > ev.FirstTaskID
		if fired[e] || len(c.waiters[e]) == 0 && !launches && e != end || ev.NumTriggers == 0 && e != end {
			continue
		}
		var notRun, notLaunched []int
		explained := false
		for _, t := range c.triggers[e] {
			if ran[t] {
				continue
			}
			notRun = append(notRun, t)
			if launched[t] == 0 {
				notLaunched = append(notLaunched, t)
			}
			explained = explained || blocked(t)
		}
		if explained {
			consequences = append(consequences, e)
			continue
		}
		var needs []string
		if len(c.waiters[e]) > 0 {
			needs = append(needs, "tasks "+list(c.waiters[e])+" wait on it")
		}
		if launches {
			needs = append(needs, fmt.Sprintf("tasks [%d, %d) it launches never start", ev.FirstTaskID, ev.LastTaskID))
		}
		if e == end {
			needs = append(needs, "the next iteration never starts")
		}
		switch {
		case len(c.triggers[e]) < ev.NumTriggers:
			c.errf(CodeDeadlock, "event %s can never collect its num_triggers %d: only %d task(s) %s trigger it; %s",
				c.eventName(e), ev.NumTriggers, len(c.triggers[e]), list(c.triggers[e]), strings.Join(needs, "; "))
		default:
			c.errf(CodeDeadlock, "event %s never collects its num_triggers %d (reached %d): of the tasks %s that trigger it, %s never ran (%s never launched); %s",
				c.eventName(e), ev.NumTriggers, count[e], list(c.triggers[e]), list(notRun), list(notLaunched), strings.Join(needs, "; "))
		}
	}
	if len(consequences) > 0 && c.counts[CodeCycle] == 0 {
		c.errf(CodeDeadlock, "%d more event(s) never fire because tasks that trigger them are stuck behind the events above: e%s",
			len(consequences), joinInts(consequences, ", e"))
	}
	if end < 0 {
		c.warnf(CodeDeadlock, "no EVENT_END_OF_TASK_GRAPH event: MPK's runtime starts every iteration from one")
	}
	var never []int
	for t := range g.Tasks {
		if launched[t] == 0 && g.Tasks[t].TaskType != TaskTerminate && !blocked(t) {
			never = append(never, t)
		}
	}
	if len(never) > 0 {
		c.warnf(CodeLaunch, "tasks %s are never launched in an iteration: no event's range holds them", list(never))
	}
}

func joinInts(xs []int, sep string) string {
	if len(xs) > 12 {
		return joinInts(xs[:12], sep) + " ... (" + strconv.Itoa(len(xs)-12) + " more)"
	}
	var s strings.Builder
	for i, x := range xs {
		if i > 0 {
			s.WriteString(sep)
		}
		s.WriteString(strconv.Itoa(x))
	}
	return s.String()
}
