package vm

// The differential check: programs mutated from correct lowerings go
// through the validator, the counter simulations (free order, adversarial
// orders, the device's per-SM queues) and this VM. Whatever the validator
// accepts must run here without deadlock or error, reach the same outputs
// in every order it is run in, leave the weights and inputs as they were
// bound, fire every task in the simulations with no read before a write,
// and, when the mutation touched only synchronisation (waits, counters,
// placement, list order, ids), give exactly the outputs of the program it
// was mutated from, which themselves match the eager oracle. Any
// disagreement fails with the mutation list minimised and the program
// printed. TestDifferential runs a fixed sample in `make test`;
// FuzzDifferential lets the fuzzer choose the mutations.

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/validate"
)

// diffBase is a correct program the mutations start from, with everything
// it runs on: weights, inputs, the KV caches of the positions before it,
// and its outputs (checked against the eager oracle once).
type diffBase struct {
	name           string
	prog           *ir.Program
	weights        model.Weights
	pristine       model.Weights // a copy, to see a run that wrote a weight
	inputs         map[string]*tensor.Tensor
	pristineInputs map[string]*tensor.Tensor
	kv             map[string]*tensor.Tensor
	want           map[string]*tensor.Tensor // IO outputs and KV caches after the step
}

// diffBaseSpecs are the bases: the default toy lowering, a two-layer one
// with thin tiles, round-robin placement and split-KV attention (kv_len 21
// over 2 shards), and a batch of two sequences (GEMM tiles).
var diffBaseSpecs = []struct {
	name, model, point string
	pos, batch         int
}{
	{"toy-1L default", "toy-1L", `{}`, 2, 1},
	{"toy-2L thin tiles, split-KV", "toy-2L",
		`{"tiling": {"gemv": {"N_tile": 16}, "attention": {"n_partitions": 4}}, "sm_assignment": "round_robin"}`, 20, 1},
	{"toy-1L batch 2", "toy-1L", `{"tiling": {"gemv": {"N_tile": 32}}}`, 1, 2},
}

var (
	diffBasesOnce sync.Once
	diffBasesList []*diffBase
	diffBasesErr  error
)

// diffBases builds the bases once per test binary.
func diffBases(t testing.TB) []*diffBase {
	t.Helper()
	diffBasesOnce.Do(func() {
		for _, s := range diffBaseSpecs {
			b, err := buildDiffBase(s.name, s.model, s.point, s.pos, s.batch)
			if err != nil {
				diffBasesErr = fmt.Errorf("base %s: %w", s.name, err)
				return
			}
			diffBasesList = append(diffBasesList, b)
		}
	})
	if diffBasesErr != nil {
		t.Fatal(diffBasesErr)
	}
	return diffBasesList
}

func diffToken(r, p, vocab int) int32 { return int32((7*r + 13*p + 3) % vocab) }

