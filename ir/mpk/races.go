package mpk

import (
	"slices"
	"sort"

	"github.com/amk-dev/amk/ir"
)

// Bounds on the race check's work: the happens-before table is tasks^2 bits
// (128 MiB at the task limit), and each pair of views is compared once.
const (
	maxRaceTasks = 1 << 15
	maxRacePairs = 1 << 27
)

// access is one task's view of a base tensor.
type access struct {
	task  int
	view  Tensor
	write bool
}

// races reports unordered tasks whose views of one base tensor overlap where
// at least one of them writes: two writers (overlap) or a writer and a
// reader (race). Ordered means one task is a transitive predecessor of the
// other through trigger -> dependent_event (or launching event) edges.
func (c *checker) races() {
	if n := len(c.g.Tasks); n > maxRaceTasks {
		c.warnf(CodeRace, "races not checked: %d tasks, over the %d the happens-before table is sized for", n, maxRaceTasks)
		return
	}
	p := c.program()
	if p == nil {
		return
	}
	graph := ir.BuildGraph(p)
	order := graph.TopologicalOrder()
	if order == nil {
		return
	}
	n := len(c.g.Tasks)
	words := (n + 63) / 64
	anc := make([]uint64, n*words)
	for _, t := range order {
		row := anc[int(t)*words : int(t+1)*words]
		for _, pr := range graph.Pred(int(t)) {
			prow := anc[int(pr)*words : int(pr+1)*words]
			for i := range row {
				row[i] |= prow[i]
			}
			row[pr/64] |= 1 << (uint(pr) % 64)
		}
	}
	before := func(a, b int) bool { return anc[b*words+a/64]&(1<<(uint(a)%64)) != 0 }
	ordered := func(a, b int) bool { return before(a, b) || before(b, a) }

	byBase := map[string][]access{}
	for t := range c.g.Tasks {
		for _, v := range c.g.Tasks[t].Inputs {
			byBase[v.BasePtr] = append(byBase[v.BasePtr], access{t, v, false})
		}
		for _, v := range c.g.Tasks[t].Outputs {
			byBase[v.BasePtr] = append(byBase[v.BasePtr], access{t, v, true})
		}
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	pairs := 0
	for _, base := range bases {
		if base == "nullptr" {
			continue
		}
		var writes, reads []access
		for _, a := range byBase[base] {
			if a.write {
				writes = append(writes, a)
			} else {
				reads = append(reads, a)
			}
		}
		if pairs += len(writes) * (len(writes) + len(reads)); pairs > maxRacePairs {
			c.warnf(CodeRace, "races checked only up to tensor %q: more than %d view pairs to compare", base, maxRacePairs)
			return
		}
		for i, w := range writes {
			for _, o := range writes[i+1:] {
				if lo, hi, ok := overlap(w.view, o.view); ok && w.task != o.task && !ordered(w.task, o.task) {
					c.errf(CodeOverlap, "tasks %d and %d both write bytes [%d, %d) of %q with no event between them", w.task, o.task, lo, hi, base)
				}
			}
			for _, r := range reads {
				if lo, hi, ok := overlap(w.view, r.view); ok && w.task != r.task && !ordered(w.task, r.task) {
					c.errf(CodeRace, "task %d reads bytes [%d, %d) of %q that task %d writes, with no event ordering them", r.task, lo, hi, base, w.task)
				}
			}
		}
	}
}

// overlap reports whether two views of one base can touch a common byte, and
// the common byte range of their footprints. Views with the same strides and
// data type are compared as boxes (exact for row-major views); any others by
// their footprints (conservative).
func overlap(a, b Tensor) (lo, hi int64, ok bool) {
	alo, ahi := a.Footprint()
	blo, bhi := b.Footprint()
	lo, hi = max(alo, blo), min(ahi, bhi)
	if lo >= hi {
		return 0, 0, false
	}
	bits, known := dataTypeBits[a.DataType]
	if !known || bits%8 != 0 || a.DataType != b.DataType || !slices.Equal(a.Strides, b.Strides) || len(a.Dims) != len(b.Dims) {
		return lo, hi, true
	}
	elem := int64(bits / 8)
	if a.Offset%elem != 0 || b.Offset%elem != 0 {
		return lo, hi, true
	}
	dims := make([]int, len(a.Strides))
	for i := range dims {
		dims[i] = i
	}
	sort.SliceStable(dims, func(i, j int) bool { return a.Strides[dims[i]] > a.Strides[dims[j]] })
	ao, bo := a.Offset/elem, b.Offset/elem
	for _, d := range dims {
		s := a.Strides[d]
		if s <= 0 {
			return lo, hi, true
		}
		ac, bc := ao/s, bo/s
		ao, bo = ao-ac*s, bo-bc*s
		if ac+a.Dims[d] <= bc || bc+b.Dims[d] <= ac {
			return 0, 0, false
		}
	}
	return lo, hi, true
}
