package flywheel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// Latency kinds a corpus record can carry (the trial package's values).
const (
	KindMeasuredGPU = "measured-gpu"
	KindPredicted   = "predicted"
)

// Env fingerprints where a corpus point was produced. Unknown fields are
// empty strings.
type Env struct {
	Target     string `json:"target"`      // GPU target record name
	Device     string `json:"device"`      // "cpu" or "cuda"
	DeviceName string `json:"device_name"` // the live device or worker
	Driver     string `json:"driver"`      // driver version, when known
	Toolkit    string `json:"toolkit"`     // CUDA toolkit version, when known
	AMKVersion string `json:"amk_version"`
}

// Record is one corpus.jsonl line: a kept, correct point. The first twelve
// fields are the reference's; the rest are amk's additions.
type Record struct {
	Model       string
	GPU         string
	Regime      string
	Correctness string // always "PASS"
	LatencyUS   float64
	BoundUS     float64 // the streamed-bytes floor (trial.Verdict.BoundUS); never 0
	// PctOfRoofline is LatencyUS / BoundUS × 100.
	PctOfRoofline float64
	// Schedule is the point's JSON: the ScheduleConfig dict with
	// "kernel_knobs" embedded.
	Schedule    pyjson.Value
	IRVersion   string
	ABIVersion  string
	Notes       string
	TS          float64 // epoch seconds
	LatencyKind string  // measured-gpu | predicted
	Shape       Shape
	ShapeSource string // see ShapeFrom*
	Env         Env
}

// Value renders the record as the ordered JSON object written to the file.
func (r *Record) Value() pyjson.Value {
	str := pyjson.StringValue
	flt := pyjson.FloatValue
	i := func(n int) pyjson.Value { return pyjson.IntValue(int64(n)) }
	m := pyjson.M
	return pyjson.ObjectValue(
		m("model", str(r.Model)), m("gpu", str(r.GPU)), m("regime", str(r.Regime)),
		m("correctness", str(r.Correctness)), m("latency_us", flt(r.LatencyUS)),
		m("bound_us", flt(r.BoundUS)), m("pct_of_roofline", flt(r.PctOfRoofline)),
		m("schedule", r.Schedule), m("ir_version", str(r.IRVersion)),
		m("abi_version", str(r.ABIVersion)), m("notes", str(r.Notes)), m("ts", flt(r.TS)),
		m("latency_kind", str(r.LatencyKind)),
		m("model_shape", pyjson.ObjectValue(
			m("hidden", i(r.Shape.Hidden)), m("n_layers", i(r.Shape.NLayers)),
			m("n_heads", i(r.Shape.NHeads)), m("n_kv_heads", i(r.Shape.NKVHeads)),
			m("head_dim", i(r.Shape.HeadDim)), m("intermediate", i(r.Shape.Intermediate)),
			m("vocab", i(r.Shape.Vocab)))),
		m("shape_source", str(r.ShapeSource)),
		m("env", pyjson.ObjectValue(
			m("target", str(r.Env.Target)), m("device", str(r.Env.Device)),
			m("device_name", str(r.Env.DeviceName)), m("driver", str(r.Env.Driver)),
			m("toolkit", str(r.Env.Toolkit)), m("amk_version", str(r.Env.AMKVersion)))),
	)
}

// Check enforces what every record must satisfy before it is written.
func (r *Record) Check() error {
	switch {
	case r.Model == "" || r.GPU == "":
		return errors.New("flywheel: corpus record without model or gpu")
	case r.Correctness != CorrectPass:
		return fmt.Errorf("flywheel: only PASS points enter the corpus (got %q)", r.Correctness)
	case !(ir.Finite(r.LatencyUS) && r.LatencyUS > 0):
		return fmt.Errorf("flywheel: corpus latency %v is not a positive number", r.LatencyUS)
	case !(ir.Finite(r.BoundUS) && r.BoundUS > 0):
		return fmt.Errorf("flywheel: corpus bound_us %v is not a positive number", r.BoundUS)
	case !(ir.Finite(r.PctOfRoofline) && r.PctOfRoofline > 0):
		return fmt.Errorf("flywheel: corpus pct_of_roofline %v is not a positive number", r.PctOfRoofline)
	case !ir.Finite(r.TS):
		return fmt.Errorf("flywheel: corpus ts %v is not finite", r.TS)
	case r.Schedule.Kind != pyjson.Object:
		return errors.New("flywheel: corpus schedule is not an object")
	case r.LatencyKind != KindMeasuredGPU && r.LatencyKind != KindPredicted:
		return fmt.Errorf("flywheel: corpus latency_kind %q is not measured-gpu or predicted", r.LatencyKind)
	}
	return nil
}