// buildDiffBase lowers the model at every position up to pos, runs them in
// this VM carrying the KV caches, and checks the logits at pos against the
// eager oracle for every sequence of the batch.
func buildDiffBase(name, modelName, pointJSON string, pos, batch int) (*diffBase, error) {
	cfg, err := model.Preset(modelName)
	if err != nil {
		return nil, err
	}
	target, err := ir.Target("h100")
	if err != nil {
		return nil, err
	}
	point, err := schedule.ParsePoint([]byte(pointJSON))
	if err != nil {
		return nil, err
	}
	w, err := model.InitWeights(cfg, 11)
	if err != nil {
		return nil, err
	}
	b := &diffBase{name: name, weights: w, pristine: model.Weights{}}
	for k, v := range w {
		b.pristine[k] = v.Clone()
	}
	var kv map[string]*tensor.Tensor
	for p := 0; p <= pos; p++ {
		prog, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: p, B: batch})
		if err != nil {
			return nil, err
		}
		toks, poss, rows := make([]int32, batch), make([]int32, batch), make([]int32, batch)
		for r := range toks {
			toks[r], poss[r], rows[r] = diffToken(r, p, cfg.Vocab), int32(p), int32(r)
		}
		inputs := map[string]*tensor.Tensor{}
		for name, vals := range map[string][]int32{schedule.TokenInput: toks, schedule.PosInput: poss, schedule.ReshapeInput: rows} {
			if inputs[name], err = tensor.FromInts(ir.I32, []int{batch}, vals); err != nil {
				return nil, err
			}
		}
		if p == pos {
			b.prog, b.inputs, b.kv = prog, inputs, kv
			b.pristineInputs = map[string]*tensor.Tensor{}
			for k, v := range inputs {
				b.pristineInputs[k] = v.Clone()
			}
		}
		out, err := b.run(prog, Options{Workers: 1}, inputs, kv)
		if err != nil {
			return nil, fmt.Errorf("position %d: %w", p, err)
		}
		kv = map[string]*tensor.Tensor{}
		for k, v := range out {
			if prog.Buffers[bufferNamed(prog, k)].Kind == ir.KVCache {
				kv[k] = v
			}
		}
		if p == pos {
			b.want = out
		}
	}
	logits := b.want[schedule.LogitsOutput].Floats()
	for r := range batch {
		e, err := model.NewEager(cfg, w)
		if err != nil {
			return nil, err
		}
		var ref []float32
		for p := 0; p <= pos; p++ {
			if ref, err = e.Step(diffToken(r, p, cfg.Vocab), p); err != nil {
				return nil, err
			}
		}
		if c := Compare(logits[r*cfg.Vocab:(r+1)*cfg.Vocab], ref, cfg.Vocab, cfg.DType); !c.Pass {
			return nil, fmt.Errorf("sequence %d disagrees with the eager oracle: %s", r, c.Reason)
		}
	}
	return b, nil
}

func bufferNamed(p *ir.Program, name string) int {
	for i := range p.Buffers {
		if p.Buffers[i].Name == name {
			return i
		}
	}
	return -1
}

// errUnbindable marks a mutant that cannot be bound to the base's tensors
// (a buffer's kind, shape or dtype no longer matches them): it says nothing
// about the validator.
var errUnbindable = errors.New("the mutant cannot be bound to the base's weights and inputs")

// run executes prog once without validating it (the callers validate),
// bound to the base's weights and the given inputs and KV caches, and
// returns its IO outputs and KV caches by name.
func (b *diffBase) run(prog *ir.Program, opts Options, inputs, kv map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	opts.Timeout = time.Minute // a guard only: the VM finds a deadlock by itself
	m, err := newVM(prog, opts)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := m.BindWeights(b.weights); err != nil {
		return nil, fmt.Errorf("%w: %v", errUnbindable, err)
	}
	for name, t := range inputs {
		if err := m.Bind(name, t); err != nil {
			return nil, fmt.Errorf("%w: %v", errUnbindable, err)
		}
	}
	if err := m.BindKV(kv); err != nil {
		return nil, fmt.Errorf("%w: %v", errUnbindable, err)
	}
	res, err := m.Run()
	if err != nil {
		if strings.Contains(err.Error(), "unbound buffers") {
			return nil, fmt.Errorf("%w: %v", errUnbindable, err)
		}
		return nil, err
	}
	out := map[string]*tensor.Tensor{}
	maps.Copy(out, res.Outputs)
	maps.Copy(out, res.KV)
	return out, nil
}

// sameBits reports whether two tensors hold the same dtype, shape and bits.
func sameBits(a, b *tensor.Tensor) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !slices.Equal(a.I, b.I) ||
		!slices.Equal(a.Packed, b.Packed) || !slices.Equal(a.Bytes, b.Bytes) || !slices.Equal(a.Half, b.Half) ||
		len(a.F) != len(b.F) {
		return false
	}
	for i := range a.F {
		if math.Float32bits(a.F[i]) != math.Float32bits(b.F[i]) {
			return false
		}
	}
	return true
}

// diffOutputs names the first output that differs between two runs.
func diffOutputs(a, b map[string]*tensor.Tensor) string {
	for _, k := range sortedKeys(a, b) {
		if !sameBits(a[k], b[k]) {
			return k
		}
	}
	return ""
}

func sortedKeys(ms ...map[string]*tensor.Tensor) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// restoreWeights puts back any weight a run overwrote and names it.
func (b *diffBase) restoreWeights() []string {
	var hit []string
	for k, v := range b.pristine {
		if !sameBits(v, b.weights[k]) {
			hit = append(hit, k)
			*b.weights[k] = *v.Clone()
		}
	}
	slices.Sort(hit)
	return hit
}

