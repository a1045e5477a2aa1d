package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

// DefaultToken is the token id whose decode step amk's own specs check (the
// reference's choice, 7). A spec's Token is used as given: 0 is a real token.
const DefaultToken = 7

// Options configures Evaluate.
type Options struct {
	// Launcher supplies latencies; nil means the CPU cost model.
	Launcher Launcher
	// Models caches models, weights and oracle logits across trials; nil
	// means a private cache per call (slow for big models).
	Models *ModelCache
	// Environment is the evaluator's fingerprint stamped on the verdict and
	// the outcome; empty means Environment(Launcher.Name(), Version).
	Environment string
	// Version is the amk build that evaluates (the binary's version), for
	// the fingerprint; empty reads "unknown".
	Version string
}

// Timing is a launcher's answer for one correct program.
type Timing struct {
	LatencyUS float64
	Kind      LatencyKind // KindMeasuredGPU or KindPredicted
	// IncumbentUS and Ratio are set when the incumbent was timed side by side.
	IncumbentUS *float64
	Ratio       *float64
	// FloorUS, when set, is the launcher's own sustained-bandwidth floor.
	Notes []string
}

// Launcher times a correct, validated program.
type Launcher interface {
	// Name is the device label reported in verdicts ("cpu", "cuda:0 NVIDIA H200").
	Name() string
	// Time returns the latency of prog lowered from point; incumbent, when
	// non-nil, is the campaign incumbent's program to time side by side.
	Time(ctx context.Context, req TimeRequest) (Timing, error)
}

// TimeRequest is what a Launcher gets.
type TimeRequest struct {
	Model     *LoadedModel
	Target    *ir.GpuTarget
	Point     schedule.Point
	Program   *ir.Program
	Incumbent *schedule.Point
	// Expected are the reference-VM logits the launcher's own output must
	// match before any timing counts.
	Expected []float32
	Token    int
	Pos      int
	Batch    int // sequences in the program (>= 1)
}

// CPULauncher returns the cost model's prediction, labelled predicted.
type CPULauncher struct{}

// Name implements Launcher.
func (CPULauncher) Name() string { return "cpu" }

// Time implements Launcher with schedule.Predict.
func (CPULauncher) Time(ctx context.Context, req TimeRequest) (Timing, error) {
	c := schedule.Predict(req.Program, req.Target, req.Point)
	t := Timing{LatencyUS: c.PredictedUS, Kind: KindPredicted}
	if req.Incumbent != nil {
		inc, err := schedule.Lower(req.Model.Config, req.Target, *req.Incumbent, schedule.LowerOptions{Pos: req.Pos, B: req.Batch})
		if err == nil {
			ic := schedule.Predict(inc, req.Target, *req.Incumbent).PredictedUS
			ratio := c.PredictedUS / ic
			t.IncumbentUS, t.Ratio = &ic, &ratio
		}
	}
	return t, nil
}

// Evaluate runs the whole pipeline for one trial and never panics: parse and
// type-check the point, lower, validate, check launch feasibility, run the
// reference VM against the eager oracle, and only for a correct program ask
// the launcher for a latency.
func Evaluate(ctx context.Context, spec Spec, opts Options) (out Outcome) {
	out = Outcome{CampaignID: spec.CampaignID, TrialID: spec.TrialID}
	defer func() {
		if r := recover(); r != nil {
			out.Verdict = nil
			out.Failure = &Failure{Class: FailCrash, Phase: "evaluate", Message: fmt.Sprint("internal error: ", r)}
		}
	}()
	if opts.Launcher == nil {
		opts.Launcher = CPULauncher{}
	}
	if opts.Models == nil {
		opts.Models = NewModelCache(0)
	}
	if opts.Environment == "" {
		opts.Environment = Environment(opts.Launcher.Name(), opts.Version)
	}
	out.Worker = opts.Environment // also on a failure, which has no verdict
	st := stages{}
	v, timing, regions, err := evaluate(ctx, spec, opts, st)
	out.Stages = st
	if err != nil {
		out.Failure = err
		return out
	}
	out.Verdict = v
	out.Regions = regions
	if timing != nil {
		out.IncumbentUS, out.Ratio = timing.IncumbentUS, timing.Ratio
	}
	return out
}

