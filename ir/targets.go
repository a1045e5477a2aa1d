package ir

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/amk-dev/amk/didyoumean"
)

// GpuTarget describes a GPU as data: adding a chip is adding a record.
type GpuTarget struct {
	Name                   string
	SMArch                 int // compute capability x 10
	NumSMs                 int
	SmemBytesPerSM         int
	SmemBytesPerBlockOptin int
	RegsPerSM              int
	MaxThreadsPerSM        int
	MaxRegsPerThread       int
	L2Bytes                int64
	HBMBytes               int64
	HBMBandwidthGBs        float64 // spec peak
	FP16TFLOPS             float64
	ClockGHz               float64
	SupportsCooperative    bool
	WDDMTDR                bool
	MeasuredBWGBs          float64 // sustained, 0 = not measured
	Note                   string

	// Fields below are amk's own (the reference's GpuTarget has none of
	// them); the codec writes them only when set, so NVIDIA records encode
	// exactly as the reference's do. For an AMD part NumSMs counts compute
	// units (CUs) and SmemBytesPerSM is the LDS per CU.
	Vendor              string             // VendorNVIDIA (also when empty) or VendorAMD
	WavefrontSize       int                // threads per warp/wavefront; 0 = 32
	L1BytesPerSM        int                // vector L1 data cache per SM/CU, 0 = not recorded
	LastLevelCacheBytes int64              // memory-side cache behind L2 (AMD Infinity Cache), 0 = none
	MatrixTFLOPS        map[string]float64 // dense matrix-unit peak per dtype ("fp16", "bf16", "fp8", ...)
	Pipeline            *PipelineTiming    // instruction-level timing for the pipeline simulator, nil = none
}

// Vendors.
const (
	VendorNVIDIA = "nvidia"
	VendorAMD    = "amd"
)

// VendorName is the target's vendor, VendorNVIDIA when unrecorded.
func (t *GpuTarget) VendorName() string {
	if t.Vendor == "" {
		return VendorNVIDIA
	}
	return t.Vendor
}

// IsAMD reports whether the target is an AMD part.
func (t *GpuTarget) IsAMD() bool { return t.VendorName() == VendorAMD }

// Wavefront is the number of threads that issue together: 32 on NVIDIA
// (a warp), 64 on AMD CDNA (a wavefront).
func (t *GpuTarget) Wavefront() int {
	if t.WavefrontSize <= 0 {
		return 32
	}
	return t.WavefrontSize
}

// MatrixPeakTFLOPS is the dense matrix-unit peak for a dtype ("fp16",
// "bf16", "fp8", ...; case-insensitive): the recorded figure, else
// FP16TFLOPS for fp16 and bf16, else 0 (not known).
func (t *GpuTarget) MatrixPeakTFLOPS(dtype string) float64 {
	key := strings.ToLower(strings.TrimSpace(dtype))
	if v, ok := t.MatrixTFLOPS[key]; ok {
		return v
	}
	if key == "fp16" || key == "bf16" {
		return t.FP16TFLOPS
	}
	return 0
}

// PrefetchCacheBytes is the on-chip capacity that prefetched weights can
// wait in: the larger of L2 and a memory-side last-level cache.
func (t *GpuTarget) PrefetchCacheBytes() int64 { return max(t.L2Bytes, t.LastLevelCacheBytes) }

// PipelineTiming is the instruction-level timing of one wave on one SM/CU
// as data, in core clock cycles, for the pipeline package's simulator. The
// figures are for one op of each class of a GEMM micro-kernel's schedule
// (Quadrant says which MMA sub-tile). Estimates from public ISA and tuning
// documents, not measurements: no such device is attached to amk.
type PipelineTiming struct {
	Quadrant     string   `json:"quadrant"`      // the MMA quadrant the figures are for
	GlobalLoad   OpTiming `json:"global_load"`   // LOAD_A/LOAD_B: a sub-tile DRAM/L2 -> LDS
	LDSLoad      OpTiming `json:"lds_load"`      // MMA_LOAD_A/MMA_LOAD_B: a fragment LDS -> registers
	MMA          OpTiming `json:"mma"`           // one register quadrant's matrix instructions
	Compute      OpTiming `json:"compute"`       // a generic vector op
	WaitOverhead int      `json:"wait_overhead"` // cycles a counter wait that stalls costs beyond the stall
	Barrier      int      `json:"barrier"`       // the workgroup barrier at every half (LDS stage) boundary
	Source       string   `json:"source"`
}