// diffRuns are the orders each accepted mutant runs in: one task at a
// time in list order, two adversarial seeds, and four workers at once.
var diffRuns = []struct {
	name string
	opts Options
}{
	{"serial", Options{Workers: 1}},
	{"adversarial seed 1", Options{Adversarial: true, Seed: 1}},
	{"adversarial seed 7", Options{Adversarial: true, Seed: 7}},
	{"4 workers", Options{Workers: 4}},
}

// verdict is what the check concluded about one mutant.
type verdict struct {
	accepted bool   // the validator accepted it
	skipped  string // accepted but not runnable on the base's tensors
	failure  string // a disagreement ("" when none)
}

// oracle checks a program the validator accepted (or, in tests of the
// oracle itself, any program): simulations, runs, outputs, weights.
func (b *diffBase) oracle(p *ir.Program, syncOnly bool) verdict {
	v := verdict{accepted: true}
	if _, stuck := ir.SimulateCounters(p); len(stuck) > 0 {
		v.failure = fmt.Sprintf("the counter simulation leaves tasks %v stuck (deadlock)", stuck)
		return v
	}
	for _, seed := range []int{0, 1, 5} {
		if _, stuck := ir.SimulateQueues(p, seed); len(stuck) > 0 {
			v.failure = fmt.Sprintf("the per-SM queue simulation (seed %d) leaves tasks %v stuck (the device deadlocks)", seed, stuck)
			return v
		}
	}
	if bad := ir.SimulateAdversarial(p, 16); len(bad) > 0 {
		v.failure = "the adversarial simulation reads before a write: " + strings.Join(bad[:min(3, len(bad))], "; ")
		return v
	}
	var first map[string]*tensor.Tensor
	for _, r := range diffRuns {
		out, err := b.run(p, r.opts, b.inputs, b.kv)
		if hit := b.restoreWeights(); len(hit) > 0 {
			v.failure = fmt.Sprintf("the %s run wrote the weights %v", r.name, hit)
			return v
		}
		if errors.Is(err, errUnbindable) {
			v.skipped = err.Error()
			return v
		}
		if err != nil && strings.Contains(err.Error(), "outside the table's") {
			// An id the step's data puts outside the table (the
			// mutant reads other ids): no static proof can see data.
			v.skipped = err.Error()
			return v
		}
		if err != nil {
			v.failure = fmt.Sprintf("the %s run failed: %v", r.name, err)
			return v
		}
		for name, t := range b.pristineInputs {
			if !sameBits(t, b.inputs[name]) {
				*b.inputs[name] = *t.Clone()
				v.failure = fmt.Sprintf("the %s run changed the input %q", r.name, name)
				return v
			}
		}
		if first == nil {
			first = out
			continue
		}
		if k := diffOutputs(first, out); k != "" {
			v.failure = fmt.Sprintf("%q differs between the serial and the %s run (a race)", k, r.name)
			return v
		}
	}
	if syncOnly {
		if k := diffOutputs(first, b.want); k != "" {
			v.failure = fmt.Sprintf("only synchronisation changed, yet %q differs from the unmutated program's (which matches the eager oracle)", k)
		}
	}
	return v
}

// check validates a mutant and, if accepted, runs the oracle on it.
func (b *diffBase) check(p *ir.Program, syncOnly bool) verdict {
	rep := validate.Validate(p)
	if rep.Has(validate.CodeInternal) {
		return verdict{failure: "the validator panicked: " + rep.Reason(1)}
	}
	if !rep.OK {
		return verdict{}
	}
	return b.oracle(p, syncOnly)
}

// mutation is one edit of a program, drawn from the fuzz input: what it
// does is decided when it is applied (its numbers index whatever the
// program then holds), so any subset of a mutation list still applies.
type mutation struct {
	kind    int
	a, b, c int
}

