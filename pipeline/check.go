package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Finding rules. The first seven are hazards; the last two are advisory.
const (
	RuleLDSRead    = "lds-raw"       // a fragment load reads a slot whose global load is not complete (or never ran)
	RuleLDSWrite   = "lds-war"       // a global load overwrites a slot a fragment load still reads
	RuleRegRead    = "reg-raw"       // an MMA reads a quadrant whose fragment load is not complete
	RuleRegWrite   = "reg-war"       // a fragment load overwrites a quadrant before its MMA consumed it
	RuleWrongData  = "wrong-data"    // an MMA reads another k-block's data (wrong or stale stage)
	RulePrologue   = "prologue"      // the prologue does not leave what the first iteration reads
	RuleReorder    = "reorder"       // the reorder put a cross-stage fragment before a same-partition MMA
	RuleExcessWait = "excess-wait"   // advisory: a derived wait drains ops the consumer does not need
	RuleDeadLoad   = "dead-prologue" // advisory: a prologue fragment load nobody reads
	RuleCoverage   = "coverage"      // an output quadrant is not computed exactly once per k-step
)

// Finding is one hazard (or advisory) of a schedule, at a place of the
// body: partition (half) and mini-iter (1-based; 0 in the prologue), op and
// the LDS stage involved (-1 none).
type Finding struct {
	Rule     string `json:"rule"`
	Advisory bool   `json:"advisory"`
	Half     int    `json:"half"` // partition within an iteration, -1 for the prologue or a body-wide finding
	Mini     int    `json:"mini_iter"`
	Op       string `json:"op"`
	Stage    int    `json:"stage"`
	Message  string `json:"message"`
}

func (f Finding) String() string {
	var where []string
	if f.Half >= 0 {
		where = append(where, fmt.Sprintf("half %d", f.Half))
	}
	switch {
	case f.Mini > 0:
		where = append(where, fmt.Sprintf("mini-iter %d", f.Mini))
	case f.Rule == RuleCoverage:
		where = append(where, "body")
	default:
		where = append(where, "prologue")
	}
	where = append(where, f.Op)
	if f.Stage >= 0 {
		where = append(where, fmt.Sprintf("stage %d", f.Stage))
	}
	return fmt.Sprintf("[%s] %s: %s", f.Rule, strings.Join(where, ", "), f.Message)
}

// Report is the checker's verdict.
type Report struct {
	Findings []Finding // hazards first, then advisories, each in stream order
}

// Hazards are the findings that make a schedule unsafe.
func (r Report) Hazards() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if !f.Advisory {
			out = append(out, f)
		}
	}
	return out
}

// Safe reports whether the schedule has no hazard.
func (r Report) Safe() bool { return len(r.Hazards()) == 0 }

// MarshalJSON writes {"safe", "hazards" (a count), "findings"}.
func (r Report) MarshalJSON() ([]byte, error) {
	findings := r.Findings
	if findings == nil {
		findings = []Finding{}
	}
	return json.Marshal(struct {
		Safe     bool      `json:"safe"`
		Hazards  int       `json:"hazards"`
		Findings []Finding `json:"findings"`
	}{r.Safe(), len(r.Hazards()), findings})
}

// checkIterations is how many main iterations the checker unrolls: the
// first (fed by the prologue) and two steady-state ones, enough for every
// register and LDS slot to be written and read across each half boundary.
const checkIterations = 3

// Check proves a schedule or reports its hazards. The model: one wave
// issues the prologue, a full drain, then the body of every partition of
// every iteration in issue order (IssueOrder); a load completes only when a
// wait drains it (waits never rely on timing); the waits are the ones the
// schedule's edge rules derive (for each consumer, drain the global (vm) and
// LDS (lgkm) counters, which complete in issue order, down to the newest
// producer a rule covers). The prologue's own waits are exact. Against that
// it runs the data flow: which k-block every LDS slot and register
// quadrant holds, and whether each op's inputs are complete.
func Check(s *Schedule) Report {
	_, findings := analyze(s, checkIterations)
	return Report{Findings: findings}
}

