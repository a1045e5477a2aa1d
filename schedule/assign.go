package schedule

import (
	"container/heap"
	"fmt"

	"github.com/amk-dev/amk/ir"
)

// AssignSMs sets every task's SM (the per-SM serial queues are the tasks of
// each SM in list order). Tasks that already have an SM keep it (the
// split-KV shards the lowering pins, docs/spec/rules.md R17); explicit pins of the assignment
// override; every other task is placed by the policy:
//
//   - round_robin: the k-th unpinned task of the topological order goes to
//     SM k mod numSMs;
//   - load_balance (the default): LPT over the topological order — each
//     task goes to the SM with the least load keyed (Σ est_bytes,
//     Σ est_flops, task count, SM id); pinned tasks count towards their
//     SM's load as they are met.
//
// The topological order is the list order when that is one (always for
// lowered programs), else Kahn's order. An explicit pin naming a task that
// does not exist, or an SM outside [0, numSMs), is an error.
func AssignSMs(p *ir.Program, a ir.SMAssignment, numSMs int) error {
	sms, err := placement(p, a, numSMs, true)
	if err != nil {
		return err
	}
	for i := range p.Tasks {
		p.Tasks[i].SM = &sms[i]
	}
	return nil
}

// placement computes the SM of every task without touching the program;
// keepPins says whether tasks that already have an SM keep it.
func placement(p *ir.Program, a ir.SMAssignment, numSMs int, keepPins bool) ([]int, error) {
	if numSMs <= 0 {
		return nil, fmt.Errorf("cannot assign SMs: the target has %d SMs", numSMs)
	}
	n := len(p.Tasks)
	sms := make([]int, n)
	pinned := make([]bool, n)
	for i := range p.Tasks {
		if s := p.Tasks[i].SM; s != nil && keepPins {
			if *s < 0 || *s >= numSMs {
				return nil, fmt.Errorf("task %d is pinned to SM %d, out of range [0,%d)", i, *s, numSMs)
			}
			sms[i], pinned[i] = *s, true
		}
	}
	for _, pin := range a.Explicit {
		if pin.Task < 0 || pin.Task >= n {
			return nil, fmt.Errorf("sm_assignment pins task %d, but the program has %d tasks", pin.Task, n)
		}
		if pin.SM < 0 || pin.SM >= numSMs {
			return nil, fmt.Errorf("sm_assignment pins task %d to SM %d, out of range [0,%d)", pin.Task, pin.SM, numSMs)
		}
		sms[pin.Task], pinned[pin.Task] = pin.SM, true
	}
	policy := a.Policy
	if a.IsExplicit() || policy == "" {
		policy = PolicyLoadBalance
	}
	order := topoOrder(p)
	switch policy {
	case PolicyRoundRobin:
		k := 0
		for _, i := range order {
			if !pinned[i] {
				sms[i] = k % numSMs
				k++
			}
		}
	case PolicyLoadBalance:
		lpt(p, order, sms, pinned, numSMs)
	default:
		return nil, fmt.Errorf("unknown sm_assignment policy %q (%s, %s)", policy, PolicyRoundRobin, PolicyLoadBalance)
	}
	return sms, nil
}

// topoOrder is the list order when every wait's producers come earlier in
// the list, else Kahn's order (list order on a cycle).
func topoOrder(p *ir.Program) []int32 {
	n := len(p.Tasks)
	lastProducer := make([]int32, len(p.Counters))
	for i := range lastProducer {
		lastProducer[i] = -1
	}
	for i := range p.Tasks {
		if c := p.Tasks[i].OutCounter; c >= 0 && c < len(lastProducer) {
			lastProducer[c] = int32(i)
		}
	}
	listOK := true
	for i := 0; i < n && listOK; i++ {
		for _, w := range p.Tasks[i].Waits {
			if w.Counter >= 0 && w.Counter < len(lastProducer) && lastProducer[w.Counter] >= int32(i) {
				listOK = false
				break
			}
		}
	}
	if !listOK {
		if order := ir.BuildGraph(p).TopologicalOrder(); order != nil {
			return order
		}
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	return order
}

// smLoad is one SM's accumulated load, the LPT key.
type smLoad struct {
	bytes, flops int64
	count, sm    int
}

func (a smLoad) less(b smLoad) bool {
	if a.bytes != b.bytes {
		return a.bytes < b.bytes
	}
	if a.flops != b.flops {
		return a.flops < b.flops
	}
	if a.count != b.count {
		return a.count < b.count
	}
	return a.sm < b.sm
}

// loadHeap is a min-heap of SMs by load, with each SM's heap position.
type loadHeap struct {
	loads []smLoad
	heap  []int // SM ids
	pos   []int // SM id -> index in heap
}

func (h *loadHeap) Len() int           { return len(h.heap) }
func (h *loadHeap) Less(i, j int) bool { return h.loads[h.heap[i]].less(h.loads[h.heap[j]]) }
func (h *loadHeap) Swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.pos[h.heap[i]], h.pos[h.heap[j]] = i, j
}
func (h *loadHeap) Push(any) {}
func (h *loadHeap) Pop() any { return nil }
func (h *loadHeap) add(sm int, t *ir.Task) {
	l := &h.loads[sm]
	l.bytes += t.EstBytes
	l.flops += t.EstFlops
	l.count++
	heap.Fix(h, h.pos[sm])
}

func lpt(p *ir.Program, order []int32, sms []int, pinned []bool, numSMs int) {
	h := &loadHeap{loads: make([]smLoad, numSMs), heap: make([]int, numSMs), pos: make([]int, numSMs)}
	for s := range numSMs {
		h.loads[s].sm = s
		h.heap[s], h.pos[s] = s, s
	}
	for _, i := range order {
		t := &p.Tasks[i]
		if pinned[i] {
			h.add(sms[i], t)
			continue
		}
		s := h.heap[0]
		sms[i] = s
		h.add(s, t)
	}
}
