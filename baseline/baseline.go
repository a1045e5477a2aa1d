package baseline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/vm"
)

// Format is the File format this package reads and writes.
const Format = "amk-baseline-v1"

// MaxFileBytes bounds a baseline file (llama-1b: 128256 logits a position).
const MaxFileBytes = 512 << 20

// File is an implementation's decode of an amk model.
type File struct {
	Format         string `json:"format"`
	Model          string `json:"model"`          // the amk model name it was exported from
	Implementation string `json:"implementation"` // e.g. "transformers 5.17.0 LlamaForCausalLM, bfloat16, static cache"
	DType          string `json:"dtype"`
	// Prompt is the leading part of Inputs given by the caller; the rest of
	// Inputs are the implementation's greedy choices.
	Prompt []int32 `json:"prompt"`
	// Inputs[p] is the token fed at position p; Logits[p] the logits there.
	Inputs []int32          `json:"inputs"`
	Logits [][]float32      `json:"logits"`
	Timing *json.RawMessage `json:"timing,omitempty"` // the implementation's own timing report, carried as is
}

// Read decodes and validates a baseline file of at most MaxFileBytes.
func Read(r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("baseline file larger than %d MiB", MaxFileBytes>>20)
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("baseline file: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

func (f *File) validate() error {
	var problems []string
	if f.Format != Format {
		problems = append(problems, fmt.Sprintf("format %q, want %q", f.Format, Format))
	}
	if len(f.Inputs) == 0 {
		problems = append(problems, "no inputs")
	}
	if len(f.Logits) != len(f.Inputs) {
		problems = append(problems, fmt.Sprintf("%d logit rows for %d inputs", len(f.Logits), len(f.Inputs)))
	}
	if len(f.Prompt) == 0 || len(f.Prompt) > len(f.Inputs) {
		problems = append(problems, fmt.Sprintf("the prompt (%d tokens) must be a non-empty prefix of the inputs (%d)", len(f.Prompt), len(f.Inputs)))
	} else {
		for i, t := range f.Prompt {
			if f.Inputs[i] != t {
				problems = append(problems, fmt.Sprintf("the prompt is not a prefix of the inputs (position %d: %d vs %d)", i, t, f.Inputs[i]))
				break
			}
		}
	}
	for p, row := range f.Logits {
		if len(row) == 0 || len(row) != len(f.Logits[0]) {
			problems = append(problems, fmt.Sprintf("logit row %d has %d values, row 0 has %d", p, len(row), len(f.Logits[0])))
			break
		}
	}
	if len(problems) > 0 {
		return errors.New("baseline file: " + strings.Join(problems, "; "))
	}
	return nil
}

// FromEager is the file amk's own eager oracle writes for cfg and w: the
// prompt, then n greedy tokens (n-1 of them fed back), with the logits of
// every position. It is what an implementation of the same model must match.
func FromEager(cfg model.Config, w model.Weights, prompt []int32, n int, name string) (*File, error) {
	if len(prompt) == 0 || n < 1 || len(prompt)+n-1 > cfg.MaxSeq {
		return nil, fmt.Errorf("want a prompt and 1 <= n with prompt + n - 1 <= max_seq %d", cfg.MaxSeq)
	}
	e, err := model.NewEager(cfg, w)
	if err != nil {
		return nil, err
	}
	f := &File{Format: Format, Model: name, Implementation: "amk eager oracle", DType: cfg.DType.String(),
		Prompt: append([]int32(nil), prompt...)}
	next := prompt[0]
	for p := 0; p < len(prompt)+n-1; p++ {
		if p < len(prompt) {
			next = prompt[p]
		}
		logits, err := e.Step(next, p)
		if err != nil {
			return nil, err
		}
		f.Inputs = append(f.Inputs, next)
		f.Logits = append(f.Logits, logits)
		next = model.Argmax(logits)
	}
	return f, nil
}

// Step is one position of a check.
type Step struct {
	Pos         int     `json:"pos"`
	Input       int32   `json:"input"`
	TheirArgmax int32   `json:"their_argmax"`
	OurArgmax   int32   `json:"our_argmax"`
	MaxAbsErr   float64 `json:"max_abs_err"`
	KL          float64 `json:"kl"` // mean KL(softmax(ours) || softmax(theirs)), nats
	Pass        bool    `json:"pass"`
	Reason      string  `json:"reason,omitempty"`
}

// Report is the outcome of Check.
type Report struct {
	Model          string `json:"model"`
	Implementation string `json:"implementation"`
	DType          string `json:"dtype"`
	Steps          []Step `json:"steps"`
	// ArgmaxAgree counts the positions whose argmaxes agree.
	ArgmaxAgree int    `json:"argmax_agree"`
	Pass        bool   `json:"pass"`
	Reason      string `json:"reason,omitempty"`
}

// Fits reports whether f is a valid file for a model of cfg's shape
// (vocabulary, max_seq, token range), before any weights are loaded.
func (f *File) Fits(cfg model.Config) error {
	if err := f.validate(); err != nil {
		return err
	}
	if len(f.Logits[0]) != cfg.Vocab {
		return fmt.Errorf("the baseline has %d logits a position, model %s has a vocabulary of %d", len(f.Logits[0]), cfg.Name, cfg.Vocab)
	}
	if len(f.Inputs) > cfg.MaxSeq {
		return fmt.Errorf("the baseline has %d positions, model %s has max_seq %d", len(f.Inputs), cfg.Name, cfg.MaxSeq)
	}
	for p, t := range f.Inputs {
		if t < 0 || int(t) >= cfg.Vocab {
			return fmt.Errorf("input %d at position %d is outside the vocabulary [0, %d)", t, p, cfg.Vocab)
		}
	}
	return nil
}

// Check replays f's inputs through amk's eager oracle with cfg and w and
// compares every position's logits at cfg's dtype tolerance. It passes iff
// every position does. An error means the file does not fit the model.
func Check(f *File, cfg model.Config, w model.Weights) (*Report, error) {
	if err := f.Fits(cfg); err != nil {
		return nil, err
	}
	e, err := model.NewEager(cfg, w)
	if err != nil {
		return nil, err
	}
	rep := &Report{Model: f.Model, Implementation: f.Implementation, DType: cfg.DType.String(), Pass: true}
	var failed []string
	for p, tok := range f.Inputs {
		ours, err := e.Step(tok, p)
		if err != nil {
			return nil, err
		}
		cmp := vm.Compare(f.Logits[p], ours, cfg.Vocab, cfg.DType)
		st := Step{Pos: p, Input: tok, TheirArgmax: model.Argmax(f.Logits[p]), OurArgmax: model.Argmax(ours),
			MaxAbsErr: cmp.MaxAbsErr, KL: cmp.KL, Pass: cmp.Pass, Reason: cmp.Reason}
		if st.TheirArgmax == st.OurArgmax {
			rep.ArgmaxAgree++
		}
		if !st.Pass {
			rep.Pass = false
			failed = append(failed, fmt.Sprint(p))
		}
		rep.Steps = append(rep.Steps, st)
	}
	if !rep.Pass {
		rep.Reason = fmt.Sprintf("logits differ beyond the %s tolerance at positions %s", cfg.DType, strings.Join(failed, ", "))
	}
	return rep, nil
}
