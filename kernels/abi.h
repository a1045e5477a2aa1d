/* ==========================================================================================
 * amk device ABI (seed 000 §8, reference-behaviour §1.8).
 *
 * The contract between three parties:
 *   1. the persistent megakernel VM and the per-op entry kernels (kernels/cuda/),
 *   2. the micro-kernels every opcode dispatches to (kernels/cuda/ops*.cuh),
 *   3. the host marshaller (kernels.MarshalProgram in Go), which writes these PODs
 *      byte for byte.
 *
 * Enum codes, capacities and the version are CANONICAL and owned by package ir;
 * kernels/abi_test.go parses this header and fails on any drift (codes, names, caps,
 * version, the amk_params_t field order). The AMK_STATIC_ASSERTs below pin every size
 * and offset the Go marshaller relies on; the same test compares them with the Go
 * layout constants.
 *
 * Decode model: one launch == one forward pass == one decoded token. Counters are zeroed
 * by the host before every launch; KV caches persist in device memory across launches.
 * ========================================================================================== */
#ifndef AMK_ABI_H
#define AMK_ABI_H

#include <stdint.h>
#include <stddef.h>

#if defined(__cplusplus)
#define AMK_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define AMK_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ---- version (ir.ABIVersion = "0.2") ------------------------------------------------------ */
#define AMK_ABI_VERSION_MAJOR 0
#define AMK_ABI_VERSION_MINOR 2

/* ---- capacities (ir.MaxInputs, MaxOutputs, MaxWaits, MaxRank) ------------------------------ */
#define AMK_MAX_INPUTS  8
#define AMK_MAX_OUTPUTS 4
#define AMK_MAX_WAITS   8
#define AMK_MAX_RANK    4

/* ---- element types (ir.DType) -------------------------------------------------------------- */
typedef enum {
    AMK_F32    = 0,
    AMK_F16    = 1,
    AMK_BF16   = 2,
    AMK_F8E4M3 = 3,
    AMK_F8E5M2 = 4,
    AMK_I32    = 5,
    AMK_I8     = 6,
    AMK_I4     = 7, /* packed: element 2b is the low nibble of byte b, 2b+1 the high nibble */
    AMK_U8     = 8,
    AMK_BOOL   = 9
} amk_dtype_t;

/* ---- memory spaces (ir.MemSpace) ----------------------------------------------------------- */
typedef enum {
    AMK_HBM            = 0,
    AMK_GLOBAL_SCRATCH = 1,
    AMK_SMEM           = 2,
    AMK_REGISTER       = 3
} amk_memspace_t;

/* ---- buffer kinds (ir.BufferKind); stored in amk_buffer_t.kind ------------------------------ */
typedef enum {
    AMK_WEIGHT     = 0,
    AMK_ACTIVATION = 1,
    AMK_KV_CACHE   = 2,
    AMK_IO_INPUT   = 3,
    AMK_IO_OUTPUT  = 4,
    AMK_CONST      = 5
} amk_buffer_kind_t;

/* ---- opcodes (ir.Op); append only, never renumber ------------------------------------------ */
typedef enum {
    AMK_OP_NOP               = 0,
    AMK_OP_COPY              = 1,
    AMK_OP_EMBED             = 2,
    AMK_OP_RMSNORM           = 3,
    AMK_OP_LAYERNORM         = 4,
    AMK_OP_GEMV_TILE         = 5,
    AMK_OP_GEMM_TILE         = 6,
    AMK_OP_ATTENTION_TILE    = 7,
    AMK_OP_ROPE              = 8,
    AMK_OP_SILU_MUL          = 9,
    AMK_OP_GELU              = 10,
    AMK_OP_ADD               = 11,
    AMK_OP_MUL               = 12,
    AMK_OP_DEQUANT           = 13,
    AMK_OP_SOFTMAX           = 14,
    AMK_OP_ALLREDUCE_SHARD   = 15,
    AMK_OP_KV_APPEND         = 16,
    AMK_OP_SAMPLE_ARGMAX     = 17,
    AMK_OP_ATTENTION_COMBINE = 18,
    AMK_OP_FUSED             = 19,
    AMK_OP__COUNT
} amk_opcode_t;

