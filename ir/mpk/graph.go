package mpk

import (
	"fmt"
	"strconv"

	"github.com/amk-dev/amk/pyjson"
)

// EventID is MPK's 64-bit event id: the NVSHMEM tag in the top bits, the gpu
// id in bits 32..47 and the event's index into all_events in the low 32 bits.
type EventID uint64

// Event-id layout and the "no event" value (runtime_header.h).
const (
	InvalidEventID EventID = 0x7ffffffffffffffe
	NVSHMEMTag     EventID = 0x1e00000000000000
	gpuShift               = 32
	gpuMask                = 0xffff
	indexMask              = 0xffffffff
)

// MakeEventID builds the id of event index on a gpu.
func MakeEventID(gpu, index int, nvshmem bool) EventID {
	id := EventID(uint64(gpu&gpuMask)<<gpuShift | uint64(uint32(index)))
	if nvshmem {
		id |= NVSHMEMTag
	}
	return id
}

// Valid reports whether e names an event (is not InvalidEventID).
func (e EventID) Valid() bool { return e != InvalidEventID }

// Index is the event's position in all_events.
func (e EventID) Index() int { return int(uint64(e) & indexMask) }

// GPU is the gpu id the event lives on.
func (e EventID) GPU() int { return int(uint64(e) >> gpuShift & gpuMask) }

// NVSHMEM reports whether the event is signalled across GPUs.
func (e EventID) NVSHMEM() bool { return e&NVSHMEMTag != 0 }

// Canonical reports whether e is exactly what MakeEventID writes for its
// parts (no stray bits outside the tag, gpu and index fields).
func (e EventID) Canonical() bool { return e == MakeEventID(e.GPU(), e.Index(), e.NVSHMEM()) }

func (e EventID) String() string {
	if !e.Valid() {
		return "EVENT_INVALID_ID"
	}
	s := "e" + strconv.Itoa(e.Index())
	if e.GPU() != 0 {
		s += "@gpu" + strconv.Itoa(e.GPU())
	}
	if e.NVSHMEM() {
		s += "(nvshmem)"
	}
	return s
}

// Tensor is one task operand: a strided view of a named base tensor, starting
// Offset bytes into it.
type Tensor struct {
	BasePtr  string
	Offset   int64
	Dims     []int64
	Strides  []int64
	DataType int
}

// Task is one entry of all_tasks.
type Task struct {
	TaskType        int
	VariantID       int
	Inputs          []Tensor
	Outputs         []Tensor
	TriggerEvent    EventID // signalled (counter += 1) when the task finishes
	DependentEvent  EventID // waited for (counter >= num_triggers x iteration) before it starts
	RequestID       int
	ExpertOffset    int
	KVIdx           int
	MergeTaskOffset int
	TaskOffset      int
}

// Event is one entry of all_events: it fires when NumTriggers tasks have
// signalled it and then, by its type, launches the tasks [FirstTaskID,
// LastTaskID).
type Event struct {
	EventType   int
	NumTriggers int
	FirstTaskID int64
	LastTaskID  int64
}

// Graph is a whole task_graph.json. AMK is the "amk" key amk's exporter adds
// (what an amk program holds that MPK's format has no field for); MPK's
// loader ignores it, and it is nil for graphs written by Mirage.
type Graph struct {
	Tasks      []Task
	Events     []Event
	FirstTasks []int64
	AMK        *pyjson.Value
}

// Task types of Mirage's runtime_header.h that amk relies on, and amk's own.
const (
	TaskTerminate       = 0
	TaskBeginTaskGraph  = 10
	TaskAMKBase         = 1000 // amk task types: TaskAMKBase + amk opcode
	TaskAMKJoin         = 1100 // amk's join relay (see doc.go)
	taskAMKLast         = TaskAMKJoin
	defaultTaskMetadata = -1
)

// EventKind is what an event does, independent of which numbering wrote it.
type EventKind int

