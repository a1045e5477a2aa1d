package mpk

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// MaxGraphBytes bounds the size of a task-graph file Decode accepts.
const MaxGraphBytes = 256 << 20

// Bounds on what one graph may hold; far above any model MPK compiles.
const (
	MaxTasks  = 1 << 22
	MaxEvents = 1 << 22
	MaxDims   = 8
	// MaxViewBytes bounds the bytes one view may reach (offset plus
	// extent, 1 TiB): the import sizes a tensor to the furthest byte its
	// views reach.
	MaxViewBytes = int64(1) << 40
)

// Looks reports whether a JSON document is shaped like an MPK task graph (a
// top-level object with an "all_tasks" key), so that a caller can tell it
// from an amk program before decoding either.
func Looks(data []byte) bool {
	if len(data) > MaxGraphBytes || !bytes.Contains(data, []byte(`"all_tasks"`)) {
		return false // the cheap test first: an amk program is never parsed twice
	}
	root, err := pyjson.Parse(data)
	if err != nil || root.Kind != pyjson.Object {
		return false
	}
	_, ok := root.Get("all_tasks")
	return ok
}

// Decode reads a task_graph.json. Every required key of the format must be
// present with its type (errors are *ir.DecodeError naming the JSON path);
// unknown keys are ignored, as MPK's loader does; an "amk" key is kept as
// the graph's sidecar. Decode never panics.
func Decode(data []byte) (*Graph, error) {
	if len(data) > MaxGraphBytes {
		return nil, fmt.Errorf("task graph is %d bytes, over the %d-byte limit", len(data), MaxGraphBytes)
	}
	root, err := pyjson.ParseUnique(data) // a repeated key is refused (docs/spec/formats.md §1)
	if err != nil {
		return nil, err
	}
	d := &decoder{}
	g := d.graph(root)
	if d.err != nil {
		return nil, d.err
	}
	return g, nil
}

type decoder struct{ err error }

