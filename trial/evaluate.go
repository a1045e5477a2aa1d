package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
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
	// Config is the model as Program was lowered (Model.Config, or with a
	// workload's context, ContextConfig).
	Config model.Config
	// KV, on a workload trial, are the seeded KV caches of the check model
	// (Model.Check with Config's context) the reference VM started the
	// step from: a device checks the same step from the same caches
	// instead of running the positions before it. Nil: the step follows
	// the history tokens of HistoryToken from position 0.
	KV map[string]*tensor.Tensor
}

// lowering is the model config the request's programs are lowered with.
func (req TimeRequest) lowering() model.Config {
	if req.Config.Name == "" && req.Model != nil {
		return req.Model.Config
	}
	return req.Config
}

// GPULauncher is a Launcher whose latencies are CUDA-event timings on a GPU
// (kernels/gpu's): it evaluates device cuda trials. Any other launcher
// evaluates device cpu trials only.
type GPULauncher interface {
	Launcher
	// OnGPU is true: the launcher times on a GPU.
	OnGPU() bool
}

// onGPU reports whether l times on a GPU.
func onGPU(l Launcher) bool {
	g, ok := l.(GPULauncher)
	return ok && g.OnGPU()
}

// EmulatorLauncher is a Launcher that runs the CUDA kernels on the CPU
// emulator (kernels/gpu's, serving --device emu): it evaluates device emu
// trials, whose latencies stay the cost model's.
type EmulatorLauncher interface {
	Launcher
	// Emulates is true: the launcher runs the kernels on the CPU emulator.
	Emulates() bool
}

