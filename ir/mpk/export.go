package mpk

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// Fixed positions of the canonical layout (doc.go): the termination task and
// event, the begin-task-graph task and the event that launches every other
// task once per iteration, and the first counter event.
const (
	terminateTask    = 0
	beginTask        = 1
	terminationEvent = 0
	launchEvent      = 1
	firstCounter     = 2
)

// ExportOptions are the parts of an exported graph amk's program does not fix.
type ExportOptions struct {
	GPU int // the gpu id written into every event id (MPK's my_gpu_id)
}

// ToGraph writes an amk program as an MPK task graph. A program imported
// from MPK (meta.mpk present) is written back in its original layout; any
// other program gets amk's canonical layout with an "amk" sidecar holding
// what MPK has no field for. What MPK cannot express is an error naming the
// program field: more operands than a TaskDesc holds, two thresholds on one
// counter, duplicate buffer names, ids that are not dense.
func ToGraph(p *ir.Program, opt ExportOptions) (*Graph, error) {
	if opt.GPU < 0 || opt.GPU > gpuMask {
		return nil, fmt.Errorf("gpu id %d outside [0, %d]", opt.GPU, gpuMask)
	}
	if err := checkDense(p); err != nil {
		return nil, err
	}
	if _, ok := p.Meta.Get(metaKey); ok {
		return graphFromImported(p)
	}
	return canonicalGraph(p, opt)
}

