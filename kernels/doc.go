// Package kernels owns amk's GPU execution path up to the driver: the device
// ABI (abi.h), the CUDA sources of the micro-kernels and of the persistent
// megakernel VM (cuda/), the Go mirror of the ABI's POD layouts
// (MarshalProgram), the pre-launch device checks (CheckDevice, PlanSmem,
// CheckBinding), the -D knob space of the sources (KnobSpace) and the
// sources of the CPU emulator (emu/, EmulatorSources). The CUDA sources are
// embedded in the binary (Sources); $AMK_KERNEL_SOURCES names a directory of
// the same layout that replaces them at run time (a CUDA fix reaching a GPU
// machine without rebuilding the Go binaries; CheckSources says why one is
// refused).
// Subpackages: kernels/build compiles the sources with nvcc (or, for the
// emulator, a host C++ compiler) through a shared cache; kernels/launch runs
// them (gorgonia.org/cu behind the cuda build tag, or the emulator; a
// supervised child process per device).
//
// # Execution model
//
// One cooperative launch runs one decode step (one forward pass, one token).
// The host zeroes the counters, the abort flag and the diagnostics before
// every launch; KV caches persist in device memory across launches; a new
// position only re-marshals instruction params (Tables.RemarshalInstructions,
// docs/spec/rules.md R28), weights stay resident.
//
// The launch has one block per queue: grid = 1 + the largest Task.SM, which
// the launcher checks against the co-residency the occupancy API proves for
// the compiled kernel at its block size and dynamic shared memory (docs/spec/rules.md R24).
// Queue q holds the tasks with SM == q in task-list order: exactly the order
// the validator proves to be a linear extension of the DAG (docs/spec/rules.md R21);
// MarshalProgram re-proves it (and acyclicity and wait satisfiability) before
// anything reaches a device. Each block (no entry grid.sync: the cooperative
// launch already makes every block resident; AMK_ENTRY_GRID_SYNC=1 restores
// it), for each queue entry: (a) weight prefetch — with pipelining_depth d
// the block keeps the weight rows of its next d projection instructions, at
// most AMK_PREFETCH_WINDOW_BYTES (256 KiB) of them ahead, streaming into L2
// (weights never wait on counters, so this overlaps HBM with the dependency
// spin); (b) copy the instruction to shared memory and bounds-check it;
// (c) wait; (d) dispatch the micro-kernel (the whole block cooperates);
// (e) signal. The kernel's end is the exit barrier.
//
// With the streaming ring (kernel knobs ring_stages > 0 and ring_tile,
// cuda/ring.cuh; off by default) every warp also streams the weight rows of
// the GEMV/FUSED tiles (fp and quantized) of its queue through a private shared-memory ring
// (cp.async.bulk + mbarrier on sm_90 with nvcc >= 12, cp.async otherwise),
// ring_stages - 1 chunks ahead of its dot products and across task ends, so
// the next projection's first weights are in flight before its wait; the
// per-tile cp.async ring is compiled out and PlanSmem provisions the ring
// (RingBytes) above the ops' shared memory.
//
// Sync (cuda/sync.cuh, docs/spec/ir.md §8): signal = __syncthreads, thread 0
// red.release.gpu.global.add(counter, 1) on sm_70+ (a release reduction:
// the barrier makes the block's stores visible to thread 0, the release
// orders them before the increment; before sm_70 a __threadfence +
// atomicAdd), __syncthreads. wait = thread 0 polls each (counter, threshold)
// with ld.acquire.gpu (atomicAdd(c, 0) before sm_70) — counters only grow,
// so satisfied waits are not re-read — with 64 busy polls and then
// exponential __nanosleep backoff (32 ns, capped at AMK_BACKOFF_MAX_NS =
// 256 ns); a fence after the last acquire and a __syncthreads publish the
// data to the block.
//
// # Watchdog and aborts (docs/spec/rules.md R23, R25)
//
// Every 64 polls a waiting thread checks the abort flag and the %globaltimer
// clock. A wait longer than amk_program_t.watchdog_ns (0: the build's
// AMK_WATCHDOG_NS, 1 s by default; keep it below any driver/OS watchdog)
// raises AMK_ABORT_WATCHDOG — a code distinct from every trap — through an
// atomicCAS on the flag, and the winning block records the task, its opcode,
// the counter, the value observed, the threshold and the time waited in
// amk_diag_t. Every other waiting block sees the flag at its next poll and
// leaves its queue, so a deadlocked or mis-marshalled program ends in bounded
// time and the launcher reports a WATCHDOG status naming that task and
// counter. Device traps (codes from AMK_TRAP_FIRST: unimplemented op, FUSED
// pattern, head_dim, KV position out of range, operand shape/dtype, shared
// memory, launch shape, index out of range, token id out of range) use the
// same path; CheckDevice rejects every program that would trap before launch,
// naming the opcode, so a trap means a bypassed check.
//
// # Instructions
//
// cuda/ops*.cuh implement every opcode of ir: EMBED (ids checked, never
// clamped), RMSNORM, LAYERNORM, GEMV_TILE (fp32/fp16/bf16 with 128-bit
// streaming loads, a register path with COLS x KUNROLL loads in flight per
// lane and a cp.async path streaming each warp's rows through a private ring
// that never drains between row groups; int8/int4 dequant-fused with q = nibble -
// zero when zeros are given, else nibble - 8, docs/spec/rules.md R27; also the FUSED patterns'
// quantized tiles and through the streaming ring, amk_gemv_q_row, docs/spec/quantization.md §4),
// GEMM_TILE (batch rows in
// register tiles), ATTENTION_TILE (GQA, batched, split-KV partials of one
// sequence or a batch; q and
// the accumulator in registers, head_dim <= 256), ATTENTION_COMBINE, ROPE,
// KV_APPEND (rank 3/4, pos bounds-checked, docs/spec/rules.md R28), ADD, MUL, GELU, SILU_MUL,
// SOFTMAX (last dim), DEQUANT, ALLREDUCE_SHARD (sum on one device), COPY,
// SAMPLE_ARGMAX (integer index into integer outputs, docs/spec/rules.md R27) and FUSED as the
// patterns of ir.FusedPatterns (RMSNorm or SiLU·up staging into the x cache,
// residual-add, RoPE and KV-append epilogues; a params.recipe is VM-only).
// Math is fp32, stored with round-to-nearest-even.
// The VM dispatches them and amk_entry_<op> kernels run them standalone for
// Loop 1, so a knob Loop 1 keeps is the code the VM runs (docs/spec/rules.md R29).
//
// # Knobs
//
// KnobSpace lists the -D macros with defaults, searched choices and validated
// ranges; the sources carry the same defaults (a test compares them), so the
// default variant equals a build without -D. The build refuses any other
// macro or value (ParseDefine) and keys its cache on the full knob set with
// defaults filled (docs/spec/rules.md R8).
//
// # Inline PTX and the CPU emulator
//
// Every asm statement of cuda/ is a named wrapper in cuda/ptx.cuh
// (amk_ptx_*), with a host definition beside it under AMK_EMU; a test keeps
// inline PTX out of every other file, and kernels/build's opt-in
// TestPTXMatchesRevision shows a source change left the PTX of every variant
// unchanged. The emulator (emu/: runtime.cc, the emu.h shim force-included
// into the kernel translation unit kernel.cc, fake CUDA headers in include/)
// compiles cuda/ unchanged for the host and runs a launch with one OS thread
// per block and one fiber per CUDA thread: barriers and warp collectives
// checked for divergence, cp.async and bulk copies that land only when
// waited for (their targets poisoned until then), mbarriers with arrival and
// transaction counts and phase parity, seeded thread schedules, and reports
// that name the block, thread, task, opcode and counter of a deadlock,
// divergence or misuse. emu.h states the model; docs/results/emu.md what it
// cannot show (timing, the GPU's weaker memory model, nvcc's code, driver
// limits, bit-exact GPU maths).
//
// # What is verified here and what is not
//
// Verified without a GPU (go test ./kernels/...): abi.h parsed against ir
// (every enum code and name, caps, version, amk_params_t field order) and its
// static asserts compiled by the host C and C++ compilers and compared with
// the Go layout constants; the byte tables of MarshalProgram (sizes, offsets,
// little-endian contents, queue order, arena layout) and its refusals;
// CheckDevice, PlanSmem, tensor encoding, the knob allow-list (with a fuzz
// target); source-tree invariants (every opcode dispatched and given an entry
// kernel, knob defaults equal in Go and CUDA, includes resolve). The sources
// compile with nvcc 11.8 (Debian) for sm_75, sm_80 and sm_90 across the knob
// extremes (threads 128..1024, cols/stages/unroll up to 16, cp.async on and
// off); the cuda-tagged launcher passes go vet and links against the CUDA
// 11.8 headers and stub libcuda.
//
// On the CPU emulator (kernels/gpu's emulator tests, in go test): the
// megakernel's buffers (logits, KV caches, every activation) match the
// reference VM for toy, toy-2L and a 2-layer 512-wide bf16 model, on the
// register GEMV, the per-tile cp.async ring and the streaming ring with the
// sm_80 and sm_90 (bulk copy) engines, the device default and the fully
// fused point with paired tiles, split-KV attention, 128 and 256 threads,
// positions 0 and 20, under several thread schedules; seeded kernel bugs
// (a wrong counter wait, a missing barrier, a short cp.async wait, a wrong
// mbarrier parity, a paired-tile index off by one, barrier divergence, a
// missing __syncwarp) are caught.
//
// Not verified (no GPU was available): that any kernel computes the right
// numbers on a GPU, that the sync primitives and the watchdog behave as
// designed on hardware, the cooperative launch through cgo, the co-residency numbers,
// performance of any path (the cp.async and register GEMV variants in
// particular), compilation with nvcc 12/13 and for sm_90a, and the
// cuda-tagged code at run time (gorgonia.org/cu against a real driver).
// kernels/launch/cuda_test.go holds the GPU checks to run first.
package kernels
