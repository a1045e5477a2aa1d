package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The differential check of the hazard checker: an independent machine
// runs the issue stream the checker proves, with exactly the waits it
// derives (vmcnt/lgkmcnt counter values, the prologue drain), and computes
// the tile's GEMM symbolically. Whatever Check calls safe must compute, in
// every output quadrant, each k-block's A·B product exactly once, whatever
// order the in-flight loads complete in.

// poison marks a value the machine cannot pin down: read while a write to
// it was in flight, so any completion order could change it.
const poison = -2

// slot is an LDS (stage, operand, sub-tile).
type slot struct {
	stage   int
	operand string
	sub     int
}

// flight is an issued load that has not been waited for: until a wait
// drains it, it may complete at any moment.
type flight struct {
	in    *inst
	slot  slot   // the LDS slot a global load writes or a fragment load reads
	reg   [2]int // a fragment load's register quadrant
	value int    // the k-block a fragment load read (poison if unstable)
}

// machine is the symbolic state of one wave.
type machine struct {
	partitions int
	lds        map[slot]int   // k-block held (missing: never filled)
	loads      map[slot]int   // global loads issued per slot (the next fills k-block stage + n·P)
	regs       map[[2]int]int // register quadrant -> k-block (missing: never loaded)
	vm, lgkm   []*flight      // in flight, in issue order
	acc        map[[2]int][]string
}

// drain completes in-flight ops, oldest first, until at most keep remain.
func (m *machine) drainVM(keep int) {
	for len(m.vm) > keep {
		f := m.vm[0]
		m.vm = m.vm[1:]
		m.lds[f.slot] = f.value
	}
}

func (m *machine) drainLGKM(keep int) {
	for len(m.lgkm) > keep {
		f := m.lgkm[0]
		m.lgkm = m.lgkm[1:]
		m.regs[f.reg] = f.value
	}
}

func (m *machine) issue(in *inst) {
	if in.drain {
		m.drainVM(0)
		m.drainLGKM(0)
	}
	if in.vmcnt >= 0 {
		m.drainVM(in.vmcnt)
	}
	if in.lgkmcnt >= 0 {
		m.drainLGKM(in.lgkmcnt)
	}
	switch in.op.Kind.Class() {
	case GlobalLoad:
		s := slot{in.stage, in.op.Kind.Operand(), in.op.Sub}
		kblk := s.stage + m.loads[s]*m.partitions
		m.loads[s]++
		// A fragment load still reading this slot may read either value.
		for _, f := range m.lgkm {
			if f.slot == s {
				f.value = poison
			}
		}
		m.vm = append(m.vm, &flight{in: in, slot: s, value: kblk})
	case FragmentLoad:
		s := slot{in.stage, in.op.Kind.Operand(), in.op.Sub}
		f := &flight{in: in, slot: s, reg: regIndex(in.op.Kind, in.op.Sub)}
		v, filled := m.lds[s]
		if !filled {
			v = poison
		}
		for _, g := range m.vm {
			if g.slot == s {
				v = poison // the slot may still change under the read
			}
		}
		f.value = v
		m.lgkm = append(m.lgkm, f)
	case MMAClass:
		q := in.op.Quadrant
		var k [2]int
		for i, r := range [][2]int{{0, q[0]}, {1, q[1]}} {
			v, loaded := m.regs[r]
			if !loaded {
				v = poison
			}
			for _, f := range m.lgkm {
				if f.reg == r {
					v = poison // the register may still change under the read
				}
			}
			k[i] = v
		}
		m.acc[q] = append(m.acc[q], fmt.Sprintf("A%d·B%d", k[0], k[1]))
	}
}

// runDataflow executes the stream Check proves and returns what is wrong
// with the tile it computes ("" when every quadrant accumulates A_k·B_k
// exactly once for every k-block of the unrolled iterations).
func runDataflow(s *Schedule) string {
	stream, _ := analyze(s, checkIterations)
	m := &machine{partitions: s.Partitions, lds: map[slot]int{}, loads: map[slot]int{}, regs: map[[2]int]int{},
		acc: map[[2]int][]string{}}
	for _, in := range stream {
		m.issue(in)
	}
	want := make([]string, 0, checkIterations*s.Partitions)
	for k := 0; k < checkIterations*s.Partitions; k++ {
		want = append(want, fmt.Sprintf("A%d·B%d", k, k))
	}
	var errs []string
	for a := 0; a < s.Quadrants; a++ {
		for b := 0; b < s.Quadrants; b++ {
			got := slices.Clone(m.acc[[2]int{a, b}])
			slices.Sort(got)
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(got, w) {
				errs = append(errs, fmt.Sprintf("C(%d,%d) = %s, want %s", a, b, strings.Join(got, " + "), strings.Join(w, " + ")))
			}
		}
	}
	return strings.Join(errs, "; ")
}

// checkAgainstDataflow fails when Check calls s safe and the machine
// computes a wrong tile.
func checkAgainstDataflow(t *testing.T, s *Schedule, what string) bool {
	t.Helper()
	if err := s.Validate(); err != nil {
		return false
	}
	r := Check(s)
	if !r.Safe() {
		return false
	}
	if bad := runDataflow(s); bad != "" {
		var listing strings.Builder
		for _, l := range Listing(s) {
			listing.WriteString("  " + l + "\n")
		}
		t.Fatalf("%s: Check says SAFE but the tile is wrong: %s\nlisting:\n%s", what, bad, listing.String())
	}
	return true
}

