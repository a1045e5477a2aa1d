package pipeline

import (
	"fmt"
	"strings"
)

// Kind is an op of a pipeline schedule.
type Kind string

// Op kinds (those of AMD's 4-wave schedule, docs/spec/formats.md §3).
const (
	LoadA    Kind = "LOAD_A"     // A sub-tile DRAM -> LDS (a stage)
	LoadB    Kind = "LOAD_B"     // B sub-tile DRAM -> LDS
	MMALoadA Kind = "MMA_LOAD_A" // A fragment LDS (a stage, a sub-tile) -> register quadrant A_quad[sub]
	MMALoadB Kind = "MMA_LOAD_B" // B fragment LDS -> B_quad[sub]
	MMA      Kind = "MMA"        // matrix instructions on quadrant (m, n): reads A_quad[m], B_quad[n]
	Compute  Kind = "COMPUTE"    // a generic op with no pipeline dependencies
)

func (k Kind) known() bool {
	switch k {
	case LoadA, LoadB, MMALoadA, MMALoadB, MMA, Compute:
		return true
	}
	return false
}

// Class groups kinds the way edge rules and wait counters see them.
type Class string

// Op classes.
const (
	GlobalLoad   Class = "GLOBAL_LOAD"   // LOAD_A, LOAD_B: counted by the global (vm) counter
	FragmentLoad Class = "FRAGMENT_LOAD" // MMA_LOAD_A, MMA_LOAD_B: counted by the LDS (lgkm) counter
	MMAClass     Class = "MMA"
	ComputeClass Class = "COMPUTE"
)

// Class of a kind.
func (k Kind) Class() Class {
	switch k {
	case LoadA, LoadB:
		return GlobalLoad
	case MMALoadA, MMALoadB:
		return FragmentLoad
	case MMA:
		return MMAClass
	}
	return ComputeClass
}

// Operand is "A" or "B" for the load kinds, "" otherwise.
func (k Kind) Operand() string {
	switch k {
	case LoadA, MMALoadA:
		return "A"
	case LoadB, MMALoadB:
		return "B"
	}
	return ""
}

// Stage is an op's LDS stage relative to its partition: the partition's own
// stage, or the next one (the stage the next partition computes on).
type Stage string

// Relative stages.
const (
	Same  Stage = "same"
	Cross Stage = "cross"
)

func (s Stage) offset() int {
	if s == Cross {
		return 1
	}
	return 0
}

// Op is one op of a mini-iter. Sub is the LDS sub-tile a load writes or a
// fragment load reads, which is also the register quadrant a fragment load
// writes; Stage applies to the loads; Quadrant is an MMA's (m, n).
type Op struct {
	Kind     Kind
	Sub      int
	Stage    Stage
	Quadrant [2]int
}

func (o Op) String() string {
	switch o.Kind.Class() {
	case GlobalLoad, FragmentLoad:
		return fmt.Sprintf("%s[stage=%s, sub=%d]", o.Kind, o.Stage, o.Sub)
	case MMAClass:
		return fmt.Sprintf("MMA(%d,%d)", o.Quadrant[0], o.Quadrant[1])
	}
	return string(o.Kind)
}

// MiniIter is one mini-iteration of the body: its ops in declaration order
// (the 4-wave schedule's are LOAD, FRAG, MMA).
type MiniIter struct {
	Ops []Op
}

// Ordering strategies: how the declared body becomes the issue order.
const (
	// Identity issues the body as declared (SchedulingStrategy.IDENTITY).
	Identity = "identity"
	// DoubleBufferReorder is the framework's MMA-block interleave: for each
	// MMA in order, the first unplaced fragment load of each operand
	// quadrant the MMA reads (matched by sub-tile, ignoring the stage), then
	// the next global load, then the MMA; leftovers go last.
	DoubleBufferReorder = "double_buffer_reorder"
)

// Scope of an edge rule: where the producer is relative to the consumer.
type Scope string

// Scopes.
const (
	SameHalf  Scope = "same_half"  // the same partition instance
	CrossHalf Scope = "cross_half" // an earlier partition instance
	AnyHalf   Scope = "any"
)