// The mutation kinds. Those below firstDataflow change only
// synchronisation, placement, list order or ids; the rest change what
// tasks compute or the buffers.
const (
	mDropWait = iota
	mThreshold
	mRetargetWait
	mAddWait
	mOutCounter
	mFreshCounter
	mCounterInit
	mSM
	mMoveTask
	mMergeCounters
	mSwapOutCounters
	mPermuteBuffers
	mPermuteCounters
	mInput
	mOutput
	mKind
	mIntParam
	mDeleteTask
	mDuplicateTask
	mAddCopy
	numMutations
)

const firstDataflow = mInput

var mutationNames = []string{"drop wait", "threshold", "retarget wait", "add wait", "out_counter", "fresh counter",
	"counter init", "sm", "move task", "merge counters", "swap out_counters", "permute buffers", "permute counters",
	"input", "output", "buffer kind", "int param", "delete task", "duplicate task", "add COPY"}

// decodeMutations reads up to max mutations, four bytes each.
func decodeMutations(data []byte, max int) []mutation {
	var ms []mutation
	for len(data) >= 4 && len(ms) < max {
		ms = append(ms, mutation{kind: int(data[0]) % numMutations, a: int(data[1]), b: int(data[2]), c: int(data[3])})
		data = data[4:]
	}
	return ms
}

// mutate applies ms to a deep copy of p; it returns the mutant, whether
// every mutation was a synchronisation-only one, and what each did.
func mutate(p *ir.Program, ms []mutation) (*ir.Program, bool, []string) {
	q := cloneProgram(p)
	syncOnly := true
	var log []string
	for _, m := range ms {
		if m.kind >= firstDataflow {
			syncOnly = false
		}
		if what := m.apply(q); what != "" {
			log = append(log, mutationNames[m.kind]+": "+what)
		}
	}
	return q, syncOnly, log
}

// cloneProgram deep-copies what the mutations edit (buffers, counters,
// tasks, pages); the target, meta and config are shared, never edited.
func cloneProgram(p *ir.Program) *ir.Program {
	q := *p
	q.Buffers = slices.Clone(p.Buffers)
	for i := range q.Buffers {
		q.Buffers[i].Shape = slices.Clone(q.Buffers[i].Shape)
	}
	q.Counters = slices.Clone(p.Counters)
	q.Tasks = make([]ir.Task, len(p.Tasks))
	for i := range p.Tasks {
		q.Tasks[i] = cloneTask(p.Tasks[i])
	}
	if p.Pages != nil {
		pages := *p.Pages
		pages.BufferToPage = slices.Clone(pages.BufferToPage)
		pages.Pages = slices.Clone(pages.Pages)
		q.Pages = &pages
	}
	return &q
}

