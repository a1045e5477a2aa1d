package ir

import (
	"fmt"
	"slices"
	"sort"
)

// Graph is the producer -> consumer dependency graph of a program, indexed by
// task list position, in compressed sparse row form. For every wait of task t
// on counter c there is an edge p -> t for every producer p of c; self-edges
// are kept (a task waiting on its own counter is a cycle). Edges are
// de-duplicated and each adjacency list is sorted.
type Graph struct {
	N       int
	succOff []int32
	succ    []int32
	predOff []int32
	pred    []int32
}

// Succ returns the direct successors of task i.
func (g *Graph) Succ(i int) []int32 { return g.succ[g.succOff[i]:g.succOff[i+1]] }

// Pred returns the direct predecessors of task i.
func (g *Graph) Pred(i int) []int32 { return g.pred[g.predOff[i]:g.predOff[i+1]] }

// NumEdges is the number of distinct edges (the "edges" stat).
func (g *Graph) NumEdges() int { return len(g.succ) }

// ProducersByCounter returns, per counter position, the task positions whose
// out_counter it is. Out-of-range counter references are ignored.
func ProducersByCounter(p *Program) [][]int32 {
	prod := make([][]int32, len(p.Counters))
	for i := range p.Tasks {
		c := p.Tasks[i].OutCounter
		if c >= 0 && c < len(prod) {
			prod[c] = append(prod[c], int32(i))
		}
	}
	return prod
}

// WritersByBuffer returns, per buffer position, the task positions listing it
// among their outputs (once per task).
func WritersByBuffer(p *Program) [][]int32 {
	w := make([][]int32, len(p.Buffers))
	for i := range p.Tasks {
		for k, b := range p.Tasks[i].Outputs {
			if b < 0 || b >= len(w) || containsInt(p.Tasks[i].Outputs[:k], b) {
				continue
			}
			w[b] = append(w[b], int32(i))
		}
	}
	return w
}

func containsInt(xs []int, x int) bool {
	return slices.Contains(xs, x)
}

// BuildGraph computes the dependency graph.
func BuildGraph(p *Program) *Graph {
	n := len(p.Tasks)
	prod := ProducersByCounter(p)
	g := &Graph{N: n, succOff: make([]int32, n+1), predOff: make([]int32, n+1)}
	// Predecessor lists first (grouped by consumer), then transpose.
	var seen []int
	for t := range n {
		seen = seen[:0]
		start := len(g.pred)
		for _, w := range p.Tasks[t].Waits {
			c := w.Counter
			if c < 0 || c >= len(prod) || containsInt(seen, c) {
				continue
			}
			seen = append(seen, c)
			g.pred = append(g.pred, prod[c]...)
		}
		lst := g.pred[start:]
		if len(seen) > 1 {
			slices.Sort(lst)
			// producers of distinct counters are distinct tasks, so no duplicates remain.
		}
		g.predOff[t+1] = int32(len(g.pred))
	}
	counts := make([]int32, n+1)
	for _, p := range g.pred {
		counts[p+1]++
	}
	for i := range n {
		g.succOff[i+1] = g.succOff[i] + counts[i+1]
	}
	g.succ = make([]int32, len(g.pred))
	fill := append([]int32(nil), g.succOff[:n]...)
	for t := range n {
		for _, p := range g.Pred(t) {
			g.succ[fill[p]] = int32(t)
			fill[p]++
		}
	}
	return g
}

// QueueNext returns, per task position, the next task placed on the same SM
// in task-list order (-1 for the last task of its SM and for unplaced
// tasks): the serial queue each SM runs (docs/spec/rules.md R21).
func QueueNext(p *Program) []int32 {
	next := make([]int32, len(p.Tasks))
	last := map[int]int32{}
	for t := range p.Tasks {
		next[t] = -1
		if sm := p.Tasks[t].SM; sm != nil {
			if prev, ok := last[*sm]; ok {
				next[prev] = int32(t)
			}
			last[*sm] = int32(t)
		}
	}
	return next
}

// WithQueues returns the dependency graph plus an edge from every placed task
// to the next task of its SM's queue (QueueNext). The queues cannot deadlock
// iff this graph is acyclic (every wait being satisfiable): a cycle is a
// queue head that waits, directly or through other SMs, for a task behind it
// in its own queue.
func (g *Graph) WithQueues(next []int32) *Graph {
	n := g.N
	q := &Graph{N: n, succOff: make([]int32, n+1), predOff: make([]int32, n+1)}
	extraPred := make([]int32, n)
	for i := range extraPred {
		extraPred[i] = -1
	}
	for t := 0; t < n && t < len(next); t++ {
		if nx := next[t]; nx >= 0 && !slices.Contains(g.Succ(t), nx) {
			extraPred[nx] = int32(t)
		}
	}
	q.succ = make([]int32, 0, len(g.succ)+n)
	for t := range n {
		q.succ = append(q.succ, g.Succ(t)...)
		if t < len(next) && next[t] >= 0 && extraPred[next[t]] == int32(t) {
			q.succ = append(q.succ, next[t])
		}
		q.succOff[t+1] = int32(len(q.succ))
	}
	q.pred = make([]int32, 0, len(q.succ))
	for t := range n {
		q.pred = append(q.pred, g.Pred(t)...)
		if extraPred[t] >= 0 {
			q.pred = append(q.pred, extraPred[t])
		}
		q.predOff[t+1] = int32(len(q.pred))
	}
	return q
}

