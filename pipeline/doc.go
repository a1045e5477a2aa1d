// Package pipeline owns instruction-level pipeline schedules as data
// (docs/spec/formats.md §3): inside one GEMM tile's K-loop, the order of global->LDS loads,
// LDS->register fragment loads and MMAs across the LDS stages, the way
// AMD's 4-wave FP8 matmul schedule is written by hand. It is pure: no I/O
// beyond the bytes it is given.
//
// # The IR (schedule.go, order.go)
//
// A Schedule has two K-partitions per main iteration (the halves of a
// double buffer: partition p computes on LDS stage p and k-block
// iteration*2+p) and Quadrants register quadrants A_quad[i], B_quad[i]
// (and LDS sub-tiles) per operand. Body is the partition's mini-iters, each
// an ordered list of ops: LOAD_A/LOAD_B (a sub-tile into an LDS stage),
// MMA_LOAD_A/MMA_LOAD_B (a fragment from an LDS stage and sub-tile into the
// quadrant of that index), MMA (quadrant (m, n): reads A_quad[m], B_quad[n])
// and COMPUTE. Stages are relative to the partition ("same" or "cross"), so
// both partitions run the same body with the stage flipped. Ordering turns
// the declared body into the issue order: identity, or the framework's
// double_buffer_reorder (IssueOrder documents the matching). Edge rules
// (a named base set plus appended rules; From -> To class, scope same_half
// / cross_half / any, config match) are what the wait derivation sees. The
// prologue is derived (the framework's derive_prologue_from_program) or
// explicit, plus an optional bootstrap, and ends with a full drain.
//
// The file format (codec.go) is JSON, "format": "amk-pipeline/1", strict
// (unknown keys, trailing data, files over 1 MiB and every structural
// problem are errors saying where). testdata/ holds AMD's 4-wave schedule
// (amd-4wave-fp8.json), its three mutants (4wave-mutant-*.json) and the
// default ping-pong schedule.
//
// # The checker (check.go)
//
// Check unrolls the prologue and three main iterations for one wave and
// runs two things side by side. The waits: before each op the edge rules'
// derived waits drain the global (vm) and LDS (lgkm) counters, which
// complete in issue order, down to the newest producer a rule covers; an
// op completes only when a wait drains it (nothing relies on timing). The
// data flow: which k-block each LDS slot (stage, operand, sub-tile) and
// each register quadrant holds; a global load refills its slot with the
// stage's next k-block. Hazards, each naming the half, mini-iter, op and
// LDS stage and explaining itself: lds-raw (a fragment load reads a slot
// whose global load is not drained, or that nothing filled), lds-war (a
// global load overwrites a slot a pending fragment load reads), reg-raw (an
// MMA reads a quadrant whose fragment load is not drained: "missing wait",
// with the rule that would have covered it), reg-war (a fragment load
// overwrote a quadrant before its MMA consumed it), wrong-data (an MMA
// reads another k-block: wrong stage, stale or refilled too early),
// prologue (the prologue does not leave what the first iteration reads),
// reorder (double_buffer_reorder placed a cross-stage fragment before a
// same-partition MMA) and coverage (a k-step does not compute every output
// quadrant (m, n) exactly once: a quadrant computed twice accumulates its
// k-block twice, one never computed misses it). Advisory: excess-wait (a derived wait drains past
// every true producer) and dead-prologue (a prologue fragment nobody
// reads). Listing prints the proved issue stream with the derived waits as
// counter values (s_waitcnt vmcnt(N) lgkmcnt(N)). Not modelled: other waves (cross-wave LDS visibility is the
// barrier's job), register hazards inside an MMA's own execution, deeper
// pipelines than two stages.
//
// # The simulator (sim.go)
//
// Simulate runs a safe schedule on a target's ir.PipelineTiming (latency,
// unit busy cycles and issue hold per op class, a wait's overhead, a
// barrier per half) for one wave in issue order with the derived waits
// (an MMA also waits for its quadrant's previous MMA, the accumulator),
// and predicts the steady-state cycles per iteration and the MMA
// utilisation (matrix-pipe busy / cycles). Predictions only: the figures
// are estimates and no AMD device is attached to amk.
//
// # Loop 1 (space.go)
//
// Variants is a small space of the FP8 GEMM micro-kernel's schedule knob
// (MMA order, cross-stage rotation on/off, prologue form, ordering); Tune
// generates each, proves it with Check, simulates the safe ones and ranks
// them by predicted MMA utilisation.
package pipeline
