package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/vm"
)

// Device builds, loads, runs and times variants of a case's kernel: the
// one thing Loop 1 needs of a GPU (LaunchDevice implements it over
// kernels/launch; tests use fakes).
type Device interface {
	// Name labels the device in the summary ("cuda:0 NVIDIA H200").
	Name() string
	// Notes are remarks about measuring for target on this device (a
	// device whose target record is another one).
	Notes(target *ir.GpuTarget) []string
	// Prepare builds variant v and loads c. A variant that does not
	// compile is a *BuildError; any other error is a device failure.
	Prepare(ctx context.Context, c *Case, v kernels.Variant) (Prepared, error)
}

// Prepared is one variant loaded with one case.
type Prepared interface {
	// Run launches the case's tasks once and reads back its outputs.
	Run(ctx context.Context) (map[int]*tensor.Tensor, error)
	// Time launches them warmup + samples times, timing each sample with
	// CUDA events.
	Time(ctx context.Context, warmup, samples int) (launch.Stats, error)
	Close() error
}

// BuildError is a variant that did not compile.
type BuildError struct{ Err error }

func (e *BuildError) Error() string { return "build failed: " + e.Err.Error() }
func (e *BuildError) Unwrap() error { return e.Err }

// Options configures Tune.
type Options struct {
	Op     ir.Op
	DType  ir.DType
	Target *ir.GpuTarget
	Budget int // variants to try, >= 1
	// Results is the results.tsv the trials are appended to ("" = none).
	Results string
	// Warmup and Samples time the first correct variant; each later
	// correct variant is timed against the best so far in Rounds
	// alternating (ABBA) rounds of Samples/Rounds samples each.
	Warmup, Samples, Rounds int
	// MinGain is the strict win a variant needs over the best (0.01).
	MinGain float64
	// Quant, when on, tunes the quantised GEMV: the case model's
	// projections quantised (Op must be GEMV_TILE).
	Quant model.Quantization
	// Case, when set, replaces NewCase(Op, DType, Target, "").
	Case *Case
	// Log receives one progress line per trial (stderr); nil = none.
	Log io.Writer
}

// Defaults of Options.
const (
	DefaultWarmup  = 10
	DefaultSamples = 100
	DefaultRounds  = 4
	DefaultMinGain = 0.01
)

// Trial is one variant's outcome (trials_detail).
type Trial struct {
	Trial         int      `json:"trial"`
	Variant       string   `json:"variant"`
	Defines       []string `json:"defines"`
	Built         bool     `json:"built"`
	Correct       bool     `json:"correct"`
	Correctness   string   `json:"correctness"`
	MaxRelErr     *float64 `json:"max_rel_err"`
	LatencyUS     *float64 `json:"latency_us"`
	IncumbentUS   *float64 `json:"incumbent_us,omitempty"`
	Ratio         *float64 `json:"ratio,omitempty"`
	Spread        *float64 `json:"spread,omitempty"`
	PctOfRoofline *float64 `json:"pct_of_roofline"`
	Kept          bool     `json:"kept"`
	Note          string   `json:"note"`
}

// Summary is the seed-001 Loop-1 JSON (plus the case and notes).
type Summary struct {
	Op            string   `json:"op"`
	GPU           string   `json:"gpu"`
	DType         string   `json:"dtype"`
	Quantization  string   `json:"quantization,omitempty"` // the case's weight scheme (model.Quantization), if any
	Device        string   `json:"device"`
	Trials        int      `json:"trials"`
	NCorrect      int      `json:"n_correct"`
	BestVariant   *string  `json:"best_variant"`
	BestUS        *float64 `json:"best_us"`
	BaselineUS    *float64 `json:"baseline_us"`
	Speedup       *float64 `json:"speedup"`
	AllCorrect    bool     `json:"all_correct"`
	PctOfRoofline *float64 `json:"pct_of_roofline"`
	BoundUS       *float64 `json:"bound_us"`
	OpBytes       int64    `json:"op_bytes"`
	Blocks        int      `json:"blocks"` // blocks of one launch: one per task of the case (per-SM rate = op_bytes / best_us / blocks)
	ResultsTSV    string   `json:"results_tsv"`
	TrialsDetail  []Trial  `json:"trials_detail"`
	Case          string   `json:"case"`
	Notes         []string `json:"notes"`
}

