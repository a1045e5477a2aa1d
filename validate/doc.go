// Package validate statically proves a megakernel program safe to load:
// deadlock-free, race-free and in bounds (docs/spec/ir.md §3). Validate(p) returns a
// Report; a program with any error must never reach a VM or a GPU. Validate
// never panics and never mutates the program, whatever it holds.
//
// # Rules, in order
//
// The rules are those of the Python reference's validator, in its order and
// with its message templates, with the changes of docs/spec/rules.md
// (R17-R22) noted where they apply:
//
//  0. docs/spec/rules.md R18: every buffer, counter and task id equals its list position. Each
//     violation is an error; with non-dense ids nothing else is checked
//     (every reference is an id = position), except the GPU label warning.
//  1. Per task in list order: missing buffers and counters, ABI caps
//     (8 inputs, 4 outputs, 8 waits, rank 4), thresholds >= 1, self-waits,
//     the op table (opcode, arity, outputs, required params), param keys
//     (unknown: warning) and types (int32; finite real for eps/scale/theta,
//     docs/spec/rules.md R22: bools, NaN and infinities rejected). The reference's
//     "unimplemented opcode" rule never fires: every opcode has an oracle.
//  2. Waits: a counter with no producer or a threshold above its producer
//     count is unsatisfiable; a counter with several producers must be waited
//     on with threshold == #producers (all-join).
//  3. Acyclicity (Kahn), with a witness from an iterative DFS.
//  4. Transitive RAW provenance, at every size (docs/spec/rules.md R20: no task cap, no
//     "SKIPPED" warning): every writer of a transient buffer other than the
//     reader precedes the read; a KV cache written this pass counts. A
//     reader of a part of a buffer (an ATTENTION_TILE over a KV-head slice
//     reads its query heads' columns of q and its KV heads' columns of
//     every cache row) needs only the writers whose tile footprints may
//     meet that part (a footprint that cannot be placed on those rows
//     counts as meeting it); the coverage rule (10) proves the part
//     written. This is what lets per-KV-head counters (each slice waiting
//     for its own heads' tiles) pass, and what rejects a slice that waits
//     for another head's counter.
//  5. Multi-writer WAW: the writers have pairwise disjoint tile footprints
//     (on one counter or several), or they are totally ordered.
//  6. On-chip (SMEM/REGISTER) buffers are used on one SM.
//  7. Per-SM queues: amk's loader builds each SM's serial queue in task-list
//     order (docs/spec/rules.md R21), so a dependency between two tasks on one SM must point
//     forward in the list; placements lie in [0, target.num_sms). Beyond the
//     reference (docs/spec/rules.md R32): a queue must respect the dependency order
//     transitively too, through tasks on other SMs; the dependency graph plus
//     the queues' order must have no cycle (ir.QueueCycle).
//  8. Page aliasing, at every size: buffers sharing a page have separated
//     live ranges (every use of one precedes every writer of the other).
//  9. Every IO_OUTPUT is produced; meta['gpu'] != target.name warns.
//  10. docs/spec/rules.md R19, amk's own checks, after the reference's so that reference-rule
//     errors keep the reference's order: tile bounds, K, KV window and
//     position bounds, param/shape/dtype consistency per task, then tile
//     coverage. They accept every shape the reference lowering emits (the
//     flat->head EMBED reshape (or ROPE reading the flat projection as a
//     view), rank-3/rank-4 KV caches, rank-2/rank-3 q, the fused-pattern
//     tiles of ir.FusedPatterns,
//     split-KV partials [n_heads, hd+2] with flags bit 1 ([B, n_heads,
//     hd+2] for a batch, which amk's lowering splits too), GEMM tiles with
//     M_tile rows, quantized I4/I8 weights with scales).
//  11. docs/spec/rules.md R31, the memory model (docs/spec/ir.md §1, §4), which
//     the reference states but does not check: no task writes a WEIGHT,
//     CONST or IO_INPUT buffer, and every counter starts at 0 (the device
//     zeroes them before each launch).
//
// # Codes
//
// RN in the rule column is requirement N of docs/spec/rules.md.
//
//	code                severity  rule
//	nil-program         error     Validate(nil)
//	internal            error     a validator bug caught by the panic guard (never expected)
//	dense-ids           error     R18: id != list position (buffer, counter or task)
//	bad-shape           error     a negative dimension (only programs built in code)
//	missing-buffer      error     step 1: a task reads or writes a buffer id that does not exist
//	missing-counter     error     step 1: out_counter or a wait names a counter that does not exist
//	abi-cap             error     step 1: more than 8 inputs, 4 outputs or 8 waits
//	rank-cap            error     step 1: a buffer of rank > 4 used by a task
//	bad-threshold       error     step 1: a wait threshold < 1
//	self-wait           error     step 1: a task waits on its own out_counter
//	unknown-op          error     step 1: an opcode not in the op table
//	arity               error     step 1: input count outside the op's range, or wrong output count
//	missing-param       error     step 1: a required param is absent
//	unknown-param       warning   step 1: a param that is not an amk_params_t field
//	param-type          error     step 1: not an int32, or not a finite real
//	fused-pattern       error     step 1: a FUSED task names an unknown pattern (params.flags
//	                              bits 16-31), or its inputs do not match the pattern's roles
//	unsatisfiable-wait  error     step 2: no producer, or threshold > #producers
//	partial-join        error     step 2: threshold != #producers on a shared counter
//	cycle               error     step 3: the dependency graph has a cycle
//	race-raw            error     step 4: a writer of a read buffer (or of the read part of it)
//	                              does not precede the read
//	race-kv             error     step 4: the same for a KV cache written this pass
//	never-produced      error     step 4: a transient buffer is read but never written
//	self-read           error     step 4: a task reads a buffer only it writes (R31: the
//	                              reference only warns; no write precedes the read)
//	race-waw            error     step 5: two writers that overlap and are unordered
//	onchip-cross-sm     error     step 6: an on-chip buffer used from several SMs
//	onchip-unplaced     warning   step 6: an on-chip buffer whose users have no SM yet
//	sm-queue-order      error     step 7: a same-SM dependency pointing backwards in the list, or
//	                              (R32) a queue head that waits, through other SMs, for a task
//	                              behind it in its queue
//	sm-range            error     step 7: sm outside [0, target.num_sms)
//	page-binding        error     step 8: a page binding names a buffer that does not exist
//	page-alias          error     step 8: two buffers on one page with unordered live ranges
//	output-unproduced   error     step 9: an IO_OUTPUT no task writes
//	gpu-label           warning   step 9: meta['gpu'] differs from target.name
//	tile-bounds         error     R19: n_off < 0, N_tile <= 0, M_tile <= 0, or a tile beyond the
//	                              output's columns/rows or the weight's rows; a RoPE tile
//	                              neither whole heads nor a paired tile; a paired tile
//	                              (ir.PairStride) not two N_tile/2 ranges of one head, the
//	                              first in its first half
//	tile-coverage       error     R19: the tiles of a read (or output) buffer leave a gap or
//	                              write some element twice
//	bad-K               error     R19: K <= 0, or K != the last dimension of x or of W
//	kv-bounds           error     R19: kv_len <= 0, kv_start < 0, or kv_start+kv_len > max_seq
//	kv-pos              error     R19: KV_APPEND pos outside [0, max_seq) (or its rows past the end)
//	shape-mismatch      error     R19: params (hidden, head_dim, head counts) or sizes inconsistent
//	                              with the buffers' shapes
//	dtype-mismatch      error     R19: a dtype the op cannot consume (non-integer EMBED ids or ROPE
//	                              positions, a non-float activation, weight dtype vs qdtype)
//	quant-scales        error     R19: a quantised tile's scales are not a float WEIGHT of shape
//	                              [N, ceil(K/group)] (a group short, a row short), params.group
//	                              is not positive, or they are another weight's scales (their
//	                              source is not the weight's + ".scales")
//	readonly-write      error     R31: a task writes a WEIGHT, CONST or IO_INPUT buffer
//	counter-init        error     R31: a counter whose init is not 0
//
// # Reachability
//
// Steps 4, 5 and 8 ask whether one task strictly happens-before another. The
// reference keeps an ancestor bitset per task, which is n^2 bits (1.25 GB at
// 100k tasks), and so caps the proofs at 8000 tasks. amk answers the same
// questions exactly without that table:
//
//   - Cheap answers first. u cannot precede v unless u comes earlier in the
//     Kahn order; u precedes v directly iff v waits on u's out_counter. In a
//     lowered program every read waits on its writers' counter (the tiles of
//     a projection share one), so RAW and the WAW writer chains are settled
//     here in O(waits) per writer.
//   - RAW: each read needs every other writer of the buffer to precede it.
//   - WAW: "every pair of writers is ordered" is equivalent to "the writers,
//     sorted by Kahn index, form a chain of consecutive precedences" (a
//     total order is transitive), so k writers cost k-1 questions, not k^2/2.
//     Disjointness of tile footprints is checked by sorting column ranges.
//   - Pages: among the buffers of a page that have writers, "A before B"
//     (every use of A precedes every writer of B) is transitive, so sorting
//     them by first writer's Kahn index and checking consecutive pairs proves
//     the page; all pairs are only examined, to report them, when the chain
//     breaks. The uses of A are first cut to their frontier (a use with a
//     direct successor among A's uses is implied by it: a projection's tiles
//     by the task that reads their output).
//   - The remaining questions are answered together: their distinct sources,
//     in Kahn order, are taken 512 at a time, and one forward sweep over the
//     Kahn order — from the first source to the last target only — ORs each
//     task's predecessors' 512-bit rows. Memory is one row per task of the
//     window (at most 64 bytes x n), time O((window + edges in it) x 8
//     words) per chunk. The same sweep, forward and backward, names the
//     offending writer pair of a WAW race.
//
// No answer is approximate: a "no" means no path exists, a "yes" names one.
package validate
