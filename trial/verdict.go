package trial

import (
	"encoding/json"

	"github.com/amk-dev/amk/model"
)

// LatencyKind says how a latency was obtained. A latency is "measured-gpu"
// only when a CUDA-event-timed run on a GPU also matched the reference;
// otherwise it is "predicted" (the cost model's figure).
type LatencyKind string

// Latency kinds.
const (
	KindMeasuredGPU LatencyKind = "measured-gpu"
	KindPredicted   LatencyKind = "predicted"
)

// Verdict is the one structured result of evaluating a schedule (docs/spec/loop.md).
// Pointer fields are JSON null when absent: no latency without correct=true.
// A rejected verdict (valid=false) has correct=false, rejected_reason, a note
// naming the stage that rejected it, and null latency, kind, pct and bound_us.
type Verdict struct {
	Valid          bool         `json:"valid"`
	RejectedReason *string      `json:"rejected_reason"`
	Correct        *bool        `json:"correct"`
	MaxAbsErr      *float64     `json:"max_abs_err"`
	Top1Agreement  *float64     `json:"top1_agreement"`
	LatencyUS      *float64     `json:"latency_us"`
	LatencyKind    *LatencyKind `json:"latency_kind"`
	PctOfRoofline  *float64     `json:"pct_of_roofline"`
	BoundUS        *float64     `json:"bound_us"` // the streamed-bytes floor: StreamedMB at the spec HBM bandwidth
	// AllWeightsBoundUS is the seed's floor (every weight byte, the whole
	// embedding table included): a second figure, never the headline.
	AllWeightsBoundUS *float64 `json:"all_weights_bound_us"`
	ScheduleID        string   `json:"schedule_id"`
	Tasks             int      `json:"tasks"`
	WeightMB          float64  `json:"weight_mb"`
	StreamedMB        float64  `json:"streamed_mb"` // ir.Program.StreamedBytes / 1e6
	GPU               string   `json:"gpu"`
	Model             string   `json:"model"`
	Device            string   `json:"device"`
	NBuffers          int      `json:"n_buffers"`
	NCounters         int      `json:"n_counters"`
	Notes             []string `json:"notes"`
	// Environment fingerprints the evaluator (trial.Environment, or the
	// fleet worker's fingerprint); an amk addition to docs/spec/loop.md's fields.
	Environment string `json:"environment,omitempty"`
	// What was evaluated, so that a verdict alone re-lowers its program
	// (amkctl calibrate); amk additions, written on every verdict: the
	// spec's model as given (a preset name or a config.json path; Model
	// is the config's display name), the parsed point (schedule.Point's
	// JSON; absent when the point did not parse), the decode position and
	// the batch (absent: one sequence).
	ModelSpec string          `json:"model_spec,omitempty"`
	Point     json.RawMessage `json:"point,omitempty"`
	Pos       *int            `json:"pos,omitempty"`
	Batch     int             `json:"batch,omitempty"`
	// ModelQuality, when asked for (amkctl eval --quality N), compares a
	// quantised model's logits with its float twin's (ModelQuality): a
	// figure of the weights, separate from the schedule's correctness.
	ModelQuality *model.Quality `json:"model_quality,omitempty"`
	// Workload is set on a workload trial (Spec.Workload): its decode
	// steps were evaluated at the positions of Positions, and then
	// latency_us is the workload's mean time per decode step, bound_us its
	// mean floor per step, pct_of_roofline their ratio, max_abs_err the
	// largest and top1_agreement the mean over the positions, streamed_mb
	// the mean per step, tasks, n_buffers and n_counters the first
	// position's, and pos is absent.
	Workload  *Workload         `json:"workload,omitempty"`
	Positions []PositionVerdict `json:"positions,omitempty"`
}

// PositionVerdict is one evaluated decode position of a workload trial:
// its figures as a one-step verdict states them, and its weight in the
// workload's means. A latency only with a correctness PASS at every
// position (the verdict's correct).
type PositionVerdict struct {
	Pos           int      `json:"pos"`
	KVLen         int      `json:"kv_len"`
	Weight        float64  `json:"weight"`
	Correct       *bool    `json:"correct"`
	MaxAbsErr     *float64 `json:"max_abs_err"`
	Top1Agreement *float64 `json:"top1_agreement"`
	LatencyUS     *float64 `json:"latency_us"`
	BoundUS       *float64 `json:"bound_us"`
	PctOfRoofline *float64 `json:"pct_of_roofline"`
	StreamedMB    float64  `json:"streamed_mb"`
	Tasks         int      `json:"tasks"`
	// Token is the token the step decoded (batch row r decodes RowToken of
	// it): the spec's, or the next one whose oracle logits have a clear top
	// (see LoadedModel.checkToken).
	Token int `json:"token"`
	// IncumbentUS is the incumbent's latency at this position, timed side
	// by side with the candidate, when the spec asked for it.
	IncumbentUS *float64 `json:"incumbent_us,omitempty"`
}

// Notes of a rejected verdict, one per stage that can reject (docs/spec/loop.md: a
// rejected verdict says why and where; the reference's wording).
const (
	NoteUnknownTarget   = "unknown GPU target, rejected, no launch"
	NoteMalformedConfig = "config dict could not be parsed, rejected, no launch"
	NoteModel           = "model could not be loaded, rejected, no launch"
	NotePosition        = "decode position outside the model's context, rejected, no launch"
	NoteLowering        = "lower() raised, config rejected, no launch"
	NoteValidate        = "validate() REJECTED, schedule never launches (agent-safety)"
	NoteLaunch          = "launch config infeasible, REJECTED before launch (agent-safety)"
	NoteDeviceRefused   = "the device's loader refused the program, REJECTED before launch"
	NoteBatch           = "batch size not supported here, rejected, no launch"
	NoteWorkload        = "workload not supported here, rejected, no launch"
	NoteToken           = "token outside the model's vocabulary, rejected, no launch"
	// NoteWeightsUnchecked: a campaign's spec that names no weights
	// identity (Spec.WeightsID; issued before weights were identified)
	// was evaluated on whatever weights this evaluator has.
	NoteWeightsUnchecked = "weights not checked against the campaign's: the spec names none (a campaign created, or a scheduler built, before weights were identified)"
)
