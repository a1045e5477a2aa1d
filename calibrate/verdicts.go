package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Bounds on the input of one calibration.
const (
	MaxVerdictBytes = 1 << 20 // one verdict file
	MaxVerdictFiles = 1000    // verdict files in one calibration
)

// VerdictFile is one verdict as read from a file.
type VerdictFile struct {
	Name string // the file's name, for messages and labels
	Data []byte
}

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
	case v.ModelSpec == "" || len(v.Point) == 0 || v.Pos == nil:
		return errors.New("lacks model_spec, point or pos (written by an amk older than amkctl calibrate): evaluate the point again")
	}
	return nil
}

// FromVerdicts checks every verdict for target and lowers its program
// again; it refuses the lot, naming each refused file and why, if any is
// unusable (CheckVerdict, a point that does not parse or hash to its
// schedule_id, a model that is not the one measured, a lowering that
// changed since).
func FromVerdicts(files []VerdictFile, target *ir.GpuTarget) ([]Measurement, error) {
	if len(files) == 0 {
		return nil, errors.New("no verdicts")
	}
	if len(files) > MaxVerdictFiles {
		return nil, fmt.Errorf("%d verdict files, over the limit of %d", len(files), MaxVerdictFiles)
	}
	configs := map[string]model.Config{}
	var out []Measurement
	var errs []error
	for _, f := range files {
		m, err := measurement(f, target, configs)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
			continue
		}
		out = append(out, m)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func measurement(f VerdictFile, target *ir.GpuTarget, configs map[string]model.Config) (Measurement, error) {
	v, err := ParseVerdict(f.Data)
	if err != nil {
		return Measurement{}, err
	}
	if err := CheckVerdict(v, target.Name); err != nil {
		return Measurement{}, err
	}
	pt, err := schedule.ParsePoint(v.Point)
	if err != nil {
		return Measurement{}, fmt.Errorf("point: %w", err)
	}
	if id := pt.ID(); id != v.ScheduleID {
		return Measurement{}, fmt.Errorf("point hashes to %s, the verdict says %s", id, v.ScheduleID)
	}
	cfg, ok := configs[v.ModelSpec]
	if !ok {
		if cfg, err = model.Load(v.ModelSpec); err != nil {
			return Measurement{}, fmt.Errorf("model_spec: %w", err)
		}
		configs[v.ModelSpec] = cfg
	}
	if cfg.Name != v.Model {
		return Measurement{}, fmt.Errorf("model_spec %q is now %s, the verdict measured %s", v.ModelSpec, cfg.Name, v.Model)
	}
	batch := max(1, v.Batch)
	prog, err := schedule.Lower(cfg, target, pt, schedule.LowerOptions{Pos: *v.Pos, B: batch})
	if err != nil {
		return Measurement{}, fmt.Errorf("lowering: %w", err)
	}
	if len(prog.Tasks) != v.Tasks {
		return Measurement{}, fmt.Errorf("the lowering changed since the measurement (%d tasks now, %d measured): measure again", len(prog.Tasks), v.Tasks)
	}
	label := fmt.Sprintf("%s pos %d %s", v.ModelSpec, *v.Pos, v.ScheduleID)
	if batch > 1 {
		label = fmt.Sprintf("%s pos %d B %d %s", v.ModelSpec, *v.Pos, batch, v.ScheduleID)
	}
	return Measurement{Label: label + " (" + f.Name + ")", Program: prog, Point: pt, MeasuredUS: *v.LatencyUS, Device: v.Device}, nil
}