func (m mutation) apply(p *ir.Program) string {
	nt, nb, nc := len(p.Tasks), len(p.Buffers), len(p.Counters)
	if nt == 0 || nb == 0 || nc == 0 {
		return ""
	}
	t := &p.Tasks[m.a%nt]
	switch m.kind {
	case mDropWait:
		if len(t.Waits) == 0 {
			return ""
		}
		k := m.b % len(t.Waits)
		w := t.Waits[k]
		t.Waits = slices.Delete(t.Waits, k, k+1)
		return fmt.Sprintf("task %s no longer waits for counter %d >= %d", t.Describe(), w.Counter, w.Threshold)
	case mThreshold:
		if len(t.Waits) == 0 {
			return ""
		}
		w := &t.Waits[m.b%len(t.Waits)]
		old := w.Threshold
		w.Threshold = max(1, old+m.c%5-2)
		return fmt.Sprintf("task %s waits for counter %d >= %d (was %d)", t.Describe(), w.Counter, w.Threshold, old)
	case mRetargetWait:
		if len(t.Waits) == 0 {
			return ""
		}
		w := &t.Waits[m.b%len(t.Waits)]
		old := w.Counter
		w.Counter = m.c % nc
		return fmt.Sprintf("task %s waits on counter %d instead of %d (threshold %d)", t.Describe(), w.Counter, old, w.Threshold)
	case mAddWait:
		if len(t.Waits) >= ir.MaxWaits {
			return ""
		}
		w := ir.Wait{Counter: m.b % nc, Threshold: 1 + m.c%3}
		t.Waits = append(t.Waits, w)
		return fmt.Sprintf("task %s also waits for counter %d >= %d", t.Describe(), w.Counter, w.Threshold)
	case mOutCounter:
		old := t.OutCounter
		t.OutCounter = m.b % nc
		return fmt.Sprintf("task %s signals counter %d instead of %d", t.Describe(), t.OutCounter, old)
	case mFreshCounter:
		// The task signals a new counter; its old counter's waiters that
		// the mutation picks wait on the new one (threshold 1) instead.
		old := t.OutCounter
		c := p.AddCounter("fresh")
		t.OutCounter = c
		moved := 0
		for i := range p.Tasks {
			for k := range p.Tasks[i].Waits {
				if w := &p.Tasks[i].Waits[k]; w.Counter == old && (m.b+i)%2 == 0 {
					w.Counter, w.Threshold = c, 1
					moved++
				}
			}
		}
		return fmt.Sprintf("task %s signals a new counter %d instead of %d; %d waits moved to it", t.Describe(), c, old, moved)
	case mCounterInit:
		c := &p.Counters[m.b%nc]
		c.Init = 1 + m.c%3
		return fmt.Sprintf("counter %d starts at %d", c.ID, c.Init)
	case mSM:
		old := "none"
		if t.SM != nil {
			old = fmt.Sprint(*t.SM)
		}
		if m.b%5 == 0 {
			t.SM = nil
			return fmt.Sprintf("task %s unplaced (was SM %s)", t.Describe(), old)
		}
		sm := m.c % 4
		t.SM = &sm
		return fmt.Sprintf("task %s on SM %d (was %s)", t.Describe(), sm, old)
	case mMoveTask:
		from, to := m.a%nt, m.b%nt
		if from == to {
			return ""
		}
		moved := p.Tasks[from]
		p.Tasks = slices.Delete(p.Tasks, from, from+1)
		p.Tasks = slices.Insert(p.Tasks, to, moved)
		renumberTasks(p)
		return fmt.Sprintf("task %s moved from list position %d to %d", moved.Label, from, to)
	case mMergeCounters:
		x, y := m.b%nc, m.c%nc
		if x == y {
			return ""
		}
		for i := range p.Tasks {
			if p.Tasks[i].OutCounter == y {
				p.Tasks[i].OutCounter = x
			}
			for k := range p.Tasks[i].Waits {
				if p.Tasks[i].Waits[k].Counter == y {
					p.Tasks[i].Waits[k].Counter = x
				}
			}
		}
		joinThresholds(p, x)
		return fmt.Sprintf("counter %d merged into counter %d (every wait on it now waits for all its producers)", y, x)
	case mSwapOutCounters:
		u := &p.Tasks[m.b%nt]
		if u == t {
			return ""
		}
		t.OutCounter, u.OutCounter = u.OutCounter, t.OutCounter
		return fmt.Sprintf("tasks %s and %s swap out_counters", t.Describe(), u.Describe())
	case mPermuteBuffers:
		perm := rand.New(rand.NewPCG(uint64(m.a), uint64(m.b))).Perm(nb)
		permuteBuffers(p, perm)
		return fmt.Sprintf("buffer ids permuted (seed %d/%d)", m.a, m.b)
	case mPermuteCounters:
		perm := rand.New(rand.NewPCG(uint64(m.a), uint64(m.b))).Perm(nc)
		permuteCounters(p, perm)
		return fmt.Sprintf("counter ids permuted (seed %d/%d)", m.a, m.b)
	case mInput:
		if len(t.Inputs) == 0 {
			return ""
		}
		k := m.b % len(t.Inputs)
		old := t.Inputs[k]
		t.Inputs[k] = m.c % nb
		return fmt.Sprintf("task %s reads buffer %d (%s) instead of %d", t.Describe(), t.Inputs[k], p.Buffers[t.Inputs[k]].Name, old)
	case mOutput:
		if len(t.Outputs) == 0 {
			return ""
		}
		k := m.b % len(t.Outputs)
		old := t.Outputs[k]
		t.Outputs[k] = m.c % nb
		return fmt.Sprintf("task %s writes buffer %d (%s) instead of %d", t.Describe(), t.Outputs[k], p.Buffers[t.Outputs[k]].Name, old)
	case mKind:
		buf := &p.Buffers[m.b%nb]
		old := buf.Kind
		buf.Kind = ir.BufferKind(m.c % 6)
		if buf.Kind == ir.Weight || buf.Kind == ir.Const {
			src := buf.Name
			if buf.Source == nil {
				buf.Source = &src
			}
		} else {
			buf.Source = nil
		}
		return fmt.Sprintf("buffer %d (%s) is a %s (was %s)", buf.ID, buf.Name, buf.Kind, old)
	case mIntParam:
		var ints []int
		for i, prm := range t.Params {
			if _, ok := prm.Val.Int64(); ok {
				ints = append(ints, i)
			}
		}
		if len(ints) == 0 {
			return ""
		}
		prm := &t.Params[ints[m.b%len(ints)]]
		old, _ := prm.Val.Int64()
		delta := int64(m.c%9 - 4)
		if m.c%4 == 0 {
			delta *= 16
		}
		*prm = ir.IntParam(prm.Key, old+delta)
		return fmt.Sprintf("task %s param %s = %d (was %d)", t.Describe(), prm.Key, old+delta, old)
	case mDeleteTask:
		gone := t.Describe()
		k := m.a % nt
		p.Tasks = slices.Delete(p.Tasks, k, k+1)
		renumberTasks(p)
		return "task " + gone + " deleted"
	case mDuplicateTask:
		dup := cloneTask(*t)
		dup.Label += "'"
		p.AddTask(dup)
		return fmt.Sprintf("task %s duplicated as task %d", t.Describe(), len(p.Tasks)-1)
	case mAddCopy:
		src, dst := m.b%nb, m.c%nb
		c := p.AddCounter("copy")
		task := ir.Task{Op: ir.OpCOPY, Inputs: []int{src}, Outputs: []int{dst}, OutCounter: c, Label: "copy"}
		if m.a%2 == 0 {
			// Ordered after one of the writers of its source, if any.
			for i := range p.Tasks {
				if slices.Contains(p.Tasks[i].Outputs, src) {
					task.Waits = []ir.Wait{{Counter: p.Tasks[i].OutCounter, Threshold: 1}}
					break
				}
			}
		}
		id := p.AddTask(task)
		// Readers of the destination that the mutation picks wait for it.
		for i := range p.Tasks {
			if i != id && slices.Contains(p.Tasks[i].Inputs, dst) && (m.a+i)%3 != 0 && len(p.Tasks[i].Waits) < ir.MaxWaits {
				p.Tasks[i].Waits = append(p.Tasks[i].Waits, ir.Wait{Counter: c, Threshold: 1})
			}
		}
		return fmt.Sprintf("a COPY (task %d) of buffer %d (%s) into buffer %d (%s)", id, src, p.Buffers[src].Name, dst, p.Buffers[dst].Name)
	}
	return ""
}

