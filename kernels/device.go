package kernels

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
)

// Device limits of the kernels (common.cuh).
const (
	AttnMaxHeadDim = 256 // AMK_ATTN_MAX_HEAD_DIM: attention keeps q and acc in registers
	cpaChunkBytes  = 512 // AMK_CPA_CHUNK_BYTES: one 16-byte vector per lane
)

// UnsupportedError says why a program cannot run on the device, naming the
// task and its opcode (docs/spec/rules.md R25). It is a clean rejection before launch.
type UnsupportedError struct {
	Task   string // ir.Task.Describe(), or "" for a buffer-level reason
	Op     ir.Op
	Reason string
}

func (e *UnsupportedError) Error() string {
	if e.Task == "" {
		return "not supported on the device: " + e.Reason
	}
	return fmt.Sprintf("opcode %s (task %s) cannot run on the device: %s", e.Op, e.Task, e.Reason)
}

// CheckDevice rejects, before launch, every program the device kernels would
// refuse at run time (a trap): FUSED tasks that are not an ir.FusedPatterns pattern, dtypes the
// kernels do not store (fp8), quantized GEMM, attention heads beyond
// AttnMaxHeadDim, softmax over an inner axis, and operands whose shapes the
// kernels cannot index. It assumes a program that ir-level validation
// accepted; it never panics on one it did not.
func CheckDevice(p *ir.Program) error {
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if !deviceStores(b.DType) {
			return &UnsupportedError{Reason: fmt.Sprintf("buffer %d (%s) has dtype %s, which the device kernels do not store", b.ID, b.Name, b.DType)}
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if reason := taskUnsupported(p, t); reason != "" {
			return &UnsupportedError{Task: t.Describe(), Op: t.Op, Reason: reason}
		}
	}
	return nil
}

func buf(p *ir.Program, ids []int, k int) *ir.Buffer {
	if k >= len(ids) || ids[k] < 0 || ids[k] >= len(p.Buffers) {
		return nil
	}
	return &p.Buffers[ids[k]]
}

func taskUnsupported(p *ir.Program, t *ir.Task) string {
	if !t.Op.Valid() {
		return fmt.Sprintf("unknown opcode %d", int(t.Op))
	}
	spec, _ := t.Op.Spec()
	if len(t.Inputs) < spec.MinInputs || len(t.Outputs) != spec.NOutputs {
		return fmt.Sprintf("%d inputs and %d outputs do not match the opcode's arity", len(t.Inputs), len(t.Outputs))
	}
	for k := range t.Inputs {
		if buf(p, t.Inputs, k) == nil {
			return fmt.Sprintf("input %d names unknown buffer %d", k, t.Inputs[k])
		}
	}
	for k := range t.Outputs {
		if buf(p, t.Outputs, k) == nil {
			return fmt.Sprintf("output %d names unknown buffer %d", k, t.Outputs[k])
		}
	}
	switch t.Op {
	case ir.OpFUSED:
		return fusedUnsupported(p, t)
	case ir.OpGEMVTile:
		q := t.Params.IntOr("qdtype", 0)
		_, _, quant := ir.TileQuant(t)
		if q != 0 && !quant {
			return fmt.Sprintf("qdtype %d is not a device weight format (0, %d for I8, %d for I4 with a scales input)", q, ir.I8, ir.I4)
		}
		return projectionUnsupported(p, t, quant)
	case ir.OpGEMMTile:
		if t.Params.IntOr("qdtype", 0) != 0 {
			return "quantized GEMM_TILE is not implemented on the device"
		}
		return projectionUnsupported(p, t, false)
	case ir.OpAttentionTile:
		return attentionUnsupported(p, t)
	case ir.OpSOFTMAX:
		x := buf(p, t.Inputs, 0)
		if d := t.Params.IntOr("dim", -1); d != -1 && d != int64(len(x.Shape)-1) {
			return fmt.Sprintf("softmax over dim %d: the device reduces only the last dimension", d)
		}
	case ir.OpDEQUANT:
		q := buf(p, t.Inputs, 0)
		k := int64(q.Cols())
		g := t.Params.IntOr("group", k)
		if q.DType == ir.I4 || g <= 0 || k <= 0 || k%g != 0 {
			return fmt.Sprintf("DEQUANT needs unpacked integer q with the last dim (%d) a multiple of group (%d)", k, g)
		}
	case ir.OpROPE:
		if hd := t.Params.IntOr("head_dim", 0); hd <= 0 || hd%2 != 0 {
			return fmt.Sprintf("ROPE needs a positive even head_dim, got %d", hd)
		}
	case ir.OpKVAppend:
		if r := len(buf(p, t.Outputs, 0).Shape); r != 3 && r != 4 {
			return fmt.Sprintf("KV_APPEND needs a rank-3 or rank-4 cache, got rank %d", r)
		}
	}
	return ""
}

