package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

// Client is what the Launcher needs of the launcher child; launch.Client
// over a launch.Supervisor implements it.
type Client interface {
	Hello(ctx context.Context) (*launch.HelloResponse, error)
	Load(ctx context.Context, req *launch.LoadRequest) (*launch.LoadResponse, error)
	Update(ctx context.Context, req *launch.UpdateRequest) error
	Run(ctx context.Context, req *launch.RunRequest) (*launch.RunResponse, error)
	Time(ctx context.Context, req *launch.TimeRequest) (*launch.Comparison, error)
	Read(ctx context.Context, req *launch.ReadRequest) (*launch.RunResponse, error)
	Unload(ctx context.Context, handle string) error
}

// Options tunes the Launcher. Zero values take the defaults.
type Options struct {
	// Target is the operator's target record for this device (the
	// worker's --target); "" recognises it from the device name. Either
	// way a device without a record is refused (docs/spec/rules.md R1).
	Target string
	// Warmup launches per program and interleaved Samples per program.
	Warmup, Samples int
	// WatchdogNS is the per-wait budget of the device watchdog (0: the
	// build's AMK_WATCHDOG_NS).
	WatchdogNS uint64
	// Per-request bounds, on top of the trial's own deadline: a request
	// that outlives one kills the child and fails as a timeout.
	LoadTimeout, RunTimeout, TimeTimeout time.Duration
	// Generation reports the child's generation (launch.Supervisor.Generation):
	// handles loaded in an earlier generation are gone. nil: never changes.
	Generation func() int
}

// Defaults of Options.
const (
	DefaultWarmup      = 5
	DefaultSamples     = 20
	DefaultLoadTimeout = 20 * time.Minute // a cold nvcc build of the VM plus weight upload
	DefaultRunTimeout  = 2 * time.Minute
	DefaultTimeTimeout = 10 * time.Minute
)

func (o *Options) fill() {
	if o.Warmup <= 0 {
		o.Warmup = DefaultWarmup
	}
	if o.Samples <= 0 {
		o.Samples = DefaultSamples
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = DefaultLoadTimeout
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = DefaultRunTimeout
	}
	if o.TimeTimeout <= 0 {
		o.TimeTimeout = DefaultTimeTimeout
	}
	if o.Generation == nil {
		o.Generation = func() int { return 0 }
	}
}

// Handle names the Launcher uses in the child.
const (
	handleCheck     = "check"
	handleCandidate = "cand"
	handleIncumbent = "inc"
)

// Launcher is the trial.Launcher of one CUDA device: it checks the
// candidate's GPU logits against the reference VM's, then times it
// interleaved with the incumbent. It serialises trials (one device, one
// child).
type Launcher struct {
	c      Client
	opts   Options
	info   launch.Info
	target *ir.GpuTarget
	notes  []string
	name   string
	close  func() error
	// emulated: the child serves the CPU emulator (launch.Info.Emulator):
	// its check runs the kernels, its latency is the cost model's.
	emulated bool

	mu       sync.Mutex
	inc      *residentIncumbent
	leftover []string // handles a failed trial may have left loaded
}

// residentIncumbent is the incumbent program kept loaded between trials.
type residentIncumbent struct {
	key string
	gen int
}

// New greets the child and matches its device to a target record.
func New(ctx context.Context, c Client, opts Options) (*Launcher, error) {
	opts.fill()
	hctx, cancel := context.WithTimeout(ctx, opts.RunTimeout)
	defer cancel()
	hello, err := c.Hello(hctx)
	if err != nil {
		return nil, fmt.Errorf("launcher child: %w", err)
	}
	if hello.Protocol != launch.ProtocolVersion {
		return nil, fmt.Errorf("launcher child speaks protocol %d, want %d", hello.Protocol, launch.ProtocolVersion)
	}
	if hello.Sources != kernels.SourceHash() {
		return nil, fmt.Errorf("launcher child compiles kernel sources %.12s, this binary has %.12s: run the same build", hello.Sources, kernels.SourceHash())
	}
	info := hello.Device
	target, notes, err := launch.MatchTarget(info, "")
	if err != nil {
		return nil, err
	}
	if opts.Target != "" && opts.Target != target.Name {
		_, more, err := launch.MatchTarget(info, opts.Target)
		if err != nil {
			return nil, err
		}
		notes = append(notes, more...)
	}
	name := fmt.Sprintf("cuda:%d %s", info.Ordinal, info.Name)
	if info.Emulator {
		name = "emu " + info.Name
	}
	return &Launcher{c: c, opts: opts, info: info, target: target, notes: notes, name: name, emulated: info.Emulator}, nil
}