// joinThresholds sets every wait on counter c to c's producer count.
func joinThresholds(p *ir.Program, c int) {
	n := 0
	for i := range p.Tasks {
		if p.Tasks[i].OutCounter == c {
			n++
		}
	}
	for i := range p.Tasks {
		for k := range p.Tasks[i].Waits {
			if p.Tasks[i].Waits[k].Counter == c {
				p.Tasks[i].Waits[k].Threshold = max(n, 1)
			}
		}
	}
}

func cloneTask(t ir.Task) ir.Task {
	t.Inputs, t.Outputs, t.Waits, t.Params = slices.Clone(t.Inputs), slices.Clone(t.Outputs), slices.Clone(t.Waits), slices.Clone(t.Params)
	if t.SM != nil {
		sm := *t.SM
		t.SM = &sm
	}
	return t
}

func renumberTasks(p *ir.Program) {
	for i := range p.Tasks {
		p.Tasks[i].ID = i
	}
}

// permuteBuffers gives buffer i the id perm[i], moving it to that position
// and renaming every reference (tasks, pages).
func permuteBuffers(p *ir.Program, perm []int) {
	bufs := make([]ir.Buffer, len(p.Buffers))
	for i, b := range p.Buffers {
		b.ID = perm[i]
		bufs[perm[i]] = b
	}
	p.Buffers = bufs
	re := func(xs []int) {
		for k, x := range xs {
			if x >= 0 && x < len(perm) {
				xs[k] = perm[x]
			}
		}
	}
	for i := range p.Tasks {
		re(p.Tasks[i].Inputs)
		re(p.Tasks[i].Outputs)
	}
	if p.Pages != nil {
		for k := range p.Pages.BufferToPage {
			if b := p.Pages.BufferToPage[k].Buffer; b >= 0 && b < len(perm) {
				p.Pages.BufferToPage[k].Buffer = perm[b]
			}
		}
	}
}

