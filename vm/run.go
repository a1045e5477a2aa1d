package vm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// Result is what one Run produced.
type Result struct {
	// Outputs holds every IO_OUTPUT tensor by buffer name.
	Outputs map[string]*tensor.Tensor
	// KV holds every KV_CACHE tensor by buffer name, as the run left it:
	// bind it again (BindKV) to carry the cache into the next step.
	KV map[string]*tensor.Tensor
	// Order lists the task ids in completion order.
	Order []int
}

// Run executes the program once: counter-driven, ready-queue scheduled.
func (v *VM) Run() (*Result, error) {
	bufs, err := v.materialize()
	if err != nil {
		return nil, err
	}
	s := v.newRunState(bufs)
	workers := v.opts.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(v.tasks))
	switch {
	case v.opts.Adversarial:
		rng := rand.New(rand.NewPCG(v.opts.Seed, v.opts.Seed^0x9e3779b97f4a7c15))
		err = s.runSerial(func(n int) int { return rng.IntN(n) })
	case workers <= 1:
		err = s.runSerial(func(int) int { return 0 })
	default:
		err = s.runParallel(workers)
	}
	if err != nil {
		return nil, err
	}
	res := &Result{Outputs: map[string]*tensor.Tensor{}, KV: map[string]*tensor.Tensor{}, Order: s.order}
	for i := range v.prog.Buffers {
		b := &v.prog.Buffers[i]
		switch b.Kind {
		case ir.IOOutput:
			res.Outputs[b.Name] = bufs[i]
		case ir.KVCache:
			res.KV[b.Name] = bufs[i]
		}
	}
	return res, nil
}

// runState is the bookkeeping of one run. Only the dispatching goroutine
// touches it.
type runState struct {
	vm       *VM
	bufs     []*tensor.Tensor
	counters []int64
	next     []int   // per counter: first waiter not yet met
	need     []int32 // per task: waits still unmet
	ready    []int32 // ready[head:] are ready and not yet taken
	head     int
	order    []int
	deadline time.Time
}

func (v *VM) newRunState(bufs []*tensor.Tensor) *runState {
	s := &runState{
		vm:       v,
		bufs:     bufs,
		counters: make([]int64, len(v.prog.Counters)),
		next:     make([]int, len(v.prog.Counters)),
		need:     make([]int32, len(v.tasks)),
		order:    make([]int, 0, len(v.tasks)),
	}
	if v.opts.Timeout > 0 {
		s.deadline = time.Now().Add(v.opts.Timeout)
	}
	for i := range v.tasks {
		s.need[i] = v.tasks[i].need
	}
	// Every counter starts at 0, as on the device (the host zeroes them
	// before each launch); validate refuses a program whose counters say
	// otherwise, so no wait is met before its producers run.
	for i := range v.tasks {
		if s.need[i] == 0 {
			s.ready = append(s.ready, int32(i))
		}
	}
	return s
}

// advance marks every wait on counter c that its value now meets; a task
// whose last wait is met becomes ready.
func (s *runState) advance(c int) {
	ws := s.vm.waiters[c]
	val := s.counters[c]
	for s.next[c] < len(ws) && int64(ws[s.next[c]].threshold) <= val {
		t := ws[s.next[c]].task
		s.next[c]++
		s.need[t]--
		if s.need[t] == 0 {
			s.ready = append(s.ready, t)
		}
	}
}

// complete records a finished task: exactly one increment of its out_counter.
func (s *runState) complete(t int32) {
	s.order = append(s.order, int(t))
	c := s.vm.tasks[t].outCtr
	if c >= 0 && c < len(s.counters) {
		s.counters[c]++
		s.advance(c)
	}
}

// nReady is the number of ready tasks not yet taken.
func (s *runState) nReady() int { return len(s.ready) - s.head }

// take removes and returns the i-th ready task (0 = the oldest, so taking
// index 0 keeps list order among ready tasks).
func (s *runState) take(i int) int32 {
	j := s.head + i
	s.ready[s.head], s.ready[j] = s.ready[j], s.ready[s.head]
	t := s.ready[s.head]
	s.head++
	if s.head == len(s.ready) {
		s.ready, s.head = s.ready[:0], 0
	}
	return t
}

func (s *runState) expired() bool {
	return !s.deadline.IsZero() && time.Now().After(s.deadline)
}

// ErrCancelled is what a Run returns when Options.Done was closed.
var ErrCancelled = errors.New("vm: run cancelled")