// what names the device in notes and reasons.
func (l *Launcher) what() string {
	if l.emulated {
		return "emulator"
	}
	return "GPU"
}

// Name implements trial.Launcher.
func (l *Launcher) Name() string { return l.name }

// OnGPU implements trial.GPULauncher: the launcher times on a GPU (not when
// it serves the CPU emulator, which times nothing).
func (l *Launcher) OnGPU() bool { return !l.emulated }

// Emulates implements trial.EmulatorLauncher: true when the child serves the
// CPU emulator (--device emu).
func (l *Launcher) Emulates() bool { return l.emulated }

// Device describes the live GPU.
func (l *Launcher) Device() launch.Info { return l.info }

// Target is the device's target record.
func (l *Launcher) Target() *ir.GpuTarget { return l.target }

// Close stops the child when the Launcher owns it.
func (l *Launcher) Close() error {
	if l.close == nil {
		return nil
	}
	return l.close()
}

// Time implements trial.Launcher: GPU correctness first (a mismatch is a
// *trial.MismatchError, never a latency), then interleaved timing. Device
// failures come back as *trial.LaunchError with the class of the launch
// status (a trap is a crash, the watchdog a timeout, a refusal before
// launch is rejected).
func (l *Launcher) Time(ctx context.Context, req trial.TimeRequest) (_ trial.Timing, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A failed trial may leave its handles loaded; free them before the next.
	for _, h := range l.leftover {
		_ = l.unload(ctx, h)
	}
	l.leftover = nil
	defer func() {
		if err != nil {
			l.leftover = []string{handleCheck, handleCandidate}
		}
	}()
	if req.Model == nil || req.Program == nil || req.Target == nil {
		return trial.Timing{}, errors.New("cuda launcher: incomplete time request")
	}
	notes := l.deviceNotes(req.Target)
	variant, knobNotes, err := variantOf(req.Point)
	if err != nil {
		return trial.Timing{}, &trial.LaunchError{Class: trial.ClassRejected, Phase: "knobs", Message: err.Error()}
	}
	notes = append(notes, knobNotes...)
	ws := weightSource(req.Model)
	if l.emulated {
		return l.emulatedTime(ctx, req, ws, variant, notes)
	}

	chk, err := l.verify(ctx, req, ws, variant)
	if err != nil {
		return trial.Timing{}, err
	}
	notes = append(notes, chk.notes...)
	cand, want := handleCheck, chk.logits
	if !chk.isCandidate {
		_ = l.unload(ctx, handleCheck)
		resp, err := l.load(ctx, handleCandidate, req.Program, ws, variant)
		if err != nil {
			return trial.Timing{}, err
		}
		cand = handleCandidate
		notes = append(notes, l.loadNotes("candidate", resp)...)
		// The full model was checked on a truncation: one untimed launch at
		// the trial's step gives the logits its timed launches must repeat.
		if want, err = l.step(ctx, cand, batchTokens(req.Token, req.Pos, req.Pos, max(1, req.Batch), req.Model.Config.Vocab), req.Pos); err != nil {
			return trial.Timing{}, err
		}
	}
	inc, incNotes, err := l.incumbent(ctx, req, ws, variant, cand)
	if err != nil {
		return trial.Timing{}, err
	}
	notes = append(notes, incNotes...)

	tctx, cancel := context.WithTimeout(ctx, l.opts.TimeTimeout)
	cmp, err := l.c.Time(tctx, &launch.TimeRequest{Candidate: cand, Incumbent: inc, Warmup: l.opts.Warmup, Samples: l.opts.Samples})
	cancel()
	if err != nil {
		return trial.Timing{}, classify(err, "time")
	}
	launches := l.opts.Warmup + l.opts.Samples
	if inc == cand {
		launches *= 2 // the candidate was timed against itself
	}
	if err := l.recheck(ctx, cand, want, req.Model.Config, launches); err != nil {
		return trial.Timing{}, err
	}
	notes = append(notes, fmt.Sprintf("the logits left by the %d timed launches equal the checked launch's bit for bit", launches))
	_ = l.unload(ctx, cand)
	return l.timing(cmp, req.Target.BandwidthBoundUS(req.Program.StreamedBytes()), notes), nil
}