func evaluate(ctx context.Context, spec Spec, opts Options, st stages) (*Verdict, *Timing, map[string]float64, *Failure) {
	var regions map[string]float64
	v := &Verdict{GPU: spec.GPU, Model: spec.Model, Device: opts.Launcher.Name(), Notes: []string{}, Environment: opts.Environment,
		ModelSpec: spec.Model, Pos: &spec.Pos, Batch: spec.Batch}
	// reject writes a seed-001 rejected verdict: valid and correct false, no
	// latency and no floor, the reason, and a note saying where it stopped.
	reject := func(note, format string, args ...any) (*Verdict, *Timing, map[string]float64, *Failure) {
		reason := fmt.Sprintf(format, args...)
		incorrect := false
		v.Valid, v.Correct, v.BoundUS = false, &incorrect, nil
		v.RejectedReason = &reason
		v.Notes = append(v.Notes, note)
		return v, nil, nil, nil
	}
	target, err := ir.Target(spec.GPU)
	if err != nil {
		return reject(NoteUnknownTarget, "%v", err)
	}
	v.GPU = target.Name
	if target.IsAMD() {
		v.Notes = append(v.Notes, target.Name+" is an AMD target: predicted only (no AMD device is attached to amk)")
	}
	done := st.start(StageParse)
	point, ignored, err := parseSpecPoint(spec.Point)
	done()
	if len(ignored) > 0 {
		v.Notes = append(v.Notes, IgnoredKeysNote(ignored))
	}
	if err != nil {
		if errors.Is(err, schedule.ErrMalformed) { // already says so
			return reject(NoteMalformedConfig, "%v", err)
		}
		return reject(NoteMalformedConfig, "malformed ScheduleConfig: %v", err)
	}
	v.ScheduleID = point.ID()
	v.Notes = append(v.Notes, schedule.OffGridNotes(point, target, spec.Device)...)
	if raw, err := json.Marshal(point); err == nil {
		v.Point = raw
	}
	lm, release, err := opts.Models.acquire(ctx, spec.Model, spec.Weights)
	defer release() // the verdict holds no reference to the weights
	if f := ctxFailure(ctx.Err(), "load-model"); f != nil {
		return nil, nil, nil, f
	}
	var memErr *MemoryError
	if errors.As(err, &memErr) {
		return nil, nil, nil, &Failure{Class: FailInfra, Phase: "memory", Message: memErr.Error()}
	}
	if err != nil {
		return reject(NoteModel, "model: %v", err)
	}
	v.Model = lm.Config.Name
	if spec.Pos < 0 || spec.Pos >= lm.Config.MaxSeq {
		return reject(NotePosition, "position %d outside [0, %d)", spec.Pos, lm.Config.MaxSeq)
	}
	batch := max(1, spec.Batch)
	if spec.Batch < 0 || spec.Batch > schedule.MaxBatch {
		return reject(NoteBatch, "batch %d is outside [1, %d]", spec.Batch, schedule.MaxBatch)
	}
	if batch > 1 && spec.Device == schedule.DeviceCUDA {
		return reject(NoteBatch, "batched lowering (B=%d) is checked and timed on --device cpu only: the CUDA launcher binds one sequence", batch)
	}
	done = st.start(StageLower)
	prog, err := schedule.Lower(lm.Config, target, point, schedule.LowerOptions{Pos: spec.Pos, B: batch})
	done()
	if err != nil {
		return reject(NoteLowering, "lowering failed: %v", err)
	}
	v.Tasks, v.NBuffers, v.NCounters = len(prog.Tasks), len(prog.Buffers), len(prog.Counters)
	wb, sb := prog.TotalWeightBytes(), prog.StreamedBytes()
	v.WeightMB, v.StreamedMB = ir.RoundTo(float64(wb)/1e6, 4), ir.RoundTo(float64(sb)/1e6, 4)
	bound := target.BandwidthBoundUS(sb)
	if !math.IsNaN(bound) && bound > 0 {
		b := ir.RoundTo(bound, 4)
		v.BoundUS = &b
	}
	if all := target.BandwidthBoundUS(wb); !math.IsNaN(all) && all > 0 {
		b := ir.RoundTo(all, 4)
		v.AllWeightsBoundUS = &b
	}
	done = st.start(StageValidate)
	rep := validate.Validate(prog)
	done()
	if !rep.OK {
		return reject(NoteValidate, "%s", rep.Reason(4))
	}
	if err := schedule.CheckLaunch(point, target); err != nil {
		return reject(NoteLaunch, "%v", err)
	}
	v.Valid = true
	regions = regionShares(schedule.Predict(prog, target, point))
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, ctxFailure(err, "validate")
	}

	done = st.start(StageReferenceVM)
	check, err := lm.check(ctx, prog, spec.Token, spec.Pos, batch, target, point)
	done()
	if err != nil {
		if f := ctxFailure(ctx.Err(), "reference-vm"); f != nil {
			return nil, nil, nil, f
		}
		correct := false
		v.Correct = &correct
		v.Notes = append(v.Notes, "reference VM failed: "+err.Error())
		return v, nil, regions, nil
	}
	v.Correct = &check.cmp.Pass
	v.MaxAbsErr = finiteOrNil(check.cmp.MaxAbsErr)
	v.Top1Agreement = finiteOrNil(check.cmp.Top1Agreement)
	v.Notes = append(v.Notes, check.notes...)
	if !check.cmp.Pass {
		v.Notes = append(v.Notes, "correctness FAIL: "+check.cmp.Reason+"; no latency without a PASS")
		return v, nil, regions, nil
	}

	done = st.start(StageTiming)
	timing, err := opts.Launcher.Time(ctx, TimeRequest{Model: lm, Target: target, Point: point, Program: prog,
		Incumbent: incumbentPoint(spec, v), Expected: check.logits, Token: spec.Token, Pos: spec.Pos, Batch: batch})
	done()
	if err != nil {
		if f := ctxFailure(ctx.Err(), "timing"); f != nil {
			return nil, nil, nil, f
		}
		return launcherOutcome(v, regions, err)
	}
	v.Notes = append(v.Notes, timing.Notes...)
	if v.BoundUS == nil {
		v.Notes = append(v.Notes, "no streamed-bytes floor for this target; latency withheld")
		return v, &timing, regions, nil
	}
	if timing.LatencyUS < bound || math.IsNaN(timing.LatencyUS) {
		v.Notes = append(v.Notes, fmt.Sprintf("latency %.4fus is below the streamed-bytes floor %.4fus: a measurement artifact, withheld", timing.LatencyUS, bound))
		return v, &timing, regions, nil
	}
	lat := ir.RoundTo(timing.LatencyUS, 4)
	kind := timing.Kind
	pct, _ := ir.PctOfRoofline(timing.LatencyUS, bound)
	v.LatencyUS, v.LatencyKind, v.PctOfRoofline = &lat, &kind, &pct
	return v, &timing, regions, nil
}