// inst is one issued op of the unrolled stream.
type inst struct {
	op     Op
	mini   int // 1-based mini-iter, 0 in the prologue
	iter   int // -1 in the prologue
	part   int // partition (prologue: 0)
	half   int // global half = k-block the partition computes (iter*P + part), -1 in the prologue
	stage  int // absolute LDS stage of a load, -1 otherwise
	seq    int
	origin string // "body", "prologue", "bootstrap"

	reads slotKey // a fragment load's slot
	kblk  int     // the k-block a load wrote / a fragment load copied

	// planned waits before issue: drain the counter down to (and
	// including) this op; nil = no wait.
	waitVM, waitLDS *inst
	vmcnt, lgkmcnt  int  // the waits as counter values (ops left outstanding), -1 = no wait
	drain           bool // a full drain before this op (after the prologue)
	halfStart       bool // the first op of a partition (a barrier precedes it)
}

func (in *inst) where() string {
	if in.iter < 0 {
		return "the prologue"
	}
	return fmt.Sprintf("iteration %d half %d mini-iter %d", in.iter, in.part, in.mini)
}

type slotKey struct {
	stage   int
	operand string
	sub     int
}

type slotState struct {
	loaded bool
	kblk   int
	writer *inst
}

type regState struct {
	valid   bool
	kblk    int
	stage   int // the stage its fragment load read
	writer  *inst
	history []regState // overwritten values, newest last
}

type checker struct {
	s        *Schedule
	rules    []EdgeRule
	stream   []*inst
	slots    map[slotKey]*slotState
	regs     map[[2]int]*regState // (0=A/1=B, sub)
	vm, lds  []*inst              // in flight, issue order
	findings []Finding
	seen     map[string]bool
	usedBy   map[*inst]bool // fragment loads whose value an MMA consumed
}

func analyze(s *Schedule, iters int) ([]*inst, []Finding) {
	c := &checker{s: s, rules: s.Rules(), slots: map[slotKey]*slotState{}, regs: map[[2]int]*regState{},
		seen: map[string]bool{}, usedBy: map[*inst]bool{}}
	order, reorder := s.IssueOrder()
	for _, f := range reorder {
		c.report(f)
	}
	c.prologue(order)
	for it := range iters {
		for p := 0; p < s.Partitions; p++ {
			for i, pl := range order {
				in := c.newInst(pl.Op, pl.Mini, it, p, "body")
				in.halfStart = i == 0
				in.drain = i == 0 && it == 0 && p == 0 // the prologue's drain
				c.issue(in)
			}
		}
	}
	c.deadPrologue()
	c.coverage()
	var hazards, advisories []Finding
	for _, f := range c.findings {
		if f.Advisory {
			advisories = append(advisories, f)
		} else {
			hazards = append(hazards, f)
		}
	}
	return c.stream, append(hazards, advisories...)
}

func (c *checker) newInst(o Op, mini, iter, part int, origin string) *inst {
	in := &inst{op: o, mini: mini, iter: iter, part: part, half: -1, stage: -1, seq: len(c.stream), origin: origin}
	if iter >= 0 {
		in.half = iter*c.s.Partitions + part
	}
	if cl := o.Kind.Class(); cl == GlobalLoad || cl == FragmentLoad {
		in.stage = (part + o.Stage.offset()) % c.s.Partitions
	}
	return in
}

// prologue issues the derived or explicit prologue and the bootstrap, with
// exact waits, then drains both counters.
func (c *checker) prologue(order []Placed) {
	ops := c.s.Prologue.Ops
	if c.s.Prologue.Form == PrologueDerived {
		for stage := 0; stage < c.s.Partitions; stage++ {
			for _, k := range []Kind{LoadA, LoadB} {
				for sub := 0; sub < c.s.Quadrants; sub++ {
					rel := Same
					if stage != 0 {
						rel = Cross
					}
					in := c.newInst(Op{Kind: k, Sub: sub, Stage: rel}, 0, -1, 0, "prologue")
					c.issue(in)
				}
			}
		}
		ops = derivedFragments(order)
	}
	for _, o := range ops {
		c.issue(c.newInst(o, 0, -1, 0, "prologue"))
	}
	for _, o := range c.s.Prologue.Bootstrap {
		c.issue(c.newInst(o, 0, -1, 0, "bootstrap"))
	}
	c.vm, c.lds = nil, nil
}