// QueueCycle returns nil when the per-SM queues (QueueNext) cannot
// deadlock given the dependency graph g of p, and otherwise a witness
// cycle whose first edge cyc[0] -> cyc[1] is a queue edge (cyc[0] runs
// before cyc[1] on their SM) that is not also a dependency; the rest of
// the cycle, cyc[1] -> ... -> cyc[0], is why cyc[0] must wait for cyc[1].
// A cycle of dependencies alone (reported elsewhere) is returned as it is.
func QueueCycle(p *Program, g *Graph) []int32 {
	// When every dependency points forward in the task list (as in every
	// lowering), the list order is a topological order of the dependencies
	// and of the queues (each in list order) together: no cycle, nothing
	// to build.
	forward := true
	for t := 0; t < g.N && forward; t++ {
		for _, s := range g.Succ(t) {
			if int(s) <= t {
				forward = false
				break
			}
		}
	}
	if forward {
		return nil
	}
	next := QueueNext(p)
	q := g.WithQueues(next)
	if q.TopologicalOrder() != nil {
		return nil
	}
	cyc := q.FindCycle()
	for k := range cyc {
		a, b := cyc[k], cyc[(k+1)%len(cyc)]
		if next[a] == b && !slices.Contains(g.Succ(int(a)), b) {
			return append(cyc[k:], cyc[:k]...)
		}
	}
	return cyc
}

// TopologicalOrder is Kahn's algorithm: the initial ready set in position
// order, then FIFO. It returns nil when the graph has a cycle.
func (g *Graph) TopologicalOrder() []int32 {
	indeg := make([]int32, g.N)
	for t := 0; t < g.N; t++ {
		indeg[t] = g.predOff[t+1] - g.predOff[t]
	}
	order := make([]int32, 0, g.N)
	for t := 0; t < g.N; t++ {
		if indeg[t] == 0 {
			order = append(order, int32(t))
		}
	}
	for head := 0; head < len(order); head++ {
		for _, s := range g.Succ(int(order[head])) {
			indeg[s]--
			if indeg[s] == 0 {
				order = append(order, s)
			}
		}
	}
	if len(order) != g.N {
		return nil
	}
	return order
}

// FindCycle returns one cycle as task positions (first node not repeated), or
// nil if the graph is acyclic. The DFS is iterative, so depth is unbounded.
func (g *Graph) FindCycle() []int32 {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, g.N)
	parent := make([]int32, g.N)
	next := make([]int32, g.N) // next successor index to explore
	stack := make([]int32, 0, 64)
	for root := 0; root < g.N; root++ {
		if color[root] != white {
			continue
		}
		stack = append(stack[:0], int32(root))
		color[root] = grey
		parent[root] = -1
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			succ := g.Succ(int(u))
			if int(next[u]) < len(succ) {
				v := succ[next[u]]
				next[u]++
				switch color[v] {
				case white:
					color[v] = grey
					parent[v] = u
					stack = append(stack, v)
				case grey:
					cyc := []int32{v}
					for x := u; x != v && x >= 0; x = parent[x] {
						cyc = append(cyc, x)
					}
					// reverse to follow edge direction v -> ... -> u -> v
					for i, j := 1, len(cyc)-1; i < j; i, j = i+1, j-1 {
						cyc[i], cyc[j] = cyc[j], cyc[i]
					}
					return cyc
				}
				continue
			}
			color[u] = black
			stack = stack[:len(stack)-1]
		}
	}
	return nil
}

// SimulateCounters is the static reachability cross-check: fire every ready
// task (all waits satisfied) until none is, incrementing counters. It returns
// the firing order and the tasks left stuck (non-empty iff some wait can never
// be satisfied). It is ready-queue driven: O(tasks + waits). Like every
// simulation here it starts each counter at 0, as the device does (the host
// zeroes the counters before every launch, docs/spec/ir.md §2; validate
// refuses a program whose counters say otherwise).
func SimulateCounters(p *Program) (order, stuck []int) {
	return simulate(p, false, false, func(ready []int) int { return 0 })
}

// adversarialPick is the reference's adversarial choice among n ready
// tasks for one seed.
func adversarialPick(seed, n int) int { return int(uint64(seed) * 2654435761 % uint64(n)) }

