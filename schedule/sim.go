package schedule

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/amk-dev/amk/ir"
)

// simResult is what the queue simulation reports.
type simResult struct {
	makespan   float64
	work       float64            // Σ alone
	alone      []float64          // each task run alone on one SM
	chain      map[string]float64 // critical-chain time per region
	smsUsed    int
	deadlocked bool
}

// simTask is a task's timing parameters.
type simTask struct {
	pre     float64 // dispatch-phase overhead, µs
	bytes   float64 // bytes streamed
	cap     float64 // the SM's stream rate limit for this task, bytes/µs
	compute float64 // µs of compute for a task that streams no bytes
	pf      float64 // bytes it may prefetch while waiting on its dependencies
	waits   bool
}

const (
	phaseDispatch uint8 = iota
	phaseWait
	phaseData
	phaseSignal
	phaseDone
)

const (
	evDispatchEnd uint8 = iota
	evDataStart
	evComputeEnd
	evSignalEnd
	evFillEnd
)

type smSim struct {
	queue  []int32
	qi     int
	phase  uint8
	task   int32
	left   float64 // bytes left in the current stream (data or prefetch)
	pfDone float64 // bytes of the head task already prefetched
	active int     // index in sim.active, -1 when not streaming
	prev   int32   // the task this SM ran before the head, -1 if none
}

type timer struct {
	at   float64
	seq  int
	sm   int32
	kind uint8
}

type timerHeap []timer

func (h timerHeap) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}

