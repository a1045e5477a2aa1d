// Package ir is the megakernel intermediate representation: a task DAG whose
// tasks synchronise only through monotonic counters (docs/spec/ir.md).
//
// It owns the data model (Program, Buffer, Task, Counter, Wait, Page,
// PageAllocation, GpuTarget, ScheduleConfig as data), the canonical enum codes
// shared with the device ABI, the one op table every other package consults
// (arity, required params, the marshalled param fields), the GPU target
// registry, the fused layer patterns of FUSED tasks (FusedPatterns, as data)
// and their recipes in the reference's params.recipe form, both ways
// (recipe.go: PatternRecipe, WithRecipes, WithPatterns),
// the JSON codec of docs/spec/ir.md §6 and the graph algorithms the
// validator, lowering and VMs build on (dependency edges, Kahn order, the
// per-SM queues and their deadlock cycle, counter simulation, adversarial
// interleavings, the device's queue-by-queue execution). The simulations
// start every counter at 0, as the device does.
//
// Decoding has two paths: the direct decoder (direct.go) scans the bytes
// straight into the structs and only accepts; anything it does not take,
// every malformed file included, goes to the tree decoder (codec.go), which
// defines what a program may hold and words every error. DecodePlain is the
// direct path alone (no error built), for callers that tell programs from
// other documents or decode from a memory map they release as it goes.
//
// The target registry holds NVIDIA and AMD parts. amk's own target fields
// (vendor, wavefront width, L1, a memory-side last-level cache, matrix peaks
// per dtype, the instruction-level PipelineTiming the pipeline package
// simulates with) are written by the codec only when set, so NVIDIA records
// encode exactly as the reference's do. The AMD parts are predicted only.
//
// ir imports only the standard library and amk's Python-compatible JSON
// writer; it performs no I/O besides what its callers hand it.
package ir
