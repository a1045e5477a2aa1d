package validate

import "slices"

// checkMemoryModel is docs/spec/rules.md R31, the memory model of
// docs/spec/ir.md §1, §2 and §4 that the reference states but does not check:
//
//   - WEIGHT, CONST and IO_INPUT buffers are read-only. They are bound from
//     outside (the model's state dict, the step's inputs), shared by every
//     step and, on a device, by every launch; a task that writes one corrupts
//     what every later reader, and the next token, sees. The race proofs skip
//     these kinds because nothing may write them, so the write itself is the
//     error.
//   - Every counter starts at 0: the host zeroes the counters before each
//     launch. A program that gives a counter another init describes waits
//     the device never sees (a wait the file says is met at start would wait
//     for its producers on the device, or the reverse), so the proofs, made
//     on the file, would not hold for the run.
func (c *checker) checkMemoryModel() {
	p := c.p
	for i := range p.Counters {
		if v := p.Counters[i].Init; v != 0 {
			c.errf(CodeCounterInit, -1, -1, i, "counter %d starts at %d: every counter starts at 0 (the host zeroes them before each launch), so the waits on it cannot be proved against the count the file gives", i, v)
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		for k, b := range t.Outputs {
			buf := c.buffer(b)
			if buf == nil || !buf.Kind.ReadOnly() || slices.Contains(t.Outputs[:k], b) {
				continue
			}
			c.errf(CodeReadOnlyWrite, t.ID, b, -1, "task %d (%s) writes %s buffer #%d ('%s'), which is read-only: weights, constants and inputs are bound from outside and never written", t.ID, t.Label, buf.Kind, b, buf.Name)
		}
	}
}
