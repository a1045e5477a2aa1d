package ir

// A FUSED task runs either a generic params.recipe (VM only) or one of the
// fused layer patterns below, named by params.flags bits 16-31. A pattern
// is one projection tile, out[m, n_off : n_off+N_tile] of x @ W.T, with an
// optional staging step applied to the activation before the dot products
// and an optional epilogue applied to the tile's results. The table is the
// data the validator, the reference VM, the lowering and the device ABI
// (kernels/abi.h amk_fused_pattern_t) share.
//
// Numerics, on every executor: the dot products accumulate in float32.
// Staging output is rounded to the activation's dtype, exactly as the unfused
// RMSNORM / SILU_MUL would store it. Every epilogue first rounds the sums to
// the activation's dtype (the unfused projection's output), then adds the
// residual or rotates in float32 and rounds to the destination's dtype. So a
// fused program computes its unfused twin's values bit for bit; fusion
// changes where values live, never what they are.

// FusedStaging is what a pattern does to the activation before the GEMV.
type FusedStaging int

// Staging kinds.
const (
	StageNone    FusedStaging = iota
	StageRMSNorm              // x' = RMSNORM(x, norm_w): params eps, hidden
	StageSiLUMul              // x' = silu(gate) * up: inputs gate, up
)

// FusedEpilogue is what a pattern does with the tile's results.
type FusedEpilogue int

// Epilogue kinds.
const (
	EpilogueNone       FusedEpilogue = iota
	EpilogueAdd                      // out = x'@W.T + residual
	EpilogueRoPE                     // out = rope(x'@W.T) per head of the tile (pos input)
	EpilogueRoPEAppend               // cache[pos, heads of the tile] = rope(x'@W.T)
	EpilogueAppend                   // cache[pos, heads of the tile] = x'@W.T
)

// FusedPattern is one fused layer task shape.
type FusedPattern struct {
	ID       int // params.flags bits 16-31; append only, never renumber
	Name     string
	Staging  FusedStaging
	Epilogue FusedEpilogue
	// Inputs names the task's inputs in order: "x" (or "gate", "up"),
	// "norm_w", "W", "residual", "pos". The output is "out" or, for the
	// append epilogues, the KV cache (written, never read: sibling tiles
	// write the same cache at other heads).
	Inputs []string
	// Required lists the params beyond K, N_tile and n_off.
	Required []string
	Note     string
}

// Input roles of a pattern.
const (
	RoleX        = "x"
	RoleGate     = "gate"
	RoleUp       = "up"
	RoleNormW    = "norm_w"
	RoleW        = "W"
	RoleResidual = "residual"
	RolePos      = "pos"
)

// Fused pattern ids.
const (
	FusedNone            = 0
	FusedGEMVAdd         = 1
	FusedNormGEMV        = 2
	FusedNormGEMVRoPE    = 3
	FusedNormGEMVRoPEApp = 4
	FusedNormGEMVAppend  = 5
	FusedSiLUGEMV        = 6
	FusedSiLUGEMVAdd     = 7
	FusedGEMVRoPE        = 8
	FusedGEMVRoPEAppend  = 9
	FusedGEMVAppend      = 10
	fusedPatternCount    = 11
)

// Param notes of the table.
const (
	fusedPatternParamsNote = "params: K, N_tile, n_off"
	fusedNormParamsNote    = "; eps, hidden"
	fusedRoPEParamsNote    = "; head_dim, theta; a tile covers whole heads or is a paired tile (PairStride)"
	fusedAppendParamsNote  = "; N = the projection's width, pos = the cache row"
)

