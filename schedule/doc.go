// Package schedule owns the Loop-2 edit surface and what turns it into a
// program: search points, the one canonical default, the schedule id, the
// search space as data, the lowering of a Llama-family decode step into an
// ir.Program, the SM assignment, and the analytic cost model.
//
// # Points and ids
//
// A Point is a ScheduleConfig plus the kernel build knobs. Default() is the
// canonical default (docs/spec/rules.md R12): the reference's default_config() with knobs
// {cols_per_warp 1, cpasync 1, cpa_stages 4, cpa_cols 2}. ParsePoint is the
// strict reader of an agent's config dict (the reference harness's type
// sanity check; every problem
// reported, joined by "; "); CheckLaunch adds the target-dependent launch
// limits (docs/spec/rules.md R24). Point.ID is the reference harness's id: "sch_" + 10
// hex digits of the SHA-1 of the config as ScheduleConfig.to_dict() writes
// it, with kernel_knobs embedded only when some knob is not at its default,
// written as Python's json.dumps(sort_keys=True); campaigns hash normalised
// points, so one campaign point has one id. ConfigID hashes a bare config
// dict.
//
// # Search space (docs/spec/rules.md R15)
//
// Space lists every knob with its choices (what a search draws), its range
// (what eval accepts), its default and whether it is effective on the
// target and device: whether eval applies it there, which
// TestSpaceMatchesEval derives knob by knob from the lowering, the launch
// check, the cost model and the kernel build. Effective everywhere:
// tiling.gemv.N_tile and tiling.attention.n_partitions (lowering: tile
// widths and counts, split-KV shards — the latter only once kv_len > 16,
// at every batch: the reference splits at B = 1 only, amk splits each
// sequence's window the same way),
// the device lowering's tiling.gemv.tiles_per_sm,
// tiling.attention.kv_head_split, tiling.attention.head_counters and
// fusion_grouping (the cost model predicts the programs they lower, on AMD
// targets too), sm_assignment (the lowering sets Task.sm; the cost model
// runs those queues), pipelining_depth and threads_per_block (cost model;
// the kernels read both from the program's config). On NVIDIA targets the
// streaming ring's kernel_knobs.ring_stages and ring_tile (the kernels
// build it; the cost model streams its look-ahead), offered only in
// combinations that fit the dynamic shared memory cap (CheckLaunch refuses
// a ring that does not). On "cuda" only: smem_bytes_per_block and the other
// kernel knobs (kernel build and launch; the cost model does not model
// them, so a CPU campaign neither draws nor features them). Per vendor:
// threads_per_block offers whole warps (NVIDIA, 32) or wavefronts (AMD, 64)
// only, and an AMD target has no kernel_knobs.* (CUDA -D knobs) and no
// kernel build at all. Reserved (recorded, normalised to their defaults,
// never drawn, not features, not in Complexity): tiling.attention.kv_block,
// page_allocation. Normalize also drops what a program never reads, so one
// program has one id: a fusion group that matches no entry of Fusions,
// N_tile under tiles_per_sm, head_counters without kv_head_split and the
// RoPE epilogue, reshape_view with the RoPE epilogue, ring_tile with the
// ring off. SpaceSize counts the distinct normalised points; Mutate never
// returns a move the normalisation undoes.
//
// # Device lowering
//
// A config with tiles_per_sm > 0 or a fusion group takes the device
// lowering (lower_device.go): projection phases (q|k|v, gate|up, o, down,
// lm_head) split into tiles_per_sm x num_SMs tiles of one width, and the
// fused lowerings of Fusions (qkv, gate_up, norm_staging, rope_epilogue,
// residual_epilogue, silu_staging, reshape_view) replace glue tasks by
// ir.FusedPatterns tiles. kv_head_split = 1 (any lowering) makes each
// attention, or split-KV shard, one ATTENTION_TILE per KV head (params
// n_off, N_tile) on one counter: KV head x KV chunk across SMs, the query
// heads of a GQA group sharing their K/V rows. tiling.attention.head_counters
// = 1, with kv_head_split and rope_epilogue, gives the q|k|v phase one
// counter per KV head (tiles cut at the head groups' boundaries,
// emitHeadPhase): each attention slice waits for its own heads' q, k and v
// tiles only (the validator's partial-read rule proves it); elsewhere
// every consumer reads the whole of its producer (ROPE, KV_APPEND, the
// GEMVs, COMBINE) and the knob changes nothing. DeviceDefault is the device
// lowering's default (seven hops per layer, every SM streaming every
// phase), FullyFused adds the RoPE epilogue (five hops) and the per-KV-head
// counters. With tiles_per_sm the RoPE epilogue's q|k|v tiles are paired
// tiles (ir.PairStride, pairWidth): columns [i, i+w) and their rotation
// partners [i+head_dim/2, i+head_dim/2+w) of one head, each head of q, k
// and v split into tiles_per_sm x num_SMs / heads of them, so the phase
// fills the SMs and no tile straddles a head; without tiles_per_sm they
// are whole heads. Depth, HopsPerLayer, PhaseTiles and
// BytesInFlightPerSM measure a point's shape
// (docs/results/roofline-design.md).
//
// # Lowering
//
// Lower follows the Python reference's lowering exactly (buffer and counter order,
// names, labels, counter notes, params, est_bytes/est_flops, meta), adds
// the SM assignment (AssignSMs: round_robin over the topological order, or
// LPT keyed (Σ est_bytes, Σ est_flops, count, sm) with pinned split-KV
// shards keeping their SM and counting their load, docs/spec/rules.md R17) and rejects
// positions outside [0, max_seq) (docs/spec/rules.md R28). Reposition re-targets a lowered
// program to another position when the result equals a fresh lowering.
//
// # Quantized models
//
// A model with quantized weights (model.Quantization, docs/spec/quantization.md)
// lowers every quantized projection as an I8/I4 WEIGHT [N, K] followed by
// its F16 scales [N, groups] (source KEY.scales); its GEMV/GEMM and fused
// tiles take the scales as their last input and params qdtype and group
// (withScales), and their est_bytes count the stored width plus the
// scales, so the streamed-bytes floor is the quantized model's. The cost
// model caps a quantized tile's per-SM stream at the ALU rate of its
// dequantization (CostParams.ALUGOpsPerSM, DequantOpsI8, DequantOpsI4;
// first-principles, uncalibrated). On cuda a quantized model's space
// (SpaceFor, QuantizedSpec: a "NAME:SCHEME" model) also draws
// kernel_knobs.qc, the weight rows a warp of the quantized GEMV streams.
//
// # Cost model
//
// Predict simulates the persistent kernel, event by event. Rates: the
// achievable HBM bandwidth BW = 0.8 x spec GB/s is ONE pool shared by all
// SMs (docs/spec/rules.md R16); each SM computes at 0.7 x the 16-bit matrix peak / num_sms.
// Every SM drains its queue (its tasks in topological = list order)
// strictly serially, so a head task that waits blocks the SM. Per task:
//
//	dispatch   0.25 µs                      dequeue, decode, block barrier
//	  + tile   0.10 µs + x-cache + 0.04 µs x depth      (GEMV/GEMM tiles only)
//	           x-cache = M x K x bytes(x) / (2.5 x spec BW / num_sms)
//	wait       until every wait's counter reaches its threshold, then 0.6 µs
//	           for the polling waiter to see it; while waiting, a tile with
//	           depth > 0 prefetches up to min((1 - e) x bytes, L2 / num_sms)
//	           of its weights, e = max(0.5, 1 / (1 + 0.6 x depth)); the
//	           room is L2, or AMD's larger Infinity Cache, over num_sms
//	data       a 0.6 µs HBM fill latency (hidden in proportion to the bytes
//	           already prefetched, up to one window), then the remaining
//	           bytes stream at a rate r <= cap; a task without bytes
//	           computes flops / per-SM rate instead
//	signal     0.5 µs (barrier + device fence + atomicAdd), then the
//	           counter increments and the SM takes its next task
//
// The constants are a target's CostParams (TargetCosts): the same
// first-principles record for every target until a calibration replaces
// it (schedule/costs.json, embedded and checked by ParseCostRecords,
// written by amkctl calibrate; PredictWith predicts under any record); a fused tile adds StagingUS (+ its norm weight or up from L2) and
// EpilogueUS for a RoPE / append epilogue.
//
// cap is the SM's in-flight window over the HBM latency (Little's law):
// cap = W_eff x 64 B x wave / 0.6 µs, with W_eff = tpb/wave warps (wave =
// the target's warp or wavefront width, 32 or 64), at most N_tile
// for a tile (one warp per output column) or n_heads for attention, and
// cap <= bytes x per-SM flop rate / flops. At every instant the streaming
// SMs (data or prefetch) share BW max-min fairly: r_i = min(cap_i, λ) with
// Σ r_i <= BW. Hence the makespan (the last signal) can never beat
// Σ bytes / BW, and PredictedUS = max(makespan, streamed bytes / spec BW,
// Σ bytes / BW) — the last two are floors, the first binds in practice.
// RegionUS splits the critical chain (from the last task back through
// whichever constraint started each task: its SM predecessor or the
// producer whose signal released it) by region (classifyRegion: by task
// label first, then by op).
//
// What the knobs do in this model: thinner tiles put more SMs' windows to
// work on a projection, but every extra tile on an SM pays dispatch, fill,
// x-cache and signal, and an SM holding two tiles of one phase delays the
// all-join (so llama-8b on h100 is fastest at N_tile 32, not 16 or
// 128); pipelining hides fill latency and part of each tile's bytes in the
// waits but costs issue time (optimum depth 1-2); 128 threads halve each
// SM's window; round_robin spreads the tiles that run at the same time
// (q/k/v, gate/up) over distinct SMs, where LPT, balancing bytes over the
// whole program, puts some of them on one SM (small on h200: 77 such
// pairs), which then serialises them (the reference's measured ablation
// also found round_robin faster). The constants are
// first-principles estimates, not fits to measurements; the model ranks
// schedules and stays above the physical floor, it does not claim to
// reproduce measured latencies.
package schedule
