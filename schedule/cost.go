package schedule

import (
	"maps"
	"math"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// The achievable fractions of DefaultCostParams, kept as the package's
// named figures (doc.go, docs/spec/rules.md R16).
const (
	AchievableBWFraction   = 0.80
	AchievableFlopFraction = 0.70
)

// Regions of the breakdown.
const (
	RegionAttention = "attention"
	RegionMLP       = "mlp"
	RegionLMHead    = "lm_head"
	RegionOther     = "other"
)

// Regions lists the breakdown's regions in report order.
var Regions = []string{RegionAttention, RegionMLP, RegionLMHead, RegionOther}

// Cost is the analytic prediction for one program on one target.
type Cost struct {
	PredictedUS      float64 // the headline: max(MakespanUS, BandwidthBoundUS, BytesBoundUS)
	MakespanUS       float64 // simulated end of the last task
	TotalWorkUS      float64 // every task run alone on one SM, summed
	BandwidthBoundUS float64 // streamed bytes (ir.Program.StreamedBytes) / spec HBM bandwidth: the roofline floor
	// AllWeightsBoundUS is the seed's floor, every weight byte (the whole
	// embedding table included) / spec HBM bandwidth; a second figure only.
	AllWeightsBoundUS float64
	BytesBoundUS      float64 // Σ est_bytes / achievable HBM bandwidth
	FlopsBoundUS      float64 // Σ est_flops / achievable fp16 rate
	RegionUS          map[string]float64
	NTasks            int
	NSMsUsed          int
	Notes             []string
}

// Predict estimates the single-stream decode latency of a program on a
// target under a point's timing knobs (pipelining_depth, threads_per_block;
// sm_assignment places the tasks of a program that carries no SMs). It is
// deterministic and never below either bandwidth floor (docs/spec/rules.md
// R16): the streamed-bytes floor (BandwidthBoundUS) and the task-bytes floor
// (BytesBoundUS).
func Predict(p *ir.Program, t *ir.GpuTarget, pt Point) Cost {
	var costs CostParams
	if t != nil {
		costs = TargetCosts(t.Name)
	}
	return PredictWith(p, t, pt, costs)
}

// PredictWith is Predict under the given cost record instead of the
// target's own (a calibration tries records; TargetCosts holds the kept one).
func PredictWith(p *ir.Program, t *ir.GpuTarget, pt Point, costs CostParams) Cost {
	c := Cost{NTasks: len(p.Tasks), RegionUS: map[string]float64{}}
	for _, r := range Regions {
		c.RegionUS[r] = 0
	}
	if t == nil {
		c.PredictedUS, c.MakespanUS = math.NaN(), math.NaN()
		c.Notes = append(c.Notes, "no GPU target: nothing to predict against")
		return c
	}
	m := costModelWith(t, pt, costs)
	var totalBytes, totalFlops float64
	for i := range p.Tasks {
		b, f := taskBytesFlops(p, &p.Tasks[i])
		totalBytes += float64(b)
		totalFlops += float64(f)
	}
	c.BytesBoundUS = totalBytes / m.bw
	c.FlopsBoundUS = totalFlops / (m.flopsPerSM * float64(m.numSMs))
	c.BandwidthBoundUS = t.BandwidthBoundUS(p.StreamedBytes())
	c.AllWeightsBoundUS = t.BandwidthBoundUS(p.TotalWeightBytes())
	if p.StreamedBytes() == 0 || math.IsNaN(c.BandwidthBoundUS) {
		c.BandwidthBoundUS = c.BytesBoundUS
	}

	s, notes := m.simulate(p)
	c.Notes = append(c.Notes, notes...)
	c.TotalWorkUS = s.work
	c.NSMsUsed = s.smsUsed
	regionWork := map[string]float64{}
	for i := range p.Tasks {
		regionWork[classifyRegion(&p.Tasks[i])] += s.alone[i]
	}
	switch {
	case len(p.Tasks) == 0:
		c.MakespanUS = m.c.DispatchUS + m.c.SignalUS
		c.RegionUS[RegionOther] = c.MakespanUS
	case s.deadlocked:
		c.MakespanUS = s.work
		maps.Copy(c.RegionUS, regionWork)
		c.Notes = append(c.Notes, "the per-SM queues deadlock in simulation; the serial work is used")
	default:
		c.MakespanUS = s.makespan
		maps.Copy(c.RegionUS, s.chain)
	}
	c.PredictedUS = max(c.MakespanUS, c.BandwidthBoundUS, c.BytesBoundUS)
	if c.PredictedUS > c.MakespanUS && c.MakespanUS > 0 {
		scale := c.PredictedUS / c.MakespanUS
		for r := range c.RegionUS {
			c.RegionUS[r] *= scale
		}
		c.Notes = append(c.Notes, "prediction raised to the bandwidth floor (streamed bytes or task bytes)")
	}
	return c
}

// costModel holds the per-target rates and the point's timing knobs.
type costModel struct {
	c          CostParams // the target's costs
	bw         float64    // shared achievable HBM bytes per µs
	flopsPerSM float64    // flops per µs per SM
	numSMs     int
	warps      int     // warps (AMD: wavefronts) per block
	inflight   float64 // bytes one warp/wavefront keeps in flight
	ringWarp   float64 // streaming ring: bytes one warp keeps ahead, across waits (0: off)
	depth      int
	l2Share    float64 // L2 (or Infinity Cache) bytes per SM: a bound on what one SM can prefetch
	l2PerSM    float64 // L2 bytes per µs per SM
	exposed    float64 // exposed fraction of a prefetchable tile
	policy     ir.SMAssignment
}

func newCostModel(t *ir.GpuTarget, pt Point) *costModel {
	return costModelWith(t, pt, TargetCosts(t.Name))
}

func costModelWith(t *ir.GpuTarget, pt Point, c CostParams) *costModel {
	numSMs := max(1, t.NumSMs)
	depth := max(0, pt.Config.PipeliningDepth)
	return &costModel{
		c:          c,
		bw:         max(t.HBMBandwidthGBs, 1e-9) * 1e3 * c.AchievableBW,
		flopsPerSM: max(t.MatrixPeakTFLOPS("fp16"), 1e-9) * 1e6 * c.AchievableFlop / float64(numSMs),
		numSMs:     numSMs,
		warps:      max(1, pt.Config.ThreadsPerBlock/t.Wavefront()),
		inflight:   c.InflightPerLane * float64(t.Wavefront()),
		ringWarp:   ringWarpBytes(t, pt),
		depth:      depth,
		l2Share:    float64(t.PrefetchCacheBytes()) / float64(numSMs),
		l2PerSM:    max(t.HBMBandwidthGBs, 1e-9) * 1e3 * c.L2BWFactor / float64(numSMs),
		exposed:    max(c.MinExposed, 1/(1+float64(depth)*c.PipelineGain)),
		policy:     pt.Config.SMAssignment,
	}
}

// ringWarpBytes is the streaming ring's look-ahead of one warp, on NVIDIA
// targets (the ring is CUDA code) when the point turns it on.
func ringWarpBytes(t *ir.GpuTarget, pt Point) float64 {
	r := RingBytesAheadPerSM(pt)
	if r == 0 || t.Wavefront() != 32 {
		return 0
	}
	return float64(r) / float64(max(1, pt.Config.ThreadsPerBlock/32))
}

// taskBytesFlops trusts the lowering's estimates and otherwise derives them
// as the reference does: bytes of WEIGHT/KV_CACHE inputs; 2*M*K*N_tile
// flops for GEMV/GEMM (an untagged tile assumed fp16); 4*heads*kv_len*hd
// for attention.
func taskBytesFlops(p *ir.Program, t *ir.Task) (int64, int64) {
	if t.EstBytes != 0 || t.EstFlops != 0 {
		return max(0, t.EstBytes), max(0, t.EstFlops)
	}
	var bytes, flops int64
	for _, id := range t.Inputs {
		if b := p.Buffer(id); b != nil && (b.Kind == ir.Weight || b.Kind == ir.KVCache) {
			bytes += b.NBytes()
		}
	}
	switch t.Op {
	case ir.OpGEMVTile, ir.OpGEMMTile:
		k, n := t.Params.IntOr("K", 0), t.Params.IntOr("N_tile", 0)
		flops = 2 * t.Params.IntOr("M_tile", 1) * k * n
		if bytes == 0 && k > 0 && n > 0 {
			bytes = 2 * k * n
		}
	case ir.OpAttentionTile:
		flops = 4 * t.Params.IntOr("n_heads", 1) * t.Params.IntOr("kv_len", 0) * t.Params.IntOr("head_dim", 0)
	}
	return max(0, bytes), max(0, flops)
}

// classifyRegion buckets a task into a region of the cost model's
// breakdown (attention, mlp, lm_head, other): by label first, then by op.
func classifyRegion(t *ir.Task) string {
	l := strings.ToLower(t.Label)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("lm_head", "lmhead", "logits", "classifier"):
		return RegionLMHead
	case has("attn", "attention", "rope", "kv", ".q", ".k", ".v", ".o[", "o_proj") || strings.HasPrefix(l, "q"):
		return RegionAttention
	case has("mlp", "ffn", "gate", "up", "down", "swiglu", "silu"):
		return RegionMLP
	}
	switch t.Op {
	case ir.OpSampleArgmax:
		return RegionLMHead
	case ir.OpAttentionTile, ir.OpAttentionCombine, ir.OpROPE, ir.OpKVAppend, ir.OpSOFTMAX:
		return RegionAttention
	case ir.OpSiLUMul, ir.OpGELU:
		return RegionMLP
	}
	return RegionOther
}