// TestDataflowOfTheSeeds: the machine computes the right tile for the safe
// schedules of testdata and the whole variant space, and a wrong one for
// the coverage mutant (so it can tell).
func TestDataflowOfTheSeeds(t *testing.T) {
	for _, name := range []string{"amd-4wave-fp8", "pingpong-default"} {
		if !checkAgainstDataflow(t, load(t, name), name) {
			t.Fatalf("%s is not safe", name)
		}
	}
	safe := 0
	for _, v := range Variants() {
		if checkAgainstDataflow(t, v.Schedule(), v.Name()) {
			safe++
		}
	}
	if safe == 0 {
		t.Fatal("no variant is safe")
	}
	s := load(t, "amd-4wave-fp8")
	s.Body[0].Ops[2].Quadrant = [2]int{0, 1}
	if bad := runDataflow(s); !strings.Contains(bad, "C(0,0)") || !strings.Contains(bad, "C(0,1)") {
		t.Fatalf("the machine does not see quadrant (0,1) twice and (0,0) never: %q", bad)
	}
}

// mutateSchedule applies one random edit to a copy of s: a changed
// quadrant, sub-tile or stage, a moved, dropped or repeated op, a changed
// rule, ordering or prologue.
func mutateSchedule(s *Schedule, rng *rand.Rand) *Schedule {
	c := *s
	c.Body = make([]MiniIter, len(s.Body))
	for i, m := range s.Body {
		c.Body[i] = MiniIter{Ops: slices.Clone(m.Ops)}
	}
	c.RuleAppend = slices.Clone(s.RuleAppend)
	c.Prologue.Ops = slices.Clone(s.Prologue.Ops)
	c.Prologue.Bootstrap = slices.Clone(s.Prologue.Bootstrap)
	mi := rng.IntN(len(c.Body))
	ops := c.Body[mi].Ops
	k := rng.IntN(len(ops))
	switch rng.IntN(9) {
	case 0:
		if ops[k].Kind == MMA {
			ops[k].Quadrant[rng.IntN(2)] = rng.IntN(c.Quadrants)
		}
	case 1:
		if ops[k].Kind.Class() == GlobalLoad || ops[k].Kind.Class() == FragmentLoad {
			ops[k].Sub = rng.IntN(c.Quadrants)
		}
	case 2:
		if ops[k].Stage == Same {
			ops[k].Stage = Cross
		} else if ops[k].Stage == Cross {
			ops[k].Stage = Same
		}
	case 3: // move an op to another mini-iter
		if len(ops) > 1 {
			o := ops[k]
			c.Body[mi].Ops = slices.Delete(ops, k, k+1)
			to := rng.IntN(len(c.Body))
			at := rng.IntN(len(c.Body[to].Ops) + 1)
			c.Body[to].Ops = slices.Insert(c.Body[to].Ops, at, o)
		}
	case 4: // swap two ops of the mini-iter
		j := rng.IntN(len(ops))
		ops[k], ops[j] = ops[j], ops[k]
	case 5: // drop an op
		if len(ops) > 1 {
			c.Body[mi].Ops = slices.Delete(ops, k, k+1)
		}
	case 6: // repeat an op
		if len(ops) < MaxOpsPerMini {
			c.Body[mi].Ops = slices.Insert(ops, k, ops[k])
		}
	case 7:
		if len(c.RuleAppend) > 0 && rng.IntN(2) == 0 {
			c.RuleAppend = c.RuleAppend[:len(c.RuleAppend)-1]
		} else {
			c.RuleAppend = append(c.RuleAppend, CrossHalfFragmentRule)
		}
	case 8:
		if c.Ordering == Identity {
			c.Ordering = DoubleBufferReorder
		} else {
			c.Ordering = Identity
		}
		if rng.IntN(2) == 0 && len(c.Prologue.Bootstrap) > 0 {
			c.Prologue.Bootstrap = c.Prologue.Bootstrap[:len(c.Prologue.Bootstrap)-1]
		}
	}
	return &c
}

// TestCheckAgreesWithDataflow is the bounded property test: random edits of
// the safe schedules, one to three at a time.
func TestCheckAgreesWithDataflow(t *testing.T) {
	bases := []*Schedule{load(t, "amd-4wave-fp8"), load(t, "pingpong-default")}
	for _, v := range Variants() {
		bases = append(bases, v.Schedule())
	}
	rng := rand.New(rand.NewPCG(4, 2))
	safe, total := 0, 0
	for i := range 3000 {
		s := bases[rng.IntN(len(bases))]
		for range 1 + rng.IntN(3) {
			s = mutateSchedule(s, rng)
		}
		total++
		if checkAgainstDataflow(t, s, fmt.Sprintf("mutant %d", i)) {
			safe++
		}
	}
	t.Logf("%d mutants, %d called safe and checked against the dataflow", total, safe)
	if safe < total/20 {
		t.Fatalf("only %d of %d mutants are safe: the property is barely exercised", safe, total)
	}
}

// FuzzCheckDataflow: the fuzzer's schedules (FuzzCheck's generator, and
// edits of the seed chosen by the bytes) never make Check call a wrong
// tile safe.
func FuzzCheckDataflow(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, uint64(1))
	f.Add([]byte("4wave"), uint64(7))
	seed := Seed4Wave.Schedule()
	f.Fuzz(func(t *testing.T, data []byte, edits uint64) {
		checkAgainstDataflow(t, scheduleFromBytes(data), "generated")
		rng := rand.New(rand.NewPCG(edits, uint64(len(data))))
		s := seed
		for range 1 + edits%4 {
			s = mutateSchedule(s, rng)
		}
		checkAgainstDataflow(t, s, "edited seed")
	})
}