// projectionUnsupported mirrors amk_gemv_shape and the dtype checks of the
// GEMV/GEMM kernels.
// fusedUnsupported checks a FUSED task against the device's patterns
// (amk_op_fused): a known pattern with its inputs, a float weight covering
// the tile, whole heads or a paired tile (ir.PairStride) for a RoPE or
// append epilogue, a KV cache row for an append.
func fusedUnsupported(p *ir.Program, t *ir.Task) string {
	id := ir.TaskFusedPattern(t)
	pat, ok := ir.FusedPatternByID(id)
	if !ok || len(t.Inputs) != pat.TaskArity(t) {
		return fmt.Sprintf("FUSED runs on the device only as a pattern of ir.FusedPatterns (params.flags bits 16-31) with its inputs (and a quantised tile's scales); pattern %d with %d inputs is not one (a params.recipe is VM-only)", id, len(t.Inputs))
	}
	if q := t.Params.IntOr("qdtype", 0); q != 0 && q != int64(ir.I8) && q != int64(ir.I4) {
		return fmt.Sprintf("qdtype %d is not a device weight format (0, %d for I8, %d for I4)", q, ir.I8, ir.I4)
	}
	_, _, quant := ir.TileQuant(t)
	paired := t.Params.IntOr("flags", 0)&ir.FlagPairedTile != 0
	if paired && !pat.Paired() {
		return fmt.Sprintf("pattern %s cannot be a paired tile: only the q/k/v patterns, which carry head_dim, can", pat.Name)
	}
	if id == ir.FusedGEMVAdd {
		return projectionUnsupported(p, t, quant)
	}
	x, w, out := buf(p, t.Inputs, 0), buf(p, t.Inputs, pat.Role(ir.RoleW)), buf(p, t.Outputs, 0)
	k, nt, off := t.Params.IntOr("K", 0), t.Params.IntOr("N_tile", 0), t.Params.IntOr("n_off", 0)
	if k <= 0 || nt <= 0 || off < 0 || x.Numel()%k != 0 {
		return fmt.Sprintf("tile n_off=%d N_tile=%d K=%d does not fit x's %d elements", off, nt, k, x.Numel())
	}
	m := x.Numel() / k
	n := out.Numel() / max(m, 1)
	if pat.WritesCache() {
		n = t.Params.IntOr("N", 0)
		if r := len(out.Shape); out.Kind != ir.KVCache || (r != 3 && r != 4) || int64(out.Shape[r-2]*out.Shape[r-1]) != n {
			return fmt.Sprintf("pattern %s appends to a KV cache with rows of N=%d values; output %s is %s %v", pat.Name, n, out.Name, out.Kind, out.Shape)
		}
	}
	hd := t.Params.IntOr("head_dim", 0)
	last := off + nt // one past the tile's last column
	if paired {
		// amk_op_fused: N_tile/2 columns at n_off and at n_off + head_dim/2, inside one head.
		if hd <= 0 || hd%2 != 0 || nt%2 != 0 || off%hd+nt/2 > hd/2 {
			return fmt.Sprintf("pattern %s: paired tile n_off=%d N_tile=%d is not two matching half-head ranges of head_dim %d", pat.Name, off, nt, hd)
		}
		last = off + hd/2 + nt/2
	}
	if last > n {
		return fmt.Sprintf("tile [%d, %d) exceeds the projection's %d columns", off, last, n)
	}
	if !paired && (pat.Epilogue == ir.EpilogueRoPE || pat.WritesCache()) {
		if hd <= 0 || hd%2 != 0 || off%hd != 0 || nt%hd != 0 {
			return fmt.Sprintf("pattern %s needs tiles of whole heads or paired tiles (head_dim %d, tile [%d, %d))", pat.Name, hd, off, off+nt)
		}
	}
	switch {
	case quant && len(w.Shape) == 2:
		if reason := quantUnsupported(p, t, w, k, last); reason != "" {
			return reason
		}
	case !w.DType.IsFloat() || len(w.Shape) != 2:
		return fmt.Sprintf("weight %s is %s %v; fused patterns need a float [N, K] weight (or a quantised one with qdtype)", w.Name, w.DType, w.Shape)
	}
	if int64(w.Shape[0]) < last || int64(w.Cols()) < k {
		return fmt.Sprintf("weight %s %v does not cover the tile [%d, %d) x K=%d", w.Name, w.Shape, off, last, k)
	}
	return ""
}

