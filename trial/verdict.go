package trial

// Latency kinds. A latency is "measured-gpu" only when a CUDA-event-timed run
// on a GPU also matched the reference; otherwise it is "predicted".
const (
	KindMeasuredGPU = "measured-gpu"
	KindPredicted   = "predicted"
)

// Verdict is the one structured result of evaluating a schedule (docs/spec/loop.md).
// Pointer fields are JSON null when absent: no latency without correct=true,
// no correctness claim for a rejected config.
type Verdict struct {
	Valid          bool     `json:"valid"`
	RejectedReason *string  `json:"rejected_reason"`
	Correct        *bool    `json:"correct"`
	MaxAbsErr      *float64 `json:"max_abs_err"`
	Top1Agreement  *float64 `json:"top1_agreement"`
	LatencyUS      *float64 `json:"latency_us"`
	LatencyKind    *string  `json:"latency_kind"`
	PctOfRoofline  *float64 `json:"pct_of_roofline"`
	BoundUS        *float64 `json:"bound_us"`
	ScheduleID     string   `json:"schedule_id"`
	Tasks          int      `json:"tasks"`
	WeightMB       float64  `json:"weight_mb"`
	GPU            string   `json:"gpu"`
	Model          string   `json:"model"`
	Device         string   `json:"device"`
	NBuffers       int      `json:"n_buffers"`
	NCounters      int      `json:"n_counters"`
	Notes          []string `json:"notes"`
}