/* ---- params.flags bits (ir.FlagCausal, FlagPartialWrite, FlagPairedTile, FusedPatternShift) - */
#define AMK_FLAG_CAUSAL         0x1
#define AMK_FLAG_PARTIAL_WRITE  0x2
#define AMK_FLAG_PAIRED_TILE    0x4 /* FUSED q/k/v tile: N_tile/2 columns at n_off and n_off + head_dim/2 */
#define AMK_FUSED_PATTERN_SHIFT 16

/* A FUSED task runs on the device only as a known pattern (params.flags bits 16-31); the table,
 * with each pattern's inputs, params and numerics, is ir.FusedPatterns (ir/fused.go). Staging
 * and every epilogue round where the unfused chain stores: a fused task is its unfused chain,
 * bit for bit. */
typedef enum {
    AMK_FUSED_NONE                  = 0,
    AMK_FUSED_GEMV_ADD              = 1,  /* [x, W, residual]: out = x @ W[tile].T + residual          */
    AMK_FUSED_NORM_GEMV             = 2,  /* [x, norm_w, W]: out = rmsnorm(x) @ W[tile].T               */
    AMK_FUSED_NORM_GEMV_ROPE        = 3,  /* [x, norm_w, W, pos]: out = rope(rmsnorm(x) @ W[tile].T)    */
    AMK_FUSED_NORM_GEMV_ROPE_APPEND = 4,  /* [x, norm_w, W, pos] -> cache[pos, tile heads] = rope      */
    AMK_FUSED_NORM_GEMV_APPEND      = 5,  /* [x, norm_w, W] -> cache[pos, tile heads] = tile           */
    AMK_FUSED_SILU_GEMV             = 6,  /* [gate, up, W]: out = (silu(gate)*up) @ W[tile].T           */
    AMK_FUSED_SILU_GEMV_ADD         = 7,  /* [gate, up, W, residual]: ... + residual                   */
    AMK_FUSED_GEMV_ROPE             = 8,  /* [x, W, pos]                                                */
    AMK_FUSED_GEMV_ROPE_APPEND      = 9,  /* [x, W, pos] -> cache                                      */
    AMK_FUSED_GEMV_APPEND           = 10  /* [x, W] -> cache                                           */
} amk_fused_pattern_t;

/* ---- abort codes ----------------------------------------------------------------------------
 * *abort_flag is 0 while a launch runs cleanly. The first block that aborts wins an atomicCAS
 * from 0 to its code and fills amk_diag_t; every waiting block polls the flag and leaves its
 * queue. Codes below AMK_TRAP_FIRST are not traps: the watchdog (a counter wait exceeded its
 * budget) and a host-requested abort. Codes from AMK_TRAP_FIRST on are device traps: an
 * instruction the device refuses to run (the Go side rejects such programs before launch, R25,
 * so a trap means a bypassed check or a marshalling bug). */
typedef enum {
    AMK_ABORT_NONE            = 0,
    AMK_ABORT_WATCHDOG        = 1,  /* diag: task, counter, observed, threshold, waited_ns   */
    AMK_ABORT_HOST            = 2,  /* the host wrote the flag                               */
    AMK_TRAP_FIRST            = 16,
    AMK_TRAP_UNIMPLEMENTED_OP = 16, /* diag.detail = opcode                                  */
    AMK_TRAP_FUSED_PATTERN    = 17, /* diag.detail = pattern id                              */
    AMK_TRAP_HEAD_DIM         = 18, /* diag.detail = head_dim beyond AMK_ATTN_MAX_HEAD_DIM   */
    AMK_TRAP_KV_POS           = 19, /* diag.detail = pos outside [0, max_seq) (R28)          */
    AMK_TRAP_OPERAND          = 20, /* dtype/shape/param the kernel cannot handle; detail    */
    AMK_TRAP_SMEM             = 21, /* diag.detail = dynamic smem bytes needed               */
    AMK_TRAP_LAUNCH           = 22, /* blockDim != AMK_THREADS; diag.detail = blockDim.x     */
    AMK_TRAP_INDEX            = 23, /* buffer/counter/instruction id out of range; detail    */
    AMK_TRAP_TOKEN            = 24  /* EMBED id outside [0, V); diag.detail = the id         */
} amk_abort_code_t;

/* ---- counters -------------------------------------------------------------------------------- */
typedef uint32_t amk_counter_t; /* monotonic, zeroed by the host before each launch */