// emulates reports whether l runs the kernels on the CPU emulator.
func emulates(l Launcher) bool {
	e, ok := l.(EmulatorLauncher)
	return ok && e.Emulates()
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
		inc, err := schedule.Lower(req.lowering(), req.Target, *req.Incumbent, schedule.LowerOptions{Pos: req.Pos, B: req.Batch})
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
//
// A trial's latency is of its device's kind, whatever the evaluator has: a
// device cpu trial is timed by the cost model (predicted) even where the
// launcher is a GPU's, and a device cuda trial on an evaluator without a
// GPU is refused before anything runs (an infrastructure failure of phase
// PhaseDevice), never given a prediction where a measurement was asked.
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
	gpu := onGPU(opts.Launcher)
	if opts.Environment == "" {
		opts.Environment = Environment(opts.Launcher.Name(), opts.Version)
	}
	switch {
	case spec.Device == schedule.DeviceCUDA && !gpu:
		out.Worker = opts.Environment
		out.Failure = &Failure{Class: FailInfra, Phase: PhaseDevice, Message: fmt.Sprintf(
			"this evaluator (%s) has no GPU: a device cuda trial is timed on one (a gpuworker --device N serving %s); refused before evaluating",
			opts.Launcher.Name(), spec.GPU)}
		return out
	case spec.Device == schedule.DeviceEmu && !emulates(opts.Launcher):
		out.Worker = opts.Environment
		out.Failure = &Failure{Class: FailInfra, Phase: PhaseDevice, Message: fmt.Sprintf(
			"this evaluator (%s) does not run the CPU emulator: a device emu trial runs the kernels on it (a gpuworker --device emu serving %s); refused before evaluating",
			opts.Launcher.Name(), spec.GPU)}
		return out
	case spec.Device != schedule.DeviceCUDA && gpu, spec.Device != schedule.DeviceEmu && emulates(opts.Launcher):
		opts.Launcher = CPULauncher{} // a cpu trial's latency is the cost model's
	}
	if opts.Models == nil {
		opts.Models = NewModelCache(0)
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

// step is one decode step a trial evaluates: its position, its weight in
// the verdict's means, and what became of it.
type step struct {
	pos    int
	weight float64
	prog   *ir.Program
	bound  float64 // the streamed-bytes floor, µs (NaN without one)
	check  *checkResult
	kv     map[string]*tensor.Tensor // the seeded caches it started from (workload trials)
	timing *Timing
}

func evaluate(ctx context.Context, spec Spec, opts Options, st stages) (*Verdict, *Timing, map[string]float64, *Failure) {
	var regions map[string]float64
	v := &Verdict{GPU: spec.GPU, Model: spec.Model, Device: opts.Launcher.Name(), Notes: []string{}, Environment: opts.Environment,
		ModelSpec: spec.Model, Pos: &spec.Pos, Batch: spec.Batch, Workload: spec.Workload}
	// reject writes a seed-001 rejected verdict: valid and correct false, no
	// latency and no floor, the reason, and a note saying where it stopped.
	reject := func(note, format string, args ...any) (*Verdict, *Timing, map[string]float64, *Failure) {
		reason := fmt.Sprintf(format, args...)
		incorrect := false
		v.Valid, v.Correct, v.BoundUS, v.Positions = false, &incorrect, nil, nil
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
	if w := spec.Workload; w != nil {
		v.Pos, v.Batch = nil, w.Batch
		if err := w.Check(); err != nil {
			return reject(NoteWorkload, "%v", err)
		}
	}
	if f := weightsRefusal(ctx, spec); f != nil {
		return nil, nil, nil, f
	}
	if spec.WeightsID == nil && spec.CampaignID != "" {
		v.Notes = append(v.Notes, NoteWeightsUnchecked)
	}
	lm, release, err := opts.Models.acquire(ctx, spec.Model, spec.Weights)
	defer release() // the verdict holds no reference to the weights
	if f := ctxFailure(ctx.Err(), "load-model"); f != nil {
		return nil, nil, nil, f
	}
	var memErr *MemoryError
	if errors.As(err, &memErr) {
		return nil, nil, nil, &Failure{Class: FailInfra, Phase: PhaseMemory, Message: memErr.Error()}
	}
	if err != nil {
		return reject(NoteModel, "model: %v", err)
	}
	v.Model = lm.Config.Name
	if lm.FromCheckpoint {
		v.Notes = append(v.Notes, CheckpointNote(lm.Files))
	}
	cfg, batch := lm.Config, max(1, spec.Batch)
	steps := []*step{{pos: spec.Pos, weight: 1}}
	if w := spec.Workload; w != nil {
		if cfg, err = ContextConfig(lm.Config, spec.Model, *w); err != nil {
			return reject(NotePosition, "%v", err)
		}
		batch, steps = w.B(), nil
		for _, p := range w.Positions() {
			steps = append(steps, &step{pos: p.Pos, weight: p.Weight})
		}
	} else if spec.Pos < 0 || spec.Pos >= cfg.MaxSeq {
		return reject(NotePosition, "position %d outside [0, %d)", spec.Pos, cfg.MaxSeq)
	}
	if spec.Batch < 0 || spec.Batch > schedule.MaxBatch {
		return reject(NoteBatch, "batch %d is outside [1, %d]", spec.Batch, schedule.MaxBatch)
	}
	// A token the model cannot embed says nothing about the schedule.
	if spec.Token < 0 || spec.Token >= lm.Check.Vocab {
		return reject(NoteToken, "token %d outside the vocabulary [0, %d)", spec.Token, lm.Check.Vocab)
	}
	var streamed float64
	bound, boundOK := 0.0, true
	for i, s := range steps {
		done = st.start(StageLower)
		s.prog, err = schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: s.pos, B: batch})
		done()
		if err != nil {
			return reject(NoteLowering, "lowering failed%s: %v", at(spec, s.pos), err)
		}
		sb := s.prog.StreamedBytes()
		streamed += s.weight * float64(sb)
		s.bound = target.BandwidthBoundUS(sb)
		if math.IsNaN(s.bound) || !(s.bound > 0) {
			boundOK = false
		}
		bound += s.weight * s.bound
		if i == 0 {
			v.Tasks, v.NBuffers, v.NCounters = len(s.prog.Tasks), len(s.prog.Buffers), len(s.prog.Counters)
			wb := s.prog.TotalWeightBytes()
			v.WeightMB = ir.RoundTo(float64(wb)/1e6, 4)
			if all := target.BandwidthBoundUS(wb); !math.IsNaN(all) && all > 0 {
				b := ir.RoundTo(all, 4)
				v.AllWeightsBoundUS = &b
			}
		}
		done = st.start(StageValidate)
		rep := validate.Validate(s.prog)
		done()
		if !rep.OK {
			return reject(NoteValidate, "%s%s", rep.Reason(4), at(spec, s.pos))
		}
	}
	v.StreamedMB = ir.RoundTo(streamed/1e6, 4)
	if boundOK {
		b := ir.RoundTo(bound, 4)
		v.BoundUS = &b
	}
	if err := schedule.CheckLaunch(point, target); err != nil {
		return reject(NoteLaunch, "%v", err)
	}
	v.Valid = true
	regions = stepRegions(steps, target, point)
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, ctxFailure(err, "validate")
	}
	if spec.Workload != nil {
		v.Positions = make([]PositionVerdict, len(steps))
		for i, s := range steps {
			pv := &v.Positions[i]
			pv.Pos, pv.KVLen, pv.Weight, pv.Tasks = s.pos, s.pos+1, ir.RoundTo(s.weight, 6), len(s.prog.Tasks)
			pv.StreamedMB = ir.RoundTo(float64(s.prog.StreamedBytes())/1e6, 4)
			if boundOK {
				pv.BoundUS = new(ir.RoundTo(s.bound, 4))
			}
		}
	}

	done = st.start(StageReferenceVM)
	correct, maxErr, top1 := true, 0.0, 0.0
	for i, s := range steps {
		if spec.Workload != nil {
			s.check, s.kv, err = lm.checkSeeded(ctx, cfg, s.prog, spec.Token, s.pos, batch, target, point)
		} else {
			s.check, err = lm.check(ctx, s.prog, spec.Token, s.pos, batch, target, point)
		}
		if err != nil {
			done()
			if f := ctxFailure(ctx.Err(), "reference-vm"); f != nil {
				return nil, nil, nil, f
			}
			incorrect := false
			v.Correct = &incorrect
			v.Notes = append(v.Notes, "reference VM failed"+at(spec, s.pos)+": "+err.Error())
			return v, nil, regions, nil
		}
		c := s.check.cmp
		if v.Positions != nil {
			pv := &v.Positions[i]
			pv.Correct, pv.MaxAbsErr, pv.Top1Agreement = &c.Pass, finiteOrNil(c.MaxAbsErr), finiteOrNil(c.Top1Agreement)
			pv.Token = s.check.token
		}
		maxErr, top1 = max(maxErr, c.MaxAbsErr), top1+c.Top1Agreement/float64(len(steps))
		if i == 0 || !slices.Equal(s.check.notes, steps[0].check.notes) {
			v.Notes = append(v.Notes, s.check.notes...)
		}
		if !c.Pass {
			correct = false
			v.Notes = append(v.Notes, "correctness FAIL"+at(spec, s.pos)+": "+c.Reason+"; no latency without a PASS")
		}
	}
	done()
	v.Correct = &correct
	v.MaxAbsErr = finiteOrNil(maxErr)
	v.Top1Agreement = finiteOrNil(top1)
	if !correct {
		return v, nil, regions, nil
	}

	done = st.start(StageTiming)
	incumbent := incumbentPoint(spec, v)
	for i, s := range steps {
		token := spec.Token
		if spec.Workload != nil {
			token = s.check.token
		}
		timing, err := opts.Launcher.Time(ctx, TimeRequest{Model: lm, Target: target, Point: point, Program: s.prog,
			Incumbent: incumbent, Expected: s.check.logits, Token: token, Pos: s.pos, Batch: batch, Config: cfg, KV: s.kv})
		if err != nil {
			done()
			if f := ctxFailure(ctx.Err(), "timing"); f != nil {
				return nil, nil, nil, f
			}
			var mm *MismatchError
			if errors.As(err, &mm) && v.Positions != nil {
				v.Positions[i].Correct = new(false) // the device disagreed here
				v.Notes = append(v.Notes, fmt.Sprintf("the device's logits differ from the reference VM's at pos %d", s.pos))
			}
			return launcherOutcome(v, regions, err)
		}
		s.timing = &timing
		for _, n := range timing.Notes {
			if spec.Workload != nil {
				n = fmt.Sprintf("pos %d: %s", s.pos, n)
			}
			v.Notes = append(v.Notes, n)
		}
	}
	done()
	timing := combineTimings(steps)
	if v.BoundUS == nil {
		v.Notes = append(v.Notes, "no streamed-bytes floor for this target; latency withheld")
		return v, timing, regions, nil
	}
	for _, s := range steps {
		if lat := s.timing.LatencyUS; lat < s.bound || math.IsNaN(lat) {
			v.Notes = append(v.Notes, fmt.Sprintf("latency %.4fus%s is below the streamed-bytes floor %.4fus: a measurement artifact, withheld", lat, at(spec, s.pos), s.bound))
			return v, timing, regions, nil
		}
	}
	lat := ir.RoundTo(timing.LatencyUS, 4)
	kind := timing.Kind
	pct, _ := ir.PctOfRoofline(timing.LatencyUS, bound)
	v.LatencyUS, v.LatencyKind, v.PctOfRoofline = &lat, &kind, &pct
	for i, s := range steps {
		if v.Positions == nil {
			break
		}
		pv := &v.Positions[i]
		pv.LatencyUS = new(ir.RoundTo(s.timing.LatencyUS, 4))
		pv.PctOfRoofline = new(ir.RoundTo(s.timing.LatencyUS/s.bound*100, 3))
		if s.timing.IncumbentUS != nil {
			pv.IncumbentUS = new(ir.RoundTo(*s.timing.IncumbentUS, 4))
		}
	}
	return v, timing, regions, nil
}

