package ir

import "fmt"

// Op is an instruction kind (an ABI opcode). Codes are canonical and
// append-only: extend by appending, never renumber.
type Op int

// Opcodes (amk_opcode_t).
const (
	OpNOP Op = iota
	OpCOPY
	OpEMBED
	OpRMSNORM
	OpLAYERNORM
	OpGEMVTile
	OpGEMMTile
	OpAttentionTile
	OpROPE
	OpSiLUMul
	OpGELU
	OpADD
	OpMUL
	OpDEQUANT
	OpSOFTMAX
	OpAllreduceShard
	OpKVAppend
	OpSampleArgmax
	OpAttentionCombine
	OpFUSED
	opCount
)

// Variadic marks an unbounded input count in OpSpec.MaxInputs.
const Variadic = -1

// OpSpec pins an opcode's arity and the params that make it mathematically
// correct. It is the single table the validator, lowering, VMs and the ABI
// header test consult.
type OpSpec struct {
	Op        Op
	Name      string
	MinInputs int
	MaxInputs int // Variadic = unbounded (still capped by MaxInputs)
	NOutputs  int
	Required  []string
	Note      string
}

var opTable = [opCount]OpSpec{
	{OpNOP, "NOP", 0, 0, 0, nil, "no-op"},
	{OpCOPY, "COPY", 1, 1, 1, nil, "page to page move: out = in (cast)"},
	{OpEMBED, "EMBED", 2, 2, 1, []string{"hidden"}, "[ids, table[V,H]] -> gathered rows; also the flat->head reshape"},
	{OpRMSNORM, "RMSNORM", 2, 2, 1, []string{"eps", "hidden"}, "x*rsqrt(mean(x^2)+eps)*w"},
	{OpLAYERNORM, "LAYERNORM", 2, 3, 1, []string{"eps", "hidden"}, "LayerNorm(x, w[, b])"},
	{OpGEMVTile, "GEMV_TILE", 2, 3, 1, []string{"K", "N_tile", "n_off"}, "out[..,n_off:n_off+N_tile] = x @ W[n_off:..].T"},
	{OpGEMMTile, "GEMM_TILE", 2, 3, 1, []string{"M_tile", "K", "N_tile", "n_off"}, "tiled GEMM (batch rows)"},
	{OpAttentionTile, "ATTENTION_TILE", 3, 4, 1, []string{"head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads"}, "GQA attention over a KV window; n_off/N_tile: a KV-head slice (its query heads only)"},
	{OpROPE, "ROPE", 2, 2, 1, []string{"head_dim", "theta"}, "Llama rotate-half rotary embedding"},
	{OpSiLUMul, "SILU_MUL", 2, 2, 1, nil, "SwiGLU silu(gate)*up"},
	{OpGELU, "GELU", 1, 1, 1, nil, "exact (erf) GELU"},
	{OpADD, "ADD", 2, 2, 1, nil, "residual add"},
	{OpMUL, "MUL", 1, 2, 1, nil, "elementwise product, or a*params.scale"},
	{OpDEQUANT, "DEQUANT", 2, 3, 1, []string{"qdtype", "group"}, "int4/int8 + scales -> fp tile"},
	{OpSOFTMAX, "SOFTMAX", 1, 1, 1, nil, "softmax over params.dim (default -1)"},
	{OpAllreduceShard, "ALLREDUCE_SHARD", 1, 8, 1, nil, "tensor-parallel shard reduce (sum on one device)"},
	{OpKVAppend, "KV_APPEND", 2, 2, 1, []string{"pos"}, "append new k/v into the KV cache at pos (in place)"},
	{OpSampleArgmax, "SAMPLE_ARGMAX", 1, 1, 1, nil, "greedy logits -> next token"},
	{OpAttentionCombine, "ATTENTION_COMBINE", 2, 8, 1, nil, "merge per-KV-block (acc, m, l) flash partials"},
	{OpFUSED, "FUSED", 1, Variadic, 1, []string{"recipe"}, "a fused subgraph: params.recipe (VM only), or a FusedPatterns pattern named in params.flags bits 16-31 (then its params replace recipe)"},
}

// Ops lists every opcode in code order.
func Ops() []Op {
	out := make([]Op, opCount)
	for i := range out {
		out[i] = Op(i)
	}
	return out
}

// Valid reports whether o is a defined opcode.
func (o Op) Valid() bool { return o >= 0 && o < opCount }

// Spec returns the op table entry of o; ok is false for an unknown opcode.
func (o Op) Spec() (OpSpec, bool) {
	if !o.Valid() {
		return OpSpec{}, false
	}
	return opTable[o], true
}

func (o Op) String() string {
	if o.Valid() {
		return opTable[o].Name
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ParseOp maps an opcode name such as "GEMV_TILE" to its Op.
func ParseOp(name string) (Op, error) {
	for _, s := range opTable {
		if s.Name == name {
			return s.Op, nil
		}
	}
	return 0, fmt.Errorf("unknown opcode %q", name)
}

// ParamType is how a param marshals into amk_params_t.
type ParamType byte

// Param marshalling types (PARAM_FIELDS).
const (
	ParamInt32 ParamType = 'i'
	ParamReal  ParamType = 'f'
)

// ParamField is one scalar field of amk_params_t, in ABI order.
type ParamField struct {
	Name string
	Type ParamType
}

// ParamFields is amk_params_t in layout order: 19 int32 then 3 float32.
var ParamFields = []ParamField{
	{"K", ParamInt32}, {"N", ParamInt32}, {"M", ParamInt32}, {"N_tile", ParamInt32}, {"M_tile", ParamInt32},
	{"n_off", ParamInt32}, {"m_off", ParamInt32}, {"hidden", ParamInt32}, {"vocab", ParamInt32},
	{"head_dim", ParamInt32}, {"n_heads", ParamInt32}, {"n_kv_heads", ParamInt32}, {"kv_start", ParamInt32},
	{"kv_len", ParamInt32}, {"pos", ParamInt32}, {"qdtype", ParamInt32}, {"group", ParamInt32},
	{"flags", ParamInt32}, {"dim", ParamInt32},
	{"eps", ParamReal}, {"scale", ParamReal}, {"theta", ParamReal},
}

// ParamFieldType returns the marshalled type of a known param key.
func ParamFieldType(key string) (ParamType, bool) {
	for _, f := range ParamFields {
		if f.Name == key {
			return f.Type, true
		}
	}
	return 0, false
}

// Flag bits of params.flags.
const (
	FlagCausal        = 1 << 0
	FlagPartialWrite  = 1 << 1 // split-KV flash partial [acc | m | l]
	FlagPairedTile    = 1 << 2 // a FUSED q/k/v tile of two half-head column ranges (PairStride)
	FusedPatternShift = 16
)
