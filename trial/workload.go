package trial

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

// Workload is what a schedule is tuned for: Batch sequences decoding
// GenLen tokens each after a prompt of each length in PromptLens. The decode
// steps after a prompt of P tokens run at positions P .. P+GenLen-1; the
// step at position p reads a KV cache of p+1 rows (the prompt's, the tokens
// generated so far, its own). A trial of a workload is evaluated at a few
// of those positions (Positions: the start, middle and end of each
// generation) and its latency is the workload's mean time per decode step,
// interpolated linearly between them.
type Workload struct {
	PromptLens []int `json:"prompt_lens"`
	GenLen     int   `json:"gen_len"`
	// Batch is the number of sequences decoded together (0 means 1).
	Batch int `json:"batch,omitempty"`
}

// Workload defaults and limits.
const (
	DefaultPromptLen = 512
	DefaultGenLen    = 128
	// MaxPromptLens bounds the prompt lengths of one workload (each costs
	// up to three evaluated positions a trial).
	MaxPromptLens = 8
	// MaxContext bounds a workload's context (its last position + 1): a
	// KV cache the evaluators allocate for every layer.
	MaxContext = 1 << 17
	// MaxWorkloadFileBytes bounds a workload file.
	MaxWorkloadFileBytes = 1 << 16
)

// DefaultWorkload is a 512-token prompt, 128 generated tokens, batch 1.
func DefaultWorkload() Workload {
	return Workload{PromptLens: []int{DefaultPromptLen}, GenLen: DefaultGenLen, Batch: 1}
}

// B is the batch, at least 1.
func (w Workload) B() int { return max(1, w.Batch) }

// Check says what is wrong with the workload (nil when nothing is).
func (w Workload) Check() error {
	switch {
	case len(w.PromptLens) == 0:
		return errors.New("workload: no prompt length")
	case len(w.PromptLens) > MaxPromptLens:
		return fmt.Errorf("workload: %d prompt lengths, at most %d", len(w.PromptLens), MaxPromptLens)
	case w.GenLen < 1:
		return fmt.Errorf("workload: gen_len %d must be at least 1", w.GenLen)
	case w.Batch < 0 || w.Batch > schedule.MaxBatch:
		return fmt.Errorf("workload: batch %d must be in [1, %d]", w.Batch, schedule.MaxBatch)
	}
	for _, p := range w.PromptLens {
		if p < 0 {
			return fmt.Errorf("workload: prompt length %d is negative", p)
		}
		if p > MaxContext-w.GenLen {
			return fmt.Errorf("workload: a %d-token prompt and %d generated tokens exceed the largest context amk evaluates, %d", p, w.GenLen, MaxContext)
		}
	}
	return nil
}

// Context is the KV rows the workload needs: its last position + 1.
func (w Workload) Context() int { return slices.Max(w.PromptLens) + w.GenLen }

// WorkloadPosition is one evaluated decode position of a workload and its
// weight in the workload's mean time per step.
type WorkloadPosition struct {
	Pos    int
	Weight float64
}

// Positions are the decode positions a trial of the workload is evaluated
// at, ascending, with their weights (summing to 1): for each prompt length
// P the first, middle and last generated positions P, P+(G-1)/2 and P+G-1
// (fewer when they coincide), weighted so that the weighted sum is the mean
// over the generation's positions of the time interpolated linearly
// between them (the trapezoid rule), each prompt length weighing the same.
func (w Workload) Positions() []WorkloadPosition {
	weights := map[int]float64{}
	for _, p := range w.PromptLens {
		g := w.GenLen
		xs := slices.Compact([]int{p, p + (g-1)/2, p + g - 1})
		share := 1 / float64(len(w.PromptLens))
		if len(xs) == 1 {
			weights[xs[0]] += share
			continue
		}
		span := float64(xs[len(xs)-1] - xs[0])
		for i, x := range xs {
			lo, hi := x, x
			if i > 0 {
				lo = xs[i-1]
			}
			if i < len(xs)-1 {
				hi = xs[i+1]
			}
			weights[x] += share * float64(hi-lo) / 2 / span
		}
	}
	out := make([]WorkloadPosition, 0, len(weights))
	for p, wt := range weights {
		out = append(out, WorkloadPosition{Pos: p, Weight: wt})
	}
	slices.SortFunc(out, func(a, b WorkloadPosition) int { return a.Pos - b.Pos })
	return out
}

// String says the workload in words: "512-token prompt, 128 generated
// tokens, batch 1".
func (w Workload) String() string {
	lens := make([]string, len(w.PromptLens))
	for i, p := range w.PromptLens {
		lens[i] = strconv.Itoa(p)
	}
	prompt := lens[0] + "-token prompt"
	if len(lens) > 1 {
		prompt = "prompts of " + strings.Join(lens, ", ") + " tokens"
	}
	gen := "generated tokens"
	if w.GenLen == 1 {
		gen = "generated token"
	}
	return fmt.Sprintf("%s, %d %s, batch %d", prompt, w.GenLen, gen, w.B())
}