// permuteCounters gives counter i the id perm[i].
func permuteCounters(p *ir.Program, perm []int) {
	ctrs := make([]ir.Counter, len(p.Counters))
	for i, c := range p.Counters {
		c.ID = perm[i]
		ctrs[perm[i]] = c
	}
	p.Counters = ctrs
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if t.OutCounter >= 0 && t.OutCounter < len(perm) {
			t.OutCounter = perm[t.OutCounter]
		}
		for k := range t.Waits {
			if c := t.Waits[k].Counter; c >= 0 && c < len(perm) {
				t.Waits[k].Counter = perm[c]
			}
		}
	}
}

// diffCase is one mutant's outcome, kept for the report.
type diffCase struct {
	base     *diffBase
	ms       []mutation
	syncOnly bool
	log      []string
	v        verdict
	prog     *ir.Program
}

func (b *diffBase) try(ms []mutation) diffCase {
	p, syncOnly, log := mutate(b.prog, ms)
	return diffCase{base: b, ms: ms, syncOnly: syncOnly, log: log, v: b.check(p, syncOnly), prog: p}
}

// minimise drops mutations one at a time while the mutant still fails.
func (b *diffBase) minimise(c diffCase) diffCase {
	for changed := true; changed; {
		changed = false
		for i := range c.ms {
			fewer := slices.Delete(slices.Clone(c.ms), i, i+1)
			if d := b.try(fewer); d.v.failure != "" {
				c, changed = d, true
				break
			}
		}
	}
	return c
}

func (c diffCase) report() string {
	var s strings.Builder
	fmt.Fprintf(&s, "differential check failed on base %q: %s\n", c.base.name, c.v.failure)
	fmt.Fprintf(&s, "minimised to %d mutation(s) (synchronisation only: %v):\n", len(c.log), c.syncOnly)
	for _, l := range c.log {
		fmt.Fprintf(&s, "  - %s\n", l)
	}
	fmt.Fprintf(&s, "validator: %s\n", validate.Validate(c.prog).String())
	fmt.Fprintf(&s, "the program (one line per buffer, counter and task):\n%s", programText(c.prog))
	return s.String()
}

