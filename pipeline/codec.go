package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/amk-dev/amk/pyjson"
)

// Format is the "format" value of a schedule file.
const Format = "amk-pipeline/1"

// MaxFileBytes bounds a schedule file.
const MaxFileBytes = 1 << 20

type wireSchedule struct {
	Format     string       `json:"format"`
	Name       string       `json:"name"`
	Note       string       `json:"note,omitempty"`
	Partitions int          `json:"partitions"`
	Quadrants  int          `json:"quadrants"`
	Body       []wireMini   `json:"body"`
	Ordering   string       `json:"ordering"`
	EdgeRules  wireRules    `json:"edge_rules"`
	Prologue   wirePrologue `json:"prologue"`
}

type wireMini struct {
	Ops []wireOp `json:"ops"`
}

type wireOp struct {
	Op       string `json:"op"`
	Sub      *int   `json:"sub,omitempty"`
	Stage    string `json:"stage,omitempty"`
	Quadrant []int  `json:"quadrant,omitempty"`
}

type wireRules struct {
	Base   string     `json:"base"`
	Append []wireRule `json:"append,omitempty"`
}

type wireRule struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Scope       string `json:"scope"`
	ConfigMatch *bool  `json:"config_match,omitempty"`
}

type wirePrologue struct {
	Form      string   `json:"form"`
	Ops       []wireOp `json:"ops,omitempty"`
	Bootstrap []wireOp `json:"bootstrap,omitempty"`
}

// Decode reads a schedule file (at most MaxFileBytes, one JSON object, no
// unknown keys) and validates it; every error says where.
func Decode(data []byte) (*Schedule, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("schedule file is %d bytes: at most %d", len(data), MaxFileBytes)
	}
	// Go's decoder keeps the last of a repeated key and matches keys to
	// fields without regard to case; amk refuses a repeated key in any
	// spelling, as in every document it reads.
	if v, err := pyjson.Parse(data); err == nil {
		if d := pyjson.FindDuplicateKeyFold(v); d != nil {
			return nil, fmt.Errorf("not a pipeline schedule: %v", d)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireSchedule
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("not a pipeline schedule: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not a pipeline schedule: data after the JSON object")
	}
	if w.Format != Format {
		return nil, fmt.Errorf("not a pipeline schedule: format %q, want %q", w.Format, Format)
	}
	var errs []string
	s := &Schedule{Name: w.Name, Note: w.Note, Partitions: w.Partitions, Quadrants: w.Quadrants,
		Ordering: w.Ordering, RuleBase: w.EdgeRules.Base, Prologue: Prologue{Form: w.Prologue.Form}}
	ops := func(where string, in []wireOp) []Op {
		var out []Op
		for i, o := range in {
			op, err := o.op()
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s op %d: %v", where, i+1, err))
				continue
			}
			out = append(out, op)
		}
		return out
	}
	if len(w.Body) > MaxMiniIters {
		return nil, fmt.Errorf("body has %d mini-iters: at most %d", len(w.Body), MaxMiniIters)
	}
	for i, m := range w.Body {
		s.Body = append(s.Body, MiniIter{Ops: ops(fmt.Sprintf("mini-iter %d", i+1), m.Ops)})
	}
	s.Prologue.Ops = ops("prologue", w.Prologue.Ops)
	s.Prologue.Bootstrap = ops("prologue bootstrap", w.Prologue.Bootstrap)
	for _, r := range w.EdgeRules.Append {
		rule := EdgeRule{From: Class(r.From), To: Class(r.To), Scope: Scope(r.Scope), ConfigMatch: true}
		if r.ConfigMatch != nil {
			rule.ConfigMatch = *r.ConfigMatch
		}
		s.RuleAppend = append(s.RuleAppend, rule)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func (o wireOp) op() (Op, error) {
	op := Op{Kind: Kind(o.Op)}
	if !op.Kind.known() {
		return op, fmt.Errorf("unknown op %q (known: LOAD_A, LOAD_B, MMA_LOAD_A, MMA_LOAD_B, MMA, COMPUTE)", o.Op)
	}
	switch op.Kind.Class() {
	case GlobalLoad, FragmentLoad:
		if o.Sub == nil {
			return op, fmt.Errorf("%s needs \"sub\"", o.Op)
		}
		if o.Quadrant != nil {
			return op, fmt.Errorf("%s takes no \"quadrant\"", o.Op)
		}
		op.Sub, op.Stage = *o.Sub, Stage(o.Stage)
		if op.Stage == "" {
			op.Stage = Same
		}
	case MMAClass:
		if len(o.Quadrant) != 2 {
			return op, fmt.Errorf("MMA needs \"quadrant\": [m, n]")
		}
		if o.Sub != nil || o.Stage != "" {
			return op, fmt.Errorf("MMA takes no \"sub\" or \"stage\" (it reads registers)")
		}
		op.Quadrant = [2]int{o.Quadrant[0], o.Quadrant[1]}
	default:
		if o.Sub != nil || o.Stage != "" || o.Quadrant != nil {
			return op, fmt.Errorf("%s takes no \"sub\", \"stage\" or \"quadrant\"", o.Op)
		}
	}
	return op, nil
}

func wireOps(in []Op) []wireOp {
	var out []wireOp
	for _, o := range in {
		w := wireOp{Op: string(o.Kind)}
		switch o.Kind.Class() {
		case GlobalLoad, FragmentLoad:
			sub := o.Sub
			w.Sub, w.Stage = &sub, string(o.Stage)
		case MMAClass:
			w.Quadrant = []int{o.Quadrant[0], o.Quadrant[1]}
		}
		out = append(out, w)
	}
	return out
}

// Encode writes a schedule in the file format (2-space indent, trailing
// newline); Decode(Encode(s)) gives s back.
func Encode(s *Schedule) ([]byte, error) {
	w := wireSchedule{Format: Format, Name: s.Name, Note: s.Note, Partitions: s.Partitions, Quadrants: s.Quadrants,
		Ordering: s.Ordering, EdgeRules: wireRules{Base: s.RuleBase},
		Prologue: wirePrologue{Form: s.Prologue.Form, Ops: wireOps(s.Prologue.Ops), Bootstrap: wireOps(s.Prologue.Bootstrap)}}
	for _, m := range s.Body {
		w.Body = append(w.Body, wireMini{Ops: wireOps(m.Ops)})
	}
	for _, r := range s.RuleAppend {
		wr := wireRule{From: string(r.From), To: string(r.To), Scope: string(r.Scope)}
		if !r.ConfigMatch {
			f := false
			wr.ConfigMatch = &f
		}
		w.EdgeRules.Append = append(w.EdgeRules.Append, wr)
	}
	out, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
