package validate

import "slices"

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
	for a := 0; a < c.g.N; a++ {
		sa := p.Tasks[a].SM
		if sa == nil {
			continue
		}
		for _, b := range c.g.Succ(a) {
			sb := p.Tasks[b].SM
			if sb != nil && *sb == *sa && a >= int(b) {
				c.errf(CodeSMQueueOrder, int(b), -1, -1, "SM %d queue order violates dependency %d->%d (producer must precede consumer in the same SM's serial queue)", *sa, a, b)
			}
		}
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
