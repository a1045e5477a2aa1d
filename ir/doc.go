// Package ir is the megakernel intermediate representation: a task DAG whose
// tasks synchronise only through monotonic counters (docs/spec/ir.md).
//
// It owns the data model (Program, Buffer, Task, Counter, Wait, Page,
// PageAllocation, GpuTarget, ScheduleConfig as data), the canonical enum codes
// shared with the device ABI, the one op table every other package consults
// (arity, required params, the marshalled param fields), the GPU target
// registry, the JSON codec of docs/spec/ir.md §6 and the graph algorithms the
// validator, lowering and VMs build on (dependency edges, Kahn order, counter
// simulation, adversarial interleavings).
//
// ir imports only the standard library and amk's Python-compatible JSON
// writer; it performs no I/O besides what its callers hand it.
package ir
