package mpk

import (
	"strconv"

	"github.com/amk-dev/amk/ir"
)

// mpkTask is what amk knows of one of Mirage's task types: its name in
// runtime_header.h and the amk opcode whose cost it resembles.
type mpkTask struct {
	name string
	op   ir.Op
}

var mpkTasks = map[int]mpkTask{
	0: {"TASK_TERMINATE", ir.OpNOP}, 10: {"TASK_BEGIN_TASK_GRAPH", ir.OpNOP},
	101: {"TASK_EMBEDDING", ir.OpEMBED}, 102: {"TASK_RMS_NORM_LINEAR", ir.OpGEMVTile},
	103: {"TASK_ATTENTION_1", ir.OpAttentionTile}, 104: {"TASK_ATTENTION_2", ir.OpAttentionCombine},
	105: {"TASK_SILU_MUL_LINEAR_WITH_RESIDUAL", ir.OpGEMVTile}, 106: {"TASK_ALLREDUCE", ir.OpAllreduceShard},
	107: {"TASK_REDUCE", ir.OpAllreduceShard}, 108: {"TASK_LINEAR_WITH_RESIDUAL", ir.OpGEMVTile},
	109: {"TASK_ARGMAX", ir.OpSampleArgmax}, 110: {"TASK_ARGMAX_PARTIAL", ir.OpSampleArgmax},
	111: {"TASK_ARGMAX_REDUCE", ir.OpSampleArgmax}, 115: {"TASK_SINGLE_BATCH_EXTEND_ATTENTION", ir.OpAttentionTile},
	116: {"TASK_PAGED_ATTENTION_1", ir.OpAttentionTile}, 117: {"TASK_PAGED_ATTENTION_2", ir.OpAttentionCombine},
	118: {"TASK_SILU_MUL", ir.OpSiLUMul}, 119: {"TASK_RMS_NORM", ir.OpRMSNORM}, 120: {"TASK_LINEAR", ir.OpGEMVTile},
	121: {"TASK_IDENTITY", ir.OpCOPY},
	151: {"TASK_LINEAR_WITH_RESIDUAL_HOPPER", ir.OpGEMVTile}, 152: {"TASK_LINEAR_HOPPER", ir.OpGEMVTile},
	153: {"TASK_PAGED_ATTENTION_HOPPER", ir.OpAttentionTile}, 154: {"TASK_RMS_NORM_HOPPER", ir.OpRMSNORM},
	155: {"TASK_LINEAR_SWAPAB_HOPPER", ir.OpGEMVTile}, 156: {"TASK_LINEAR_SWAPAB_WITH_RESIDUAL_HOPPER", ir.OpGEMVTile},
	157: {"TASK_LINEAR_CUTLASS_HOPPER", ir.OpGEMVTile}, 158: {"TASK_LINEAR_CUTLASS_WITH_RESIDUAL_HOPPER", ir.OpGEMVTile},
	301: {"TASK_NVSHMEM_ALLGATHER_STRIDED_PUT", ir.OpAllreduceShard}, 302: {"TASK_NVSHMEM_TILE_ALLREDUCE", ir.OpAllreduceShard},
	TaskAMKJoin: {"TASK_AMK_JOIN", ir.OpNOP},
}

// TaskTypeName names a task type: Mirage's enum name, amk's AMK_<OP>, or
// "task_type N" for a code amk does not know.
func TaskTypeName(code int) string {
	if t, ok := mpkTasks[code]; ok {
		return t.name
	}
	if op := ir.Op(code - TaskAMKBase); code >= TaskAMKBase && op.Valid() {
		return "AMK_" + op.String()
	}
	return "task_type " + strconv.Itoa(code)
}

// opOf is the amk opcode a task type stands for (NOP when amk knows none).
func opOf(code int) ir.Op {
	if t, ok := mpkTasks[code]; ok {
		return t.op
	}
	if op := ir.Op(code - TaskAMKBase); code >= TaskAMKBase && op.Valid() {
		return op
	}
	return ir.OpNOP
}
