/* ==========================================================================================
 * The instruction set (Layer 1) and the opcode dispatch.
 *
 * Each instruction is `__device__ bool amk_op_<name>(const amk_program_t&, const amk_instruction_t&,
 * int32_t task)`: pure compute over its declared buffers, the whole block cooperating. It never
 * touches counters or undeclared buffers and never launches work. It returns false only after
 * raising a trap (an operand the kernel cannot handle), and then writes nothing further.
 *
 * The persistent VM (megakernel.cu) and the per-op Loop-1 entry kernels call exactly these
 * functions, so a variant Loop 1 keeps is the code the megakernel runs (R29).
 *
 * Device coverage (R25): every opcode of ir, FUSED as the patterns of ir.FusedPatterns. Others
 * trap with AMK_TRAP_FUSED_PATTERN / AMK_TRAP_UNIMPLEMENTED_OP; kernels.CheckDevice rejects
 * such programs before launch, naming the opcode.
 * ========================================================================================== */
#ifndef AMK_OPS_CUH
#define AMK_OPS_CUH

#include "common.cuh"
#include "ops_elementwise.cuh"
#include "ops_norm.cuh"
#include "ops_gemv.cuh"
#include "ops_attention.cuh"

__device__ __forceinline__ bool amk_dispatch(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    switch (inst.op) {
        case AMK_OP_NOP:               return true;
        case AMK_OP_COPY:              return amk_op_copy(prog, inst, task);
        case AMK_OP_EMBED:             return amk_op_embed(prog, inst, task);
        case AMK_OP_RMSNORM:           return amk_op_rmsnorm(prog, inst, task);
        case AMK_OP_LAYERNORM:         return amk_op_layernorm(prog, inst, task);
        case AMK_OP_GEMV_TILE:         return amk_op_gemv_tile(prog, inst, task);
        case AMK_OP_GEMM_TILE:         return amk_op_gemm_tile(prog, inst, task);
        case AMK_OP_ATTENTION_TILE:    return amk_op_attention_tile(prog, inst, task);
        case AMK_OP_ROPE:              return amk_op_rope(prog, inst, task);
        case AMK_OP_SILU_MUL:          return amk_op_silu_mul(prog, inst, task);
        case AMK_OP_GELU:              return amk_op_gelu(prog, inst, task);
        case AMK_OP_ADD:               return amk_op_add(prog, inst, task);
        case AMK_OP_MUL:               return amk_op_mul(prog, inst, task);
        case AMK_OP_DEQUANT:           return amk_op_dequant(prog, inst, task);
        case AMK_OP_SOFTMAX:           return amk_op_softmax(prog, inst, task);
        case AMK_OP_ALLREDUCE_SHARD:   return amk_op_allreduce_shard(prog, inst, task);
        case AMK_OP_KV_APPEND:         return amk_op_kv_append(prog, inst, task);
        case AMK_OP_SAMPLE_ARGMAX:     return amk_op_sample_argmax(prog, inst, task);
        case AMK_OP_ATTENTION_COMBINE: return amk_op_attention_combine(prog, inst, task);
        case AMK_OP_FUSED:             return amk_op_fused(prog, inst, task);
        default:                       return amk_trap(prog, AMK_TRAP_UNIMPLEMENTED_OP, task, inst.op, inst.op);
    }
}

#endif /* AMK_OPS_CUH */