// step launches handle once at pos with the batch's tokens and returns its
// logits.
func (l *Launcher) step(ctx context.Context, handle string, tokens []int32, pos int) ([]float32, error) {
	inputs, err := stepInputs(tokens, pos)
	if err != nil {
		return nil, err
	}
	return l.launchOnce(ctx, handle, inputs, pos)
}

// launchOnce launches handle once with inputs (a step at pos) and returns
// its logits; a status other than OK is a classed error.
func (l *Launcher) launchOnce(ctx context.Context, handle string, inputs map[string]launch.WireTensor, pos int) ([]float32, error) {
	rctx, cancel := context.WithTimeout(ctx, l.opts.RunTimeout)
	res, err := l.c.Run(rctx, &launch.RunRequest{Handle: handle, Inputs: inputs})
	cancel()
	if err != nil {
		return nil, classify(err, "run")
	}
	if err := statusError(res, fmt.Sprintf("run pos %d", pos)); err != nil {
		return nil, err
	}
	return logitsOf(res)
}

// recheck re-reads the logits the timed launches of handle left on the
// device and requires them to equal want bit for bit. Every timed launch ran
// the same step on the same inputs as the checked one, so a difference means
// a race in the schedule (or a faulty device): the trial is incorrect.
func (l *Launcher) recheck(ctx context.Context, handle string, want []float32, cfg model.Config, launches int) error {
	rctx, cancel := context.WithTimeout(ctx, l.opts.RunTimeout)
	res, err := l.c.Read(rctx, &launch.ReadRequest{Handle: handle, Read: []string{schedule.LogitsOutput}})
	cancel()
	if err != nil {
		return classify(err, "recheck")
	}
	got, err := logitsOf(res)
	if err != nil {
		return err
	}
	return l.sameBits(got, want, cfg, fmt.Sprintf("the logits left by the %d timed launches differ from the checked launch's", launches),
		"the schedule races or the device is faulty")
}

// sameBits requires got to equal want bit for bit; a difference is a
// *trial.MismatchError whose reason starts with what and ends with why.
func (l *Launcher) sameBits(got, want []float32, cfg model.Config, what, why string) error {
	differ, first := 0, -1
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if differ++; first < 0 {
				first = i
			}
		}
	}
	if differ == 0 {
		return nil
	}
	cmp := vm.Compare(got, want, cfg.Vocab, cfg.DType)
	cmp.Pass = false
	cmp.Reason = fmt.Sprintf("%s in %d of %d values (first at index %d)", what, differ, len(want), first)
	if first < len(got) && first < len(want) {
		cmp.Reason += fmt.Sprintf(": %g, checked %g", got[first], want[first])
	}
	cmp.Reason += "; " + why
	return &trial.MismatchError{Device: l.name, Comparison: cmp}
}