// OpTiming is one op class's timing: Latency from issue until its result
// can be used, Busy cycles its execution unit is occupied (the next op of
// the class starts no sooner), Issue cycles the wave's in-order issue is
// held (no later op of the wave issues sooner).
type OpTiming struct {
	Latency int `json:"latency"`
	Busy    int `json:"busy"`
	Issue   int `json:"issue"`
}

// BandwidthBoundUS is the honest single-stream decode floor: the time to
// stream weightBytes once at the spec HBM bandwidth, in microseconds (NaN if
// the bandwidth is unknown).
func (t *GpuTarget) BandwidthBoundUS(weightBytes int64) float64 {
	if t.HBMBandwidthGBs <= 0 {
		return math.NaN()
	}
	return float64(weightBytes) / (t.HBMBandwidthGBs * 1e9) * 1e6
}

// MeasuredBandwidthBoundUS is the floor at the measured sustained bandwidth,
// falling back to the spec figure when none is recorded.
func (t *GpuTarget) MeasuredBandwidthBoundUS(weightBytes int64) float64 {
	bw := t.MeasuredBWGBs
	if bw <= 0 {
		bw = t.HBMBandwidthGBs
	}
	if bw <= 0 {
		return math.NaN()
	}
	return float64(weightBytes) / (bw * 1e9) * 1e6
}

// IsCUDA reports whether the target is an NVIDIA part the CUDA VM can run on.
func (t *GpuTarget) IsCUDA() bool { return t.SMArch > 0 }

// StaticSmemReserve is the part of a device's per-block shared memory opt-in
// cap (which counts a block's static and dynamic bytes together) kept for the
// CUDA megakernel's static shared memory: the instruction copy, the block
// reductions' scratch and, with the streaming ring, its per-warp state and
// mbarriers. Measured with ptxas 12.4 for sm_90 (TMA path): 464 bytes at the
// default variant, 1696 with the ring at 12 stages x 2 KiB, 1760 since paired
// q|k|v tiles ride the ring (docs/results/cuda-review.md, L3). The launcher
// refuses a kernel whose static bytes exceed it, so the figure is checked on
// every load.
const StaticSmemReserve = 2048

// DynamicSmemCap is the dynamic shared memory a launch of the CUDA megakernel
// may ask for per block on a device whose per-block opt-in cap is optin: the
// cap less StaticSmemReserve. Every planner of dynamic shared memory (the
// launcher's device info, schedule.CheckLaunch, kernels.PlanSmem's callers)
// takes its limit from here, so a plan the host accepts is one the device
// can load.
func DynamicSmemCap(optin int) int { return max(optin-StaticSmemReserve, 0) }

// DynamicSmemBytes is DynamicSmemCap of the target's opt-in cap for an NVIDIA
// target; an AMD target (no CUDA kernel, so no static reserve) keeps its
// whole cap.
func (t *GpuTarget) DynamicSmemBytes() int {
	if t.IsAMD() {
		return t.SmemBytesPerBlockOptin
	}
	return DynamicSmemCap(t.SmemBytesPerBlockOptin)
}

const (
	kib = 1024
	mib = 1024 * 1024
	gib = 1024 * 1024 * 1024
)