// checkDense requires ids equal to positions: MPK addresses tasks, events and
// tensors by position or name, never by a separate id.
func checkDense(p *ir.Program) error {
	for i := range p.Buffers {
		if p.Buffers[i].ID != i {
			return fmt.Errorf("buffers[%d].id: %d; MPK needs ids equal to positions", i, p.Buffers[i].ID)
		}
	}
	for i := range p.Counters {
		if p.Counters[i].ID != i {
			return fmt.Errorf("counters[%d].id: %d; MPK needs ids equal to positions", i, p.Counters[i].ID)
		}
		if p.Counters[i].Init != 0 {
			return fmt.Errorf("counters[%d].init: %d; MPK's event counters start at 0", i, p.Counters[i].Init)
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if t.ID != i {
			return fmt.Errorf("tasks[%d].id: %d; MPK needs ids equal to positions", i, t.ID)
		}
		if len(t.Inputs) > MaxTaskInputs {
			return fmt.Errorf("tasks[%d].inputs: %d inputs; an MPK TaskDesc holds %d", i, len(t.Inputs), MaxTaskInputs)
		}
		if len(t.Outputs) > MaxTaskOutputs {
			return fmt.Errorf("tasks[%d].outputs: %d outputs; an MPK TaskDesc holds %d", i, len(t.Outputs), MaxTaskOutputs)
		}
		for k, b := range append(append([]int(nil), t.Inputs...), t.Outputs...) {
			if p.Buffer(b) == nil {
				return fmt.Errorf("tasks[%d]: operand %d names buffer %d, which does not exist", i, k, b)
			}
		}
		if t.OutCounter < 0 || t.OutCounter >= len(p.Counters) {
			return fmt.Errorf("tasks[%d].out_counter: %d names no counter", i, t.OutCounter)
		}
		for k, w := range t.Waits {
			if w.Counter < 0 || w.Counter >= len(p.Counters) {
				return fmt.Errorf("tasks[%d].waits[%d].counter: %d names no counter", i, k, w.Counter)
			}
		}
	}
	return nil
}

// counterThresholds is each counter's one threshold: the threshold of its
// waits (which must agree: an MPK event has one num_triggers) or, for a
// counter nobody waits on, its producer count.
func counterThresholds(p *ir.Program) ([]int, error) {
	thr := make([]int, len(p.Counters))
	set := make([]int, len(p.Counters)) // the task that fixed thr, plus one
	for i := range p.Tasks {
		thr[p.Tasks[i].OutCounter]++
	}
	for i := range p.Tasks {
		for k, w := range p.Tasks[i].Waits {
			switch {
			case set[w.Counter] == 0:
				thr[w.Counter], set[w.Counter] = w.Threshold, i+1
			case thr[w.Counter] != w.Threshold:
				return nil, fmt.Errorf("tasks[%d].waits[%d].threshold: %d, but tasks[%d] waits on counter %d with %d; an MPK event has one num_triggers",
					i, k, w.Threshold, set[w.Counter]-1, w.Counter, thr[w.Counter])
			}
		}
	}
	return thr, nil
}

// dataTypeOf is the Mirage data_type closest to an amk dtype. F8E5M2 and
// BOOL have no exact Mirage code; the sidecar keeps the amk dtype.
func dataTypeOf(d ir.DType) int {
	switch d {
	case ir.F32:
		return 950
	case ir.F16:
		return 940
	case ir.BF16:
		return 941
	case ir.F8E4M3, ir.F8E5M2:
		return 930
	case ir.I32:
		return 955
	case ir.I8:
		return 935
	case ir.I4:
		return 925
	}
	return 936 // U8, BOOL
}

// dtypeOf is the amk dtype of a Mirage data_type (U8 for codes amk lacks).
func dtypeOf(code int) ir.DType {
	switch code {
	case 950:
		return ir.F32
	case 940:
		return ir.F16
	case 941:
		return ir.BF16
	case 930:
		return ir.F8E4M3
	case 955, 956:
		return ir.I32
	case 935:
		return ir.I8
	case 925, 926, 920:
		return ir.I4
	}
	return ir.U8
}

// wholeView is a task's view of a whole buffer.
func wholeView(b *ir.Buffer) Tensor {
	dims := make([]int64, len(b.Shape))
	for i, d := range b.Shape {
		dims[i] = int64(d)
	}
	return Tensor{BasePtr: b.Name, Dims: dims, Strides: b.Strides(), DataType: dataTypeOf(b.DType)}
}

// outputView is the part of a buffer a task writes: a GEMV/GEMM tile writes
// columns [n_off, n_off+N_tile) (and a GEMM tile rows [m_off, m_off+M_tile))
// of its output (docs/spec/ir.md §7); every other task writes the whole buffer.
func outputView(t *ir.Task, b *ir.Buffer) Tensor {
	v := wholeView(b)
	if (t.Op != ir.OpGEMVTile && t.Op != ir.OpGEMMTile) || len(v.Dims) == 0 || b.DType.Bits()%8 != 0 {
		return v
	}
	last := len(v.Dims) - 1
	nOff, ok1 := t.Params.Int("n_off")
	nTile, ok2 := t.Params.Int("N_tile")
	if !ok1 || !ok2 || nOff < 0 || nTile <= 0 || nOff+nTile > v.Dims[last] {
		return v
	}
	elem := int64(b.DType.Bits() / 8)
	v.Offset = nOff * v.Strides[last] * elem
	v.Dims[last] = nTile
	if t.Op == ir.OpGEMMTile && last > 0 {
		mOff, ok1 := t.Params.Int("m_off")
		mTile, ok2 := t.Params.Int("M_tile")
		if ok1 && ok2 && mOff >= 0 && mTile > 0 && mOff+mTile <= v.Dims[last-1] {
			v.Offset += mOff * v.Strides[last-1] * elem
			v.Dims[last-1] = mTile
		}
	}
	return v
}

func canonicalGraph(p *ir.Program, opt ExportOptions) (*Graph, error) {
	seen := map[string]int{}
	for i := range p.Buffers {
		name := p.Buffers[i].Name
		if j, dup := seen[name]; dup {
			return nil, fmt.Errorf("buffers[%d].name: %q is also buffers[%d]'s name; MPK tells tensors apart by name", i, name, j)
		}
		if name == "" || name == "nullptr" {
			return nil, fmt.Errorf("buffers[%d].name: %q cannot name an MPK tensor", i, name)
		}
		seen[name] = i
	}
	thr, err := counterThresholds(p)
	if err != nil {
		return nil, err
	}
	waited := make([]bool, len(p.Counters))
	produced := make([]bool, len(p.Counters))
	for i := range p.Tasks {
		produced[p.Tasks[i].OutCounter] = true
		for _, w := range p.Tasks[i].Waits {
			waited[w.Counter] = true
		}
	}
	ev := func(index int) EventID { return MakeEventID(opt.GPU, index, false) }
	g := &Graph{FirstTasks: []int64{}}
	g.Tasks = append(g.Tasks, scaffoldTask(TaskTerminate, InvalidEventID), scaffoldTask(TaskBeginTaskGraph, ev(launchEvent)))
	g.Events = append(g.Events,
		Event{EventType: EventCode(NumberingMirage, KindTermination), NumTriggers: 1},
		Event{EventType: EventCode(NumberingMirage, KindLaunchDependentTasks), NumTriggers: 1, FirstTaskID: firstCounter})
	for c := range p.Counters {
		g.Events = append(g.Events, Event{EventType: EventCode(NumberingMirage, KindEmpty), NumTriggers: thr[c]})
	}
	var relays []Task
	for i := range p.Tasks {
		t := &p.Tasks[i]
		mt := Task{TaskType: TaskAMKBase + int(t.Op), TriggerEvent: ev(firstCounter + t.OutCounter), DependentEvent: InvalidEventID}
		setDefaultMetadata(&mt)
		for _, b := range t.Inputs {
			mt.Inputs = append(mt.Inputs, wholeView(p.Buffer(b)))
		}
		for _, b := range t.Outputs {
			mt.Outputs = append(mt.Outputs, outputView(t, p.Buffer(b)))
		}
		switch len(t.Waits) {
		case 0:
			g.FirstTasks = append(g.FirstTasks, int64(len(g.Tasks)))
		case 1:
			mt.DependentEvent = ev(firstCounter + t.Waits[0].Counter)
		default:
			join := len(g.Events)
			g.Events = append(g.Events, Event{EventType: EventCode(NumberingMirage, KindEmpty), NumTriggers: len(t.Waits)})
			mt.DependentEvent = ev(join)
			for _, w := range t.Waits {
				relays = append(relays, relayTask(ev(firstCounter+w.Counter), ev(join)))
			}
		}
		g.Tasks = append(g.Tasks, mt)
	}
	end := len(g.Events)
	ends := 0
	for c := range p.Counters {
		if produced[c] && !waited[c] {
			relays = append(relays, relayTask(ev(firstCounter+c), ev(end)))
			ends++
		}
	}
	g.Events = append(g.Events, Event{EventType: EventCode(NumberingMirage, KindEndOfTaskGraph), NumTriggers: ends})
	g.Tasks = append(g.Tasks, relays...)
	g.Events[launchEvent].LastTaskID = int64(len(g.Tasks))
	side := sidecarOf(p)
	g.AMK = &side
	return g, nil
}

func setDefaultMetadata(t *Task) {
	t.RequestID, t.ExpertOffset, t.KVIdx, t.MergeTaskOffset, t.TaskOffset =
		defaultTaskMetadata, defaultTaskMetadata, defaultTaskMetadata, defaultTaskMetadata, defaultTaskMetadata
}

func scaffoldTask(taskType int, trigger EventID) Task {
	t := Task{TaskType: taskType, TriggerEvent: trigger, DependentEvent: InvalidEventID, Inputs: []Tensor{}, Outputs: []Tensor{}}
	setDefaultMetadata(&t)
	return t
}

// relayTask waits for one event and signals another: amk's join relay.
func relayTask(wait, signal EventID) Task {
	t := scaffoldTask(TaskAMKJoin, signal)
	t.DependentEvent = wait
	return t
}

// sidecarOf is the program's JSON without what the MPK tasks and events
// already say (each task's inputs, outputs, out_counter and waits).
func sidecarOf(p *ir.Program) pyjson.Value {
	root := ir.ToValue(p)
	tasks, _ := root.Get("tasks")
	kept := make([]pyjson.Value, len(tasks.Arr))
	for i, t := range tasks.Arr {
		var ms []pyjson.Member
		for _, m := range t.Obj {
			if !structural[m.Key] {
				ms = append(ms, m)
			}
		}
		kept[i] = pyjson.ObjectValue(ms...)
	}
	root.Set("tasks", pyjson.ArrayValue(kept...))
	return root
}

// structural are the task keys the MPK graph itself carries.
var structural = map[string]bool{"inputs": true, "outputs": true, "out_counter": true, "waits": true}