// OK is the verb's success: every built variant was correct and a correct
// best was found.
func (s *Summary) OK() bool { return s.AllCorrect && s.BestVariant != nil }

// DTypeName is the command-line spelling of a case dtype.
func DTypeName(dt ir.DType) string {
	switch dt {
	case ir.F32:
		return "fp32"
	case ir.F16:
		return "fp16"
	case ir.BF16:
		return "bf16"
	}
	return dt.String()
}

// ParseDType reads fp32, fp16 or bf16.
func ParseDType(s string) (ir.DType, error) {
	for _, dt := range []ir.DType{ir.F32, ir.F16, ir.BF16} {
		if s == DTypeName(dt) {
			return dt, nil
		}
	}
	return 0, fmt.Errorf("--dtype must be fp32, fp16 or bf16, got %q", s)
}

func (o *Options) fill() error {
	if o.Target == nil {
		return errors.New("tune: no target")
	}
	if o.Budget < 1 {
		return errors.New("tune-instruction budget must be >= 1")
	}
	if o.Warmup <= 0 {
		o.Warmup = DefaultWarmup
	}
	if o.Samples <= 0 {
		o.Samples = DefaultSamples
	}
	if o.Rounds <= 0 {
		o.Rounds = DefaultRounds
	}
	if o.MinGain <= 0 {
		o.MinGain = DefaultMinGain
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// slot is a correct, timed variant kept loaded for side-by-side timing.
type slot struct {
	prep  Prepared
	label string
	us    float64
}

// loop is one Tune run's state.
type loop struct {
	opts    Options
	dev     Device
	c       *Case
	ref     []float32
	boundUS float64
	sum     *Summary
	best    *slot
	base    *slot // variant 0, when correct
}

// Tune runs Loop 1 on one op: for each proposal build, verify against the
// reference VM on the case, time only correct variants (each against the
// best so far, interleaved on the same device, docs/spec/rules.md R7), keep on a strict
// MinGain win, and log one results.tsv row per trial. Rows are appended as
// trials finish. The error is for a run that could not proceed (no case, a
// results file refused, cancellation); variant failures are trial outcomes.
func Tune(ctx context.Context, dev Device, opts Options) (*Summary, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	c := opts.Case
	if c == nil {
		var err error
		name := ""
		if opts.Quant.On() {
			name = model.ModelSpec(CaseModel, opts.Quant)
		}
		if c, err = NewCase(opts.Op, opts.DType, opts.Target, name); err != nil {
			return nil, err
		}
	}
	opts.Op, opts.DType = c.Op, c.DType
	refOut, err := c.Reference()
	if err != nil {
		return nil, fmt.Errorf("reference VM on the case: %w", err)
	}
	l := &loop{opts: opts, dev: dev, c: c, ref: flatten(c.Outputs, refOut), boundUS: opts.Target.BandwidthBoundUS(c.OpBytes)}
	l.sum = &Summary{Op: OpName(c.Op), GPU: opts.Target.Name, DType: DTypeName(c.DType), Quantization: c.Quant.String(), Device: dev.Name(),
		AllCorrect: true, OpBytes: c.OpBytes, Blocks: len(c.Program.Tasks), ResultsTSV: opts.Results, TrialsDetail: []Trial{}, Case: c.Describe,
		Notes: append([]string{}, dev.Notes(opts.Target)...)}
	if finitePositive(l.boundUS) {
		b := round(l.boundUS, 6)
		l.sum.BoundUS = &b
	}
	defer l.closeAll()
	fmt.Fprintf(opts.Log, "amk Loop 1 | tune-instruction %s | device %s | gpu (roofline) %s | dtype %s | budget %d\n  case: %s\n",
		l.sum.Op, l.sum.Device, l.sum.GPU, l.sum.DType, opts.Budget, c.Describe)
	for i, v := range ProposalsFor(c.Op, c.Quant.On(), opts.Budget) {
		if err := ctx.Err(); err != nil {
			return l.sum, err
		}
		tr := l.trial(ctx, i, v)
		l.sum.TrialsDetail = append(l.sum.TrialsDetail, tr)
		if err := l.log(tr); err != nil {
			return l.sum, err
		}
	}
	l.sum.Trials = len(l.sum.TrialsDetail)
	l.finish(ctx)
	return l.sum, nil
}

// trial evaluates one variant.
func (l *loop) trial(ctx context.Context, i int, v kernels.Variant) Trial {
	label := Label(v)
	defines, _ := v.Defines()
	tr := Trial{Trial: i, Variant: label, Defines: defines}
	prep, err := l.dev.Prepare(ctx, l.c, v)
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			tr.Correctness, tr.Note = flywheel.CorrectCrash, err.Error()
			return tr
		}
		return l.crashed(tr, "load failed: "+err.Error())
	}
	tr.Built = true
	keepOpen := false
	defer func() {
		if !keepOpen {
			_ = prep.Close()
		}
	}()
	out, err := prep.Run(ctx)
	if err != nil {
		return l.crashed(tr, "run failed: "+err.Error())
	}
	cmp := vm.Compare(flatten(l.c.Outputs, out), l.ref, 1, l.c.DType)
	if ir.Finite(cmp.MaxRelErr) {
		e := round(cmp.MaxRelErr, 8)
		tr.MaxRelErr = &e
	}
	if !cmp.Pass {
		l.sum.AllCorrect = false
		tr.Correctness, tr.Note = flywheel.CorrectFail, "numerics mismatch: "+cmp.Reason
		return tr
	}
	us, spread, incUS, err := l.time(ctx, prep)
	if err != nil {
		return l.crashed(tr, "timing failed: "+err.Error())
	}
	tr.Correct, tr.Correctness = true, flywheel.CorrectPass
	l.sum.NCorrect++
	if ir.Finite(spread) {
		tr.Spread = new(round(spread, 4))
	}
	if incUS > 0 {
		tr.IncumbentUS, tr.Ratio = new(round(incUS, 4)), new(round(us/incUS, 4))
	}
	if ok, note := launch.FloorGuard(us, l.boundUS, "op-bytes floor"); !ok {
		tr.Note = note
		return tr
	}
	tr.LatencyUS = new(round(us, 4))
	tr.PctOfRoofline = l.pct(us)
	// Correctness first, then a strict MinGain win over the best so far,
	// both timed side by side.
	if l.best == nil || us < incUS*(1-l.opts.MinGain) {
		tr.Kept, keepOpen = true, true
		s := &slot{prep: prep, label: label, us: us}
		if l.best != nil && l.best != l.base {
			_ = l.best.prep.Close()
		}
		l.best = s
		if i == 0 {
			l.base = s
		}
	}
	return tr
}