// at names a workload trial's decode position in a message ("" for a
// one-step trial, whose position the verdict states).
func at(spec Spec, pos int) string {
	if spec.Workload == nil {
		return ""
	}
	return fmt.Sprintf(" at pos %d", pos)
}

// combineTimings is the trial's timing: each step's latency weighted (the
// workload's mean time per step), the kind of the first step (every step
// comes from one launcher), and the incumbent's latency weighted the same
// way, with its ratio, when every step timed it.
func combineTimings(steps []*step) *Timing {
	t := &Timing{Kind: steps[0].timing.Kind}
	inc, sided := 0.0, true
	for _, s := range steps {
		t.LatencyUS += s.weight * s.timing.LatencyUS
		if s.timing.IncumbentUS == nil {
			sided = false
		} else {
			inc += s.weight * *s.timing.IncumbentUS
		}
	}
	if len(steps) == 1 {
		return steps[0].timing
	}
	if sided && inc > 0 {
		ratio := t.LatencyUS / inc
		t.IncumbentUS, t.Ratio = &inc, &ratio
	}
	return t
}

// stepRegions is the cost model's critical-chain share per region over the
// steps, each step's region times weighted.
func stepRegions(steps []*step, target *ir.GpuTarget, point schedule.Point) map[string]float64 {
	sum := schedule.Cost{RegionUS: map[string]float64{}}
	for _, s := range steps {
		for r, us := range schedule.Predict(s.prog, target, point).RegionUS {
			sum.RegionUS[r] += s.weight * us
		}
	}
	return regionShares(sum)
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

// CheckpointNotePrefix starts the verdict note of a model checked on the
// weights of its own checkpoint (model.Checkpoint), found beside its config
// without a weights file named.
const CheckpointNotePrefix = "weights: the model's checkpoint, "

// CheckpointNote is that note for the checkpoint's files: how many, their
// names and the directory they lie in.
func CheckpointNote(files []string) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	dir := ""
	if len(files) > 0 {
		dir = filepath.Dir(files[0])
	}
	return fmt.Sprintf("%s%d file(s): %s (in %s)", CheckpointNotePrefix, len(files), strings.Join(names, ", "), dir)
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

// Stages lists the pipeline stages in the order a trial passes them.
var Stages = []string{StageParse, StageLower, StageValidate, StageReferenceVM, StageTiming}

// stages accumulates per-stage wall time in seconds.
type stages map[string]float64

func (s stages) start(name string) func() {
	t0 := time.Now()
	return func() { s[name] += time.Since(t0).Seconds() }
}
