package ir

import (
	"math"
	"strconv"

	"github.com/amk-dev/amk/pyjson"
)

// Buffer is a named tensor: a weight, an activation, a KV cache, a model
// input or output, or a constant.
type Buffer struct {
	ID     int
	Name   string
	Kind   BufferKind
	DType  DType
	Shape  []int
	Space  MemSpace
	Source *string // state-dict key for WEIGHT/CONST buffers
}

// Numel is the element count (1 for a scalar shape).
func (b *Buffer) Numel() int64 {
	n := int64(1)
	for _, d := range b.Shape {
		n *= int64(d)
	}
	return n
}

// NBytes is the storage size of the buffer.
func (b *Buffer) NBytes() int64 { return b.DType.NBytes(b.Numel()) }

// Strides returns the row-major element strides of the shape.
func (b *Buffer) Strides() []int64 {
	s := make([]int64, len(b.Shape))
	acc := int64(1)
	for i := len(b.Shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= int64(b.Shape[i])
	}
	return s
}

// Cols is the size of the last dimension (1 for rank 0).
func (b *Buffer) Cols() int {
	if len(b.Shape) == 0 {
		return 1
	}
	return b.Shape[len(b.Shape)-1]
}

// Wait is a precondition: do not execute until counters[Counter] >= Threshold.
type Wait struct {
	Counter   int
	Threshold int
}

// Param is one op parameter; the value keeps its JSON type so that the
// validator can tell an int from a float as Python does.
type Param struct {
	Key string
	Val pyjson.Value
}

// Params are a task's op-specific scalars, in insertion order.
type Params []Param

// Get returns a param's value.
func (ps Params) Get(key string) (pyjson.Value, bool) {
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].Key == key {
			return ps[i].Val, true
		}
	}
	return pyjson.Value{}, false
}

// Has reports whether key is present.
func (ps Params) Has(key string) bool {
	_, ok := ps.Get(key)
	return ok
}

// Int returns an integer param (ok false if absent, not an int, or a bool).
func (ps Params) Int(key string) (int64, bool) {
	v, ok := ps.Get(key)
	if !ok {
		return 0, false
	}
	return v.Int64()
}

// IntOr returns an integer param or def.
func (ps Params) IntOr(key string, def int64) int64 {
	if v, ok := ps.Int(key); ok {
		return v
	}
	return def
}

// Float returns a numeric param as float64 (ints accepted).
func (ps Params) Float(key string) (float64, bool) {
	v, ok := ps.Get(key)
	if !ok {
		return 0, false
	}
	return v.Float64()
}

// FloatOr returns a numeric param or def.
func (ps Params) FloatOr(key string, def float64) float64 {
	if v, ok := ps.Float(key); ok {
		return v
	}
	return def
}

// IntParam builds an integer param.
func IntParam(key string, v int64) Param { return Param{Key: key, Val: pyjson.IntValue(v)} }

// FloatParam builds a float param (written as Python writes floats).
func FloatParam(key string, v float64) Param { return Param{Key: key, Val: pyjson.FloatValue(v)} }

// Task is one DAG node: one ABI instruction invocation on one SM.
type Task struct {
	ID         int
	Op         Op
	Inputs     []int
	Outputs    []int
	OutCounter int
	Waits      []Wait
	Params     Params
	SM         *int // lowering/loader output; nil = unassigned
	EstBytes   int64
	EstFlops   int64
	Label      string
}

// Describe is the "id:label" (or "id:OP" when unlabelled) form used in messages.
func (t *Task) Describe() string {
	if t.Label != "" {
		return strconv.Itoa(t.ID) + ":" + t.Label
	}
	return strconv.Itoa(t.ID) + ":" + t.Op.String()
}

// Counter is a monotonic uint32 synchronisation counter, zeroed before every launch.
type Counter struct {
	ID   int
	Init int
	Note string
}

// Page is a physical scratch slot that activations are bound to.
type Page struct {
	ID        int
	Space     MemSpace
	NBytes    int64
	LiveStart int
	LiveEnd   int
}

// PageBinding binds one buffer to one page.
type PageBinding struct {
	Buffer int
	Page   int
}

// PageAllocation is the allocator's output: buffer -> page, and the pages.
type PageAllocation struct {
	BufferToPage []PageBinding
	Pages        []Page
}

// TotalScratchBytes sums the pages' sizes.
func (pa *PageAllocation) TotalScratchBytes() int64 {
	var n int64
	for _, p := range pa.Pages {
		n += p.NBytes
	}
	return n
}

// Program is a complete megakernel schedule: runnable once validated.
type Program struct {
	IRVersion  string
	ABIVersion string
	Meta       pyjson.Value // an object: model, gpu, regime, dtype, ...
	Target     *GpuTarget
	Buffers    []Buffer
	Counters   []Counter
	Tasks      []Task
	Pages      *PageAllocation
	Config     *ScheduleConfig
}

// NewProgram returns an empty program at the current versions.
func NewProgram() *Program {
	return &Program{IRVersion: IRVersion, ABIVersion: ABIVersion, Meta: pyjson.ObjectValue()}
}

// AddBuffer appends a buffer with a dense id and returns that id.
func (p *Program) AddBuffer(b Buffer) int {
	b.ID = len(p.Buffers)
	p.Buffers = append(p.Buffers, b)
	return b.ID
}