// targets is the built-in registry. The reference's eight records are kept
// with their numbers; h200, gb200 and the AMD parts are added from public
// spec sheets.
var targets = []GpuTarget{
	{Name: "rtx5090", SMArch: 120, NumSMs: 82, SmemBytesPerSM: 102400, SmemBytesPerBlockOptin: 101376,
		RegsPerSM: 65536, MaxThreadsPerSM: 2048, MaxRegsPerThread: 255, L2Bytes: 64 * mib, HBMBytes: 24 * gib,
		HBMBandwidthGBs: 896, FP16TFLOPS: 210, ClockGHz: 1.597, SupportsCooperative: true, WDDMTDR: true,
		MeasuredBWGBs: 731, Note: "Blackwell laptop GB203 (sm_120), WDDM display GPU; measured 731 GB/s D2D copy (reference)."},
	{Name: "b200", SMArch: 100, NumSMs: 148, SmemBytesPerSM: 233472, SmemBytesPerBlockOptin: 232448,
		RegsPerSM: 65536, MaxThreadsPerSM: 2048, MaxRegsPerThread: 255, L2Bytes: 50 * mib, HBMBytes: 192 * gib,
		HBMBandwidthGBs: 8000, FP16TFLOPS: 2250, ClockGHz: 1.86, SupportsCooperative: true,
		Note: "Datacenter Blackwell, HBM3e. Spec only."},
	{Name: "h100", SMArch: 90, NumSMs: 132, SmemBytesPerSM: 233472, SmemBytesPerBlockOptin: 232448,
		RegsPerSM: 65536, MaxThreadsPerSM: 2048, MaxRegsPerThread: 255, L2Bytes: 50 * mib, HBMBytes: 80 * gib,
		HBMBandwidthGBs: 3350, FP16TFLOPS: 989, ClockGHz: 1.98, SupportsCooperative: true, MeasuredBWGBs: 3089,
		Note: "Hopper SXM5, HBM3; measured 3089 GB/s STREAM triad (reference)."},
	{Name: "a100", SMArch: 80, NumSMs: 108, SmemBytesPerSM: 167936, SmemBytesPerBlockOptin: 166912,
		RegsPerSM: 65536, MaxThreadsPerSM: 2048, MaxRegsPerThread: 255, L2Bytes: 40 * mib, HBMBytes: 40 * gib,
		HBMBandwidthGBs: 1555, FP16TFLOPS: 312, ClockGHz: 1.41, SupportsCooperative: true, MeasuredBWGBs: 1382,
		Note: "Ampere SXM4 40GB, HBM2e; measured 1382 GB/s D2D copy (reference)."},
	{Name: "l4", SMArch: 89, NumSMs: 58, SmemBytesPerSM: 102400, SmemBytesPerBlockOptin: 101376,
		RegsPerSM: 65536, MaxThreadsPerSM: 1536, MaxRegsPerThread: 255, L2Bytes: 48 * mib, HBMBytes: 24 * gib,
		HBMBandwidthGBs: 300, FP16TFLOPS: 242, ClockGHz: 2.04, SupportsCooperative: true,
		Note: "Ada L4 (sm_89), 24GB GDDR6. Spec only."},
	{Name: "t4", SMArch: 75, NumSMs: 40, SmemBytesPerSM: 65536, SmemBytesPerBlockOptin: 65536,
		RegsPerSM: 65536, MaxThreadsPerSM: 1024, MaxRegsPerThread: 255, L2Bytes: 4 * mib, HBMBytes: 16 * gib,
		HBMBandwidthGBs: 320, FP16TFLOPS: 65, ClockGHz: 1.59, SupportsCooperative: true,
		Note: "Turing T4 (sm_75), 16GB GDDR6. Spec only."},
	{Name: "a10g", SMArch: 86, NumSMs: 80, SmemBytesPerSM: 102400, SmemBytesPerBlockOptin: 101376,
		RegsPerSM: 65536, MaxThreadsPerSM: 1536, MaxRegsPerThread: 255, L2Bytes: 6 * mib, HBMBytes: 24 * gib,
		HBMBandwidthGBs: 600, FP16TFLOPS: 125, ClockGHz: 1.71, SupportsCooperative: true,
		Note: "Ampere A10G (sm_86), 24GB GDDR6. Spec only."},
	{Name: "l40s", SMArch: 89, NumSMs: 142, SmemBytesPerSM: 102400, SmemBytesPerBlockOptin: 101376,
		RegsPerSM: 65536, MaxThreadsPerSM: 1536, MaxRegsPerThread: 255, L2Bytes: 96 * mib, HBMBytes: 48 * gib,
		HBMBandwidthGBs: 864, FP16TFLOPS: 362, ClockGHz: 2.52, SupportsCooperative: true,
		Note: "Ada L40S (sm_89), 48GB GDDR6. Spec only."},
	{Name: "h200", SMArch: 90, NumSMs: 132, SmemBytesPerSM: 233472, SmemBytesPerBlockOptin: 232448,
		RegsPerSM: 65536, MaxThreadsPerSM: 2048, MaxRegsPerThread: 255, L2Bytes: 50 * mib, HBMBytes: 141e9,
		HBMBandwidthGBs: 4800, FP16TFLOPS: 989, ClockGHz: 1.98, SupportsCooperative: true,
		Note: "Hopper SXM (sm_90), 141 GB HBM3e at 4.8 TB/s spec; same SM array as h100. Spec numbers."},
	{Name: "gb200", SMArch: 100, NumSMs: 148, SmemBytesPerSM: 233472, SmemBytesPerBlockOptin: 232448,
		RegsPerSM: 65536, MaxThreadsPerSM: 2048, MaxRegsPerThread: 255, L2Bytes: 50 * mib, HBMBytes: 186 * gib,
		HBMBandwidthGBs: 8000, FP16TFLOPS: 2500, ClockGHz: 1.86, SupportsCooperative: true,
		Note: "One Blackwell GPU of a GB200 superchip, HBM3e 8 TB/s. Spec only."},
	// AMD Instinct parts: numbers from AMD's product pages and the CDNA 3 /
	// CDNA 4 architecture whitepapers (peak engine clock, dense matrix peaks
	// without sparsity). NumSMs counts CUs; SmemBytesPerSM is LDS per CU;
	// L2 is 4 MB per XCD x 8 XCDs; the 256 MB Infinity Cache is the
	// memory-side last-level cache. Not CUDA targets: prediction only.
	{Name: "mi300x", SMArch: 0, NumSMs: 304, SmemBytesPerSM: 64 * kib, SmemBytesPerBlockOptin: 64 * kib,
		RegsPerSM: 131072, MaxThreadsPerSM: 2048, MaxRegsPerThread: 512, L2Bytes: 32 * mib, HBMBytes: 192 * gib,
		HBMBandwidthGBs: 5300, FP16TFLOPS: 1307.4, ClockGHz: 2.1, SupportsCooperative: true,
		Vendor: VendorAMD, WavefrontSize: 64, L1BytesPerSM: 32 * kib, LastLevelCacheBytes: 256 * mib,
		MatrixTFLOPS: map[string]float64{"fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9,
			"tf32": 653.7, "fp32": 163.4, "fp64": 163.4},
		Pipeline: &cdna3Pipeline,
		Note:     "AMD Instinct MI300X (CDNA 3, gfx942): 304 CUs, 192 GB HBM3, 256 MB Infinity Cache. Not a CUDA target: prediction only."},
	{Name: "mi325x", SMArch: 0, NumSMs: 304, SmemBytesPerSM: 64 * kib, SmemBytesPerBlockOptin: 64 * kib,
		RegsPerSM: 131072, MaxThreadsPerSM: 2048, MaxRegsPerThread: 512, L2Bytes: 32 * mib, HBMBytes: 256 * gib,
		HBMBandwidthGBs: 6000, FP16TFLOPS: 1307.4, ClockGHz: 2.1, SupportsCooperative: true,
		Vendor: VendorAMD, WavefrontSize: 64, L1BytesPerSM: 32 * kib, LastLevelCacheBytes: 256 * mib,
		MatrixTFLOPS: map[string]float64{"fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9,
			"tf32": 653.7, "fp32": 163.4, "fp64": 163.4},
		Pipeline: &cdna3Pipeline,
		Note:     "AMD Instinct MI325X (CDNA 3, gfx942): MI300X compute with 256 GB HBM3E at 6 TB/s. Not a CUDA target: prediction only."},
	{Name: "mi355x", SMArch: 0, NumSMs: 256, SmemBytesPerSM: 160 * kib, SmemBytesPerBlockOptin: 160 * kib,
		RegsPerSM: 131072, MaxThreadsPerSM: 2048, MaxRegsPerThread: 512, L2Bytes: 32 * mib, HBMBytes: 288 * gib,
		HBMBandwidthGBs: 8000, FP16TFLOPS: 2516.6, ClockGHz: 2.4, SupportsCooperative: true,
		Vendor: VendorAMD, WavefrontSize: 64, L1BytesPerSM: 32 * kib, LastLevelCacheBytes: 256 * mib,
		MatrixTFLOPS: map[string]float64{"fp16": 2516.6, "bf16": 2516.6, "fp8": 5033.2, "int8": 5033.2,
			"fp6": 10066.3, "fp4": 10066.3, "fp32": 157.3, "fp64": 78.6},
		Pipeline: &cdna4Pipeline,
		Note:     "AMD Instinct MI355X (CDNA 4, gfx950): 256 CUs, 160 KB LDS per CU, 288 GB HBM3E at 8 TB/s. Not a CUDA target: prediction only."},
}