// programText is a program one line per buffer, non-zero counter and task.
func programText(p *ir.Program) string {
	var s strings.Builder
	for _, b := range p.Buffers {
		fmt.Fprintf(&s, "  buffer %d %s %s %s%v %s\n", b.ID, b.Name, b.Kind, b.DType, b.Shape, b.Space)
	}
	for _, c := range p.Counters {
		if c.Init != 0 {
			fmt.Fprintf(&s, "  counter %d init %d\n", c.ID, c.Init)
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		var waits, params []string
		for _, w := range t.Waits {
			waits = append(waits, fmt.Sprintf("c%d>=%d", w.Counter, w.Threshold))
		}
		for _, prm := range t.Params {
			params = append(params, prm.Key+"="+prm.Val.Repr())
		}
		sm := "-"
		if t.SM != nil {
			sm = fmt.Sprint(*t.SM)
		}
		fmt.Fprintf(&s, "  task %d %s in%v out%v -> c%d waits[%s] sm %s {%s} %s\n", t.ID, t.Op, t.Inputs, t.Outputs,
			t.OutCounter, strings.Join(waits, " "), sm, strings.Join(params, " "), t.Label)
	}
	return s.String()
}

// diffStats counts what a run of the check saw.
type diffStats struct{ mutants, accepted, syncAccepted, skipped int }

func (b *diffBase) runOne(t testing.TB, ms []mutation, st *diffStats) {
	c := b.try(ms)
	st.mutants++
	if c.v.accepted {
		st.accepted++
		if c.syncOnly {
			st.syncAccepted++
		}
	}
	if c.v.skipped != "" {
		st.skipped++
	}
	if c.v.failure != "" {
		t.Fatal(b.minimise(c).report())
	}
}

// TestDifferential is the bounded differential check of `make test`: a
// fixed sample of mutants of each base (1-4 mutations each).
func TestDifferential(t *testing.T) {
	const perBase = 1000
	for _, b := range diffBases(t) {
		rng := rand.New(rand.NewPCG(2024, uint64(len(b.name))))
		var st diffStats
		for range perBase {
			data := make([]byte, 4*(1+rng.IntN(4)))
			for k := range data {
				data[k] = byte(rng.UintN(256))
			}
			b.runOne(t, decodeMutations(data, 8), &st)
		}
		t.Logf("%s: %d mutants, %d accepted (%d synchronisation-only), %d not bindable", b.name, st.mutants, st.accepted, st.syncAccepted, st.skipped)
		// The sample must reach the oracle, or the test proves nothing.
		if st.accepted < perBase/20 || st.syncAccepted < perBase/50 {
			t.Fatalf("%s: too few accepted mutants to check (%d, %d synchronisation-only)", b.name, st.accepted, st.syncAccepted)
		}
	}
}

// FuzzDifferential lets the fuzzer choose the base and up to 8 mutations.
func FuzzDifferential(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{0, mDropWait, 11, 0, 0})
	f.Add([]byte{1, mSM, 3, 1, 2, mMoveTask, 4, 9, 0})
	f.Add([]byte{2, mAddCopy, 0, 6, 4})
	f.Add([]byte{0, mCounterInit, 0, 0, 2})
	f.Add([]byte{1, mMergeCounters, 0, 3, 4, mDropWait, 20, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		bases := diffBases(t)
		b := bases[int(data[0])%len(bases)]
		var st diffStats
		b.runOne(t, decodeMutations(data[1:], 8), &st)
	})
}

// TestDifferentialOracleCatches runs the oracle, without the validator's
// gate, on the programs of the issue the validator used to accept: each
// must be caught, so that a validator that let them through again would
// fail the differential check.
func TestDifferentialOracleCatches(t *testing.T) {
	b := diffBases(t)[0]
	embed := bufferNamed(b.prog, "embed.weight")
	tokenID, pos := bufferNamed(b.prog, schedule.TokenInput), bufferNamed(b.prog, schedule.PosInput)
	var lmHead int
	for i := range b.prog.Buffers {
		if strings.Contains(b.prog.Buffers[i].Name, "lm_head") {
			lmHead = i
		}
	}
	cases := []struct {
		name string
		edit func(p *ir.Program)
		want string
	}{
		{"COPY writes embed.weight", func(p *ir.Program) {
			c := p.AddCounter("copy")
			p.AddTask(ir.Task{Op: ir.OpCOPY, Inputs: []int{lmHead}, Outputs: []int{embed}, OutCounter: c, Label: "copy"})
		}, "wrote the weights"},
		{"a task writes an IO_INPUT", func(p *ir.Program) {
			c := p.AddCounter("copy")
			p.AddTask(ir.Task{Op: ir.OpCOPY, Inputs: []int{pos}, Outputs: []int{tokenID}, OutCounter: c, Label: "copy"})
		}, "changed the input"},
		{"a dropped wait", func(p *ir.Program) {
			for i := range p.Tasks {
				if p.Tasks[i].Op == ir.OpAttentionTile {
					p.Tasks[i].Waits = p.Tasks[i].Waits[:0]
				}
			}
		}, "reads before a write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := cloneProgram(b.prog)
			tc.edit(p)
			if v := b.oracle(p, false); !strings.Contains(v.failure, tc.want) {
				t.Fatalf("the oracle says %q, want %q", v.failure, tc.want)
			}
		})
	}
	// And what the validator now refuses it refuses for the memory model.
	p := cloneProgram(b.prog)
	cases[0].edit(p)
	if rep := validate.Validate(p); !rep.Has(validate.CodeReadOnlyWrite) {
		t.Fatalf("the validator accepts a COPY into embed.weight:\n%s", rep.String())
	}
}
