package vm

import (
	"fmt"
	"sort"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/validate"
)

// Options tune a VM. The zero value runs on every core with no time limit.
type Options struct {
	// Workers is the number of tasks run at once; 0 means GOMAXPROCS.
	Workers int
	// Adversarial runs one task at a time, picking among the ready tasks
	// with a generator seeded by Seed.
	Adversarial bool
	Seed        uint64
	// Timeout bounds one Run's wall-clock time; 0 means none. Expiry is a
	// *TimeoutError.
	Timeout time.Duration
	// Done, when set, cancels a Run once it is closed (pass a context's
	// Done channel); the Run then returns ErrCancelled between tasks.
	Done <-chan struct{}
}

// maxBufferElems bounds one buffer's size so that a hostile program cannot
// make the VM allocate without limit (2^34 elements is 64 GiB of float32).
const maxBufferElems = int64(1) << 34

// task is the VM's private, prepared copy of one ir.Task.
type task struct {
	op      ir.Op
	in, out []int
	params  ir.Params        // private copy: SetIntParam edits it
	recipe  *recipe          // FUSED with params.recipe
	pattern *ir.FusedPattern // FUSED naming a pattern in params.flags
	label   string
	outCtr  int
	waits   []ir.Wait
	need    int32 // waits to meet before the task is ready
}

// waiter is one wait, indexed under its counter.
type waiter struct {
	threshold int
	task      int32
}

// VM executes one program. It is not safe for concurrent use; one Run at a
// time.
type VM struct {
	prog    *ir.Program
	opts    Options
	tasks   []task
	byName  map[string][]int // buffer name -> buffer ids
	bound   []*tensor.Tensor // per buffer: bound weight, input or KV cache
	waiters [][]waiter       // per counter, sorted by threshold
}

// New loads a program after validate.Validate accepts it.
func New(p *ir.Program, opts Options) (*VM, error) {
	if p == nil {
		return nil, fmt.Errorf("vm: nil program")
	}
	rep := validate.Validate(p)
	if !rep.OK {
		return nil, &RejectedError{Reasons: rep.Reason(3)}
	}
	return newVM(p, opts)
}

// newVM loads a program without validating it. Tests use it to run programs
// that New refuses (a wait that can never be met); everything it does is
// still checked, so a malformed program is an error, never a panic.
func newVM(p *ir.Program, opts Options) (*VM, error) {
	if opts.Workers < 0 {
		return nil, fmt.Errorf("vm: Workers must be >= 0, got %d", opts.Workers)
	}
	v := &VM{prog: p, opts: opts, byName: map[string][]int{}, bound: make([]*tensor.Tensor, len(p.Buffers))}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.ID != i {
			return nil, fmt.Errorf("vm: buffer %q has id %d at position %d", b.Name, b.ID, i)
		}
		if err := checkShape(b.Shape); err != nil {
			return nil, fmt.Errorf("vm: buffer %q: %v", b.Name, err)
		}
		v.byName[b.Name] = append(v.byName[b.Name], i)
	}
	for i := range p.Counters {
		if p.Counters[i].ID != i {
			return nil, fmt.Errorf("vm: counter %d at position %d", p.Counters[i].ID, i)
		}
	}
	v.tasks = make([]task, len(p.Tasks))
	v.waiters = make([][]waiter, len(p.Counters))
	for i := range p.Tasks {
		if err := v.prepareTask(i); err != nil {
			return nil, err
		}
	}
	for c := range v.waiters {
		w := v.waiters[c]
		sort.SliceStable(w, func(a, b int) bool { return w[a].threshold < w[b].threshold })
	}
	return v, nil
}

func (v *VM) prepareTask(i int) error {
	src := &v.prog.Tasks[i]
	if src.ID != i {
		return fmt.Errorf("vm: task %d at position %d", src.ID, i)
	}
	if !src.Op.Valid() {
		return fmt.Errorf("vm: task %s: unknown opcode %d", src.Describe(), int(src.Op))
	}
	for _, lst := range [][]int{src.Inputs, src.Outputs} {
		for _, b := range lst {
			if b < 0 || b >= len(v.prog.Buffers) {
				return fmt.Errorf("vm: task %s references buffer %d of %d", src.Describe(), b, len(v.prog.Buffers))
			}
		}
	}
	t := task{
		op:     src.Op,
		in:     append([]int(nil), src.Inputs...),
		out:    append([]int(nil), src.Outputs...),
		params: append(ir.Params(nil), src.Params...),
		label:  src.Describe(),
		outCtr: src.OutCounter,
		waits:  append([]ir.Wait(nil), src.Waits...),
	}
	if id := ir.TaskFusedPattern(src); id != ir.FusedNone {
		pat, ok := ir.FusedPatternByID(id)
		if !ok {
			return fmt.Errorf("vm: task %s: unknown fused pattern %d", t.label, id)
		}
		t.pattern = &pat
	} else if t.op == ir.OpFUSED {
		rv, _ := t.params.Get("recipe")
		r, err := parseRecipe(rv, len(t.in))
		if err != nil {
			return fmt.Errorf("vm: task %s: %v", t.label, err)
		}
		t.recipe = r
	}
	for _, w := range t.waits {
		switch {
		case w.Counter >= 0 && w.Counter < len(v.waiters):
			v.waiters[w.Counter] = append(v.waiters[w.Counter], waiter{threshold: w.Threshold, task: int32(i)})
			t.need++
		case w.Threshold > 0: // a counter that does not exist: never met
			t.need++
		}
	}
	v.tasks[i] = t
	return nil
}

func checkShape(shape []int) error {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", shape)
		}
		n *= int64(d)
		if n > maxBufferElems {
			return fmt.Errorf("shape %v is larger than %d elements", shape, maxBufferElems)
		}
	}
	return nil
}

// Program returns the program the VM was loaded with.
func (v *VM) Program() *ir.Program { return v.prog }