// derivedFragments models the fragment part of derive_prologue_from_program
// (its loads fill every stage s with k-block s): for each register
// quadrant the partition's issue order reads before writing, the last
// fragment load of that quadrant in the order, as declared (its stage taken
// relative to partition 0).
func derivedFragments(order []Placed) []Op {
	var ops []Op
	written := map[[2]int]bool{}
	need := map[[2]int]bool{}
	var needOrder [][2]int
	for _, p := range order {
		switch p.Op.Kind {
		case MMALoadA, MMALoadB:
			written[regIndex(p.Op.Kind, p.Op.Sub)] = true
		case MMA:
			for _, r := range [][2]int{{0, p.Op.Quadrant[0]}, {1, p.Op.Quadrant[1]}} {
				if !written[r] && !need[r] {
					need[r] = true
					needOrder = append(needOrder, r)
				}
			}
		}
	}
	for _, r := range needOrder {
		var last *Op
		for i := range order {
			if o := order[i].Op; o.Kind.Class() == FragmentLoad && regIndex(o.Kind, o.Sub) == r {
				last = &order[i].Op
			}
		}
		if last != nil {
			ops = append(ops, *last)
		}
	}
	return ops
}

func regIndex(k Kind, sub int) [2]int {
	if k.Operand() == "B" {
		return [2]int{1, sub}
	}
	return [2]int{0, sub}
}

func regName(r [2]int) string { return fmt.Sprintf("%s_quad[%d]", "AB"[r[0]:r[0]+1], r[1]) }

// producer is one in-flight op a consumer depends on.
type producer struct {
	in   *inst
	rule string // the hazard if it is still in flight at issue
	what string // the resource, for messages
}

func (c *checker) slot(k slotKey) *slotState {
	st := c.slots[k]
	if st == nil {
		st = &slotState{}
		c.slots[k] = st
	}
	return st
}

func (c *checker) reg(r [2]int) *regState {
	st := c.regs[r]
	if st == nil {
		st = &regState{}
		c.regs[r] = st
	}
	return st
}

func inFlight(list []*inst, in *inst) bool {
	return slices.Contains(list, in)
}

// producers lists the in-flight ops the consumer truly depends on.
func (c *checker) producers(in *inst) []producer {
	var out []producer
	switch in.op.Kind.Class() {
	case FragmentLoad:
		k := slotKey{in.stage, in.op.Kind.Operand(), in.op.Sub}
		if w := c.slot(k).writer; w != nil && inFlight(c.vm, w) {
			out = append(out, producer{w, RuleLDSRead, fmt.Sprintf("LDS stage %d %s sub %d", k.stage, k.operand, k.sub)})
		}
	case MMAClass:
		for _, r := range [][2]int{{0, in.op.Quadrant[0]}, {1, in.op.Quadrant[1]}} {
			if w := c.reg(r).writer; w != nil && inFlight(c.lds, w) {
				out = append(out, producer{w, RuleRegRead, regName(r)})
			}
		}
	case GlobalLoad:
		k := slotKey{in.stage, in.op.Kind.Operand(), in.op.Sub}
		for _, f := range c.lds {
			if f.reads == k {
				out = append(out, producer{f, RuleLDSWrite, fmt.Sprintf("LDS stage %d %s sub %d", k.stage, k.operand, k.sub)})
			}
		}
	}
	return out
}

func (r EdgeRule) inScope(p, consumer *inst) bool {
	switch r.Scope {
	case SameHalf:
		return p.half == consumer.half
	case CrossHalf:
		return p.half != consumer.half
	}
	return true
}

// plannedWaits derives the waits of the edge rules before a main-loop
// consumer: the newest covered producer per counter.
func (c *checker) plannedWaits(in *inst, deps []producer) (vm, lds *inst) {
	newest := func(cur, x *inst) *inst {
		if cur == nil || x.seq > cur.seq {
			return x
		}
		return cur
	}
	for _, r := range c.rules {
		if r.To != in.op.Kind.Class() {
			continue
		}
		var cands []*inst
		if r.ConfigMatch {
			for _, p := range deps {
				if p.in.op.Kind.Class() == r.From {
					cands = append(cands, p.in)
				}
			}
		} else {
			list := c.vm
			if r.From == FragmentLoad {
				list = c.lds
			}
			cands = append(cands, list...)
		}
		for _, p := range cands {
			if !r.inScope(p, in) {
				continue
			}
			if r.From == GlobalLoad {
				vm = newest(vm, p)
			} else {
				lds = newest(lds, p)
			}
		}
	}
	return vm, lds
}