func (h *timerHeap) push(t timer) {
	*h = append(*h, t)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *timerHeap) pop() timer {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if r < len(s) && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// sim is a discrete-event, fluid-bandwidth simulation of the persistent
// kernel: each SM drains its queue serially; a task dispatches, waits for
// its counters (prefetching its weights meanwhile when pipelining is on),
// streams its bytes, and signals its counter. All streaming SMs share one
// HBM bandwidth (max-min fair, each capped by its own in-flight limit).
type sim struct {
	m       *costModel
	p       *ir.Program
	tasks   []simTask
	sms     []smSim
	active  []int32
	caps    []float64
	rates   []float64
	timers  timerHeap
	seq     int
	now     float64
	incTime [][]float64
	incTask [][]int32
	waiters [][]int32
	end     []float64
	bind    []int32
	done    int
}

func (m *costModel) simulate(p *ir.Program) (simResult, []string) {
	n := len(p.Tasks)
	res := simResult{alone: make([]float64, n), chain: map[string]float64{}}
	if n == 0 {
		return res, nil
	}
	assign, notes := m.placeTasks(p)
	s := &sim{m: m, p: p, tasks: make([]simTask, n), sms: make([]smSim, m.numSMs),
		incTime: make([][]float64, len(p.Counters)), incTask: make([][]int32, len(p.Counters)),
		waiters: make([][]int32, len(p.Counters)), end: make([]float64, n), bind: make([]int32, n)}
	for i := range p.Tasks {
		s.tasks[i] = m.taskTiming(p, &p.Tasks[i])
		st := &s.tasks[i]
		res.alone[i] = st.pre + st.compute + m.c.SignalUS
		if st.bytes > 0 {
			res.alone[i] += m.c.HBMLatencyUS + st.bytes/st.cap
		}
		if st.waits {
			res.alone[i] += m.c.WakeUS
		}
		res.work += res.alone[i]
		s.bind[i] = -1
	}
	for _, i := range topoOrder(p) {
		sm := assign[i]
		s.sms[sm].queue = append(s.sms[sm].queue, i)
	}
	for k := range s.sms {
		s.sms[k].active, s.sms[k].prev = -1, -1
		if len(s.sms[k].queue) > 0 {
			res.smsUsed++
		}
		s.startNext(int32(k))
	}
	s.run()
	if s.done < n {
		res.deadlocked = true
		return res, notes
	}
	last := 0
	for i := range s.end {
		if s.end[i] > s.end[last] {
			last = i
		}
	}
	res.makespan = s.end[last]
	for i := int32(last); i >= 0; i = s.bind[i] {
		start := 0.0
		if b := s.bind[i]; b >= 0 {
			start = s.end[b]
		}
		res.chain[classifyRegion(&p.Tasks[i])] += s.end[i] - start
	}
	return res, notes
}

// placeTasks returns each task's SM: the program's own when every task has
// one on this target, else the point's policy.
func (m *costModel) placeTasks(p *ir.Program) ([]int, []string) {
	sms := make([]int, len(p.Tasks))
	complete := true
	for i := range p.Tasks {
		s := p.Tasks[i].SM
		if s == nil || *s < 0 || *s >= m.numSMs {
			complete = false
			break
		}
		sms[i] = *s
	}
	if complete {
		return sms, nil
	}
	policy := m.policy
	placed, err := placement(p, policy, m.numSMs, true)
	if err != nil {
		policy = ir.SMAssignment{Policy: PolicyLoadBalance}
		placed, _ = placement(p, policy, m.numSMs, false)
		return placed, []string{fmt.Sprintf("program SMs unusable on this target (%v); placed by load_balance", err)}
	}
	name := policy.Policy
	if policy.IsExplicit() {
		name = "an explicit map"
	}
	return placed, []string{"tasks without an SM placed by " + name}
}

// taskTiming derives a task's timing parameters (doc.go, "Per task").
func (m *costModel) taskTiming(p *ir.Program, t *ir.Task) simTask {
	b, f := taskBytesFlops(p, t)
	st := simTask{pre: m.c.DispatchUS, bytes: float64(b), waits: len(t.Waits) > 0}
	warps := m.warps
	tiled := t.Op == ir.OpGEMVTile || t.Op == ir.OpGEMMTile || ir.TaskFusedPattern(t) != ir.FusedNone
	switch {
	case tiled:
		warps = min(warps, int(max(1, t.Params.IntOr("N_tile", 1))))
		st.pre += m.c.TileFixedUS + m.c.PrefetchIssueUS*float64(m.depth) + m.xCacheUS(p, t) + m.fusedUS(t)
		if m.depth > 0 {
			st.pf = min((1-m.exposed)*st.bytes, m.l2Share)
		}
	case t.Op == ir.OpAttentionTile:
		heads := t.Params.IntOr("n_heads", 1)
		if nkv := t.Params.IntOr("n_kv_heads", 0); nkv > 0 && t.Params.Has("N_tile") {
			heads = heads / nkv * t.Params.IntOr("N_tile", nkv) // a KV-head slice: its GQA groups
		}
		warps = min(warps, int(max(1, heads)))
	}
	inflight := float64(warps) * m.inflight
	if tiled && m.ringWarp > 0 {
		// The streaming ring: its look-ahead is in flight before the
		// tile's wait is satisfied (weights never wait), and stays the
		// per-SM window while the tile streams. Paired tiles ride it too
		// (kernels/cuda/ring.cuh amk_ring_plan_for walks their two row
		// ranges).
		inflight = float64(warps) * m.ringWarp
		st.pf = max(st.pf, min(st.bytes, inflight))
	}
	if st.bytes > 0 {
		st.cap = inflight / m.c.HBMLatencyUS
		if m.c.MaxSMStreamGBs > 0 {
			st.cap = min(st.cap, m.c.MaxSMStreamGBs*1e3)
		}
		if f > 0 {
			st.cap = min(st.cap, st.bytes*m.flopsPerSM/float64(f))
		}
		if us := m.dequantUS(t); us > 0 {
			st.cap = min(st.cap, st.bytes/us)
		}
	} else if f > 0 {
		st.compute = float64(f) / m.flopsPerSM
	}
	return st
}

// fusedUS is a fused tile's extra work: its staging step (plus the second
// K-long operand it reads from L2: the norm weight or up) and its RoPE /
// append epilogue.
func (m *costModel) fusedUS(t *ir.Task) float64 {
	pat, ok := ir.FusedPatternByID(ir.TaskFusedPattern(t))
	if !ok {
		return 0
	}
	us := 0.0
	if pat.Staging != ir.StageNone {
		us += m.c.StagingUS + float64(2*max(0, t.Params.IntOr("K", 0)))/m.l2PerSM
	}
	if pat.Epilogue == ir.EpilogueRoPE || pat.WritesCache() {
		us += m.c.EpilogueUS
	}
	return us
}

// dequantUS is the ALU time a quantised tile's dot products take on one SM
// (CostParams.ALUGOpsPerSM): per weight an FMA per x row and one
// dequantisation (its
// bytes' stream can go no faster); 0 for other tasks.
func (m *costModel) dequantUS(t *ir.Task) float64 {
	dt, _, ok := ir.TileQuant(t)
	if !ok || m.c.ALUGOpsPerSM <= 0 {
		return 0
	}
	ops := m.c.DequantOpsI8
	if dt == ir.I4 {
		ops = m.c.DequantOpsI4
	}
	rows := float64(max(1, t.Params.IntOr("M_tile", 1))) // an FMA per x row, one dequantisation
	weights := float64(max(0, t.Params.IntOr("K", 0))) * float64(max(0, t.Params.IntOr("N_tile", 0)))
	return weights * (rows + ops) / (m.c.ALUGOpsPerSM * 1e3)
}

// xCacheUS is the time a tile spends loading its activation row x (K
// elements of x's dtype, B rows) from L2 into SMEM: every tile reloads it.
func (m *costModel) xCacheUS(p *ir.Program, t *ir.Task) float64 {
	if len(t.Inputs) == 0 {
		return 0
	}
	x := p.Buffer(t.Inputs[0])
	if x == nil {
		return 0
	}
	rows := max(1, t.Params.IntOr("M_tile", 1))
	bytes := x.DType.NBytes(rows * max(0, t.Params.IntOr("K", 0)))
	return float64(bytes) / m.l2PerSM
}

func (s *sim) after(dt float64, sm int32, kind uint8) {
	s.seq++
	s.timers.push(timer{at: s.now + dt, seq: s.seq, sm: sm, kind: kind})
}

func (s *sim) startNext(sm int32) {
	st := &s.sms[sm]
	if st.qi >= len(st.queue) {
		st.phase = phaseDone
		return
	}
	st.task = st.queue[st.qi]
	st.phase = phaseDispatch
	st.pfDone = 0
	s.after(s.tasks[st.task].pre, sm, evDispatchEnd)
}

// deps reports when the task's waits are all satisfied (ready, including
// the wake latency) and which producer's signal bound it; unsat is the
// first unsatisfied counter, -1 if none, -2 if a wait can never be met.
func (s *sim) deps(task int32) (ready float64, bind int32, unsat int) {
	ready, bind = math.Inf(-1), -1
	for _, w := range s.p.Tasks[task].Waits {
		c := w.Counter
		if c < 0 || c >= len(s.incTime) {
			return 0, -1, -2
		}
		if w.Threshold <= 0 {
			continue
		}
		if len(s.incTime[c]) < w.Threshold {
			return 0, -1, c
		}
		if at := s.incTime[c][w.Threshold-1]; at > ready || bind < 0 {
			ready, bind = at, s.incTask[c][w.Threshold-1]
		}
	}
	if bind >= 0 {
		ready += s.m.c.WakeUS
	}
	return ready, bind, -1
}

func (s *sim) dispatchEnd(sm int32) {
	st := &s.sms[sm]
	ready, bind, unsat := s.deps(st.task)
	if unsat == -1 && ready <= s.now {
		s.bind[st.task] = st.prev
		s.beginData(sm)
		return
	}
	st.phase = phaseWait
	if pf := s.tasks[st.task].pf; pf > 0 {
		st.left = pf
		s.activate(sm)
	}
	s.await(sm, ready, bind, unsat)
}

// await arms the wake-up of a waiting SM: a timer when its waits are
// satisfied, else a registration on the first unsatisfied counter.
func (s *sim) await(sm int32, ready float64, bind int32, unsat int) {
	switch {
	case unsat == -1:
		s.bind[s.sms[sm].task] = bind
		s.after(ready-s.now, sm, evDataStart)
	case unsat >= 0:
		s.waiters[unsat] = append(s.waiters[unsat], sm)
	}
}

func (s *sim) beginData(sm int32) {
	st := &s.sms[sm]
	if st.active >= 0 {
		st.pfDone += s.tasks[st.task].pf - st.left
		s.deactivate(sm)
	}
	tk := &s.tasks[st.task]
	st.phase = phaseData
	switch {
	case tk.compute > 0:
		s.after(tk.compute, sm, evComputeEnd)
	case tk.bytes-st.pfDone > 0:
		st.left = tk.bytes - st.pfDone
		// The first bytes arrive one HBM latency after the loads issue;
		// bytes already prefetched into L2 prime the window and hide it.
		window := tk.cap * s.m.c.HBMLatencyUS
		if fill := s.m.c.HBMLatencyUS * (1 - min(1, st.pfDone/window)); fill > 0 {
			s.after(fill, sm, evFillEnd)
		} else {
			s.activate(sm)
		}
	default:
		s.finishData(sm)
	}
}

func (s *sim) finishData(sm int32) {
	s.sms[sm].phase = phaseSignal
	s.after(s.m.c.SignalUS, sm, evSignalEnd)
}

func (s *sim) signalEnd(sm int32) {
	st := &s.sms[sm]
	task := st.task
	s.end[task] = s.now
	s.done++
	if c := s.p.Tasks[task].OutCounter; c >= 0 && c < len(s.incTime) {
		s.incTime[c] = append(s.incTime[c], s.now)
		s.incTask[c] = append(s.incTask[c], task)
		waiting := s.waiters[c]
		s.waiters[c] = nil
		for _, w := range waiting {
			ready, bind, unsat := s.deps(s.sms[w].task)
			s.await(w, ready, bind, unsat)
		}
	}
	st.prev = task
	st.qi++
	s.startNext(sm)
}

func (s *sim) activate(sm int32) {
	s.sms[sm].active = len(s.active)
	s.active = append(s.active, sm)
}

func (s *sim) deactivate(sm int32) {
	k := s.sms[sm].active
	last := len(s.active) - 1
	s.active[k] = s.active[last]
	s.sms[s.active[k]].active = k
	s.active = s.active[:last]
	s.sms[sm].active = -1
}

// share sets each active stream's rate: its cap when the caps fit in the
// bandwidth, else a max-min fair share of it (water-filling).
func (s *sim) share() {
	n := len(s.active)
	s.caps, s.rates = s.caps[:0], s.rates[:0]
	sum := 0.0
	for _, sm := range s.active {
		c := s.tasks[s.sms[sm].task].cap
		s.caps = append(s.caps, c)
		s.rates = append(s.rates, c)
		sum += c
	}
	if sum <= s.m.bw {
		return
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return s.caps[idx[a]] < s.caps[idx[b]] })
	left := s.m.bw
	for k, i := range idx {
		fair := left / float64(n-k)
		if s.caps[i] > fair {
			for _, j := range idx[k:] {
				s.rates[j] = fair
			}
			return
		}
		left -= s.caps[i]
	}
}

