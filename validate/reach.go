package validate

import (
	"slices"

	"github.com/amk-dev/amk/ir"
)

// reacher answers happens-before questions on an acyclic program: "does task
// u strictly precede task v", i.e. is there a path u -> ... -> v of
// dependency edges. It never materialises the ancestor relation. Every answer
// is exact; see "Reachability" in doc.go for the method and its cost.
type reacher struct {
	p     *ir.Program
	g     *ir.Graph
	order []int32 // Kahn order
	topo  []int32 // task -> index in order

	slot []int32  // task -> bit of the current sweep's source set, -1 if none
	rows []uint64 // sweep scratch: (hi-lo+1) rows of w words
}

// maxSweepWords bounds the sources one sweep carries: 64 per word.
const maxSweepWords = 8

func newReacher(p *ir.Program, g *ir.Graph, order, topo []int32) *reacher {
	slot := make([]int32, len(p.Tasks))
	for i := range slot {
		slot[i] = -1
	}
	return &reacher{p: p, g: g, order: order, topo: topo, slot: slot}
}

// quick settles the cheap cases: 0 = u does not precede v (same task, or v
// not later in the topological order), 1 = a direct edge u -> v, -1 = unknown.
func (r *reacher) quick(u, v int32) int8 {
	if u == v || r.topo[u] >= r.topo[v] {
		return 0
	}
	// An edge u -> v exists iff v waits on u's (existing) out_counter.
	waits := r.p.Tasks[v].Waits
	if len(waits) <= 16 {
		oc := r.p.Tasks[u].OutCounter
		if oc < 0 || oc >= len(r.p.Counters) {
			return 0 // u signals nothing, so it precedes nothing
		}
		for _, w := range waits {
			if w.Counter == oc {
				return 1
			}
		}
		return -1
	}
	if _, found := slices.BinarySearch(r.g.Pred(int(v)), u); found {
		return 1
	}
	return -1
}

// sweepForward sets, for every task x at topological index i in [lo, hi],
// row i-lo (w words) to the set of source slots whose task reaches x (a
// source reaches itself). Sources must lie in [lo, hi].
func (r *reacher) sweepForward(lo, hi int32, w int) []uint64 {
	rows := r.scratch(int(hi-lo+1) * w)
	for i := lo; i <= hi; i++ {
		x := r.order[i]
		row := rows[int(i-lo)*w : int(i-lo+1)*w]
		if s := r.slot[x]; s >= 0 {
			row[s>>6] |= 1 << (uint(s) & 63)
		}
		for _, pd := range r.g.Pred(int(x)) {
			j := r.topo[pd]
			if j < lo {
				continue
			}
			orInto(row, rows[int(j-lo)*w:int(j-lo+1)*w])
		}
	}
	return rows
}

// sweepBackward sets, for every task x at topological index i in [lo, hi],
// row i-lo to the set of source slots that x reaches (itself included).
func (r *reacher) sweepBackward(lo, hi int32, w int) []uint64 {
	rows := r.scratch(int(hi-lo+1) * w)
	for i := hi; i >= lo; i-- {
		x := r.order[i]
		row := rows[int(i-lo)*w : int(i-lo+1)*w]
		if s := r.slot[x]; s >= 0 {
			row[s>>6] |= 1 << (uint(s) & 63)
		}
		for _, sc := range r.g.Succ(int(x)) {
			j := r.topo[sc]
			if j > hi {
				continue
			}
			orInto(row, rows[int(j-lo)*w:int(j-lo+1)*w])
		}
	}
	return rows
}

func (r *reacher) scratch(n int) []uint64 {
	if cap(r.rows) < n {
		r.rows = make([]uint64, n)
	}
	rows := r.rows[:n]
	clear(rows)
	return rows
}

func orInto(dst, src []uint64) {
	for k := range dst {
		dst[k] |= src[k]
	}
}

func hasBit(row []uint64, s int32) bool { return row[s>>6]&(1<<(uint(s)&63)) != 0 }

// setSlots assigns bits 0.. to the tasks of srcs (which must be distinct) and
// returns a function that clears them again.
func (r *reacher) setSlots(srcs []int32) func() {
	for k, s := range srcs {
		r.slot[s] = int32(k)
	}
	return func() {
		for _, s := range srcs {
			r.slot[s] = -1
		}
	}
}

func words(n int) int { return (n + 63) / 64 }

// query is one "does src strictly precede dst" question of a batch.
type query struct {
	src, dst int32
	ans      int8 // 0 no, 1 yes, -1 pending
}

// batch collects point queries and answers them together: cheap ones at once,
// the rest by forward sweeps whose sources are chunks of the distinct query
// sources in topological order, each sweep covering only the topological
// window from its first source to its last target.
type batch struct {
	r  *reacher
	qs []query
}

func (r *reacher) newBatch() *batch { return &batch{r: r} }

// add queues a question and returns its index for ok.
func (b *batch) add(u, v int32) int {
	b.qs = append(b.qs, query{src: u, dst: v, ans: b.r.quick(u, v)})
	return len(b.qs) - 1
}

func (b *batch) ok(i int) bool { return b.qs[i].ans == 1 }