/* ---- op scalars: ir.ParamFields order; append only ------------------------------------------- */
typedef struct {
    int32_t K;
    int32_t N;
    int32_t M;
    int32_t N_tile;
    int32_t M_tile;
    int32_t n_off;
    int32_t m_off;
    int32_t hidden;
    int32_t vocab;
    int32_t head_dim;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t kv_start;
    int32_t kv_len;
    int32_t pos;
    int32_t qdtype;
    int32_t group;
    int32_t flags;
    int32_t dim;
    float   eps;
    float   scale;
    float   theta;
} amk_params_t;

/* ---- buffer table: the host resolves every buffer id to a device pointer before launch ------- */
typedef struct {
    void*   ptr;                  /* device pointer (arena offset applied for activations)   */
    int64_t numel;
    int32_t rank;
    int32_t dtype;                /* amk_dtype_t                                            */
    int32_t space;                /* amk_memspace_t                                         */
    int32_t kind;                 /* amk_buffer_kind_t (the reference leaves this padding)  */
    int64_t shape[AMK_MAX_RANK];  /* unused dimensions are 0                                */
    int64_t stride[AMK_MAX_RANK]; /* row-major element strides                              */
} amk_buffer_t;

/* ---- one instruction == one ir.Task ------------------------------------------------------------ */
typedef struct {
    int32_t      op;                            /* amk_opcode_t                              */
    int32_t      n_inputs;
    int32_t      n_outputs;
    int32_t      n_waits;
    int32_t      inputs[AMK_MAX_INPUTS];        /* buffer ids read                           */
    int32_t      outputs[AMK_MAX_OUTPUTS];      /* buffer ids written                        */
    int32_t      wait_counter[AMK_MAX_WAITS];   /* counter ids                               */
    int32_t      wait_threshold[AMK_MAX_WAITS]; /* static thresholds                         */
    int32_t      out_counter;                   /* incremented by exactly 1 on completion   */
    int32_t      sm;                            /* the queue (block) that runs it            */
    amk_params_t params;
} amk_instruction_t;

/* ---- abort diagnostics (written once, by the block whose atomicCAS won) ----------------------- */
typedef struct {
    int32_t  code;      /* amk_abort_code_t (equals *abort_flag)                         */
    int32_t  block;     /* blockIdx.x that raised it                                     */
    int32_t  task;      /* instruction index == ir task id; -1 if none                   */
    int32_t  op;        /* its opcode; -1 if none                                        */
    int32_t  counter;   /* watchdog: the counter waited on; -1 otherwise                 */
    uint32_t observed;  /* watchdog: the counter's value when the budget expired         */
    uint32_t threshold; /* watchdog: the threshold it needed                             */
    int32_t  detail;    /* trap: the offending value (see amk_abort_code_t)              */
    uint64_t waited_ns; /* watchdog: how long the wait lasted                            */
} amk_diag_t;

/* ---- the program the VM runs ----------------------------------------------------------------
 * The host uploads this record to device memory and passes its address as the only kernel
 * parameter (an 8-byte pointer, which every launch path handles). Queue q (run by block q) is
 * queue_flat[queue_off[q] .. queue_off[q] + queue_len[q]), instruction indices in ir task-list
 * order: exactly the per-SM order the validator proves to be a linear extension of the DAG (R21). */
typedef struct {
    const amk_buffer_t*      buffers;        /* [n_buffers]                                 */
    amk_counter_t*           counters;       /* [n_counters], zeroed before each launch     */
    const amk_instruction_t* instructions;   /* [n_instructions]                            */
    const int32_t*           queue_flat;     /* concatenated per-queue instruction indices  */
    const int32_t*           queue_off;      /* [num_queues]                                */
    const int32_t*           queue_len;      /* [num_queues]                                */
    unsigned char*           scratch;        /* activation arena base                       */
    int32_t*                 abort_flag;     /* amk_abort_code_t, zeroed before each launch */
    amk_diag_t*              diag;           /* zeroed before each launch                   */
    int64_t                  scratch_bytes;
    uint64_t                 watchdog_ns;    /* wait budget; 0 = the build's AMK_WATCHDOG_NS */
    int32_t                  n_buffers;
    int32_t                  n_counters;
    int32_t                  n_instructions;
    int32_t                  num_queues;     /* == gridDim.x of the VM launch               */
    int32_t                  prefetch_depth; /* ScheduleConfig.pipelining_depth; 0 = off    */
    uint32_t                 flags;          /* reserved, 0                                 */
} amk_program_t;