// outstandingAfter is a wait's counter value: how many ops of the list
// were issued after the one it drains to (-1: no wait).
func outstandingAfter(list []*inst, upTo *inst) int {
	if upTo == nil {
		return -1
	}
	for i, x := range list {
		if x == upTo {
			return len(list) - 1 - i
		}
	}
	return -1 // already complete: no wait needed
}

func retire(list []*inst, upTo *inst) []*inst {
	if upTo == nil {
		return list
	}
	for i, x := range list {
		if x == upTo {
			return append([]*inst(nil), list[i+1:]...)
		}
	}
	return list
}

func (c *checker) issue(in *inst) {
	c.stream = append(c.stream, in)
	deps := c.producers(in)
	if in.iter < 0 { // the prologue's waits are exact
		for _, p := range deps {
			if p.in.op.Kind.Class() == GlobalLoad && (in.waitVM == nil || p.in.seq > in.waitVM.seq) {
				in.waitVM = p.in
			} else if p.in.op.Kind.Class() == FragmentLoad && (in.waitLDS == nil || p.in.seq > in.waitLDS.seq) {
				in.waitLDS = p.in
			}
		}
	} else {
		in.waitVM, in.waitLDS = c.plannedWaits(in, deps)
	}
	in.vmcnt, in.lgkmcnt = outstandingAfter(c.vm, in.waitVM), outstandingAfter(c.lds, in.waitLDS)
	c.excess(in, deps)
	c.vm, c.lds = retire(c.vm, in.waitVM), retire(c.lds, in.waitLDS)
	for _, p := range deps {
		if inFlight(c.vm, p.in) || inFlight(c.lds, p.in) {
			c.missingWait(in, p)
		}
	}
	c.execute(in)
}

// excess reports a derived wait that drains past every true producer.
func (c *checker) excess(in *inst, deps []producer) {
	for _, w := range []*inst{in.waitVM, in.waitLDS} {
		if w == nil {
			continue
		}
		var need *inst
		for _, p := range deps {
			if p.in.op.Kind.Class() == w.op.Kind.Class() && (need == nil || p.in.seq > need.seq) {
				need = p.in
			}
		}
		if need == w {
			continue
		}
		counter := "global (vm)"
		if w.op.Kind.Class() == FragmentLoad {
			counter = "LDS (lgkm)"
		}
		msg := fmt.Sprintf("the derived wait drains the %s counter down to %s of %s, which %s does not depend on",
			counter, w.op, w.where(), in.op)
		if need != nil {
			msg += fmt.Sprintf("; draining to %s of %s would do", need.op, need.where())
		}
		c.report(c.finding(in, RuleExcessWait, true, -1, msg+" (a rule without config match drains its whole class)"))
	}
}

func (c *checker) finding(in *inst, rule string, advisory bool, stage int, msg string) Finding {
	half := in.part
	if in.iter < 0 {
		half = -1
	}
	return Finding{Rule: rule, Advisory: advisory, Half: half, Mini: in.mini, Op: in.op.String(), Stage: stage, Message: msg}
}

// missingWait explains a true dependency no derived wait drained.
func (c *checker) missingWait(in *inst, p producer) {
	from, to := p.in.op.Kind.Class(), in.op.Kind.Class()
	var why string
	var scopes []string
	for _, r := range c.rules {
		if r.From == from && r.To == to {
			scopes = append(scopes, string(r.Scope))
		}
	}
	crossHalf := p.in.half != in.half
	switch {
	case len(scopes) == 0:
		why = fmt.Sprintf("the edge rules have no %s -> %s rule, so no wait is derived for it", from, to)
	case crossHalf && from == FragmentLoad && to == MMAClass:
		why = fmt.Sprintf("fragment LDS loads are not drained at the half boundary: the edge rules order "+
			"FRAGMENT_LOAD -> MMA only within a half (%s), and this is a cross-half register flow; append the "+
			"cross_half rule", strings.Join(scopes, ", "))
	default:
		why = fmt.Sprintf("the %s -> %s rules (%s) do not cover a producer in %s", from, to, strings.Join(scopes, ", "),
			map[bool]string{true: "another half", false: "the same half"}[crossHalf])
	}
	var msg string
	switch p.rule {
	case RuleLDSRead:
		msg = fmt.Sprintf("reads %s while %s of %s (the global load that fills it) is still in flight; %s",
			p.what, p.in.op, p.in.where(), why)
	case RuleRegRead:
		msg = fmt.Sprintf("reads %s while its fragment load %s of %s is still in flight; %s",
			p.what, p.in.op, p.in.where(), why)
	case RuleLDSWrite:
		msg = fmt.Sprintf("overwrites %s while the fragment load %s of %s still reads it; %s",
			p.what, p.in.op, p.in.where(), why)
	}
	stage := in.stage
	if stage < 0 {
		stage = p.in.stage
	}
	c.report(c.finding(in, p.rule, false, stage, msg))
}

