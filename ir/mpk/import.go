package mpk

import (
	"fmt"
	"strconv"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// metaKey is the program meta field that keeps, for a program imported from
// MPK, what amk's IR has no field for (doc.go, "Translation").
const metaKey = "mpk"

// ToProgram translates an MPK task graph into an amk program. A graph with
// amk's sidecar (one amk exported) gives back exactly the program exported;
// any other graph is translated task for task and event for event (doc.go).
// A graph whose structure does not translate (an event id naming no event,
// a sidecar that disagrees with the tasks) is an error naming the field.
func ToProgram(g *Graph) (*ir.Program, error) {
	if g.AMK != nil {
		return programFromSidecar(g)
	}
	return programFromMPK(g)
}

// eventRef checks that an event id names an event of the graph.
func eventRef(g *Graph, id EventID, path string) error {
	if id.Valid() && (id.Index() >= len(g.Events) || !id.Canonical()) {
		return fmt.Errorf("%s: %d (%s) names no event of all_events (%d events)", path, uint64(id), id, len(g.Events))
	}
	return nil
}

func intsValue(xs []int) pyjson.Value {
	out := make([]pyjson.Value, len(xs))
	for i, x := range xs {
		out[i] = pyjson.IntValue(int64(x))
	}
	return pyjson.ArrayValue(out...)
}

func programFromSidecar(g *Graph) (*ir.Program, error) {
	side := *g.AMK
	arr := func(key string) ([]pyjson.Value, error) {
		v, ok := side.Get(key)
		if !ok || v.Kind != pyjson.Array {
			return nil, fmt.Errorf("amk.%s: expected an array", key)
		}
		return v.Arr, nil
	}
	sideTasks, err := arr("tasks")
	if err != nil {
		return nil, err
	}
	sideCounters, err := arr("counters")
	if err != nil {
		return nil, err
	}
	sideBuffers, err := arr("buffers")
	if err != nil {
		return nil, err
	}
	nT, nC := len(sideTasks), len(sideCounters)
	if len(g.Tasks) < 2+nT {
		return nil, fmt.Errorf("all_tasks: %d tasks, but the amk sidecar describes %d after the two scaffold tasks", len(g.Tasks), nT)
	}
	if g.Tasks[terminateTask].TaskType != TaskTerminate || g.Tasks[beginTask].TaskType != TaskBeginTaskGraph {
		return nil, fmt.Errorf("all_tasks[0..1]: amk's layout starts with TASK_TERMINATE and TASK_BEGIN_TASK_GRAPH")
	}
	if len(g.Events) < firstCounter+nC {
		return nil, fmt.Errorf("all_events: %d events, fewer than the %d counter events the sidecar needs", len(g.Events), firstCounter+nC)
	}
	for m := 2 + nT; m < len(g.Tasks); m++ {
		if g.Tasks[m].TaskType != TaskAMKJoin {
			return nil, fmt.Errorf("all_tasks[%d].task_type: %s after the amk tasks; only join relays belong there", m, TaskTypeName(g.Tasks[m].TaskType))
		}
	}
	bufferID := map[string]int{}
	for i, b := range sideBuffers {
		if name, ok := b.Get("name"); ok && name.Kind == pyjson.String {
			bufferID[name.S] = i
		}
	}
	counterOf := func(id EventID, path string) (int, error) {
		if err := eventRef(g, id, path); err != nil {
			return 0, err
		}
		c := id.Index() - firstCounter
		if !id.Valid() || c < 0 || c >= nC {
			return 0, fmt.Errorf("%s: %s is not one of the %d counter events (e%d..e%d)", path, id, nC, firstCounter, firstCounter+nC-1)
		}
		return c, nil
	}
	relaysOf := map[int][]int{} // join event index -> relay tasks, in order
	for m := 2 + nT; m < len(g.Tasks); m++ {
		if err := eventRef(g, g.Tasks[m].TriggerEvent, "all_tasks["+strconv.Itoa(m)+"].trigger_event"); err != nil {
			return nil, err
		}
		relaysOf[g.Tasks[m].TriggerEvent.Index()] = append(relaysOf[g.Tasks[m].TriggerEvent.Index()], m)
	}
	tasks := make([]pyjson.Value, nT)
	for i, st := range sideTasks {
		m := 2 + i
		mt := &g.Tasks[m]
		path := "all_tasks[" + strconv.Itoa(m) + "]"
		opName, _ := st.Get("op")
		if op, err := ir.ParseOp(opName.S); err == nil && mt.TaskType != TaskAMKBase+int(op) {
			return nil, fmt.Errorf("%s.task_type: %s, but the amk sidecar says op %s (%d)", path, TaskTypeName(mt.TaskType), op, TaskAMKBase+int(op))
		}
		operands := func(views []Tensor, key string) ([]int, error) {
			ids := make([]int, len(views))
			for k, v := range views {
				id, ok := bufferID[v.BasePtr]
				if !ok {
					return nil, fmt.Errorf("%s.%s[%d].base_ptr: %q is no buffer of the amk sidecar", path, key, k, v.BasePtr)
				}
				ids[k] = id
			}
			return ids, nil
		}
		ins, err := operands(mt.Inputs, "inputs")
		if err != nil {
			return nil, err
		}
		outs, err := operands(mt.Outputs, "outputs")
		if err != nil {
			return nil, err
		}
		out, err := counterOf(mt.TriggerEvent, path+".trigger_event")
		if err != nil {
			return nil, err
		}
		var waits []pyjson.Value
		wait := func(id EventID, path string) error {
			c, err := counterOf(id, path)
			if err == nil {
				waits = append(waits, pyjson.ObjectValue(pyjson.M("counter", pyjson.IntValue(int64(c))),
					pyjson.M("threshold", pyjson.IntValue(int64(g.Events[id.Index()].NumTriggers)))))
			}
			return err
		}
		dep := mt.DependentEvent
		if err := eventRef(g, dep, path+".dependent_event"); err != nil {
			return nil, err
		}
		switch c := dep.Index() - firstCounter; {
		case !dep.Valid():
		case c >= 0 && c < nC:
			err = wait(dep, path+".dependent_event")
		case len(relaysOf[dep.Index()]) == 0:
			err = fmt.Errorf("%s.dependent_event: %s is neither a counter event nor triggered by a join relay", path, dep)
		default:
			for _, r := range relaysOf[dep.Index()] {
				if err = wait(g.Tasks[r].DependentEvent, "all_tasks["+strconv.Itoa(r)+"].dependent_event"); err != nil {
					break
				}
			}
		}
		if err != nil {
			return nil, err
		}
		if waits == nil {
			waits = []pyjson.Value{}
		}
		obj := pyjson.ObjectValue()
		copyKey := func(key string) {
			if v, ok := st.Get(key); ok {
				obj.Set(key, v)
			}
		}
		copyKey("id")
		copyKey("op")
		obj.Set("inputs", intsValue(ins))
		obj.Set("outputs", intsValue(outs))
		obj.Set("out_counter", pyjson.IntValue(int64(out)))
		obj.Set("waits", pyjson.ArrayValue(waits...))
		for _, k := range []string{"params", "sm", "est_bytes", "est_flops", "label"} {
			copyKey(k)
		}
		tasks[i] = obj
	}
	root := pyjson.ObjectValue()
	for _, k := range []string{"ir_version", "abi_version", "meta", "target", "buffers", "counters", "tasks", "pages", "config"} {
		if k == "tasks" {
			root.Set(k, pyjson.ArrayValue(tasks...))
		} else if v, ok := side.Get(k); ok {
			root.Set(k, v)
		}
	}
	p, err := ir.FromValue(root)
	if err != nil {
		return nil, fmt.Errorf("the amk sidecar, read as a program: %w", err)
	}
	return p, nil
}

// eventPlace is the gpu id and NVSHMEM flag an event is referred to with.
type eventPlace struct {
	gpu     int
	nvshmem bool
	seen    bool
}

// launchersOf lists, per task, the events of kind LAUNCH_TASKS or
// LAUNCH_MASSIVE_TASKS whose range holds it: starting it waits for them.
// LAUNCH_DEPENDENT_TASKS starts an iteration and orders nothing inside it.
func launchersOf(events []Event, nTasks int) [][]int {
	out := make([][]int, nTasks)
	for e, ev := range events {
		if k := ev.Kind(); k != KindLaunchTasks && k != KindLaunchMassiveTasks {
			continue
		}
		for t := max(0, ev.FirstTaskID); t < min(int64(nTasks), ev.LastTaskID); t++ {
			out[t] = append(out[t], e)
		}
	}
	return out
}

func programFromMPK(g *Graph) (*ir.Program, error) {
	// Each event keeps the gpu id and NVSHMEM flag it is waited on with (or
	// first signalled with); a task signalling it under another id (an
	// NVSHMEM signal to a peer gpu) keeps its own in meta.mpk.
	places := make([]eventPlace, len(g.Events))
	triggerPlace := make([]*eventPlace, len(g.Tasks))
	untriggered := false
	for pass := range 2 {
		for m := range g.Tasks {
			t := &g.Tasks[m]
			id, path := t.DependentEvent, "all_tasks["+strconv.Itoa(m)+"].dependent_event"
			if pass == 1 {
				id, path = t.TriggerEvent, "all_tasks["+strconv.Itoa(m)+"].trigger_event"
				untriggered = untriggered || !id.Valid()
			}
			if err := eventRef(g, id, path); err != nil {
				return nil, err
			}
			if !id.Valid() {
				continue
			}
			here := eventPlace{gpu: id.GPU(), nvshmem: id.NVSHMEM(), seen: true}
			switch pl := &places[id.Index()]; {
			case !pl.seen:
				*pl = here
			case *pl == here:
			case pass == 0:
				return nil, fmt.Errorf("%s: %s, but event %d is waited on as %s elsewhere; amk keeps one id per event", path, id, id.Index(), MakeEventID(pl.gpu, id.Index(), pl.nvshmem))
			default:
				triggerPlace[m] = &here
			}
		}
	}
	p := ir.NewProgram()
	p.SetMeta("model", pyjson.StringValue("mpk"))
	p.SetMeta("source", pyjson.StringValue("MPK task_graph.json"))

	// Tensors -> buffers: one per base_ptr, sized to the furthest byte any
	// view reaches; read-only tensors count as weights. A tensor whose views
	// are all rows or column blocks of one row-major matrix is shaped as
	// that matrix, so that views keep their place in it (rowLayout).
	type tensorInfo struct {
		id       int
		dataType int
		mixed    bool
		hi       int64
		written  bool
		views    []Tensor
	}
	infos := map[string]*tensorInfo{}
	var order []string
	visit := func(v Tensor, written bool) {
		ti, ok := infos[v.BasePtr]
		if !ok {
			ti = &tensorInfo{id: len(order), dataType: v.DataType}
			infos[v.BasePtr] = ti
			order = append(order, v.BasePtr)
		}
		ti.mixed = ti.mixed || ti.dataType != v.DataType
		_, hi := v.Footprint()
		ti.hi = max(ti.hi, hi)
		ti.written = ti.written || written
		ti.views = append(ti.views, v)
	}
	for m := range g.Tasks {
		for _, v := range g.Tasks[m].Inputs {
			visit(v, false)
		}
		for _, v := range g.Tasks[m].Outputs {
			visit(v, true)
		}
	}
	for _, name := range order {
		ti := infos[name]
		dt := dtypeOf(ti.dataType)
		if ti.mixed || dt.Bits()%8 != 0 && dt != ir.I4 {
			dt = ir.U8
		}
		elems := ti.hi * 8 / int64(dt.Bits())
		if dt.NBytes(elems) < ti.hi {
			elems++
		}
		kind := ir.Weight
		if ti.written {
			kind = ir.Activation
		}
		shape := []int{int(elems)}
		if !ti.mixed && dt.Bits()%8 == 0 {
			if rows, cols, ok := rowLayout(ti.views, int64(dt.Bits()/8), elems); ok {
				shape = []int{int(rows), int(cols)}
			}
		}
		p.AddBuffer(ir.Buffer{Name: name, Kind: kind, DType: dt, Shape: shape})
	}

	// Events -> counters, one each, plus one for tasks that signal nothing.
	for e, ev := range g.Events {
		p.AddCounter(ev.Kind().String() + " e" + strconv.Itoa(e))
	}
	noTrigger := -1
	if untriggered {
		noTrigger = p.AddCounter("no trigger_event")
	}

	launchers := launchersOf(g.Events, len(g.Tasks))
	metaTasks := make([]pyjson.Value, len(g.Tasks))
	for m := range g.Tasks {
		mt := &g.Tasks[m]
		t := ir.Task{Op: opOf(mt.TaskType), Label: TaskTypeName(mt.TaskType) + " #" + strconv.Itoa(m), OutCounter: noTrigger}
		if mt.TriggerEvent.Valid() {
			t.OutCounter = mt.TriggerEvent.Index()
		}
		views := func(vs []Tensor, ids *[]int) pyjson.Value {
			out := make([]pyjson.Value, len(vs))
			for k, v := range vs {
				*ids = append(*ids, infos[v.BasePtr].id)
				lo, hi := v.Footprint()
				t.EstBytes += hi - lo
				out[k] = pyjson.ArrayValue(pyjson.IntValue(v.Offset), pyjson.IntValue(int64(v.DataType)), i64s(v.Dims), i64s(v.Strides))
			}
			return pyjson.ArrayValue(out...)
		}
		ins := views(mt.Inputs, &t.Inputs)
		outs := views(mt.Outputs, &t.Outputs)
		if t.Op == ir.OpGEMVTile && len(mt.Outputs) == 1 {
			// A projection tile keeps the columns its output view covers,
			// so that tiles writing disjoint columns of one tensor are
			// seen as disjoint, as they are (amk's validator knows a
			// GEMV tile's footprint by n_off and N_tile).
			if off, n, ok := columnTile(mt.Outputs[0], p.Buffers[t.Outputs[0]]); ok {
				t.Params = ir.Params{ir.IntParam("N_tile", n), ir.IntParam("n_off", off)}
			}
		}
		dependsOnLauncher := false
		if dep := mt.DependentEvent; dep.Valid() {
			t.Waits = append(t.Waits, ir.Wait{Counter: dep.Index(), Threshold: g.Events[dep.Index()].NumTriggers})
		}
		for _, e := range launchers[m] {
			if mt.DependentEvent.Valid() && e == mt.DependentEvent.Index() {
				dependsOnLauncher = true
				continue
			}
			t.Waits = append(t.Waits, ir.Wait{Counter: e, Threshold: g.Events[e].NumTriggers})
		}
		p.AddTask(t)
		metaTasks[m] = pyjson.ObjectValue(
			pyjson.M("task", pyjson.ArrayValue(pyjson.IntValue(int64(mt.TaskType)), pyjson.IntValue(int64(mt.VariantID)),
				pyjson.IntValue(int64(mt.RequestID)), pyjson.IntValue(int64(mt.ExpertOffset)), pyjson.IntValue(int64(mt.KVIdx)),
				pyjson.IntValue(int64(mt.MergeTaskOffset)), pyjson.IntValue(int64(mt.TaskOffset)))),
			pyjson.M("inputs", ins), pyjson.M("outputs", outs), pyjson.M("waits_on_launcher", pyjson.BoolValue(dependsOnLauncher)))
		if tp := triggerPlace[m]; tp != nil {
			metaTasks[m].Set("trigger_gpu", pyjson.ArrayValue(pyjson.IntValue(int64(tp.gpu)), pyjson.BoolValue(tp.nvshmem)))
		}
	}
	metaEvents := make([]pyjson.Value, len(g.Events))
	for e, ev := range g.Events {
		metaEvents[e] = pyjson.ArrayValue(pyjson.IntValue(int64(ev.EventType)), pyjson.IntValue(int64(ev.NumTriggers)),
			pyjson.IntValue(ev.FirstTaskID), pyjson.IntValue(ev.LastTaskID), pyjson.IntValue(int64(places[e].gpu)), pyjson.BoolValue(places[e].nvshmem))
	}
	p.SetMeta(metaKey, pyjson.ObjectValue(
		pyjson.M("events", pyjson.ArrayValue(metaEvents...)),
		pyjson.M("first_tasks", i64s(g.FirstTasks)),
		pyjson.M("tasks", pyjson.ArrayValue(metaTasks...)),
		pyjson.M("no_trigger_counter", pyjson.IntValue(int64(noTrigger))),
	))
	return p, nil
}

// rowLayout finds the row-major matrix [rows, cols] of elemBytes-byte
// elements (rows*cols = elems) in which every view of one tensor is a
// block of whole rows' columns: a rank-1 run of elements or a rank-2 view
// [r, c] with strides [cols, 1] that stays within its rows. cols is the
// row stride the multi-row views share (one row of all elems when none has
// several rows). ok is false when the views do not fit one such matrix; the
// tensor then stays flat.
func rowLayout(views []Tensor, elemBytes, elems int64) (rows, cols int64, ok bool) {
	cols = elems
	for _, v := range views {
		if len(v.Dims) == 2 && v.Dims[0] > 1 {
			cols = v.Strides[0]
			break
		}
	}
	if cols <= 0 || elems%cols != 0 {
		return 0, 0, false
	}
	for _, v := range views {
		if _, _, _, _, inside := block(v, elemBytes, cols); !inside {
			return 0, 0, false
		}
	}
	return elems / cols, cols, true
}

// block places a view in a row-major matrix of cols columns: rows [row0,
// row0+r) x columns [col0, col0+c); inside is false for a view that is not
// such a block (a gap between its elements, a stride other than the
// matrix's, an offset between elements, or columns past the row).
func block(v Tensor, elemBytes, cols int64) (row0, r, col0, c int64, inside bool) {
	if elemBytes <= 0 || v.Offset%elemBytes != 0 {
		return 0, 0, 0, 0, false
	}
	o := v.Offset / elemBytes
	switch {
	case len(v.Dims) == 1 && (v.Dims[0] == 1 || v.Strides[0] == 1):
		r, c = 1, v.Dims[0]
	case len(v.Dims) == 2 && (v.Dims[1] == 1 || v.Strides[1] == 1) && (v.Dims[0] == 1 || v.Strides[0] == cols):
		r, c = v.Dims[0], v.Dims[1]
	default:
		return 0, 0, 0, 0, false
	}
	row0, col0 = o/cols, o%cols
	if r <= 0 || c <= 0 || col0+c > cols {
		return 0, 0, 0, 0, false
	}
	return row0, r, col0, c, true
}

// columnTile is a projection's output view as a GEMV tile of its buffer:
// the columns [off, off+n) of every row. ok is false when the buffer is
// not a matrix or the view does not cover all its rows (a GEMV tile writes
// every row of its columns).
func columnTile(v Tensor, b ir.Buffer) (off, n int64, ok bool) {
	if len(b.Shape) != 2 {
		return 0, 0, false
	}
	rows, cols := int64(b.Shape[0]), int64(b.Shape[1])
	row0, r, col0, c, inside := block(v, int64(b.DType.Bits()/8), cols)
	if !inside || row0 != 0 || r != rows {
		return 0, 0, false
	}
	return col0, c, true
}
