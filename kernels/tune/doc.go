// Package tune is Loop 1 (docs/spec/loop.md §1): single-instruction tuning of the
// micro-kernels the megakernel VM dispatches, by their -D knobs.
//
// Cases. NewCase cuts one op's task group out of the lowering of the
// `small` preset (CaseModel) at the requested dtype, decode position
// CasePos, for the target's SM count: the lm_head tiles for GEMV_TILE (the
// one projection bigger than any GPU's L2, so repeated launches still read
// HBM), batch 4 for GEMM_TILE, split-KV shards for ATTENTION_COMBINE, the
// heaviest group otherwise. The cut program keeps the tasks' params and
// buffer shapes; consumed activations become IO inputs and produced buffers
// IO outputs (KV caches stay KV caches); its inputs are seeded values
// (projection weights scaled by 1/sqrt(K), norm weights near 1, split-KV
// denominators positive). NewShapedCase cuts the same way from a model and
// batch of the caller's choosing (a FlashInfer-Bench workload's shape, see
// package fib/loop1), picking the group by task label. The reference
// numerics are the CPU reference VM on that program (Case.Reference);
// OpBytes is its HBM traffic (the rows, windows and table rows the tasks
// touch), the traffic of the roofline.
//
// Proposals. Knobs(op) are the block size and every search knob of
// kernels.KnobSpace the op's kernel reads (qc, read only by the quantized
// GEMV, and the operator's watchdog are left out). Variant 0 is no -D (the
// built-in defaults, the incumbent); then the grid of the knobs' choices,
// knobs that the variant makes inactive reset to their defaults
// (cols_per_warp and kunroll only matter with cpasync=0, the ring knobs
// only with cpasync=1), deduplicated, ordered by how many knobs differ from
// the defaults, capped at the budget.
//
// Loop. Tune, for each proposal: build and load it (Device.Prepare; a
// compile error is a *BuildError: tag rejected, correctness CRASH, not
// counted against all_correct); run it once and compare every output with
// the reference by vm.Compare at the case dtype, element by element (rows of
// one, so only allclose and finiteness decide); time only a correct
// variant — the first alone, every later one in alternating rounds against
// the best so far on the same device (docs/spec/rules.md R7) — and keep it on a strict
// MinGain (1%) win. A failed run or timing is a crash and makes
// all_correct false, as does a mismatch (tag revert, FAIL). A reading
// below the op-bytes floor (the op's bytes at spec HBM bandwidth) is
// withheld (launch.FloorGuard). When a
// variant beat the default, best and baseline are re-timed side by side at
// the end and speedup = baseline / best. Every trial appends one
// loop=instruction row to results.tsv as it finishes: model inst:<op>,
// kernel_id <op>[<variant>], latency only for PASS, pct_of_roofline =
// latency / floor × 100 (docs/spec/rules.md R9). Summary is the seed-001 JSON, plus the case
// description and notes; OK is the verb's exit condition (all built
// variants correct and a correct best).
//
// Devices. LaunchDevice runs on a kernels/launch Device in-process through
// its OpRunner (the amk_entry_<op> kernels, docs/spec/rules.md R29) with modules from the
// shared build cache; the amkctl cuda build opens it. Everything else is
// tested with fakes.
package tune