func incumbentPoint(spec Spec, v *Verdict) *schedule.Point {
	if len(spec.Incumbent) == 0 {
		return nil
	}
	p, err := schedule.ParsePoint(spec.Incumbent)
	if err != nil {
		v.Notes = append(v.Notes, "incumbent point ignored: "+err.Error())
		return nil
	}
	return &p
}

// parseSpecPoint reads a spec's config dict (empty: the default point) and
// names the keys amk read past (schedule.IgnoredKeys).
func parseSpecPoint(raw []byte) (schedule.Point, []string, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return schedule.Default(), nil, nil
	}
	v, err := pyjson.ParseUnique(raw)
	if err != nil {
		return schedule.Point{}, nil, err
	}
	p, err := schedule.PointFromValue(v)
	return p, schedule.IgnoredKeys(v), err
}

// IgnoredKeysPrefix starts the verdict note naming the config keys amk
// read past (unknown keys are not an error, docs/spec/ir.md, but never go
// unmentioned).
const IgnoredKeysPrefix = "ignored unknown config key(s), not evaluated: "

// IgnoredKeysNote is that note for keys.
func IgnoredKeysNote(keys []string) string { return IgnoredKeysPrefix + strings.Join(keys, ", ") }

func finiteOrNil(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func ctxFailure(err error, phase string) *Failure {
	switch {
	case err == nil:
		return nil
	case err == context.DeadlineExceeded:
		return &Failure{Class: FailTimeout, Phase: phase, Message: "trial exceeded its wall-clock budget"}
	default:
		return &Failure{Class: FailInfra, Phase: phase, Message: "evaluation cancelled: " + err.Error()}
	}
}

// regionShares turns the cost model's critical-chain time per region into
// fractions (attention, mlp, lm_head; "other" is left out as the reference
// does).
func regionShares(c schedule.Cost) map[string]float64 {
	total := 0.0
	for _, us := range c.RegionUS {
		total += us
	}
	if total <= 0 {
		return nil
	}
	out := map[string]float64{}
	for _, r := range []string{schedule.RegionAttention, schedule.RegionMLP, schedule.RegionLMHead} {
		out[r] = ir.RoundTo(c.RegionUS[r]/total, 4)
	}
	return out
}

// Pipeline stages, as reported in Outcome.Stages.
const (
	StageParse       = "parse"
	StageLower       = "lower"
	StageValidate    = "validate"
	StageReferenceVM = "reference_vm"
	StageTiming      = "timing"
)

// stages accumulates per-stage wall time in seconds.
type stages map[string]float64

func (s stages) start(name string) func() {
	t0 := time.Now()
	return func() { s[name] += time.Since(t0).Seconds() }
}