// AddCounter appends a zero-initialised counter and returns its id.
func (p *Program) AddCounter(note string) int {
	id := len(p.Counters)
	p.Counters = append(p.Counters, Counter{ID: id, Note: note})
	return id
}

// AddTask appends a task with a dense id and returns that id.
func (p *Program) AddTask(t Task) int {
	t.ID = len(p.Tasks)
	p.Tasks = append(p.Tasks, t)
	return t.ID
}

// MetaString returns a string field of Meta.
func (p *Program) MetaString(key string) (string, bool) {
	v, ok := p.Meta.Get(key)
	if !ok || v.Kind != pyjson.String {
		return "", false
	}
	return v.S, true
}

// SetMeta sets a Meta field, keeping insertion order.
func (p *Program) SetMeta(key string, v pyjson.Value) {
	if p.Meta.Kind != pyjson.Object {
		p.Meta = pyjson.ObjectValue()
	}
	p.Meta.Set(key, v)
}

// GPUName is target.name, else meta["gpu"], else "?".
func (p *Program) GPUName() string {
	if p.Target != nil {
		return p.Target.Name
	}
	if g, ok := p.MetaString("gpu"); ok {
		return g
	}
	return "?"
}

// TotalWeightBytes sums the sizes of WEIGHT buffers: the bytes a decode step
// must stream from HBM at least once.
func (p *Program) TotalWeightBytes() int64 {
	var n int64
	for i := range p.Buffers {
		if p.Buffers[i].Kind == Weight {
			n += p.Buffers[i].NBytes()
		}
	}
	return n
}

// StreamedBytes is the honest roofline numerator: the bytes one decode step
// must stream from HBM. Every WEIGHT buffer counts once, except a table that
// only EMBED tasks read, which counts the rows they gather (one per id); every
// ATTENTION_TILE adds the K and V rows of its window [kv_start,
// kv_start+kv_len) of each sequence. Activations are not counted (they live
// in L2 for a decode step). TotalWeightBytes is the seed's all-weights figure.
func (p *Program) StreamedBytes() int64 {
	gathered := map[int]int64{} // weight buffer -> bytes of the rows EMBED gathers
	fullRead := map[int]bool{}
	var kv int64
	for i := range p.Tasks {
		t := &p.Tasks[i]
		for k, b := range t.Inputs {
			buf := p.Buffer(b)
			if buf == nil {
				continue
			}
			switch {
			case buf.Kind == Weight && t.Op == OpEMBED && k == 1:
				gathered[b] += embedRowBytes(p, t, buf)
			case buf.Kind == Weight:
				fullRead[b] = true
			case buf.Kind == KVCache && t.Op == OpAttentionTile && (k == 1 || k == 2):
				kv += kvWindowBytes(t, buf)
			}
		}
	}
	var n int64
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind != Weight {
			continue
		}
		switch g, ok := gathered[i]; {
		case fullRead[i] || !ok:
			n += b.NBytes()
		default:
			n += min(g, b.NBytes())
		}
	}
	return n + kv
}

// embedRowBytes is what one EMBED task gathers from its table: one row
// (the table's first dimension) per id.
func embedRowBytes(p *Program, t *Task, table *Buffer) int64 {
	ids := p.Buffer(t.Inputs[0])
	if ids == nil || len(table.Shape) == 0 || table.Shape[0] <= 0 {
		return table.NBytes()
	}
	return ids.Numel() * (table.NBytes() / int64(table.Shape[0]))
}

// kvWindowBytes is what an attention task reads from one cache: kv_len rows
// of every sequence (a cache is [max_seq, n_kv, hd] or [B, max_seq, n_kv,
// hd]), of its KV heads only when it is a KV-head slice.
func kvWindowBytes(t *Task, cache *Buffer) int64 {
	r := len(cache.Shape)
	if r < 3 || cache.Shape[r-3] <= 0 {
		return cache.NBytes()
	}
	seq := int64(cache.Shape[r-3])
	perPos := cache.NBytes() / seq
	kvLen := min(max(t.Params.IntOr("kv_len", seq), 0), seq)
	// A KV-head slice (n_off, N_tile) reads only its heads' rows.
	if nkv := int64(cache.Shape[r-2]); nkv > 0 && t.Params.Has("N_tile") {
		heads := min(max(t.Params.IntOr("N_tile", nkv), 0), nkv)
		return kvLen * perPos / nkv * heads
	}
	return kvLen * perPos
}

// TotalEstBytes sums the tasks' est_bytes.
func (p *Program) TotalEstBytes() int64 {
	var n int64
	for i := range p.Tasks {
		n += p.Tasks[i].EstBytes
	}
	return n
}

// TotalEstFlops sums the tasks' est_flops.
func (p *Program) TotalEstFlops() int64 {
	var n int64
	for i := range p.Tasks {
		n += p.Tasks[i].EstFlops
	}
	return n
}

// Buffer returns the buffer with a given id when ids are dense (nil if out of range).
func (p *Program) Buffer(id int) *Buffer {
	if id < 0 || id >= len(p.Buffers) {
		return nil
	}
	return &p.Buffers[id]
}

// Finite says x is neither NaN nor an infinity (the one helper for the
// check every latency, ratio and parameter goes through).
func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// RoundTo rounds x to n decimal places (half away from zero), as the
// reports do.
func RoundTo(x float64, n int) float64 {
	if !Finite(x) {
		return x
	}
	s := math.Pow(10, float64(n))
	return math.Round(x*s) / s
}
