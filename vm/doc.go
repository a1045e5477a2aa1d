// Package vm is amk's CPU reference VM: it executes an ir.Program with the
// counter-synchronisation semantics of the megakernel and real numerics for
// every opcode of docs/spec/ir.md §7, and it owns the one tolerance helper
// (Compare, Tolerance) that every numeric comparison in amk uses.
//
// # Loading and binding
//
// New refuses any program that validate.Validate rejects. Weights and
// constants are bound by state-dict key (Buffer.Source, else the buffer name)
// with BindWeights and are never copied; model inputs and KV caches are bound
// by buffer name with Bind (or BindKV). Every bound tensor is checked against
// its buffer's dtype and shape (docs/spec/rules.md R26). Activations and IO outputs start zeroed
// on every run; an unbound KV cache starts as zeros; a missing weight or IO
// input is an error at Run.
//
// # Execution
//
// Run is ready-queue driven (docs/spec/rules.md R30): every counter starts at 0, as on the
// device; each counter keeps its waiters sorted by
// threshold, so a task becomes ready exactly when its last wait is met and
// the whole run costs O(tasks + waits) bookkeeping. Ready tasks run on a
// worker pool (Options.Workers, default GOMAXPROCS); counters are only ever
// touched by the dispatching goroutine. When nothing is ready or running and
// tasks remain, Run returns a *DeadlockError naming the stuck tasks and the
// counter values they wait on. Options.Timeout is a wall-clock guard reported
// as a *TimeoutError, never as a livelock. Options.Adversarial runs one task
// at a time, picking among the ready tasks with a generator seeded by
// Options.Seed; a valid program gives bit-identical results in every mode.
//
// Run copies bound KV caches before writing them, so the caller's tensors are
// never modified; the caches of the next decode step are Result.KV bound
// again. Between runs SetIntParam (pos, kv_start, kv_len) and SetPosition move
// one validated program to another decode position (docs/spec/rules.md R28).
//
// # Numerics
//
// Every op computes in float32 and rounds each stored value to its output
// buffer's dtype with tensor.Round (integer outputs are truncated toward
// zero, docs/spec/rules.md R27 for SAMPLE_ARGMAX). Dot products and norm sums accumulate in
// float32 over eight partial sums whose grouping depends only on the element
// index, never on the tile shape, so a value does not change with the
// schedule; the other reductions (softmax and attention denominators, split-
// KV combine) accumulate in float32 in element order. Transcendentals (exp, erf, sqrt, sin, cos, pow) are evaluated
// in float64 and rounded to float32, because Go has no float32 versions.
// A FUSED pattern tile with params.qdtype carries its weight's scales as
// its last input and dequantises through the same opLinear as GEMV_TILE
// (docs/spec/quantization.md §5).
// Integer dequantisation follows one rule for GEMV/GEMM and DEQUANT (docs/spec/rules.md R27):
// int8 q as stored, packed int4 q = nibble − 8, and q − zero when zero points
// are given. A float64 FUSED scratch is held at float32 precision. Weights
// held at their stored width (tensor.Tensor.Half) are read as they are: EMBED
// row by row, GEMV/GEMM on bf16 through dotBF16 (each value widened by a
// shift; dotBF16Rows runs four rows in AVX2 registers on amd64), with the
// results of the float32 path bit for bit.
//
// A FUSED task runs its params.recipe (fused.go) or, when params.flags
// names one, an ir.FusedPatterns pattern (patterns.go): staging through the
// unfused op's kernel into a scratch of the activation's dtype, the tile's
// dot products through the one GEMV kernel, then the epilogue, rounding
// where the unfused chain stores, so a fused program computes its unfused
// twin's values bit for bit.
package vm