// Instruction-level timing of the AMD CUs, in cycles at the engine clock,
// for an FP8 GEMM quadrant: a 32x32 output sub-tile of one wave with K = 64
// per partition (2*32*32*64 = 131072 flops per MMA). Derived from the
// public peaks above and public CDNA 3 / CDNA 4 ISA documents, rounded;
// estimates, not measurements:
//   - MMA: one SIMD's matrix core does 1024 dense FP8 flops per clock on
//     CDNA 3 (2614.9 TFLOPS / 304 CUs / 4 SIMDs / 2.1 GHz) and 2048 on
//     CDNA 4 (5033.2 / 256 / 4 / 2.4), so a quadrant keeps it busy 128
//     cycles (four 32x32x16 instructions) or 64 (one 32x32x64); issuing
//     them holds the wave 4 cycles each; the result is readable 16 cycles
//     after the pipe drains.
//   - LDS fragment loads (32x64 FP8, 2 KB per wave, two 128-bit reads):
//     about 64 cycles of LDS latency plus the transfer at 128 B/clk
//     (CDNA 3) or 256 B/clk (CDNA 4, doubled LDS read bandwidth).
//   - Global sub-tile loads: an L2 hit (GEMM operand tiles are re-read by
//     many workgroups), about 125-145 ns = 300 cycles.
//
// Cross-check: the public MI355X cost model of Modular's pipeline
// scheduling framework (global load 200, LDS fragment load 20, MMA 16
// cycles for its 16x16x128 quadrant) orders them as cdna4Pipeline does: a
// fragment load outlasts one MMA, a global load outlasts a whole half.
var (
	cdna3Pipeline = PipelineTiming{Quadrant: "32x32 output, K=64 per partition, fp8",
		GlobalLoad: OpTiming{Latency: 300, Busy: 16, Issue: 16}, LDSLoad: OpTiming{Latency: 80, Busy: 16, Issue: 8},
		MMA: OpTiming{Latency: 144, Busy: 128, Issue: 16}, Compute: OpTiming{Latency: 8, Busy: 4, Issue: 4},
		WaitOverhead: 4, Barrier: 32,
		Source: "estimate from public CDNA 3 peaks and ISA documents, not measured"}
	cdna4Pipeline = PipelineTiming{Quadrant: "32x32 output, K=64 per partition, fp8",
		GlobalLoad: OpTiming{Latency: 300, Busy: 16, Issue: 16}, LDSLoad: OpTiming{Latency: 72, Busy: 8, Issue: 8},
		MMA: OpTiming{Latency: 80, Busy: 64, Issue: 4}, Compute: OpTiming{Latency: 8, Busy: 4, Issue: 4},
		WaitOverhead: 4, Barrier: 32,
		Source: "estimate from public CDNA 4 peaks and ISA documents, not measured"}
)

// Target returns a copy of the registered target with that name.
func Target(name string) (*GpuTarget, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	for i := range targets {
		if targets[i].Name == key {
			t := targets[i]
			t.MatrixTFLOPS = maps.Clone(t.MatrixTFLOPS)
			if t.Pipeline != nil {
				pt := *t.Pipeline
				t.Pipeline = &pt
			}
			return &t, nil
		}
	}
	return nil, fmt.Errorf("%w %q (%sknown: %s)", ErrUnknownTarget, name, hintPrefix(name, TargetNames()), strings.Join(TargetNames(), ", "))
}

// ErrUnknownTarget is the error of a GPU name no target record has; fronts
// treat it as bad input.
var ErrUnknownTarget = errors.New("unknown GPU target")

// hintPrefix is didyoumean's hint for name among known, followed by "; ", or
// "" when nothing is close.
func hintPrefix(name string, known []string) string {
	if h := didyoumean.Hint(name, known); h != "" {
		return h + "; "
	}
	return ""
}

// TargetNames lists the registered targets, sorted.
func TargetNames() []string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	sort.Strings(names)
	return names
}