// crashed records a device failure after a successful build: the variant
// is not correct.
func (l *loop) crashed(tr Trial, note string) Trial {
	l.sum.AllCorrect = false
	tr.Correctness, tr.Note = flywheel.CorrectCrash, note
	return tr
}

// time measures a correct variant: alone when nothing is kept yet, else
// interleaved with the best. It returns the candidate's median, its
// spread, and the best's median (0 when alone).
func (l *loop) time(ctx context.Context, p Prepared) (us, spread, bestUS float64, err error) {
	if l.best == nil {
		st, err := p.Time(ctx, l.opts.Warmup, l.opts.Samples)
		if err != nil {
			return 0, 0, 0, err
		}
		return st.MedianUS, st.Spread(), 0, nil
	}
	a, b, err := l.interleave(ctx, p, l.best.prep)
	if err != nil {
		return 0, 0, 0, err
	}
	return a.MedianUS, a.Spread(), b.MedianUS, nil
}

// interleave times a and b in alternating rounds (a b, b a, ...) and returns
// for each the median of the round medians, with the spread of those.
func (l *loop) interleave(ctx context.Context, a, b Prepared) (launch.Stats, launch.Stats, error) {
	per := max(1, l.opts.Samples/l.opts.Rounds)
	var ma, mb []float64
	for r := 0; r < l.opts.Rounds; r++ {
		warm := l.opts.Warmup
		if r > 0 {
			warm = min(2, warm)
		}
		order := []Prepared{a, b}
		if r%2 == 1 {
			order = []Prepared{b, a}
		}
		for _, p := range order {
			st, err := p.Time(ctx, warm, per)
			if err != nil {
				return launch.Stats{}, launch.Stats{}, err
			}
			if p == a {
				ma = append(ma, st.MedianUS)
			} else {
				mb = append(mb, st.MedianUS)
			}
		}
	}
	return launch.Summarize(ma), launch.Summarize(mb), nil
}