// EdgeRule is one dependency-edge rule of the wait derivation: the derived
// waits make a From op complete before a To op issues when both are in the
// rule's scope. ConfigMatch (the default) keeps only producers touching the
// consumer's operand, sub-tile and stage (a fragment load feeding the MMA's
// quadrant, a load feeding the fragment's slot, a fragment reading the slot
// a load overwrites); without it any earlier op of the From class is drained.
type EdgeRule struct {
	From        Class
	To          Class
	Scope       Scope
	ConfigMatch bool
}

func (r EdgeRule) String() string {
	s := fmt.Sprintf("%s -> %s (%s)", r.From, r.To, r.Scope)
	if !r.ConfigMatch {
		s += " without config match"
	}
	return s
}

// The dependency kinds an edge rule can name: RAW on an LDS slot, RAW on a
// register quadrant, WAR on an LDS slot.
var ruleKinds = map[[2]Class]string{
	{GlobalLoad, FragmentLoad}: "a fragment load reads the LDS slot a global load wrote",
	{FragmentLoad, MMAClass}:   "an MMA reads the register quadrant a fragment load wrote",
	{FragmentLoad, GlobalLoad}: "a global load overwrites the LDS slot a fragment load reads",
}

// Named rule sets.
const (
	// RulesDoubleBufferDefault is the framework's double_buffer_edge_rules:
	// loads before the fragment loads of their slot, fragment loads before
	// the MMAs of the same half (Phase 1: same_half, config match),
	// fragment loads before a load overwrites their slot.
	RulesDoubleBufferDefault = "double_buffer_default"
	// RulesNone derives no waits.
	RulesNone = "none"
)