// emulatedTime is Time on the CPU emulator: the same check as on a GPU (the
// check model through every position, the logits against the reference
// VM), then, when the checked program is the trial's own, a second launch
// of the step under the next thread schedule, whose logits must be the
// same bits (a difference is a race the schedule exposed). The latency is
// the cost model's, labelled predicted: the emulator times nothing.
func (l *Launcher) emulatedTime(ctx context.Context, req trial.TimeRequest, ws launch.WeightSource, v kernels.Variant, notes []string) (trial.Timing, error) {
	chk, err := l.verify(ctx, req, ws, v)
	if err != nil {
		return trial.Timing{}, err
	}
	notes = append(notes, chk.notes...)
	if chk.isCandidate {
		got, err := l.step(ctx, handleCheck, batchTokens(req.Token, req.Pos, req.Pos, max(1, req.Batch), req.Model.Config.Vocab), req.Pos)
		if err != nil {
			return trial.Timing{}, err
		}
		if err := l.sameBits(got, chk.logits, req.Model.Config, "a second emulated launch of the step, under another thread schedule, left logits that differ from the first's",
			"the kernels race"); err != nil {
			return trial.Timing{}, err
		}
		notes = append(notes, "a second emulated launch of the step, under another thread schedule, left the same logits bit for bit")
	} else {
		notes = append(notes, fmt.Sprintf("the emulator ran the %d-layer check model; the full %d-layer program was not run on it",
			req.Model.Check.NLayers, req.Model.Config.NLayers))
	}
	_ = l.unload(ctx, handleCheck)
	t, err := trial.CPULauncher{}.Time(ctx, req)
	if err != nil {
		return trial.Timing{}, err
	}
	t.Notes = append(notes, "latency predicted by the cost model: the CUDA kernels ran on the CPU emulator, which checks correctness and times nothing")
	return t, nil
}

// timing turns the child's comparison into the trial's Timing. The
// candidate's floor check is trial's; an incumbent reading below the
// program's streamed-bytes floor (floorUS) is withheld here the same way
// (launch.FloorGuard), with its ratio.
func (l *Launcher) timing(cmp *launch.Comparison, floorUS float64, notes []string) trial.Timing {
	c := cmp.Candidate
	t := trial.Timing{LatencyUS: c.MedianUS, Kind: trial.KindMeasuredGPU}
	notes = append(notes, fmt.Sprintf("measured-gpu on %s: median %.3f us over %d samples after %d warm-up launches (p10 %.3f, p90 %.3f, spread %.1f%%)",
		l.name, c.MedianUS, c.N, l.opts.Warmup, c.P10US, c.P90US, 100*c.Spread()))
	if cmp.Incumbent != nil {
		inc := cmp.Incumbent.MedianUS
		if ok, note := launch.FloorGuard(inc, floorUS, "streamed-bytes floor"); ok {
			ratio := cmp.Ratio
			t.IncumbentUS, t.Ratio = &inc, &ratio
			notes = append(notes, fmt.Sprintf("incumbent timed interleaved (ABBA) on the same device: median %.3f us, ratio %.4f", inc, ratio))
		} else {
			notes = append(notes, "incumbent: "+note)
		}
	}
	t.Notes = notes
	return t
}

func (l *Launcher) deviceNotes(t *ir.GpuTarget) []string {
	notes := append([]string(nil), l.notes...)
	if t.Name != l.target.Name {
		notes = append(notes, fmt.Sprintf("measured on %s (target record %s) for target %s: floor and labels are %s's; the program's SM placement assumes %d SMs, the device has %d",
			l.info.Name, l.target.Name, t.Name, t.Name, t.NumSMs, l.info.SMs))
	}
	return notes
}

// ---- child requests -------------------------------------------------------------------------

func (l *Launcher) load(ctx context.Context, handle string, p *ir.Program, ws launch.WeightSource, v kernels.Variant) (*launch.LoadResponse, error) {
	lctx, cancel := context.WithTimeout(ctx, l.opts.LoadTimeout)
	defer cancel()
	resp, err := l.c.Load(lctx, &launch.LoadRequest{Handle: handle, Program: ir.Encode(p), Variant: v, Weights: ws, WatchdogNS: l.opts.WatchdogNS})
	if err != nil {
		return nil, classify(err, "load")
	}
	return resp, nil
}