// execute applies an op's data flow.
func (c *checker) execute(in *inst) {
	P := c.s.Partitions
	switch in.op.Kind.Class() {
	case GlobalLoad:
		st := c.slot(slotKey{in.stage, in.op.Kind.Operand(), in.op.Sub})
		if st.loaded {
			st.kblk += P // the next k-block this stage holds
		} else {
			st.kblk = in.stage
		}
		st.loaded, st.writer, in.kblk = true, in, st.kblk
		c.vm = append(c.vm, in)
	case FragmentLoad:
		k := slotKey{in.stage, in.op.Kind.Operand(), in.op.Sub}
		in.reads = k
		st := c.slot(k)
		if !st.loaded {
			c.report(c.finding(in, RuleLDSRead, false, in.stage, fmt.Sprintf("reads LDS stage %d %s sub %d, which no "+
				"global load has filled", k.stage, k.operand, k.sub)))
		}
		in.kblk = st.kblk
		if !st.loaded {
			in.kblk = -1
		}
		r := c.reg(regIndex(in.op.Kind, in.op.Sub))
		old := *r
		old.history = nil
		r.history = append(r.history, old)
		if len(r.history) > 4 {
			r.history = r.history[1:]
		}
		r.valid, r.kblk, r.stage, r.writer = true, in.kblk, in.stage, in
		c.lds = append(c.lds, in)
	case MMAClass:
		for _, ri := range [][2]int{{0, in.op.Quadrant[0]}, {1, in.op.Quadrant[1]}} {
			c.consume(in, ri)
		}
	}
}

// consume checks that an MMA reads its half's k-block in a register.
func (c *checker) consume(in *inst, ri [2]int) {
	r := c.reg(ri)
	name := regName(ri)
	P := c.s.Partitions
	want := in.half
	wantStage := want % P
	if r.valid && r.kblk == want {
		c.usedBy[r.writer] = true
		return
	}
	for i := len(r.history) - 1; i >= 0; i-- {
		if h := r.history[i]; h.valid && h.kblk == want && h.writer != nil {
			over := r.writer
			if i < len(r.history)-1 {
				over = r.history[i+1].writer
			}
			c.report(c.finding(in, RuleRegWrite, false, wantStage, fmt.Sprintf("%s held k-block %d (from %s of %s) "+
				"but %s of %s overwrote it before %s consumed it", name, want, h.writer.op, h.writer.where(),
				over.op, over.where(), in.op)))
			return
		}
	}
	if !r.valid || r.writer == nil {
		if in.iter == 0 {
			c.report(c.finding(in, RulePrologue, false, wantStage, fmt.Sprintf("reads %s, which neither the prologue nor "+
				"the body before it loads: the prologue must produce what the first iteration reads", name)))
		} else {
			c.report(c.finding(in, RuleWrongData, false, wantStage, fmt.Sprintf("reads %s, which nothing has loaded", name)))
		}
		return
	}
	w := r.writer
	if w.iter < 0 {
		msg := fmt.Sprintf("reads %s holding k=%d·BK data (%s of the %s read stage %d) but the first main "+
			"iteration's half %d computes k=%d·BK (stage %d): the prologue does not produce what the first "+
			"iteration reads", name, r.kblk, w.op, w.origin, r.stage, in.part, want, wantStage)
		if c.s.Prologue.Form == PrologueDerived && w.origin == "prologue" && w.op.Stage == Cross {
			msg += "; the derived prologue copies the body's cross-stage fragment load, which at k_base=0 reads " +
				"the next stage; a bootstrap pair of same-stage fragment loads after the prologue fixes it"
		}
		c.report(c.finding(in, RulePrologue, false, wantStage, msg))
		return
	}
	var why string
	switch {
	case r.kblk < 0:
		why = fmt.Sprintf("its fragment load %s of %s read an LDS slot no global load had filled", w.op, w.where())
	case r.stage != wantStage:
		why = fmt.Sprintf("its fragment load %s of %s read stage %d (k-block %d), but k-block %d lives in stage %d: "+
			"a wrong-stage fragment", w.op, w.where(), r.stage, r.kblk, want, wantStage)
	case r.kblk < want:
		why = fmt.Sprintf("its fragment load %s of %s read stage %d before the global load of k-block %d "+
			"refilled it (stale data)", w.op, w.where(), r.stage, want)
	default:
		why = fmt.Sprintf("its fragment load %s of %s read stage %d after a global load had already "+
			"overwritten k-block %d with k-block %d", w.op, w.where(), r.stage, want, r.kblk)
	}
	c.report(c.finding(in, RuleWrongData, false, wantStage, fmt.Sprintf("reads %s holding k-block %d, but half %d "+
		"computes k-block %d: %s", name, r.kblk, in.part, want, why)))
}

