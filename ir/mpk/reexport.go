package mpk

import (
	"fmt"
	"strconv"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// metaReader reads meta.mpk, keeping the first error with its path.
type metaReader struct{ err error }

func (r *metaReader) fail(path, what string) {
	if r.err == nil {
		r.err = fmt.Errorf("meta.%s.%s: %s", metaKey, path, what)
	}
}

func (r *metaReader) arr(v pyjson.Value, path string, n int) []pyjson.Value {
	if v.Kind != pyjson.Array || (n >= 0 && len(v.Arr) != n) {
		r.fail(path, "expected an array"+map[bool]string{true: " of " + strconv.Itoa(n), false: ""}[n >= 0])
		return make([]pyjson.Value, max(n, 0))
	}
	return v.Arr
}

func (r *metaReader) int(v pyjson.Value, path string) int64 {
	i, ok := v.Int64()
	if !ok {
		r.fail(path, "expected an integer")
	}
	return i
}

func (r *metaReader) ints(v pyjson.Value, path string) []int64 {
	var out []int64
	for i, x := range r.arr(v, path, -1) {
		out = append(out, r.int(x, path+"["+strconv.Itoa(i)+"]"))
	}
	return out
}

func (r *metaReader) get(obj pyjson.Value, path, key string) pyjson.Value {
	v, ok := obj.Get(key)
	if !ok {
		r.fail(path, "missing key "+key)
	}
	return v
}

// graphFromImported writes back a program that ToProgram made from an MPK
// graph without a sidecar: meta.mpk gives the task types, tensor views and
// event table; the program gives which event each task signals and waits for.
func graphFromImported(p *ir.Program) (*Graph, error) {
	meta, _ := p.Meta.Get(metaKey)
	r := &metaReader{}
	evs := r.arr(r.get(meta, "", "events"), "events", -1)
	g := &Graph{FirstTasks: r.ints(r.get(meta, "", "first_tasks"), "first_tasks")}
	places := make([]eventPlace, len(evs))
	for e, ev := range evs {
		path := "events[" + strconv.Itoa(e) + "]"
		f := r.arr(ev, path, 6)
		g.Events = append(g.Events, Event{EventType: int(r.int(f[0], path)), NumTriggers: int(r.int(f[1], path)),
			FirstTaskID: r.int(f[2], path), LastTaskID: r.int(f[3], path)})
		places[e] = eventPlace{gpu: int(r.int(f[4], path)), nvshmem: f[5].Kind == pyjson.Bool && f[5].B}
	}
	noTrigger := int(r.int(r.get(meta, "", "no_trigger_counter"), "no_trigger_counter"))
	mtasks := r.arr(r.get(meta, "", "tasks"), "tasks", len(p.Tasks))
	if r.err != nil {
		return nil, r.err
	}
	wantCounters := len(g.Events)
	if noTrigger >= 0 {
		wantCounters++
	}
	if len(p.Counters) != wantCounters || (noTrigger >= 0 && noTrigger != len(g.Events)) {
		return nil, fmt.Errorf("counters: %d counters for the %d events of meta.%s", len(p.Counters), len(g.Events), metaKey)
	}
	// num_triggers: what amk's waits require, else the recorded value.
	for i := range p.Tasks {
		for k, w := range p.Tasks[i].Waits {
			if w.Counter >= len(g.Events) {
				return nil, fmt.Errorf("tasks[%d].waits[%d].counter: %d is the no-trigger counter, which no MPK event stands for", i, k, w.Counter)
			}
		}
	}
	thr := make([]int, len(g.Events))
	fixed := make([]int, len(g.Events))
	for i := range p.Tasks {
		for k, w := range p.Tasks[i].Waits {
			switch {
			case fixed[w.Counter] == 0:
				thr[w.Counter], fixed[w.Counter] = w.Threshold, i+1
			case thr[w.Counter] != w.Threshold:
				return nil, fmt.Errorf("tasks[%d].waits[%d].threshold: %d, but tasks[%d] waits on counter %d with %d; an MPK event has one num_triggers",
					i, k, w.Threshold, fixed[w.Counter]-1, w.Counter, thr[w.Counter])
			}
		}
	}
	for e := range g.Events {
		if fixed[e] != 0 {
			g.Events[e].NumTriggers = thr[e]
		}
	}
	id := func(e int) EventID { return MakeEventID(places[e].gpu, e, places[e].nvshmem) }
	launchers := launchersOf(g.Events, len(p.Tasks))
	for i := range p.Tasks {
		t := &p.Tasks[i]
		path := "tasks[" + strconv.Itoa(i) + "]"
		mt := mtasks[i]
		head := r.ints(r.get(mt, path, "task"), path+".task")
		if r.err == nil && len(head) != 7 {
			r.fail(path+".task", "expected 7 integers")
		}
		if r.err != nil {
			return nil, r.err
		}
		task := Task{TaskType: int(head[0]), VariantID: int(head[1]), RequestID: int(head[2]), ExpertOffset: int(head[3]),
			KVIdx: int(head[4]), MergeTaskOffset: int(head[5]), TaskOffset: int(head[6]), TriggerEvent: InvalidEventID, DependentEvent: InvalidEventID}
		if t.OutCounter != noTrigger {
			task.TriggerEvent = id(t.OutCounter)
			if tg, ok := mt.Get("trigger_gpu"); ok {
				f := r.arr(tg, path+".trigger_gpu", 2)
				task.TriggerEvent = MakeEventID(int(r.int(f[0], path+".trigger_gpu")), t.OutCounter, f[1].Kind == pyjson.Bool && f[1].B)
			}
		}
		views := func(key string, ids []int) []Tensor {
			vs := r.arr(r.get(mt, path, key), path+"."+key, len(ids))
			out := make([]Tensor, len(ids))
			for k, v := range vs {
				f := r.arr(v, path+"."+key, 4)
				out[k] = Tensor{BasePtr: p.Buffers[ids[k]].Name, Offset: r.int(f[0], path), DataType: int(r.int(f[1], path)),
					Dims: r.ints(f[2], path), Strides: r.ints(f[3], path)}
			}
			return out
		}
		task.Inputs, task.Outputs = views("inputs", t.Inputs), views("outputs", t.Outputs)
		onLauncher := r.get(mt, path, "waits_on_launcher")
		if r.err != nil {
			return nil, r.err
		}
		var rest []int
		for _, w := range t.Waits {
			isLauncher := false
			for _, e := range launchers[i] {
				isLauncher = isLauncher || e == w.Counter
			}
			if !isLauncher {
				rest = append(rest, w.Counter)
			}
		}
		switch {
		case len(rest) > 1:
			return nil, fmt.Errorf("%s.waits: %d waits besides the events that launch it; an MPK task has one dependent_event", path, len(rest))
		case len(rest) == 1:
			task.DependentEvent = id(rest[0])
		case onLauncher.Kind == pyjson.Bool && onLauncher.B && len(launchers[i]) > 0:
			task.DependentEvent = id(launchers[i][0])
		}
		g.Tasks = append(g.Tasks, task)
	}
	return g, nil
}