// cancelled reports whether Options.Done is closed.
func (s *runState) cancelled() bool {
	select {
	case <-s.vm.opts.Done:
		return true
	default:
		return false
	}
}

func (s *runState) timeoutError() error {
	return &TimeoutError{Timeout: s.vm.opts.Timeout, Done: len(s.order), Total: len(s.vm.tasks)}
}

// runSerial runs one task at a time; pick chooses among n ready tasks.
func (s *runState) runSerial(pick func(n int) int) error {
	for s.nReady() > 0 {
		if s.expired() {
			return s.timeoutError()
		}
		if s.cancelled() {
			return ErrCancelled
		}
		t := s.take(pick(s.nReady()))
		if err := s.vm.exec(t, s.bufs); err != nil {
			return err
		}
		s.complete(t)
	}
	return s.finish()
}

type doneMsg struct {
	task int32
	err  error
}

// runParallel keeps up to workers tasks in flight. Counters and the ready
// queue stay on this goroutine; the channels order each task's writes
// before its consumers start.
func (s *runState) runParallel(workers int) error {
	work := make(chan int32, workers)
	done := make(chan doneMsg, workers)
	for range workers {
		go func() {
			for t := range work {
				done <- doneMsg{t, s.vm.exec(t, s.bufs)}
			}
		}()
	}
	defer close(work)
	var timer <-chan time.Time
	if !s.deadline.IsZero() {
		tm := time.NewTimer(time.Until(s.deadline))
		defer tm.Stop()
		timer = tm.C
	}
	cancel := s.vm.opts.Done
	running := 0
	var firstErr error
	for {
		if firstErr == nil && s.cancelled() {
			firstErr = ErrCancelled
		}
		for firstErr == nil && s.nReady() > 0 && running < workers {
			work <- s.take(0)
			running++
		}
		if running == 0 {
			break
		}
		select {
		case m := <-done:
			running--
			if m.err != nil {
				if firstErr == nil {
					firstErr = m.err
				}
				continue
			}
			s.complete(m.task)
		case <-timer:
			timer = nil
			if firstErr == nil {
				firstErr = s.timeoutError()
			}
		case <-cancel:
			cancel = nil
			if firstErr == nil {
				firstErr = ErrCancelled
			}
		}
	}
	if firstErr != nil {
		return firstErr
	}
	return s.finish()
}

// finish reports a deadlock when tasks remain with nothing ready.
func (s *runState) finish() error {
	if len(s.order) == len(s.vm.tasks) {
		return nil
	}
	finished := make([]bool, len(s.vm.tasks))
	for _, t := range s.order {
		finished[t] = true
	}
	e := &DeadlockError{Counters: append([]int64(nil), s.counters...)}
	for i := range s.vm.tasks {
		if finished[i] {
			continue
		}
		t := &s.vm.tasks[i]
		st := StuckTask{ID: i, Label: t.label}
		for _, w := range t.waits {
			var val int64
			if w.Counter >= 0 && w.Counter < len(s.counters) {
				val = s.counters[w.Counter]
			}
			if val < int64(w.Threshold) {
				st.Waits = append(st.Waits, WaitState{Counter: w.Counter, Value: val, Threshold: w.Threshold})
			}
		}
		e.Stuck = append(e.Stuck, st)
	}
	return e
}

// exec runs one task's op on the run's tensors. A panic inside an op is a
// bug, but it must not take the caller down: it becomes the task's error.
func (v *VM) exec(ti int32, bufs []*tensor.Tensor) (err error) {
	t := &v.tasks[ti]
	defer func() {
		if r := recover(); r != nil {
			err = &TaskError{TaskID: int(ti), Label: t.label, Op: t.op, Err: fmt.Errorf("internal error: %v", r)}
		}
	}()
	in := make([]*tensor.Tensor, len(t.in))
	for k, b := range t.in {
		in[k] = bufs[b]
	}
	out := make([]*tensor.Tensor, len(t.out))
	for k, b := range t.out {
		out[k] = bufs[b]
	}
	switch {
	case t.pattern != nil:
		err = runPattern(*t.pattern, in, out, t.params)
	case t.op == ir.OpFUSED:
		err = runRecipe(t.recipe, in, out)
	default:
		err = runOp(t.op, in, out, t.params)
	}
	if err != nil {
		return &TaskError{TaskID: int(ti), Label: t.label, Op: t.op, Err: err}
	}
	return nil
}