func (s *sim) run() {
	var finished []int32
	for {
		if len(s.active) > 0 {
			s.share()
		}
		next := math.Inf(1)
		for k, sm := range s.active {
			next = min(next, s.now+s.sms[sm].left/s.rates[k])
		}
		if len(s.timers) > 0 {
			next = min(next, s.timers[0].at)
		}
		if math.IsInf(next, 1) {
			return
		}
		dt := next - s.now
		s.now = next
		finished = finished[:0]
		for k, sm := range s.active {
			st := &s.sms[sm]
			st.left -= s.rates[k] * dt
			if st.left <= s.rates[k]*1e-9 {
				st.left = 0
				finished = append(finished, sm)
			}
		}
		slices.Sort(finished)
		for _, sm := range finished {
			if s.sms[sm].phase == phaseData {
				s.deactivate(sm)
				s.finishData(sm)
			} else { // prefetch budget used up; keep waiting
				st := &s.sms[sm]
				st.pfDone = s.tasks[st.task].pf
				s.deactivate(sm)
			}
		}
		for len(s.timers) > 0 && s.timers[0].at <= s.now {
			ev := s.timers.pop()
			switch ev.kind {
			case evDispatchEnd:
				s.dispatchEnd(ev.sm)
			case evDataStart:
				s.beginData(ev.sm)
			case evComputeEnd:
				s.finishData(ev.sm)
			case evSignalEnd:
				s.signalEnd(ev.sm)
			case evFillEnd:
				s.activate(ev.sm)
			}
		}
	}
}