// AppendCorpus appends records to the corpus.jsonl at path, one JSON object
// per line, under the same lock discipline as AppendRows.
func AppendCorpus(path string, recs ...Record) error {
	var body strings.Builder
	for i := range recs {
		if err := recs[i].Check(); err != nil {
			return err
		}
		body.WriteString(pyjson.Compact(recs[i].Value(), false))
		body.WriteByte('\n')
	}
	return appendLocked(path, func(int64, []byte) ([]byte, error) {
		return []byte(body.String()), nil
	})
}

// ReadCorpus reads the corpus at path; skipped counts lines that were not a
// valid amk record (an unterminated last line is a torn write and is not
// counted). A missing file is an empty corpus.
func ReadCorpus(path string) (recs []Record, skipped int, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("flywheel: %w", err)
	}
	recs, skipped = ParseCorpus(data)
	return recs, skipped, nil
}

// ParseCorpus parses corpus.jsonl content (see ReadCorpus).
func ParseCorpus(data []byte) (recs []Record, skipped int) {
	i := bytes.LastIndexByte(data, '\n')
	if i < 0 {
		return nil, 0
	}
	for line := range bytes.SplitSeq(data[:i], []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		v, err := pyjson.Parse(line)
		if err != nil {
			skipped++
			continue
		}
		r, err := RecordFromValue(v)
		if err != nil {
			skipped++
			continue
		}
		recs = append(recs, r)
	}
	return recs, skipped
}

// RecordFromValue decodes one amk corpus object and checks it.
func RecordFromValue(v pyjson.Value) (Record, error) {
	if v.Kind != pyjson.Object {
		return Record{}, errors.New("not an object")
	}
	var r Record
	var errs []string
	r.Model = str(v, "model", &errs)
	r.GPU = str(v, "gpu", &errs)
	r.Regime = str(v, "regime", &errs)
	r.Correctness = str(v, "correctness", &errs)
	r.LatencyUS = num(v, "latency_us", &errs)
	r.BoundUS = num(v, "bound_us", &errs)
	r.PctOfRoofline = num(v, "pct_of_roofline", &errs)
	r.Schedule, _ = v.Get("schedule")
	r.IRVersion = str(v, "ir_version", &errs)
	r.ABIVersion = str(v, "abi_version", &errs)
	r.Notes = str(v, "notes", &errs)
	r.TS = num(v, "ts", &errs)
	r.LatencyKind = str(v, "latency_kind", &errs)
	r.ShapeSource = str(v, "shape_source", &errs)
	if ms, ok := v.Get("model_shape"); ok && ms.Kind == pyjson.Object {
		r.Shape = shapeFromValue(ms)
	} else {
		errs = append(errs, "model_shape")
	}
	if env, ok := v.Get("env"); ok && env.Kind == pyjson.Object {
		r.Env = Env{
			Target: str(env, "target", &errs), Device: str(env, "device", &errs),
			DeviceName: str(env, "device_name", &errs), Driver: str(env, "driver", &errs),
			Toolkit: str(env, "toolkit", &errs), AMKVersion: str(env, "amk_version", &errs),
		}
	} else {
		errs = append(errs, "env")
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("missing or mistyped fields: %s", strings.Join(errs, ", "))
	}
	return r, r.Check()
}

func str(v pyjson.Value, key string, errs *[]string) string {
	f, ok := v.Get(key)
	if !ok || f.Kind != pyjson.String {
		*errs = append(*errs, key)
		return ""
	}
	return f.S
}

func num(v pyjson.Value, key string, errs *[]string) float64 {
	f, ok := v.Get(key)
	x, isNum := f.Float64()
	if !ok || !isNum {
		*errs = append(*errs, key)
		return 0
	}
	return x
}

func shapeFromValue(v pyjson.Value) Shape {
	get := func(k string) int {
		f, ok := v.Get(k)
		if !ok {
			return 0
		}
		x, ok := f.Float64()
		if !ok || !ir.Finite(x) || x < 0 || x > 1<<31 {
			return 0
		}
		return int(x)
	}
	return Shape{
		Hidden: get("hidden"), NLayers: get("n_layers"), NHeads: get("n_heads"),
		NKVHeads: get("n_kv_heads"), HeadDim: get("head_dim"),
		Intermediate: get("intermediate"), Vocab: get("vocab"),
	}
}

// ScheduleKeys are the keys a schedule point's JSON may carry; ImportReference
// drops everything else (dtype, arch, tasks, weight_mb, shape hints).
var ScheduleKeys = []string{
	"tiling", "fusion_grouping", "sm_assignment", "pipelining_depth",
	"page_allocation", "threads_per_block", "smem_bytes_per_block", "kernel_knobs",
}

var shapeKeys = []string{"hidden", "n_layers", "n_heads", "n_kv_heads", "head_dim", "intermediate", "vocab"}

