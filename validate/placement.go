package validate

import (
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// checkOnChip is step 6: an SMEM/REGISTER buffer moves no data across SMs,
// so all its users must sit on one SM.
func (c *checker) checkOnChip() {
	p := c.p
	onChip := false
	for i := range p.Buffers {
		if p.Buffers[i].Space.OnChip() {
			onChip = true
			break
		}
	}
	if !onChip {
		return
	}
	users := make([]bool, len(p.Buffers))
	type use struct{ buf, sm int }
	var placed []use
	for i := range p.Tasks {
		t := &p.Tasks[i]
		for _, list := range [][]int{t.Inputs, t.Outputs} {
			for _, b := range list {
				if buf := c.buffer(b); buf == nil || !buf.Space.OnChip() {
					continue
				}
				users[b] = true
				if t.SM != nil {
					placed = append(placed, use{b, *t.SM})
				}
			}
		}
	}
	slices.SortFunc(placed, func(x, y use) int {
		if x.buf != y.buf {
			return x.buf - y.buf
		}
		return cmpInt64(int64(x.sm), int64(y.sm))
	})
	placed = slices.Compact(placed)
	sms := make([][]int, len(p.Buffers))
	for _, u := range placed {
		sms[u.buf] = append(sms[u.buf], u.sm)
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if !b.Space.OnChip() {
			continue
		}
		switch {
		case len(sms[i]) > 1:
			c.errf(CodeOnChipCrossSM, -1, b.ID, -1, "on-chip buffer '%s'(#%d, %s) is used across SMs %s, counters give ordering, not cross-SM data; promote to GLOBAL_SCRATCH/HBM or co-locate on one SM", b.Name, b.ID, b.Space, pyInts(sms[i]))
		case users[i] && len(sms[i]) == 0:
			c.warnf(CodeOnChipUnplaced, -1, b.ID, -1, "on-chip buffer '%s'(#%d) requires same-SM placement (unverified until sm_assignment runs)", b.Name, b.ID)
		}
	}
}

// checkSMQueues is step 7, once any task is placed: each SM runs its tasks
// serially in task-list order (the order amk's loader builds its per-SM
// queues in, docs/spec/rules.md R21), so a dependency between two tasks on one SM must point
// forward in the list; and every placement must name an SM of the target.
func (c *checker) checkSMQueues() {
	p := c.p
	placed := false
	for i := range p.Tasks {
		if p.Tasks[i].SM != nil {
			placed = true
			break
		}
	}
	if !placed {
		return
	}
	direct := false
	for a := 0; a < c.g.N; a++ {
		sa := p.Tasks[a].SM
		if sa == nil {
			continue
		}
		for _, b := range c.g.Succ(a) {
			sb := p.Tasks[b].SM
			if sb != nil && *sb == *sa && a >= int(b) {
				direct = true
				c.errf(CodeSMQueueOrder, int(b), -1, -1, "SM %d queue order violates dependency %d->%d (producer must precede consumer in the same SM's serial queue)", *sa, a, b)
			}
		}
	}
	if !direct && c.order != nil {
		c.checkQueueCycle()
	}
	if p.Target == nil {
		return
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if t.SM != nil && (*t.SM < 0 || *t.SM >= p.Target.NumSMs) {
			c.errf(CodeSMRange, t.ID, -1, -1, "task %d assigned to SM %d out of range [0,%d)", t.ID, *t.SM, p.Target.NumSMs)
		}
	}
}

// checkQueueCycle is the rest of step 7 (docs/spec/rules.md R32): each SM's
// queue must be a linear extension of the dependency order, transitively,
// not only for the direct edges the reference checks. Two tasks of one SM
// with no direct edge between them can still be ordered through tasks on
// other SMs; if the later one in the queue must run first, the SM blocks on
// its head for ever. The queues deadlock iff the dependency graph plus the
// queue order has a cycle; one such cycle is reported.
func (c *checker) checkQueueCycle() {
	p := c.p
	cyc := ir.QueueCycle(p, c.g)
	if len(cyc) < 2 || ir.QueueNext(p)[cyc[0]] != cyc[1] {
		return // no deadlock, or a cycle of dependencies (step 3 reported it)
	}
	a, b := cyc[0], cyc[1]
	path := make([]string, 0, len(cyc))
	for _, t := range cyc[1:] {
		path = append(path, p.Tasks[t].Describe())
	}
	path = append(path, p.Tasks[a].Describe())
	c.errf(CodeSMQueueOrder, int(a), -1, -1, "SM %d queue runs task %d before task %d, but task %d can only start after task %d (%s, through other SMs): the SM blocks on its queue head for ever (deadlock)",
		*p.Tasks[a].SM, a, b, a, b, strings.Join(path, " -> "))
}