/* ---- layout pins (the Go marshaller writes exactly these offsets) ------------------------------ */
AMK_STATIC_ASSERT(sizeof(void*) == 8, "amk requires a 64-bit address space");
AMK_STATIC_ASSERT(sizeof(amk_counter_t) == 4, "amk_counter_t is 4 bytes");
AMK_STATIC_ASSERT(sizeof(amk_params_t) == 88, "amk_params_t is 88 bytes");
AMK_STATIC_ASSERT(offsetof(amk_params_t, dim) == 72, "amk_params_t.dim at 72");
AMK_STATIC_ASSERT(offsetof(amk_params_t, eps) == 76, "amk_params_t.eps at 76");
AMK_STATIC_ASSERT(offsetof(amk_params_t, scale) == 80, "amk_params_t.scale at 80");
AMK_STATIC_ASSERT(offsetof(amk_params_t, theta) == 84, "amk_params_t.theta at 84");
AMK_STATIC_ASSERT(sizeof(amk_buffer_t) == 96, "amk_buffer_t is 96 bytes");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, numel) == 8, "amk_buffer_t.numel at 8");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, rank) == 16, "amk_buffer_t.rank at 16");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, dtype) == 20, "amk_buffer_t.dtype at 20");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, space) == 24, "amk_buffer_t.space at 24");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, kind) == 28, "amk_buffer_t.kind at 28");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, shape) == 32, "amk_buffer_t.shape at 32");
AMK_STATIC_ASSERT(offsetof(amk_buffer_t, stride) == 64, "amk_buffer_t.stride at 64");
AMK_STATIC_ASSERT(sizeof(amk_instruction_t) == 224, "amk_instruction_t is 224 bytes");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, inputs) == 16, "amk_instruction_t.inputs at 16");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, outputs) == 48, "amk_instruction_t.outputs at 48");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, wait_counter) == 64, "amk_instruction_t.wait_counter at 64");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, wait_threshold) == 96, "amk_instruction_t.wait_threshold at 96");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, out_counter) == 128, "amk_instruction_t.out_counter at 128");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, sm) == 132, "amk_instruction_t.sm at 132");
AMK_STATIC_ASSERT(offsetof(amk_instruction_t, params) == 136, "amk_instruction_t.params at 136");
AMK_STATIC_ASSERT(sizeof(amk_diag_t) == 40, "amk_diag_t is 40 bytes");
AMK_STATIC_ASSERT(offsetof(amk_diag_t, observed) == 20, "amk_diag_t.observed at 20");
AMK_STATIC_ASSERT(offsetof(amk_diag_t, waited_ns) == 32, "amk_diag_t.waited_ns at 32");
AMK_STATIC_ASSERT(sizeof(amk_program_t) == 112, "amk_program_t is 112 bytes");
AMK_STATIC_ASSERT(offsetof(amk_program_t, scratch) == 48, "amk_program_t.scratch at 48");
AMK_STATIC_ASSERT(offsetof(amk_program_t, abort_flag) == 56, "amk_program_t.abort_flag at 56");
AMK_STATIC_ASSERT(offsetof(amk_program_t, diag) == 64, "amk_program_t.diag at 64");
AMK_STATIC_ASSERT(offsetof(amk_program_t, scratch_bytes) == 72, "amk_program_t.scratch_bytes at 72");
AMK_STATIC_ASSERT(offsetof(amk_program_t, watchdog_ns) == 80, "amk_program_t.watchdog_ns at 80");
AMK_STATIC_ASSERT(offsetof(amk_program_t, n_buffers) == 88, "amk_program_t.n_buffers at 88");
AMK_STATIC_ASSERT(offsetof(amk_program_t, num_queues) == 100, "amk_program_t.num_queues at 100");
AMK_STATIC_ASSERT(offsetof(amk_program_t, prefetch_depth) == 104, "amk_program_t.prefetch_depth at 104");
AMK_STATIC_ASSERT(offsetof(amk_program_t, flags) == 108, "amk_program_t.flags at 108");

#endif /* AMK_ABI_H */
