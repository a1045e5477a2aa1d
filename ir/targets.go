package ir

import (
	"fmt"
	"math"
	"sort"
	"strings"
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

const (
	kib = 1024
	mib = 1024 * 1024
	gib = 1024 * 1024 * 1024
)

// targets is the built-in registry. The reference's eight records are kept
// with their numbers; h200, gb200 and mi300x are added from public spec sheets.
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
	{Name: "mi300x", SMArch: 0, NumSMs: 304, SmemBytesPerSM: 64 * kib, SmemBytesPerBlockOptin: 64 * kib,
		RegsPerSM: 131072, MaxThreadsPerSM: 2048, MaxRegsPerThread: 512, L2Bytes: 256 * mib, HBMBytes: 192 * gib,
		HBMBandwidthGBs: 5300, FP16TFLOPS: 1307, ClockGHz: 2.1, SupportsCooperative: true,
		Note: "AMD Instinct MI300X (gfx942, 304 CUs, 256 MB Infinity Cache as L2). Not a CUDA target: prediction and labelling only."},
}

// Target returns a copy of the registered target with that name.
func Target(name string) (*GpuTarget, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	for i := range targets {
		if targets[i].Name == key {
			t := targets[i]
			return &t, nil
		}
	}
	return nil, fmt.Errorf("unknown GPU target %q (known: %s)", name, strings.Join(TargetNames(), ", "))
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