func (l *Launcher) unload(ctx context.Context, handle string) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.RunTimeout)
	defer cancel()
	return l.c.Unload(uctx, handle)
}

func (l *Launcher) loadNotes(what string, r *launch.LoadResponse) []string {
	li := r.Launch
	out := []string{fmt.Sprintf("%s launch: grid %d x %d threads, %d B dynamic smem, %d registers, %d co-resident blocks/SM proven",
		what, li.Grid, li.Threads, li.Smem, li.Registers, li.BlocksPerSM)}
	if l.emulated {
		out[0] = fmt.Sprintf("%s launch: grid %d x %d threads, %d B dynamic smem, on the CPU emulator (one OS thread per block, one fiber per thread)",
			what, li.Grid, li.Threads, li.Smem)
	}
	for _, n := range r.Notes {
		out = append(out, what+": "+n)
	}
	return out
}

// incumbent loads (or reuses) the incumbent program and returns its handle
// ("" when there is none to time). A problem with the incumbent is not the
// candidate's: a refusal times the candidate alone with a note; a child
// failure is an infrastructure failure (retried).
func (l *Launcher) incumbent(ctx context.Context, req trial.TimeRequest, ws launch.WeightSource, candVariant kernels.Variant, cand string) (string, []string, error) {
	if req.Incumbent == nil {
		return "", nil, nil
	}
	ip := *req.Incumbent
	iv, _, err := variantOf(ip)
	if err != nil {
		return "", []string{"incumbent not timed: " + err.Error()}, nil
	}
	if ip.ID() == req.Point.ID() && iv.String() == candVariant.String() {
		return cand, []string{"incumbent is the candidate itself: timed against its own handle"}, nil
	}
	cfg := lowering(req)
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%s\x00%q", ip.ID(), req.Target.Name, req.Pos, cfg.MaxSeq, ws.Model, ws.Paths)
	if l.inc != nil && l.inc.key == key && l.inc.gen == l.opts.Generation() {
		return handleIncumbent, nil, nil
	}
	l.inc = nil
	prog, err := schedule.Lower(cfg, req.Target, ip, schedule.LowerOptions{Pos: req.Pos, B: max(1, req.Batch)})
	if err != nil {
		return "", []string{"incumbent not timed: lowering failed: " + err.Error()}, nil
	}
	if rep := validate.Validate(prog); !rep.OK {
		return "", []string{"incumbent not timed: " + rep.Reason(2)}, nil
	}
	resp, err := l.load(ctx, handleIncumbent, prog, ws, iv)
	if err != nil {
		var le *trial.LaunchError
		if errors.As(err, &le) && le.Class == trial.ClassRejected {
			return "", []string{"incumbent not timed: " + le.Message}, nil
		}
		return "", nil, &trial.LaunchError{Class: trial.FailInfra, Phase: "incumbent", Message: err.Error()}
	}
	l.inc = &residentIncumbent{key: key, gen: l.opts.Generation()}
	return handleIncumbent, l.loadNotes("incumbent", resp), nil
}

// lowering is the model config the request's programs were lowered with:
// req.Config (a workload's context), or the model's own.
func lowering(req trial.TimeRequest) model.Config {
	if req.Config.Name == "" {
		return req.Model.Config
	}
	return req.Config
}

// classify maps a child failure to a trial.LaunchError with its class.
func classify(err error, phase string) error {
	var re *launch.RemoteError
	if errors.As(err, &re) {
		return &trial.LaunchError{Class: trial.FailClass(re.Class), Phase: phase, Message: re.Message}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &trial.LaunchError{Class: trial.FailCrash, Phase: phase, Message: err.Error()}
}

// statusError turns a non-OK launch status into a classed error.
func statusError(r *launch.RunResponse, phase string) error {
	if r.Status == launch.StatusOK {
		return nil
	}
	msg := string(r.Status)
	if r.Message != "" {
		msg += ": " + r.Message
	}
	return &trial.LaunchError{Class: trial.FailClass(r.Status.Class()), Phase: phase, Message: msg}
}