// RuleSet returns a named rule set.
func RuleSet(name string) ([]EdgeRule, error) {
	switch name {
	case RulesDoubleBufferDefault:
		return []EdgeRule{
			{From: GlobalLoad, To: FragmentLoad, Scope: AnyHalf, ConfigMatch: true},
			{From: FragmentLoad, To: MMAClass, Scope: SameHalf, ConfigMatch: true},
			{From: FragmentLoad, To: GlobalLoad, Scope: AnyHalf, ConfigMatch: true},
		}, nil
	case RulesNone:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown edge rule set %q (known: %s, %s)", name, RulesDoubleBufferDefault, RulesNone)
}

// CrossHalfFragmentRule is the rule the 4-wave schedule appends: register
// flow from a fragment load of one half to an MMA of a later half.
var CrossHalfFragmentRule = EdgeRule{From: FragmentLoad, To: MMAClass, Scope: CrossHalf, ConfigMatch: true}

// Prologue forms.
const (
	// PrologueDerived is the framework's derive_prologue_from_program: fill
	// every stage s with k-block s, then, for each register quadrant the
	// first partition reads before writing, issue the body's fragment load
	// of that quadrant (its last one in the body) at partition 0.
	PrologueDerived = "derived"
	// PrologueExplicit issues Ops (stages relative to partition 0) and
	// nothing else.
	PrologueExplicit = "explicit"
)

// Prologue is what runs before the first main iteration: the derived or
// explicit ops, then Bootstrap (the 4-wave kernel's explicit pair), then a
// full drain of both counters.
type Prologue struct {
	Form      string
	Ops       []Op
	Bootstrap []Op
}

// Schedule is an instruction-level pipeline schedule of one GEMM tile's
// K-loop, as data: per main iteration, Partitions K-partitions (halves of
// a double buffer: partition p computes on LDS stage p and k-block
// iteration*Partitions+p), each running Body; register quadrants A_quad[i]
// and B_quad[i] for i < Quadrants, LDS sub-tiles likewise per stage.
type Schedule struct {
	Name       string
	Note       string
	Partitions int
	Quadrants  int
	Body       []MiniIter
	Ordering   string
	RuleBase   string     // a named rule set
	RuleAppend []EdgeRule // rules added to the base (derive_edges overrides)
	Prologue   Prologue
}

// Rules is the schedule's full rule set.
func (s *Schedule) Rules() []EdgeRule {
	base, _ := RuleSet(s.RuleBase)
	return append(base, s.RuleAppend...)
}

// Limits on a schedule (everything from outside is bounded).
const (
	Partitions    = 2 // K-partitions (halves) per main iteration
	MaxQuadrants  = 4
	MaxMiniIters  = 32
	MaxOpsPerMini = 16
	MaxRules      = 16
	MaxPrologue   = 64
)

// Validate reports every structural problem ("not a schedule"), joined.
func (s *Schedule) Validate() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if s.Partitions != Partitions {
		bad("partitions=%d: want %d (two halves of a double buffer, one LDS stage each; deeper pipelines are "+
			"not modelled)", s.Partitions, Partitions)
	}
	if s.Quadrants < 1 || s.Quadrants > MaxQuadrants {
		bad("quadrants=%d: want 1..%d", s.Quadrants, MaxQuadrants)
	}
	if len(s.Body) == 0 || len(s.Body) > MaxMiniIters {
		bad("body has %d mini-iters: want 1..%d", len(s.Body), MaxMiniIters)
	}
	mmas := 0
	for i, m := range s.Body {
		if len(m.Ops) == 0 || len(m.Ops) > MaxOpsPerMini {
			bad("mini-iter %d has %d ops: want 1..%d", i+1, len(m.Ops), MaxOpsPerMini)
		}
		for j, o := range m.Ops {
			if err := s.checkOp(o); err != nil {
				bad("mini-iter %d op %d: %v", i+1, j+1, err)
			}
			if o.Kind == MMA {
				mmas++
			}
		}
	}
	if mmas == 0 && len(s.Body) > 0 {
		bad("the body has no MMA")
	}
	if s.Ordering != Identity && s.Ordering != DoubleBufferReorder {
		bad("ordering %q: want %s or %s", s.Ordering, Identity, DoubleBufferReorder)
	}
	if _, err := RuleSet(s.RuleBase); err != nil {
		bad("edge_rules.base: %v", err)
	}
	if len(s.RuleAppend) > MaxRules {
		bad("edge_rules.append has %d rules: at most %d", len(s.RuleAppend), MaxRules)
	}
	for i, r := range s.RuleAppend {
		if _, ok := ruleKinds[[2]Class{r.From, r.To}]; !ok {
			bad("edge_rules.append[%d]: no dependency runs %s -> %s (known: GLOBAL_LOAD -> FRAGMENT_LOAD, "+
				"FRAGMENT_LOAD -> MMA, FRAGMENT_LOAD -> GLOBAL_LOAD)", i, r.From, r.To)
		}
		if r.Scope != SameHalf && r.Scope != CrossHalf && r.Scope != AnyHalf {
			bad("edge_rules.append[%d]: scope %q: want same_half, cross_half or any", i, r.Scope)
		}
	}
	switch s.Prologue.Form {
	case PrologueDerived:
		if len(s.Prologue.Ops) > 0 {
			bad("prologue: the derived form takes no ops (use bootstrap, or the explicit form)")
		}
	case PrologueExplicit:
	default:
		bad("prologue.form %q: want %s or %s", s.Prologue.Form, PrologueDerived, PrologueExplicit)
	}
	if n := len(s.Prologue.Ops) + len(s.Prologue.Bootstrap); n > MaxPrologue {
		bad("prologue has %d ops: at most %d", n, MaxPrologue)
	}
	for i, o := range append(append([]Op{}, s.Prologue.Ops...), s.Prologue.Bootstrap...) {
		if err := s.checkOp(o); err != nil {
			bad("prologue op %d: %v", i+1, err)
		}
		if o.Kind == MMA {
			bad("prologue op %d: an MMA in the prologue (it only loads)", i+1)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (s *Schedule) checkOp(o Op) error {
	if !o.Kind.known() {
		return fmt.Errorf("unknown op %q (known: LOAD_A, LOAD_B, MMA_LOAD_A, MMA_LOAD_B, MMA, COMPUTE)", o.Kind)
	}
	switch o.Kind.Class() {
	case GlobalLoad, FragmentLoad:
		if o.Sub < 0 || o.Sub >= s.Quadrants {
			return fmt.Errorf("%s sub=%d out of range [0,%d)", o.Kind, o.Sub, s.Quadrants)
		}
		if o.Stage != Same && o.Stage != Cross {
			return fmt.Errorf("%s stage %q: want same or cross", o.Kind, o.Stage)
		}
	case MMAClass:
		for _, q := range o.Quadrant {
			if q < 0 || q >= s.Quadrants {
				return fmt.Errorf("MMA quadrant (%d,%d) out of range [0,%d)", o.Quadrant[0], o.Quadrant[1], s.Quadrants)
			}
		}
	}
	return nil
}