// Name is a short form for ids and file names: "p512-g128", with "-b4"
// for a batch.
func (w Workload) Name() string {
	lens := make([]string, len(w.PromptLens))
	for i, p := range w.PromptLens {
		lens[i] = strconv.Itoa(p)
	}
	s := "p" + strings.Join(lens, "_") + "-g" + strconv.Itoa(w.GenLen)
	if w.B() > 1 {
		s += "-b" + strconv.Itoa(w.B())
	}
	return s
}

// WithBatch is the workload with batch b (b < 1 keeps its own), checked;
// a workload that names a batch above 1 other than b is an error.
func (w Workload) WithBatch(b int) (Workload, error) {
	w.PromptLens = slices.Clone(w.PromptLens)
	if b >= 1 {
		if w.Batch > 1 && w.Batch != b {
			return w, fmt.Errorf("batch %d and the workload's batch %d differ", b, w.Batch)
		}
		w.Batch = b
	}
	w.Batch = w.B()
	return w, w.Check()
}

// Equal reports whether two workloads are the same.
func (w Workload) Equal(o Workload) bool {
	return slices.Equal(w.PromptLens, o.PromptLens) && w.GenLen == o.GenLen && w.B() == o.B()
}

// ReadWorkload reads a workload file: a JSON object with "prompt_lens" (a
// list) or "prompt_len" (one length), "gen_len" and optionally "batch";
// unknown keys, a repeated key, a file over MaxWorkloadFileBytes or a
// workload Check refuses are errors.
func ReadWorkload(r io.Reader) (Workload, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxWorkloadFileBytes+1))
	if err != nil {
		return Workload{}, err
	}
	if len(data) > MaxWorkloadFileBytes {
		return Workload{}, fmt.Errorf("workload file over %d bytes", MaxWorkloadFileBytes)
	}
	var f struct {
		PromptLens []int `json:"prompt_lens"`
		PromptLen  *int  `json:"prompt_len"`
		GenLen     *int  `json:"gen_len"`
		Batch      int   `json:"batch"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Workload{}, fmt.Errorf("workload file: %w", err)
	}
	if dec.More() {
		return Workload{}, errors.New("workload file: more than one JSON value")
	}
	if _, err := pyjson.ParseUnique(data); err != nil { // a repeated key
		return Workload{}, fmt.Errorf("workload file: %w", err)
	}
	switch {
	case f.PromptLen != nil && f.PromptLens != nil:
		return Workload{}, errors.New("workload file: give prompt_len or prompt_lens, not both")
	case f.PromptLen != nil:
		f.PromptLens = []int{*f.PromptLen}
	}
	if f.GenLen == nil {
		return Workload{}, errors.New("workload file: gen_len is missing")
	}
	w := Workload{PromptLens: f.PromptLens, GenLen: *f.GenLen, Batch: max(1, f.Batch)}
	if f.Batch < 0 {
		w.Batch = f.Batch
	}
	return w, w.Check()
}

// ContextConfig is the model config a workload is lowered and checked
// with: cfg itself when its max_seq covers the workload's context;
// otherwise, for a preset (modelSpec names one, quantised or not), cfg
// with max_seq raised to the context — a preset's max_seq (the reference's
// 256) is not a property of its seeded weights, and RoPE takes any
// position — and for a config.json model an error: its
// max_position_embeddings bounds it.
func ContextConfig(cfg model.Config, modelSpec string, w Workload) (model.Config, error) {
	need := w.Context()
	if need <= cfg.MaxSeq {
		return cfg, nil
	}
	name, _, err := model.SplitModelSpec(modelSpec) // a quantised preset ("small:w4a16") is a preset
	if err != nil {
		return cfg, err
	}
	if _, err := model.Preset(name); err != nil {
		return cfg, fmt.Errorf("the workload needs a context of %d positions; %s allows %d (max_position_embeddings)", need, cfg.Name, cfg.MaxSeq)
	}
	cfg.MaxSeq = need
	return cfg, nil
}

// StepFloor is one evaluated position of a workload with its floor: the
// bytes its step streams (weights once, the gathered embedding rows, the
// KV rows attention reads) at the target's spec HBM bandwidth.
type StepFloor struct {
	WorkloadPosition
	StreamedBytes int64
	StreamedUS    float64
}

// StepFloors are the floors of a workload's positions for cfg (the model
// as ContextConfig gives it) on target, and the all-weights bytes; the
// floors do not depend on the schedule point
// (schedule.TestStreamedBytesIndependentOfThePoint), so the default's
// lowerings give them.
func StepFloors(cfg model.Config, target *ir.GpuTarget, w Workload) ([]StepFloor, int64, error) {
	var out []StepFloor
	var weights int64
	for _, p := range w.Positions() {
		prog, err := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{Pos: p.Pos, B: w.B()})
		if err != nil {
			return nil, 0, fmt.Errorf("lowering the default point at pos %d: %w", p.Pos, err)
		}
		sb := prog.StreamedBytes()
		out = append(out, StepFloor{WorkloadPosition: p, StreamedBytes: sb, StreamedUS: target.BandwidthBoundUS(sb)})
		weights = prog.TotalWeightBytes()
	}
	return out, weights, nil
}