// Event kinds.
const (
	KindInvalid EventKind = iota
	KindTermination
	KindLaunchTasks
	KindEndOfTaskGraph
	KindEmpty
	KindLaunchMassiveTasks
	KindLaunchDependentTasks
)

var kindNames = [...]string{"EVENT_INVALID", "EVENT_TERMINATION", "EVENT_LAUNCH_TASKS", "EVENT_END_OF_TASK_GRAPH",
	"EVENT_EMPTY", "EVENT_LAUNCH_MASSIVE_TASKS", "EVENT_LAUNCH_DEPENDENT_TASKS"}

func (k EventKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Launches reports whether an event of this kind enqueues its task range.
func (k EventKind) Launches() bool {
	return k == KindLaunchTasks || k == KindLaunchMassiveTasks || k == KindLaunchDependentTasks
}

// Numbering is a set of event_type codes. Mirage's runtime_header.h uses
// 900-911; an earlier description of the format (docs/spec/formats.md §1)
// uses 0-5. A graph uses one of them throughout.
type Numbering int

// The two numberings.
const (
	NumberingMirage Numbering = iota
	NumberingSeed
)

var mirageEventCodes = map[int]EventKind{900: KindEmpty, 901: KindLaunchTasks, 902: KindLaunchMassiveTasks,
	903: KindLaunchDependentTasks, 910: KindEndOfTaskGraph, 911: KindTermination}

var seedEventCodes = map[int]EventKind{0: KindTermination, 1: KindLaunchTasks, 2: KindEndOfTaskGraph,
	3: KindEmpty, 4: KindLaunchMassiveTasks, 5: KindLaunchDependentTasks}

// EventCode is the event_type code of kind in a numbering.
func EventCode(n Numbering, k EventKind) int {
	table := mirageEventCodes
	if n == NumberingSeed {
		table = seedEventCodes
	}
	for code, kk := range table {
		if kk == k {
			return code
		}
	}
	return -1
}

// kindOf maps an event_type code to its kind and numbering (ok false for a
// code neither numbering defines).
func kindOf(code int) (EventKind, Numbering, bool) {
	if k, ok := mirageEventCodes[code]; ok {
		return k, NumberingMirage, true
	}
	if k, ok := seedEventCodes[code]; ok {
		return k, NumberingSeed, true
	}
	return KindInvalid, 0, false
}

// Kind is the event's kind (KindInvalid for an unknown code).
func (e Event) Kind() EventKind {
	k, _, _ := kindOf(e.EventType)
	return k
}

// Mirage data_type codes (include/mirage/type.h) and their element sizes in
// bytes; sub-byte types are stored packed two per byte.
var dataTypeBits = map[int]int{920: 4, 925: 4, 926: 4, 930: 8, 935: 8, 936: 8, 940: 16, 941: 16,
	945: 16, 946: 16, 950: 32, 955: 32, 956: 32, 960: 64, 965: 64, 966: 64, 999: 8}

// DataTypeUnknown is Mirage's DT_UNKNOWN (the placeholder of an absent operand).
const DataTypeUnknown = 999

// Footprint is the byte range [lo, hi) of the base tensor a view can touch:
// its offset plus the furthest element its dims and strides reach. A view
// with a zero dim touches nothing (lo == hi).
func (t Tensor) Footprint() (lo, hi int64) {
	bits, ok := dataTypeBits[t.DataType]
	if !ok {
		bits = 8
	}
	last := int64(0)
	for i, d := range t.Dims {
		if d <= 0 {
			return t.Offset, t.Offset
		}
		if i < len(t.Strides) {
			last += (d - 1) * t.Strides[i]
		}
	}
	return t.Offset, t.Offset + ((last+1)*int64(bits)+7)/8
}

// Numbering is the event-type numbering the graph's events use (Mirage's
// when no event says otherwise).
func (g *Graph) Numbering() Numbering {
	for _, ev := range g.Events {
		if _, n, ok := kindOf(ev.EventType); ok {
			return n
		}
	}
	return NumberingMirage
}