// ImportReference reads a reference corpus.jsonl (flywheel/corpus.jsonl of
// the Python implementation) and converts its usable rows to amk records:
//   - the shape comes from shape keys inside "schedule", else a
//     "model_shape" object, else the model-name regexes (ShapeSource says
//     which; a regex shape is a guess);
//   - the latency kind is "measured-gpu" when the notes say "measured-gpu"
//     or "MEASURED", else "predicted";
//   - a bound_us of 0 (the reference's measured path records none) is
//     derived as latency × 100 / pct; a row where neither is known is skipped;
//   - the schedule keeps only ScheduleKeys.
//
// Rows that are not PASS, not JSON, or lack model, gpu, schedule or a
// positive latency are skipped and counted.
func ImportReference(r io.Reader) (recs []Record, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rec, ok := importLine(line)
		if !ok {
			skipped++
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return recs, skipped, fmt.Errorf("flywheel: import: %w", err)
	}
	return recs, skipped, nil
}

// ImportReferenceFile imports the reference corpus.jsonl at referencePath
// (ImportReference) and appends its usable records to the amk corpus at
// corpusPath; it returns how many it appended and how many lines it
// skipped. Nothing is appended when no line is usable.
func ImportReferenceFile(corpusPath, referencePath string) (imported, skipped int, err error) {
	f, _, err := inputfile.Open(referencePath) // regular files only, never blocks
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	recs, skipped, err := ImportReference(f)
	if err != nil {
		return 0, skipped, err
	}
	if len(recs) == 0 {
		return 0, skipped, nil
	}
	if err := AppendCorpus(corpusPath, recs...); err != nil {
		return 0, skipped, err
	}
	return len(recs), skipped, nil
}

func importLine(line []byte) (Record, bool) {
	v, err := pyjson.Parse(line)
	if err != nil || v.Kind != pyjson.Object {
		return Record{}, false
	}
	text := func(k string) string {
		f, ok := v.Get(k)
		if ok && f.Kind == pyjson.String {
			return f.S
		}
		return ""
	}
	number := func(k string) (float64, bool) {
		f, ok := v.Get(k)
		if !ok {
			return 0, false
		}
		x, ok := f.Float64()
		return x, ok && ir.Finite(x)
	}
	rec := Record{
		Model: text("model"), GPU: text("gpu"), Regime: text("regime"),
		Correctness: CorrectPass, IRVersion: text("ir_version"), ABIVersion: text("abi_version"),
		Notes: text("notes"),
	}
	if c, ok := v.Get("correctness"); ok && !(c.Kind == pyjson.String && c.S == CorrectPass) {
		return Record{}, false
	}
	if rec.Regime == "" {
		rec.Regime = RegimeSingle
	}
	sched, ok := v.Get("schedule")
	if !ok || sched.Kind != pyjson.Object {
		return Record{}, false
	}
	lat, ok := number("latency_us")
	if !ok || lat <= 0 {
		return Record{}, false
	}
	rec.LatencyUS = lat
	bound, _ := number("bound_us")
	pct, hasPct := number("pct_of_roofline")
	switch {
	case bound > 0 && !(hasPct && pct > 0):
		pct, _ = ir.PctOfRoofline(lat, bound)
	case !(bound > 0) && hasPct && pct > 0:
		bound, _ = ir.FloorFromPct(lat, pct)
	case !(bound > 0):
		return Record{}, false
	}
	rec.BoundUS, rec.PctOfRoofline = bound, pct
	rec.TS, _ = number("ts")
	rec.LatencyKind = KindPredicted
	if k := text("latency_kind"); k == KindMeasuredGPU || k == KindPredicted {
		rec.LatencyKind = k
	} else if strings.Contains(rec.Notes, "measured-gpu") || strings.Contains(rec.Notes, "MEASURED") {
		rec.LatencyKind = KindMeasuredGPU
	}
	rec.Shape, rec.ShapeSource = importShape(v, sched, rec.Model)
	rec.Schedule = keepKeys(sched, ScheduleKeys)
	rec.Env = Env{Target: rec.GPU, AMKVersion: "reference-import"}
	if rec.LatencyKind == KindMeasuredGPU {
		rec.Env.Device = "cuda"
	}
	return rec, rec.Check() == nil
}

func importShape(rec, sched pyjson.Value, model string) (Shape, string) {
	for _, k := range shapeKeys {
		if _, ok := sched.Get(k); ok {
			return shapeFromValue(sched), ShapeFromSchedule
		}
	}
	if ms, ok := rec.Get("model_shape"); ok && ms.Kind == pyjson.Object {
		return shapeFromValue(ms), ShapeFromRecord
	}
	return ShapeFromName(model), ShapeFromNameRegex
}

func keepKeys(v pyjson.Value, keys []string) pyjson.Value {
	out := pyjson.ObjectValue()
	for _, m := range v.Obj {
		if slices.Contains(keys, m.Key) {
			out.Set(m.Key, m.Val)
		}
	}
	return out
}