func (b *batch) solve() {
	r := b.r
	var pending []int32
	for i := range b.qs {
		if b.qs[i].ans < 0 {
			pending = append(pending, int32(i))
		}
	}
	if len(pending) == 0 {
		return
	}
	slices.SortFunc(pending, func(x, y int32) int {
		return int(r.topo[b.qs[x].src]) - int(r.topo[b.qs[y].src])
	})
	const chunk = 64 * maxSweepWords
	for start := 0; start < len(pending); {
		// Take queries while their distinct sources fit one sweep.
		var srcs []int32
		end := start
		hi := int32(0)
		for end < len(pending) {
			q := &b.qs[pending[end]]
			if len(srcs) == 0 || srcs[len(srcs)-1] != q.src {
				if len(srcs) == chunk {
					break
				}
				srcs = append(srcs, q.src)
			}
			hi = max(hi, r.topo[q.dst])
			end++
		}
		lo := r.topo[srcs[0]]
		w := words(len(srcs))
		clearSlots := r.setSlots(srcs)
		rows := r.sweepForward(lo, hi, w)
		for _, qi := range pending[start:end] {
			q := &b.qs[qi]
			row := rows[int(r.topo[q.dst]-lo)*w : int(r.topo[q.dst]-lo+1)*w]
			q.ans = 0
			if hasBit(row, r.slot[q.src]) {
				q.ans = 1
			}
		}
		clearSlots()
		start = end
	}
}

// allPrecede reports whether every task of us strictly precedes every task of
// vs. Both lists may hold duplicates.
func (r *reacher) allPrecede(us, vs []int32) bool {
	if len(us) == 0 || len(vs) == 0 {
		return true
	}
	maxU, minV, hi := int32(-1), int32(len(r.order)), int32(-1)
	for _, u := range us {
		maxU = max(maxU, r.topo[u])
	}
	for _, v := range vs {
		minV = min(minV, r.topo[v])
		hi = max(hi, r.topo[v])
	}
	if maxU >= minV { // some u is not before some v in every linear extension
		return false
	}
	srcs := distinctByTopo(r, us)
	const chunk = 64 * maxSweepWords
	for start := 0; start < len(srcs); start += chunk {
		part := srcs[start:min(len(srcs), start+chunk)]
		w := words(len(part))
		clearSlots := r.setSlots(part)
		rows := r.sweepForward(r.topo[part[0]], hi, w)
		lo := r.topo[part[0]]
		full := fullRow(len(part), w)
		ok := true
		for _, v := range vs {
			row := rows[int(r.topo[v]-lo)*w : int(r.topo[v]-lo+1)*w]
			for k := range row {
				if row[k]&full[k] != full[k] {
					ok = false
					break
				}
			}
			if !ok {
				break
			}
		}
		clearSlots()
		if !ok {
			return false
		}
	}
	return true
}

// frontier drops from xs every task with a direct successor in xs: whatever
// that successor precedes, the task precedes too, so "all of xs precede v"
// needs only the rest. The result is distinct.
func (r *reacher) frontier(xs []int32) []int32 {
	if len(xs) <= 1 {
		return xs
	}
	for _, x := range xs {
		r.slot[x] = 0
	}
	out := make([]int32, 0, len(xs))
	for _, x := range xs {
		if r.slot[x] != 0 {
			continue // duplicate, already decided
		}
		keep := true
		for _, s := range r.g.Succ(int(x)) {
			if r.slot[s] >= 0 && s != x {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, x)
		}
		r.slot[x] = 1
	}
	for _, x := range xs {
		r.slot[x] = -1
	}
	return out
}

// distinctByTopo returns the distinct tasks of xs sorted by topological index.
func distinctByTopo(r *reacher, xs []int32) []int32 {
	out := slices.Clone(xs)
	slices.SortFunc(out, func(a, b int32) int { return int(r.topo[a]) - int(r.topo[b]) })
	return slices.Compact(out)
}

func fullRow(n, w int) []uint64 {
	row := make([]uint64, w)
	for k := range row {
		row[k] = ^uint64(0)
	}
	if rem := n % 64; rem != 0 {
		row[w-1] = 1<<uint(rem) - 1
	}
	return row
}

// comparability fills, for the sources srcs (distinct, at most
// 64*maxSweepWords), which tasks of others each source precedes and which
// precede it: after(s, o) / before(s, o) answer "s precedes o" / "o precedes s".
type comparability struct {
	r        *reacher
	lo, hi   int32
	w        int
	fwd, bwd []uint64
}

func (r *reacher) compare(srcs, others []int32) *comparability {
	lo, hi := int32(len(r.order)), int32(-1)
	for _, x := range srcs {
		lo, hi = min(lo, r.topo[x]), max(hi, r.topo[x])
	}
	for _, x := range others {
		lo, hi = min(lo, r.topo[x]), max(hi, r.topo[x])
	}
	w := words(len(srcs))
	clearSlots := r.setSlots(srcs)
	defer clearSlots()
	cp := &comparability{r: r, lo: lo, hi: hi, w: w}
	cp.fwd = slices.Clone(r.sweepForward(lo, hi, w))
	cp.bwd = slices.Clone(r.sweepBackward(lo, hi, w))
	return cp
}

// precedes reports whether source number k strictly precedes task o.
func (cp *comparability) precedes(k int, src, o int32) bool {
	if src == o {
		return false
	}
	i := cp.r.topo[o] - cp.lo
	return hasBit(cp.fwd[int(i)*cp.w:int(i+1)*cp.w], int32(k))
}

// precededBy reports whether task o strictly precedes source number k.
func (cp *comparability) precededBy(k int, src, o int32) bool {
	if src == o {
		return false
	}
	i := cp.r.topo[o] - cp.lo
	return hasBit(cp.bwd[int(i)*cp.w:int(i+1)*cp.w], int32(k))
}