// quantUnsupported mirrors amk_qtile_of (ops_gemv.cuh): a quantised weight
// of the dtype qdtype names holding the tile's rows, an int4 row of whole
// bytes, float scales holding every row's groups up to the tile's last row.
func quantUnsupported(p *ir.Program, t *ir.Task, w *ir.Buffer, k, last int64) string {
	q, si, _ := ir.TileQuant(t)
	s := buf(p, t.Inputs, si)
	group := t.Params.IntOr("group", k)
	if group <= 0 {
		group = k
	}
	switch {
	case w.DType != q:
		return fmt.Sprintf("quantized weight %s is %s but qdtype says %s", w.Name, w.DType, q)
	case w.Numel() < last*k:
		return fmt.Sprintf("quantized weight %s holds %d elements, the tile needs %d", w.Name, w.Numel(), last*k)
	case q == ir.I4 && k%2 != 0:
		return fmt.Sprintf("int4 weight %s: K=%d is odd; the device reads whole bytes per row", w.Name, k)
	case s == nil || !s.DType.IsFloat():
		return fmt.Sprintf("the scales of %s must be a float buffer", w.Name)
	case s.Numel() < last*ir.QuantGroups(k, group):
		return fmt.Sprintf("scales %s hold %d values, the tile needs %d rows x %d groups", s.Name, s.Numel(), last, ir.QuantGroups(k, group))
	}
	return ""
}

// fusedTileBytes is the shared-memory tile a RoPE/append pattern collects
// its sums in (amk_op_fused: [x cache][tile][ring]; N_tile floats, a paired
// tile's two ranges one after the other); 0 for other tasks.
func fusedTileBytes(t *ir.Task) int64 {
	pat, ok := ir.FusedPatternByID(ir.TaskFusedPattern(t))
	if !ok || (pat.Epilogue != ir.EpilogueRoPE && !pat.WritesCache()) {
		return 0
	}
	return gemvXBytes(t.Params.IntOr("N_tile", 0))
}

