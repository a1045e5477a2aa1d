package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// Variant is one point of the schedule space of the FP8 GEMM micro-kernel
// (two partitions, 2x2 register quadrants): the schedule is that kernel's
// knob. The generator keeps the 4-wave shape, one MMA per mini-iter:
//
//   - MMAOrder: the quadrant of mini-iter i (a permutation of the four);
//   - Rotation (cross-stage fragment rotation): a quadrant whose last
//     reader is not the last mini-iter is reloaded from the cross stage in
//     the mini-iter after that reader, for the next partition; every other
//     quadrant is loaded from the own stage one mini-iter before its first
//     reader (or in the first mini-iter);
//   - Bootstrap (prologue form): the derived prologue plus a same-stage
//     bootstrap load of every rotated quadrant, or the derived prologue
//     alone;
//   - Ordering: identity or double_buffer_reorder.
//
// Global loads refill the own stage, one per mini-iter in the order A0,
// B0, B1, A1, each no earlier than the mini-iter after the last same-stage
// fragment load of its slot (after the MMA of the last mini-iter when none
// is left). A rotated schedule appends the cross_half rule to the default
// edge rules.
type Variant struct {
	MMAOrder  [4][2]int
	Rotation  bool
	Bootstrap bool
	Ordering  string
}

// Name is a short, unique spelling of the variant.
func (v Variant) Name() string {
	q := make([]string, 4)
	for i, m := range v.MMAOrder {
		q[i] = fmt.Sprintf("%d%d", m[0], m[1])
	}
	rot, pro := "off", "derived"
	if v.Rotation {
		rot = "on"
	}
	if v.Bootstrap {
		pro = "derived+bootstrap"
	}
	return fmt.Sprintf("mma=%s rotation=%s prologue=%s ordering=%s", strings.Join(q, "-"), rot, pro, v.Ordering)
}

// Seed4Wave is the variant that generates AMD's 4-wave schedule
// (testdata/amd-4wave-fp8.json, docs/spec/formats.md §3).
var Seed4Wave = Variant{MMAOrder: [4][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}}, Rotation: true, Bootstrap: true,
	Ordering: Identity}

// Schedule generates the variant's schedule.
func (v Variant) Schedule() *Schedule {
	const minis = 4
	type reg struct {
		kind Kind
		sub  int
	}
	regs := []reg{{MMALoadA, 0}, {MMALoadA, 1}, {MMALoadB, 0}, {MMALoadB, 1}}
	reads := func(r reg, mini int) bool {
		q := v.MMAOrder[mini]
		return r.sub == q[0] && r.kind == MMALoadA || r.sub == q[1] && r.kind == MMALoadB
	}
	frags := make([][]Op, minis)
	sameRead := map[reg]int{} // last mini-iter with a same-stage fragment load of the slot
	var bootstrap []Op
	for _, r := range regs {
		first, last := -1, -1
		for i := range minis {
			if reads(r, i) {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 {
			continue
		}
		if v.Rotation && last < minis-1 {
			frags[last+1] = append(frags[last+1], Op{Kind: r.kind, Sub: r.sub, Stage: Cross})
			bootstrap = append(bootstrap, Op{Kind: r.kind, Sub: r.sub, Stage: Same})
			continue
		}
		at := max(0, first-1)
		frags[at] = append(frags[at], Op{Kind: r.kind, Sub: r.sub, Stage: Same})
		sameRead[r] = at
	}
	before := make([][]Op, minis)
	var after []Op
	next := 0
	for _, l := range []reg{{LoadA, 0}, {LoadB, 0}, {LoadB, 1}, {LoadA, 1}} {
		earliest := 0
		fragKind := MMALoadA
		if l.kind == LoadB {
			fragKind = MMALoadB
		}
		if at, ok := sameRead[reg{fragKind, l.sub}]; ok {
			earliest = at + 1
		}
		at := max(earliest, next)
		op := Op{Kind: l.kind, Sub: l.sub, Stage: Same}
		if at >= minis {
			after = append(after, op)
			continue
		}
		before[at] = append(before[at], op)
		next = at + 1
	}
	s := &Schedule{Name: v.Name(), Partitions: Partitions, Quadrants: 2, Ordering: v.Ordering,
		RuleBase: RulesDoubleBufferDefault, Prologue: Prologue{Form: PrologueDerived}}
	if v.Rotation {
		s.RuleAppend = []EdgeRule{CrossHalfFragmentRule}
	}
	if v.Bootstrap {
		s.Prologue.Bootstrap = bootstrap
	}
	for i := range minis {
		ops := append(append(append([]Op{}, before[i]...), frags[i]...), Op{Kind: MMA, Quadrant: v.MMAOrder[i]})
		if i == minis-1 {
			ops = append(ops, after...)
		}
		s.Body = append(s.Body, MiniIter{Ops: ops})
	}
	return s
}

// Variants is the whole space: 24 MMA orders x rotation x prologue form x
// ordering, without the duplicates a bootstrap with nothing rotated makes.
func Variants() []Variant {
	quads := [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}}
	var out []Variant
	for _, perm := range permutations(4) {
		var order [4][2]int
		for i, j := range perm {
			order[i] = quads[j]
		}
		for _, rot := range []bool{true, false} {
			for _, boot := range []bool{true, false} {
				if boot && !rot {
					continue
				}
				for _, ord := range []string{Identity, DoubleBufferReorder} {
					out = append(out, Variant{MMAOrder: order, Rotation: rot, Bootstrap: boot, Ordering: ord})
				}
			}
		}
	}
	return out
}

func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// Candidate is one variant's verdict: proved safe (and then simulated) or
// rejected with its hazards.
type Candidate struct {
	Variant  Variant
	Schedule *Schedule
	Hazards  []Finding
	Timing   *Timing // nil unless safe
}

// Tune is Loop 1 for the pipeline schedule: take budget variants (all of
// them when budget <= 0 or beyond the space), the seed's 4-wave variant
// first and then in Variants' order, prove each with the checker, simulate
// the safe ones on the target and rank them by predicted MMA utilisation
// (best first, then fewer cycles per iteration, then the name); the
// rejected follow, by name.
func Tune(t *ir.GpuTarget, budget int) ([]Candidate, error) {
	if t == nil || t.Pipeline == nil {
		return nil, fmt.Errorf("target has no pipeline timing data (the AMD targets have it)")
	}
	variants := append([]Variant{Seed4Wave}, slices.DeleteFunc(Variants(), func(v Variant) bool { return v == Seed4Wave })...)
	if budget > 0 && budget < len(variants) {
		variants = variants[:budget]
	}
	var out []Candidate
	for _, v := range variants {
		s := v.Schedule()
		c := Candidate{Variant: v, Schedule: s, Hazards: Check(s).Hazards()}
		if len(c.Hazards) == 0 {
			tm, err := Simulate(s, t)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", v.Name(), err)
			}
			c.Timing = &tm
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		switch {
		case a.Timing != nil && b.Timing == nil:
			return -1
		case a.Timing == nil && b.Timing != nil:
			return 1
		case a.Timing != nil:
			if c := cmp.Compare(b.Timing.MMAUtilisation, a.Timing.MMAUtilisation); c != 0 {
				return c
			}
			if c := cmp.Compare(a.Timing.CyclesPerIteration, b.Timing.CyclesPerIteration); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Variant.Name(), b.Variant.Name())
	})
	return out, nil
}
