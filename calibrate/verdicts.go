package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Bounds on the input of one calibration.
const (
	MaxVerdictBytes   = 1 << 20 // one verdict file
	MaxTrialsLogBytes = 8 << 20 // one campaign trials log (trials.jsonl)
	MaxVerdictFiles   = 1000    // verdicts in one calibration, files and log lines together
)

// VerdictFile is one verdict as read from a file, or, when Name ends in
// ".jsonl", a campaign's trials log (trials.jsonl: one trial.Outcome a
// line).
type VerdictFile struct {
	Name string // the file's name, for messages and labels
	Data []byte
}

// IsTrialsLog reports whether the file is read as a campaign trials log.
func (f VerdictFile) IsTrialsLog() bool { return strings.HasSuffix(f.Name, ".jsonl") }

// Measurement is one measured point with its program lowered again.
type Measurement struct {
	Label      string // model, position, schedule id and file
	Program    *ir.Program
	Point      schedule.Point
	MeasuredUS float64
	Device     string // the verdict's device (the launcher's name)
}

// ParseVerdict reads one verdict strictly: one JSON object with
// trial.Verdict's fields only, nothing after it.
func ParseVerdict(data []byte) (*trial.Verdict, error) {
	if len(data) > MaxVerdictBytes {
		return nil, fmt.Errorf("%d bytes, over the %d-byte limit of a verdict", len(data), MaxVerdictBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v *trial.Verdict
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not a verdict: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not a verdict: data after the JSON object")
	}
	if v == nil {
		return nil, errors.New("not a verdict: null")
	}
	return v, nil
}

// CheckVerdict says why a verdict cannot calibrate target (nil: it can).
func CheckVerdict(v *trial.Verdict, target string) error {
	switch {
	case v.GPU != target:
		return fmt.Errorf("target %q, not %s", v.GPU, target)
	case !v.Valid:
		return errors.New("not valid (rejected): no latency to fit")
	case v.Correct == nil || !*v.Correct:
		return errors.New("not correct (no correctness PASS): no latency without a PASS")
	case v.LatencyKind == nil || *v.LatencyKind != trial.KindMeasuredGPU:
		kind := "null"
		if v.LatencyKind != nil {
			kind = string(*v.LatencyKind)
		}
		return fmt.Errorf("latency_kind %s, not %s: a prediction never calibrates the model", kind, trial.KindMeasuredGPU)
	case v.LatencyUS == nil || !(*v.LatencyUS > 0) || math.IsInf(*v.LatencyUS, 0):
		return errors.New("no positive finite latency_us")
	case v.ModelSpec == "" || len(v.Point) == 0 || (v.Pos == nil && v.Workload == nil):
		return errors.New("lacks model_spec, point or pos (written by an amk older than amkctl calibrate): evaluate the point again")
	case v.Workload != nil && len(v.Positions) == 0:
		return errors.New("a workload verdict without its positions: evaluate the point again")
	}
	for _, p := range v.Positions {
		if p.LatencyUS == nil || !(*p.LatencyUS > 0) || math.IsInf(*p.LatencyUS, 0) {
			return fmt.Errorf("position %d has no positive finite latency_us", p.Pos)
		}
	}
	return nil
}

// FromVerdicts checks every verdict for target and lowers its program
// again; it refuses the lot, naming each refused file and why, if any is
// unusable (CheckVerdict, a point that does not parse or hash to its
// schedule_id, a model that is not the one measured, a lowering that
// changed since). A campaign's trials log contributes the measured-gpu,
// correct verdicts of its outcomes and skips the others (failures,
// rejected, incorrect or predicted trials: a campaign records them all);
// skipped counts them.
func FromVerdicts(files []VerdictFile, target *ir.GpuTarget) (ms []Measurement, skipped int, err error) {
	if len(files) == 0 {
		return nil, 0, errors.New("no verdicts")
	}
	configs := map[string]model.Config{}
	var errs []error
	total := 0
	add := func(name string, data []byte) {
		total++
		if total > MaxVerdictFiles {
			return
		}
		m, err := measurements(name, data, target, configs)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		ms = append(ms, m...)
	}
	for _, f := range files {
		if !f.IsTrialsLog() {
			add(f.Name, f.Data)
			continue
		}
		verdicts, n, err := trialsLogVerdicts(f.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
			continue
		}
		skipped += n
		for i, v := range verdicts {
			add(fmt.Sprintf("%s#%d", f.Name, i+1), v)
		}
	}
	if total > MaxVerdictFiles {
		return nil, skipped, fmt.Errorf("%d verdicts, over the limit of %d", total, MaxVerdictFiles)
	}
	if len(errs) > 0 {
		return nil, skipped, errors.Join(errs...)
	}
	if len(ms) == 0 {
		return nil, skipped, fmt.Errorf("no measured verdicts (%d trials skipped: failed, rejected, incorrect or predicted)", skipped)
	}
	return ms, skipped, nil
}

// trialsLogVerdicts are the verdicts of a trials log's outcomes that are
// measured-gpu and correct, as JSON; skipped counts the other outcomes.
func trialsLogVerdicts(data []byte) (verdicts [][]byte, skipped int, err error) {
	if len(data) > MaxTrialsLogBytes {
		return nil, 0, fmt.Errorf("%d bytes, over the %d-byte limit of a trials log", len(data), MaxTrialsLogBytes)
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var out trial.Outcome
		if err := dec.Decode(&out); err != nil {
			return nil, 0, fmt.Errorf("line %d is not a trial outcome: %w", n+1, err)
		}
		v := out.Verdict
		if v == nil || !v.Valid || v.Correct == nil || !*v.Correct || v.LatencyKind == nil || *v.LatencyKind != trial.KindMeasuredGPU {
			skipped++
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, 0, err
		}
		verdicts = append(verdicts, raw)
	}
	return verdicts, skipped, nil
}

// measurements are a verdict's measured steps: the one step of a one-step
// verdict, or each evaluated position of a workload verdict (its own
// latency, lowered at its position with the workload's context).
func measurements(name string, data []byte, target *ir.GpuTarget, configs map[string]model.Config) ([]Measurement, error) {
	v, err := ParseVerdict(data)
	if err != nil {
		return nil, err
	}
	if err := CheckVerdict(v, target.Name); err != nil {
		return nil, err
	}
	pt, err := schedule.ParsePoint(v.Point)
	if err != nil {
		return nil, fmt.Errorf("point: %w", err)
	}
	if id := pt.ID(); id != v.ScheduleID {
		return nil, fmt.Errorf("point hashes to %s, the verdict says %s", id, v.ScheduleID)
	}
	cfg, ok := configs[v.ModelSpec]
	if !ok {
		if cfg, err = model.Load(v.ModelSpec); err != nil {
			return nil, fmt.Errorf("model_spec: %w", err)
		}
		configs[v.ModelSpec] = cfg
	}
	if cfg.Name != v.Model {
		return nil, fmt.Errorf("model_spec %q is now %s, the verdict measured %s", v.ModelSpec, cfg.Name, v.Model)
	}
	type step struct {
		pos, tasks int
		us         float64
	}
	batch := max(1, v.Batch)
	var steps []step
	if w := v.Workload; w != nil {
		if cfg, err = trial.ContextConfig(cfg, v.ModelSpec, *w); err != nil {
			return nil, err
		}
		batch = w.B()
		for _, p := range v.Positions {
			steps = append(steps, step{p.Pos, p.Tasks, *p.LatencyUS})
		}
	} else {
		steps = []step{{*v.Pos, v.Tasks, *v.LatencyUS}}
	}
	var out []Measurement
	for _, s := range steps {
		prog, err := schedule.Lower(cfg, target, pt, schedule.LowerOptions{Pos: s.pos, B: batch})
		if err != nil {
			return nil, fmt.Errorf("lowering at pos %d: %w", s.pos, err)
		}
		if len(prog.Tasks) != s.tasks {
			return nil, fmt.Errorf("the lowering changed since the measurement (%d tasks now at pos %d, %d measured): measure again", len(prog.Tasks), s.pos, s.tasks)
		}
		label := fmt.Sprintf("%s pos %d %s", v.ModelSpec, s.pos, v.ScheduleID)
		if batch > 1 {
			label = fmt.Sprintf("%s pos %d B %d %s", v.ModelSpec, s.pos, batch, v.ScheduleID)
		}
		out = append(out, Measurement{Label: label + " (" + name + ")", Program: prog, Point: pt, MeasuredUS: s.us, Device: v.Device})
	}
	return out, nil
}