func projectionUnsupported(p *ir.Program, t *ir.Task, quant bool) string {
	x, w, out := buf(p, t.Inputs, 0), buf(p, t.Inputs, 1), buf(p, t.Outputs, 0)
	k, nt, off := t.Params.IntOr("K", 0), t.Params.IntOr("N_tile", 0), t.Params.IntOr("n_off", 0)
	n := int64(out.Cols())
	if k <= 0 || nt <= 0 || off < 0 || off+nt > n {
		return fmt.Sprintf("tile n_off=%d N_tile=%d K=%d does not fit the output's %d columns", off, nt, k, n)
	}
	if x.Numel()%k != 0 || out.Numel() != x.Numel()/k*n {
		return fmt.Sprintf("x has %d elements and out %d: not a multiple of K=%d rows of %d columns", x.Numel(), out.Numel(), k, n)
	}
	if len(w.Shape) < 1 || int64(w.Shape[0]) < off+nt {
		return fmt.Sprintf("weight %s has %v rows, the tile needs %d", w.Name, w.Shape, off+nt)
	}
	switch {
	case quant:
		return quantUnsupported(p, t, w, k, off+nt)
	case !w.DType.IsFloat():
		return fmt.Sprintf("weight %s is %s; fp projections need F32, F16 or BF16 weights", w.Name, w.DType)
	case int64(w.Cols()) < k && len(w.Shape) >= 2:
		return fmt.Sprintf("weight %s rows have %d elements, K is %d", w.Name, w.Cols(), k)
	}
	return ""
}

func attentionUnsupported(p *ir.Program, t *ir.Task) string {
	q, kc, vc := buf(p, t.Inputs, 0), buf(p, t.Inputs, 1), buf(p, t.Inputs, 2)
	hd := t.Params.IntOr("head_dim", 0)
	nh, nkv := t.Params.IntOr("n_heads", 0), t.Params.IntOr("n_kv_heads", 0)
	if hd <= 0 || hd > AttnMaxHeadDim {
		return fmt.Sprintf("head_dim %d is outside the device range [1, %d]", hd, AttnMaxHeadDim)
	}
	if nh <= 0 || nkv <= 0 || nh%nkv != 0 {
		return fmt.Sprintf("n_heads %d must be a positive multiple of n_kv_heads %d", nh, nkv)
	}
	if n := t.Params.IntOr("N_tile", 0); n > 0 {
		if off := t.Params.IntOr("n_off", 0); off < 0 || off+n > nkv {
			return fmt.Sprintf("KV-head slice [%d, %d) outside the %d KV heads", off, off+n, nkv)
		}
	}
	if kc.DType != vc.DType || !kc.DType.IsFloat() {
		return fmt.Sprintf("KV caches must share one float dtype, got %s and %s", kc.DType, vc.DType)
	}
	b := int64(1)
	if len(q.Shape) == 3 {
		b = int64(q.Shape[0])
	}
	if q.Numel() != b*nh*hd {
		return fmt.Sprintf("q %s has %d elements, want %d x %d x %d", q.Name, q.Numel(), b, nh, hd)
	}
	width := hd // a split-KV partial: [B, n_heads, hd+2]
	if t.Params.IntOr("flags", 0)&ir.FlagPartialWrite != 0 {
		width = hd + 2
	}
	if out := buf(p, t.Outputs, 0); out.Numel() < b*nh*width {
		return fmt.Sprintf("output %s has %d elements, want %d x %d x %d", out.Name, out.Numel(), b, nh, width)
	}
	switch len(kc.Shape) {
	case 4:
		if int64(kc.Shape[0]) != b || int64(kc.Shape[2]) != nkv || int64(kc.Shape[3]) != hd {
			return fmt.Sprintf("KV cache shape %v does not match (B=%d, S, %d, %d)", kc.Shape, b, nkv, hd)
		}
	case 3:
		if b != 1 || int64(kc.Shape[1]) != nkv || int64(kc.Shape[2]) != hd {
			return fmt.Sprintf("KV cache shape %v does not match (S, %d, %d) for batch %d", kc.Shape, nkv, hd, b)
		}
	default:
		return fmt.Sprintf("KV cache rank %d is not 3 or 4", len(kc.Shape))
	}
	return ""
}