// coverage checks that every k-step (one partition of one iteration)
// computes each output quadrant (m, n) of the Quadrants x Quadrants tile
// exactly once: an MMA accumulates A_quad[m]·B_quad[n] of its k-block into
// C(m, n), so a quadrant computed twice adds that k-block twice and one
// never computed misses it; either way the GEMM is wrong, however well the
// loads are ordered. Every partition runs the same body, so each miss or
// repeat is reported once per partition, at the partition's first
// iteration.
func (c *checker) coverage() {
	q := c.s.Quadrants
	type key struct{ half, m, n int }
	count := map[key]int{}
	second := map[key]*inst{}
	for _, in := range c.stream {
		if in.iter < 0 || in.op.Kind.Class() != MMAClass {
			continue
		}
		k := key{in.half, in.op.Quadrant[0], in.op.Quadrant[1]}
		count[k]++
		if count[k] == 2 {
			second[k] = in
		}
	}
	for p := 0; p < c.s.Partitions; p++ {
		for m := range q {
			for n := range q {
				k := key{p, m, n} // iteration 0: half index p
				switch got := count[k]; {
				case got == 0:
					c.report(Finding{Rule: RuleCoverage, Half: p, Op: fmt.Sprintf("MMA(%d,%d)", m, n), Stage: -1,
						Message: fmt.Sprintf("the body computes output quadrant (%d,%d) never in a k-step: no MMA(%d,%d) "+
							"accumulates A_quad[%d]·B_quad[%d], so C(%d,%d) misses every k-block", m, n, m, n, m, n, m, n)})
				case got > 1:
					in := second[k]
					c.report(c.finding(in, RuleCoverage, false, -1, fmt.Sprintf("the body computes output quadrant "+
						"(%d,%d) twice in a k-step (%d MMA(%d,%d)): C(%d,%d) accumulates each k-block %d times",
						m, n, got, m, n, m, n, got)))
				}
			}
		}
	}
}

// deadPrologue notes prologue fragment loads whose value no MMA read.
func (c *checker) deadPrologue() {
	for _, in := range c.stream {
		if in.iter >= 0 || in.op.Kind.Class() != FragmentLoad {
			continue
		}
		ri := regIndex(in.op.Kind, in.op.Sub)
		if !c.usedBy[in] {
			c.report(c.finding(in, RuleDeadLoad, true, in.stage, fmt.Sprintf("the %s's %s into %s is overwritten "+
				"before any MMA reads it: the prologue produces more than the first iteration reads",
				in.origin, in.op, regName(ri))))
		}
	}
}

func (c *checker) report(f Finding) {
	key := fmt.Sprintf("%s|%d|%d|%s|%s", f.Rule, f.Half, f.Mini, f.Op, f.Message)
	if f.Rule != RuleExcessWait && f.Rule != RuleReorder {
		key = fmt.Sprintf("%s|%d|%d|%s|%d", f.Rule, f.Half, f.Mini, f.Op, f.Stage)
	}
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	c.findings = append(c.findings, f)
}
