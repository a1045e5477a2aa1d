package trial

import (
	"encoding/json"

	"github.com/amk-dev/amk/schedule"
)

// Spec is everything a worker needs to evaluate one trial. It is the queue
// payload in the distributed mode, so it is plain JSON: the schedule point
// travels as the JSON object a user or agent would write (a ScheduleConfig
// dict with an embedded "kernel_knobs" object); parsing it is part of the
// evaluation, so a malformed point becomes a clean valid=false verdict.
type Spec struct {
	// CampaignID and TrialID identify the trial; TrialID is unique within
	// the campaign and makes recording idempotent.
	CampaignID string `json:"campaign_id,omitempty"`
	TrialID    int    `json:"trial_id"`
	// Model is a preset name or a path to a HuggingFace config.json.
	Model string `json:"model"`
	// Weights optionally names a .safetensors file with real weights.
	Weights string `json:"weights,omitempty"`
	// GPU is the target record name (h100, h200, ...).
	GPU string `json:"gpu"`
	// Device is "cpu" (cost-model latency, labelled predicted), "emu" (the
	// CUDA kernels checked on the CPU emulator, latency predicted) or "cuda".
	Device schedule.Device `json:"device"`
	// Point is the candidate schedule point.
	Point json.RawMessage `json:"point"`
	// Incumbent, when set, is timed interleaved with the candidate on the
	// same device (side by side) so keep/revert never compares devices.
	Incumbent json.RawMessage `json:"incumbent,omitempty"`
	// Source says where the proposal came from (default, random, mutate,
	// prior, warm_seed, restart, baseline, ext:...).
	Source string `json:"source,omitempty"`
	// Token and Pos select the decode step checked for correctness.
	Token int `json:"token"`
	Pos   int `json:"pos"`
	// Batch is the number of sequences decoded together (B > 1 lowers the
	// projections as GEMM tiles); 0 and 1 mean one. Sequence r decodes
	// RowToken(Token, r) and is checked against its own eager decode.
	Batch int `json:"batch,omitempty"`
	// Workload, when set, replaces Pos and Batch: the trial is evaluated
	// at the workload's positions (Workload.Positions), each checked from
	// the seeded KV cache, at its batch, and its latency is the workload's
	// mean time per decode step. Nil: one step at Pos (the history tokens
	// of HistoryToken before it), as specs before workloads were.
	Workload *Workload `json:"workload,omitempty"`
	// TimeoutSeconds bounds the trial's wall-clock time (0 = the worker's default).
	TimeoutSeconds float64 `json:"timeout_s,omitempty"`
	// Incarnation is the issuing campaign's incarnation (campaign.State's):
	// with the trial id it makes the spec, and so its Digest, unique to one
	// issue (bound.go).
	Incarnation string `json:"incarnation,omitempty"`
	// WeightsID is the identity of the weights the issuing campaign's
	// trials are for (weightsid.go), fixed when the campaign was created:
	// an evaluator that would load other weights for Model and Weights
	// refuses the trial (PhaseWeights). Nil on a spec issued before
	// weights were identified: evaluated unchecked, its verdict says so.
	WeightsID *WeightsID `json:"weights_id,omitempty"`
}

// FailClass says why a trial produced no verdict.
type FailClass string

// Failure classes for trials that produced no verdict.
const (
	FailCrash   FailClass = "crash"   // the evaluator died or the device trapped
	FailTimeout FailClass = "timeout" // the watchdog or the wall clock expired
	FailInfra   FailClass = "infra"   // worker lost, device unavailable: retryable
)

// Failure is why a trial produced no verdict; it travels as a small struct.
type Failure struct {
	Class   FailClass `json:"class"`
	Phase   string    `json:"phase,omitempty"`
	Message string    `json:"message"`
}

// Phases of an infrastructure failure in which the evaluator refused the
// trial before evaluating anything (Failure.Refusal).
const (
	// PhaseMemory: the model does not fit in the memory the evaluator's
	// host has now (a *MemoryError).
	PhaseMemory = "memory"
	// PhaseDevice: the trial's device is one the evaluator does not have
	// (a device cuda trial on an evaluator without a GPU).
	PhaseDevice = "device"
	// PhaseWeights: the weights the evaluator would load for the trial's
	// model are not those the spec names (Spec.WeightsID).
	PhaseWeights = "weights"
)

// Refusal reports whether the evaluator refused the trial before
// evaluating anything (an infrastructure failure of phase memory, device
// or weights): nothing is known about the point, and evaluating it again
// where the same evaluators run refuses it again.
func (f *Failure) Refusal() bool {
	return f != nil && f.Class == FailInfra && (f.Phase == PhaseMemory || f.Phase == PhaseDevice || f.Phase == PhaseWeights)
}

// Outcome is what comes back for one trial: a verdict, or a failure.
type Outcome struct {
	CampaignID string   `json:"campaign_id,omitempty"`
	TrialID    int      `json:"trial_id"`
	Verdict    *Verdict `json:"verdict,omitempty"`
	Failure    *Failure `json:"failure,omitempty"`
	// Incumbent is the incumbent's latency re-measured side by side, when
	// the spec asked for it; Ratio = candidate / incumbent.
	IncumbentUS *float64 `json:"incumbent_us,omitempty"`
	Ratio       *float64 `json:"ratio,omitempty"`
	// Regions is the cost model's critical-path share per region
	// (attention, mlp, lm_head), for the campaign's "hottest region".
	Regions map[string]float64 `json:"regions,omitempty"`
	// Stages is the wall time of each pipeline stage in seconds (parse,
	// lower, validate, reference_vm, timing), for the worker's histograms.
	Stages map[string]float64 `json:"stages,omitempty"`
	// Worker identifies who evaluated it (host/device fingerprint).
	Worker   string  `json:"worker,omitempty"`
	ElapsedS float64 `json:"elapsed_s,omitempty"`
	// SpecDigest is the Digest of the spec the evaluator was handed, so
	// that the outcome is accepted only for that spec (CheckBound).
	SpecDigest string `json:"spec_digest,omitempty"`
}