func (d *decoder) fail(path, format string, args ...any) {
	if d.err == nil {
		d.err = &ir.DecodeError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

func at(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func dot(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) field(obj pyjson.Value, path, key string) pyjson.Value {
	v, ok := obj.Get(key)
	if !ok {
		d.fail(dot(path, key), "required key is missing")
	}
	return v
}

func (d *decoder) array(v pyjson.Value, path string, limit int) []pyjson.Value {
	if v.Kind != pyjson.Array {
		d.fail(path, "expected an array, got %s", v.Kind)
		return nil
	}
	if len(v.Arr) > limit {
		d.fail(path, "%d entries, over the limit of %d", len(v.Arr), limit)
		return nil
	}
	return v.Arr
}

// integer reads an integer within [lo, hi].
func (d *decoder) integer(v pyjson.Value, path string, lo, hi int64) int64 {
	if v.Kind != pyjson.Int {
		d.fail(path, "expected an integer, got %s %s", v.Kind, v.Repr())
		return 0
	}
	i, ok := v.Int64()
	if !ok || i < lo || i > hi {
		d.fail(path, "integer %s outside [%d, %d]", v.Num, lo, hi)
		return 0
	}
	return i
}

func (d *decoder) int32At(obj pyjson.Value, path, key string) int {
	return int(d.integer(d.field(obj, path, key), dot(path, key), math.MinInt32, math.MaxInt32))
}

// eventID reads an event id: a non-negative integer below 2^63 (MPK's
// loader reads it as unsigned long long; every id it writes is below 2^63).
func (d *decoder) eventID(obj pyjson.Value, path, key string) EventID {
	return EventID(d.integer(d.field(obj, path, key), dot(path, key), 0, math.MaxInt64))
}

func (d *decoder) graph(root pyjson.Value) *Graph {
	if root.Kind != pyjson.Object {
		d.fail("", "expected an MPK task graph object, got %s", root.Kind)
		return nil
	}
	g := &Graph{}
	tasks := d.array(d.field(root, "", "all_tasks"), "all_tasks", MaxTasks)
	for i, tv := range tasks {
		g.Tasks = append(g.Tasks, d.task(tv, at("all_tasks", i)))
	}
	events := d.array(d.field(root, "", "all_events"), "all_events", MaxEvents)
	for i, ev := range events {
		g.Events = append(g.Events, d.event(ev, at("all_events", i)))
	}
	for i, fv := range d.array(d.field(root, "", "first_tasks"), "first_tasks", MaxTasks) {
		g.FirstTasks = append(g.FirstTasks, d.integer(fv, at("first_tasks", i), 0, math.MaxUint32))
	}
	if side, ok := root.Get("amk"); ok {
		if side.Kind != pyjson.Object {
			d.fail("amk", "expected an object, got %s", side.Kind)
		}
		g.AMK = &side
	}
	if d.err != nil {
		return nil
	}
	return g
}

func (d *decoder) object(v pyjson.Value, path string) bool {
	if v.Kind != pyjson.Object {
		d.fail(path, "expected an object, got %s", v.Kind)
		return false
	}
	return true
}

func (d *decoder) task(v pyjson.Value, path string) Task {
	if !d.object(v, path) {
		return Task{}
	}
	t := Task{
		TaskType:        d.int32At(v, path, "task_type"),
		VariantID:       int(d.integer(d.field(v, path, "variant_id"), dot(path, "variant_id"), 0, math.MaxUint32)),
		TriggerEvent:    d.eventID(v, path, "trigger_event"),
		DependentEvent:  d.eventID(v, path, "dependent_event"),
		RequestID:       d.int32At(v, path, "request_id"),
		ExpertOffset:    d.int32At(v, path, "expert_offset"),
		KVIdx:           d.int32At(v, path, "kv_idx"),
		MergeTaskOffset: d.int32At(v, path, "merge_task_offset"),
		TaskOffset:      d.int32At(v, path, "task_offset"),
	}
	t.Inputs = d.tensors(d.field(v, path, "inputs"), dot(path, "inputs"), MaxTaskInputs)
	t.Outputs = d.tensors(d.field(v, path, "outputs"), dot(path, "outputs"), MaxTaskOutputs)
	return t
}

// Operand limits of MPK's TaskDesc (MAX_INPUTS_PER_TASK, MAX_OUTPUTS_PER_TASK).
const (
	MaxTaskInputs  = 7
	MaxTaskOutputs = 3
)

func (d *decoder) tensors(v pyjson.Value, path string, limit int) []Tensor {
	arr := d.array(v, path, limit)
	if arr == nil {
		return nil
	}
	out := make([]Tensor, len(arr))
	for i, tv := range arr {
		out[i] = d.tensor(tv, at(path, i))
	}
	return out
}

func (d *decoder) tensor(v pyjson.Value, path string) Tensor {
	if !d.object(v, path) {
		return Tensor{}
	}
	t := Tensor{Offset: d.integer(d.field(v, path, "offset"), dot(path, "offset"), 0, 1<<48)}
	name := d.field(v, path, "base_ptr")
	if name.Kind != pyjson.String {
		d.fail(dot(path, "base_ptr"), "expected a tensor name, got %s %s", name.Kind, name.Repr())
	}
	t.BasePtr = name.S
	t.DataType = int(d.integer(d.field(v, path, "data_type"), dot(path, "data_type"), math.MinInt32, math.MaxInt32))
	for i, x := range d.array(d.field(v, path, "dims"), dot(path, "dims"), MaxDims) {
		t.Dims = append(t.Dims, d.integer(x, at(dot(path, "dims"), i), 0, math.MaxInt32))
	}
	for i, x := range d.array(d.field(v, path, "strides"), dot(path, "strides"), MaxDims) {
		t.Strides = append(t.Strides, d.integer(x, at(dot(path, "strides"), i), 0, math.MaxInt32))
	}
	if d.err == nil && len(t.Dims) != len(t.Strides) {
		d.fail(dot(path, "strides"), "%d strides for %d dims", len(t.Strides), len(t.Dims))
	}
	if d.err == nil && !viewWithin(t) {
		d.fail(path, "the view reaches past byte %d (offset plus its furthest element); a view may span at most %d bytes",
			MaxViewBytes, MaxViewBytes)
	}
	return t
}

// viewWithin reports whether a view's footprint ends within MaxViewBytes,
// computed without overflow (dims and strides are at most 2^31 - 1 each).
func viewWithin(t Tensor) bool {
	bits, ok := dataTypeBits[t.DataType]
	if !ok {
		bits = 8
	}
	maxElems := MaxViewBytes * 8 / int64(max(bits, 1))
	var last int64
	for i, dim := range t.Dims {
		if dim <= 0 {
			return t.Offset <= MaxViewBytes // an empty view reaches nothing
		}
		last += (dim - 1) * t.Strides[i] // each term < 2^62
		if last > maxElems {
			return false
		}
	}
	_, hi := t.Footprint()
	return hi <= MaxViewBytes
}

func (d *decoder) event(v pyjson.Value, path string) Event {
	if !d.object(v, path) {
		return Event{}
	}
	return Event{
		EventType:   d.int32At(v, path, "event_type"),
		NumTriggers: int(d.integer(d.field(v, path, "num_triggers"), dot(path, "num_triggers"), math.MinInt32, math.MaxInt32)),
		FirstTaskID: d.integer(d.field(v, path, "first_task_id"), dot(path, "first_task_id"), 0, math.MaxInt64),
		LastTaskID:  d.integer(d.field(v, path, "last_task_id"), dot(path, "last_task_id"), 0, math.MaxInt64),
	}
}

// Encode writes the graph as Mirage's generator does (nlohmann::json's
// dump(2): every object's keys in sorted order, two-space indent), plus the
// "amk" sidecar when the graph has one. Decode(Encode(g)) equals g.
func Encode(g *Graph) []byte {
	tasks := make([]pyjson.Value, len(g.Tasks))
	for i := range g.Tasks {
		t := &g.Tasks[i]
		tasks[i] = pyjson.ObjectValue(
			pyjson.M("dependent_event", u64(uint64(t.DependentEvent))),
			pyjson.M("expert_offset", i64(int64(t.ExpertOffset))),
			pyjson.M("inputs", tensorsValue(t.Inputs)),
			pyjson.M("kv_idx", i64(int64(t.KVIdx))),
			pyjson.M("merge_task_offset", i64(int64(t.MergeTaskOffset))),
			pyjson.M("outputs", tensorsValue(t.Outputs)),
			pyjson.M("request_id", i64(int64(t.RequestID))),
			pyjson.M("task_offset", i64(int64(t.TaskOffset))),
			pyjson.M("task_type", i64(int64(t.TaskType))),
			pyjson.M("trigger_event", u64(uint64(t.TriggerEvent))),
			pyjson.M("variant_id", i64(int64(t.VariantID))),
		)
	}
	events := make([]pyjson.Value, len(g.Events))
	for i, e := range g.Events {
		events[i] = pyjson.ObjectValue(
			pyjson.M("event_type", i64(int64(e.EventType))),
			pyjson.M("first_task_id", i64(e.FirstTaskID)),
			pyjson.M("last_task_id", i64(e.LastTaskID)),
			pyjson.M("num_triggers", i64(int64(e.NumTriggers))),
		)
	}
	first := make([]pyjson.Value, len(g.FirstTasks))
	for i, f := range g.FirstTasks {
		first[i] = i64(f)
	}
	members := []pyjson.Member{
		pyjson.M("all_events", pyjson.ArrayValue(events...)),
		pyjson.M("all_tasks", pyjson.ArrayValue(tasks...)),
	}
	if g.AMK != nil {
		members = append(members, pyjson.M("amk", *g.AMK))
	}
	members = append(members, pyjson.M("first_tasks", pyjson.ArrayValue(first...)))
	return pyjson.Indent(pyjson.ObjectValue(members...))
}

func tensorsValue(ts []Tensor) pyjson.Value {
	out := make([]pyjson.Value, len(ts))
	for i, t := range ts {
		out[i] = pyjson.ObjectValue(
			pyjson.M("base_ptr", pyjson.StringValue(t.BasePtr)),
			pyjson.M("data_type", i64(int64(t.DataType))),
			pyjson.M("dims", i64s(t.Dims)),
			pyjson.M("offset", i64(t.Offset)),
			pyjson.M("strides", i64s(t.Strides)),
		)
	}
	return pyjson.ArrayValue(out...)
}

func i64(v int64) pyjson.Value { return pyjson.IntValue(v) }
func u64(v uint64) pyjson.Value {
	return pyjson.Value{Kind: pyjson.Int, Num: strconv.FormatUint(v, 10)}
}

func i64s(vs []int64) pyjson.Value {
	out := make([]pyjson.Value, len(vs))
	for i, v := range vs {
		out[i] = i64(v)
	}
	return pyjson.ArrayValue(out...)
}