// finish fills the best and the baseline: when a variant beat the default,
// both are re-timed side by side so that the speedup compares one session.
func (l *loop) finish(ctx context.Context) {
	s := l.sum
	if l.best == nil {
		return
	}
	label := l.best.label
	s.BestVariant = &label
	best, base := l.best.us, 0.0
	switch {
	case l.base == l.best:
		base = best
	case l.base != nil:
		a, b, err := l.interleave(ctx, l.best.prep, l.base.prep)
		if err == nil && a.MedianUS > 0 && b.MedianUS > 0 {
			best, base = a.MedianUS, b.MedianUS
			s.Notes = append(s.Notes, "best_us and baseline_us re-timed side by side (interleaved rounds) at the end")
		} else {
			base = l.base.us
			s.Notes = append(s.Notes, fmt.Sprintf("final side-by-side timing failed (%v); best and baseline come from their trials", err))
		}
	default:
		s.Notes = append(s.Notes, "the default variant was not correct: no baseline")
	}
	s.BestUS = new(round(best, 4))
	s.PctOfRoofline = l.pct(best)
	if base > 0 {
		s.BaselineUS = new(round(base, 4))
		s.Speedup = new(round(base/best, 4))
	}
}

func (l *loop) closeAll() {
	if l.base != nil {
		_ = l.base.prep.Close()
	}
	if l.best != nil && l.best != l.base {
		_ = l.best.prep.Close()
	}
}

// pct is latency / floor × 100 (docs/spec/rules.md R9), nil without a floor.
func (l *loop) pct(us float64) *float64 {
	pct, ok := ir.PctOfRoofline(us, l.boundUS)
	if !ok {
		return nil
	}
	return &pct
}

// log writes the trial's row and its progress line.
func (l *loop) log(tr Trial) error {
	tag := flywheel.TagTried
	switch {
	case tr.Kept:
		tag = flywheel.TagKept
	case !tr.Built:
		tag = flywheel.TagRejected
	case tr.Correctness == flywheel.CorrectCrash:
		tag = flywheel.TagCrash
	case !tr.Correct:
		tag = flywheel.TagRevert
	}
	lat := "   --   "
	if tr.LatencyUS != nil {
		lat = fmt.Sprintf("%8.3fus", *tr.LatencyUS)
	}
	fmt.Fprintf(l.opts.Log, "  [%-7s] %-40s %s %s\n", tag, tr.Variant, lat, tr.Note)
	if l.opts.Results == "" {
		return nil
	}
	relErr := "n/a"
	if tr.MaxRelErr != nil {
		relErr = fmt.Sprintf("%.2e", *tr.MaxRelErr)
	}
	inst := "inst:" + l.sum.Op
	if l.sum.Quantization != "" {
		inst += ":" + l.sum.Quantization // a quantised GEMV is another kernel
	}
	row := flywheel.Row{Experiment: tr.Trial, Tag: tag, Loop: flywheel.LoopInstruction, Model: inst,
		GPU: l.sum.GPU, Regime: flywheel.RegimeSingle, Correctness: tr.Correctness, LatencyUS: tr.LatencyUS,
		PctOfRoofline: tr.PctOfRoofline, KernelID: l.sum.Op + "[" + tr.Variant + "]",
		Description: flywheel.ClipDescription(fmt.Sprintf("dtype=%s; %s; max_rel_err=%s; %s", l.sum.DType, tr.Variant, relErr, tr.Note))}
	if err := flywheel.AppendRows(l.opts.Results, row); err != nil {
		return fmt.Errorf("results.tsv: %w", err)
	}
	return nil
}

// flatten concatenates the outputs' values in id order.
func flatten(ids []int, out map[int]*tensor.Tensor) []float32 {
	var vals []float32
	for _, id := range slices.Sorted(slices.Values(ids)) {
		if t := out[id]; t != nil {
			vals = append(vals, t.Floats()...)
		}
	}
	return vals
}

func finitePositive(x float64) bool { return ir.Finite(x) && x > 0 }

func round(x float64, n int) float64 { return ir.RoundTo(x, n) }