// SmemPlan is the dynamic shared memory one launch provides.
type SmemPlan struct {
	Bytes    int      // dynamic smem per block (cuFuncSetAttribute above 48 KiB)
	Notes    []string // tiles that will take a slower path because their ideal layout does not fit
	OptinCap int      // the dynamic shared memory cap it was planned against (ir.DynamicSmemCap)
}

// gemvXBytes and gemvRingBytes mirror amk_gemv_x_bytes / amk_gemv_ring_bytes.
func gemvXBytes(k int64) int64 { return (k*4 + 15) / 16 * 16 }

func gemvRingBytes(v Variant) int64 {
	return int64(v.Threads()/32) * v.get("cpa_stages") * v.get("cpa_cols") * cpaChunkBytes
}

// RingBytes is the streaming weight ring of a variant per block (AMK_WARPS x
// ring_stages x ring_tile, ring.cuh amk_ring_bytes); 0 when it is off.
func RingBytes(v Variant) int64 {
	if v.get("ring_stages") <= 0 {
		return 0
	}
	return int64(v.Threads()/32) * v.get("ring_stages") * v.get("ring_tile")
}

// PlanSmem sizes the dynamic shared memory of a launch: for every GEMV-like
// tile the x cache (+ the cp.async ring when the variant enables it), as much
// as fits under optin (the device's dynamic shared memory cap per block,
// ir.DynamicSmemCap of its opt-in cap, or ir.GpuTarget.DynamicSmemBytes); the config's
// smem_bytes_per_block is a floor. A floor above the cap is an error (docs/spec/rules.md R24).
// With the streaming ring (ring_stages > 0) its RingBytes come on top, the
// ops' share shrinks by as much, and a ring that does not fit is an error.
func PlanSmem(p *ir.Program, v Variant, optin int) (SmemPlan, error) {
	n, err := v.Normalize()
	if err != nil {
		return SmemPlan{}, err
	}
	plan := SmemPlan{OptinCap: optin}
	need := int64(0)
	if p.Config != nil {
		if p.Config.SmemBytesPerBlock > optin {
			return plan, fmt.Errorf("smem_bytes_per_block %d exceeds the device's per-block dynamic shared memory cap %d (its opt-in cap less the kernels' static reserve)", p.Config.SmemBytesPerBlock, optin)
		}
		need = int64(p.Config.SmemBytesPerBlock)
	}
	lim := int64(optin)
	ring := gemvRingBytes(n)
	stream := RingBytes(n)
	if stream > 0 {
		// The streaming ring sits above the ops' area and replaces the
		// per-tile ring (which then is used only where it still fits).
		if stream+16 > lim {
			return plan, fmt.Errorf("the streaming ring (%d warps x ring_stages %d x ring_tile %d = %d bytes) does not fit the per-block cap %d",
				n.Threads()/32, n.get("ring_stages"), n.get("ring_tile"), stream, optin)
		}
		lim -= stream
		ring = 0
		need = max(need-stream, 16)
	}
	slowest := ""
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if t.Op != ir.OpGEMVTile && t.Op != ir.OpFUSED {
			continue
		}
		x := gemvXBytes(t.Params.IntOr("K", 0)) + fusedTileBytes(t)
		q := t.Params.IntOr("qdtype", 0)
		fp := !(q == int64(ir.I8) || q == int64(ir.I4))
		want := x
		if fp && n.get("cpasync") != 0 {
			want = x + ring
		}
		switch {
		case want <= lim:
			need = max(need, want)
		case x <= lim:
			need = max(need, x)
			slowest = fmt.Sprintf("task %s: the cp.async ring does not fit (%d > %d bytes); register path", t.Describe(), want, lim)
		default:
			slowest = fmt.Sprintf("task %s: K=%d does not fit the x cache (%d > %d bytes); generic path", t.Describe(), t.Params.IntOr("K", 0), x, lim)
		}
	}
	if slowest != "" {
		plan.Notes = append(plan.Notes, slowest)
	}
	plan.Bytes = int(need + stream)
	return plan, nil
}