var fusedPatterns = [fusedPatternCount]FusedPattern{
	{FusedNone, "NONE", StageNone, EpilogueNone, nil, nil, "no pattern: the task carries params.recipe"},
	{FusedGEMVAdd, "GEMV_ADD", StageNone, EpilogueAdd, []string{RoleX, RoleW, RoleResidual}, nil,
		"o/down projection with the residual add in its epilogue; " + fusedPatternParamsNote},
	{FusedNormGEMV, "NORM_GEMV", StageRMSNorm, EpilogueNone, []string{RoleX, RoleNormW, RoleW},
		[]string{"eps", "hidden"}, "RMSNorm folded into the activation staging; " + fusedPatternParamsNote + fusedNormParamsNote},
	{FusedNormGEMVRoPE, "NORM_GEMV_ROPE", StageRMSNorm, EpilogueRoPE, []string{RoleX, RoleNormW, RoleW, RolePos},
		[]string{"eps", "hidden", "head_dim", "theta"}, "q tile: norm staging, RoPE epilogue; " +
			fusedPatternParamsNote + fusedNormParamsNote + fusedRoPEParamsNote},
	{FusedNormGEMVRoPEApp, "NORM_GEMV_ROPE_APPEND", StageRMSNorm, EpilogueRoPEAppend,
		[]string{RoleX, RoleNormW, RoleW, RolePos}, []string{"eps", "hidden", "head_dim", "theta", "N", "pos"},
		"k tile: norm staging, RoPE + KV append epilogue; " + fusedPatternParamsNote + fusedNormParamsNote +
			fusedRoPEParamsNote + fusedAppendParamsNote},
	{FusedNormGEMVAppend, "NORM_GEMV_APPEND", StageRMSNorm, EpilogueAppend, []string{RoleX, RoleNormW, RoleW},
		[]string{"eps", "hidden", "head_dim", "N", "pos"}, "v tile: norm staging, KV append epilogue; " +
			fusedPatternParamsNote + fusedNormParamsNote + fusedAppendParamsNote},
	{FusedSiLUGEMV, "SILU_GEMV", StageSiLUMul, EpilogueNone, []string{RoleGate, RoleUp, RoleW}, nil,
		"down projection with silu(gate)*up in its staging; " + fusedPatternParamsNote},
	{FusedSiLUGEMVAdd, "SILU_GEMV_ADD", StageSiLUMul, EpilogueAdd, []string{RoleGate, RoleUp, RoleW, RoleResidual}, nil,
		"down projection: silu(gate)*up staging, residual add epilogue; " + fusedPatternParamsNote},
	{FusedGEMVRoPE, "GEMV_ROPE", StageNone, EpilogueRoPE, []string{RoleX, RoleW, RolePos}, []string{"head_dim", "theta"},
		"q tile with a RoPE epilogue; " + fusedPatternParamsNote + fusedRoPEParamsNote},
	{FusedGEMVRoPEAppend, "GEMV_ROPE_APPEND", StageNone, EpilogueRoPEAppend, []string{RoleX, RoleW, RolePos},
		[]string{"head_dim", "theta", "N", "pos"}, "k tile with RoPE + KV append; " + fusedPatternParamsNote +
			fusedRoPEParamsNote + fusedAppendParamsNote},
	{FusedGEMVAppend, "GEMV_APPEND", StageNone, EpilogueAppend, []string{RoleX, RoleW},
		[]string{"head_dim", "N", "pos"}, "v tile with a KV append epilogue; " + fusedPatternParamsNote + fusedAppendParamsNote},
}

// FusedPatterns lists every pattern in id order (FusedNone first).
func FusedPatterns() []FusedPattern { return append([]FusedPattern(nil), fusedPatterns[:]...) }

// FusedPatternByID returns the pattern with id; ok is false for an unknown
// id or FusedNone.
func FusedPatternByID(id int) (FusedPattern, bool) {
	if id <= FusedNone || id >= fusedPatternCount {
		return FusedPattern{}, false
	}
	return fusedPatterns[id], true
}

// FusedPatternFlags is the params.flags value that names pattern id.
func FusedPatternFlags(id int) int64 { return int64(id) << FusedPatternShift }

// TaskFusedPattern returns the pattern a FUSED task names in params.flags
// bits 16-31 (id 0 when none: the task then needs params.recipe).
func TaskFusedPattern(t *Task) int {
	if t.Op != OpFUSED {
		return FusedNone
	}
	return int(t.Params.IntOr("flags", 0) >> FusedPatternShift & 0xFFFF)
}

// Role returns the input index of a role in the pattern (-1 if absent).
func (p FusedPattern) Role(role string) int {
	for i, r := range p.Inputs {
		if r == role {
			return i
		}
	}
	return -1
}

// WritesCache reports whether the pattern's output is a KV cache.
func (p FusedPattern) WritesCache() bool {
	return p.Epilogue == EpilogueAppend || p.Epilogue == EpilogueRoPEAppend
}

// Paired reports whether the pattern may tile as a paired tile: the
// patterns that carry head_dim (the q|k|v tiles: RoPE, RoPE + append,
// append).
func (p FusedPattern) Paired() bool {
	return p.Epilogue == EpilogueRoPE || p.WritesCache()
}

// A paired tile (params.flags bit FlagPairedTile, a FUSED task of a pattern
// with head_dim) covers two column ranges of ONE head, each of N_tile/2
// columns: [n_off, n_off+N_tile/2) in the first half of the head and the
// matching [n_off+head_dim/2, n_off+head_dim/2+N_tile/2) in its second
// half. RoPE's rotate-half pairs column i of a head with column
// i+head_dim/2, so every rotation pair lies inside the tile and the RoPE
// epilogue stays tile-local however narrow the tile. N_tile stays the
// tile's column count (what it streams and computes); absent the flag a
// tile is the one range [n_off, n_off+N_tile).

// PairStride is the distance from a paired tile's first column range to its
// second (head_dim/2, from params), or 0 for a contiguous tile. A paired
// tile with an unusable head_dim also gives 0 (the validator reports it).
func PairStride(p Params) int64 {
	if p.IntOr("flags", 0)&FlagPairedTile == 0 {
		return 0
	}
	return max(p.IntOr("head_dim", 0), 0) / 2
}

// TileRanges is the column ranges [lo, hi) a projection tile writes: one
// range [nOff, nOff+nTile), or a paired tile's two (stride > 0, PairStride).
func TileRanges(nOff, nTile, stride int64) [][2]int64 {
	if stride <= 0 {
		return [][2]int64{{nOff, nOff + nTile}}
	}
	w := nTile / 2
	return [][2]int64{{nOff, nOff + w}, {nOff + stride, nOff + stride + w}}
}

// RequiredParams is every param a task of this pattern must carry.
func (p FusedPattern) RequiredParams() []string {
	return append([]string{"K", "N_tile", "n_off"}, p.Required...)
}
