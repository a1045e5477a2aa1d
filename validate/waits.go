package validate

import "strings"

// checkWaits is step 2: every wait must be satisfiable (1 <= threshold <=
// #producers), and a wait on a counter with several producers must be an
// all-join (threshold == #producers): a counter counts, it does not say which
// producer finished.
func (c *checker) checkWaits() {
	p := c.p
	count := make([]int, len(p.Counters))
	var stray map[int]int // producers of counters that do not exist (already reported)
	for i := range p.Tasks {
		oc := p.Tasks[i].OutCounter
		if oc >= 0 && oc < len(count) {
			count[oc]++
			continue
		}
		if stray == nil {
			stray = map[int]int{}
		}
		stray[oc]++
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		for _, w := range t.Waits {
			var np int
			if w.Counter >= 0 && w.Counter < len(count) {
				np = count[w.Counter]
			} else {
				np = stray[w.Counter]
			}
			switch {
			case np == 0:
				c.errf(CodeUnsatisfiable, t.ID, -1, w.Counter, "task %d (%s) waits on counter %d with NO producer, unsatisfiable (deadlock)", t.ID, t.Label, w.Counter)
			case w.Threshold > np:
				c.errf(CodeUnsatisfiable, t.ID, -1, w.Counter, "task %d (%s) threshold %d > %d producers of counter %d, unsatisfiable (deadlock)", t.ID, t.Label, w.Threshold, np, w.Counter)
			case np > 1 && w.Threshold != np:
				c.errf(CodePartialJoin, t.ID, -1, w.Counter, "task %d (%s) partial wait threshold %d on shared counter %d (%d producers), ambiguous which-producer RACE; a shared counter must be an all-join (threshold == %d)", t.ID, t.Label, w.Threshold, w.Counter, np, np)
			}
		}
	}
}

// checkAcyclic is step 3: the producer -> consumer graph must be a DAG; a
// cycle is reported with a witness from an iterative DFS.
func (c *checker) checkAcyclic() {
	if c.order != nil {
		return
	}
	witness, task := "cycle: <not localized>", -1
	if cyc := c.g.FindCycle(); len(cyc) > 0 {
		task = int(cyc[0])
		parts := make([]string, 0, len(cyc)+1)
		for _, x := range cyc {
			parts = append(parts, c.p.Tasks[x].Describe())
		}
		parts = append(parts, c.p.Tasks[cyc[0]].Describe())
		witness = "cycle: " + strings.Join(parts, " -> ")
	}
	c.err(CodeCycle, task, -1, -1, "producer→consumer graph has a CYCLE, structural deadlock. "+witness)
}