// SimulateAdversarial fires ready tasks in adversarial interleavings (one per
// seed, each picking ready[(seed*2654435761) mod len(ready)] with ready in
// task-list order, as the reference does) and reports
// every read of a transient buffer that no fired task has written yet. It
// stops at the first seed with violations, as the reference does. It is the
// dynamic backstop to validate's static proofs: the differential check
// (package vm's tests) runs it on every program validate accepts.
func SimulateAdversarial(p *Program, seeds int) []string {
	writers := WritersByBuffer(p)
	for seed := range seeds {
		written := make([]bool, len(p.Buffers))
		for b := range p.Buffers {
			k := p.Buffers[b].Kind
			if k.ReadOnly() || (k == KVCache && len(writers[b]) == 0) {
				written[b] = true
			}
		}
		var bad []string
		simulate(p, true, false, func(ready []int) int {
			pick := adversarialPick(seed, len(ready))
			t := &p.Tasks[ready[pick]]
			label := t.Label
			if label == "" {
				label = t.Op.String()
			}
			for _, b := range t.Inputs {
				// A KV cache read by the task that appends to it is prior-step
				// state (KV_APPEND updates the cache in place).
				inPlaceKV := b >= 0 && b < len(written) && p.Buffers[b].Kind == KVCache && containsInt(t.Outputs, b)
				if b >= 0 && b < len(written) && !written[b] && !inPlaceKV {
					bad = append(bad, fmt.Sprintf("[seed %d] task %d (%s) reads buffer #%d ('%s') before any producer wrote it",
						seed, t.ID, label, b, p.Buffers[b].Name))
				}
			}
			for _, b := range t.Outputs {
				if b >= 0 && b < len(written) {
					written[b] = true
				}
			}
			return pick
		})
		if len(bad) > 0 {
			sort.Strings(bad)
			return dedupe(bad)
		}
	}
	return nil
}

// SimulateQueues runs the program the way the device runs it: each SM
// executes the tasks placed on it one at a time, in task-list order (the
// queues amk's loader builds, docs/spec/rules.md R21), a task starting once
// its waits hold; a task with no SM starts whenever its waits hold. Among the
// tasks that could start, the next is the seed's adversarial pick (as in
// SimulateAdversarial). It returns the firing order and the tasks never
// fired: non-empty iff the queues deadlock (a queue's head waits, directly or
// through other SMs, for a task behind it) or a wait can never be met. Which
// tasks fire does not depend on the seed, only their order does.
func SimulateQueues(p *Program, seed int) (order, stuck []int) {
	return simulate(p, true, true, func(ready []int) int { return adversarialPick(seed, len(ready)) })
}

func dedupe(xs []string) []string {
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// simulate runs the counter-driven walk from zeroed counters; choose picks
// which ready task (an index into ready) fires next. Tasks become ready when
// all waits hold and, with queues, when every task placed on the same SM
// before them has fired. With listOrder the ready list is kept in task-list
// order, else in the order tasks became ready.
func simulate(p *Program, listOrder, queues bool, choose func(ready []int) int) (order, stuck []int) {
	n := len(p.Tasks)
	nc := len(p.Counters)
	value := make([]int, nc)
	// waiters[c] = tasks with a wait on c; unmet[t] = number of unmet waits.
	waiters := make([][]int32, nc)
	unmet := make([]int, n)
	// With queues, next[t] is the task after t on t's SM (-1: none) and
	// blocked[t] says that an earlier task of its SM has not fired yet.
	var next []int32
	var blocked []bool
	if queues {
		next = QueueNext(p)
		blocked = make([]bool, n)
		for t := range n {
			if next[t] >= 0 {
				blocked[next[t]] = true
			}
		}
	}
	ready := []int{}
	for t := range n {
		for _, w := range p.Tasks[t].Waits {
			if w.Counter < 0 || w.Counter >= nc {
				unmet[t]++ // unknown counter: never satisfiable
				continue
			}
			if value[w.Counter] < w.Threshold {
				unmet[t]++
				ws := waiters[w.Counter]
				if len(ws) == 0 || ws[len(ws)-1] != int32(t) {
					waiters[w.Counter] = append(ws, int32(t))
				}
			}
		}
		if unmet[t] == 0 && (!queues || !blocked[t]) {
			ready = append(ready, t)
		}
	}
	fired := make([]bool, n)
	for len(ready) > 0 {
		k := choose(ready)
		t := ready[k]
		if k == 0 {
			ready = ready[1:]
		} else {
			ready = append(ready[:k], ready[k+1:]...)
		}
		fired[t] = true
		order = append(order, t)
		if queues {
			if nx := next[t]; nx >= 0 {
				blocked[nx] = false
				if unmet[nx] == 0 {
					ready = insertReady(ready, int(nx), listOrder)
				}
			}
		}
		c := p.Tasks[t].OutCounter
		if c < 0 || c >= nc {
			continue
		}
		value[c]++
		for _, w := range waiters[c] {
			for _, wt := range p.Tasks[w].Waits {
				if wt.Counter == c && value[c] == wt.Threshold {
					unmet[w]--
					if unmet[w] == 0 && (!queues || !blocked[w]) {
						ready = insertReady(ready, int(w), listOrder)
					}
				}
			}
		}
	}
	for t := range n {
		if !fired[t] {
			stuck = append(stuck, t)
		}
	}
	return order, stuck
}

// insertReady adds t to the ready list: at the end, or at its place in
// task-list order.
func insertReady(ready []int, t int, listOrder bool) []int {
	if !listOrder {
		return append(ready, t)
	}
	i := sort.SearchInts(ready, t)
	ready = append(ready, 0)
	copy(ready[i+1:], ready[i:])
	ready[i] = t
	return ready
}
