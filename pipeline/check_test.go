package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func load(t *testing.T, name string) *Schedule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func TestSeed4WavePasses(t *testing.T) {
	r := Check(load(t, "amd-4wave-fp8"))
	if !r.Safe() {
		t.Fatalf("the seed's 4-wave schedule has hazards: %v", r.Hazards())
	}
	// The derived prologue's cross-stage fragments are overwritten by the
	// bootstrap pair: noted, not a hazard.
	for _, f := range r.Findings {
		if f.Rule != RuleDeadLoad || f.Stage != 1 {
			t.Errorf("unexpected finding: %s", f)
		}
	}
}

func TestPingPongDefaultPasses(t *testing.T) {
	s := load(t, "pingpong-default")
	if r := Check(s); len(r.Findings) != 0 {
		t.Fatalf("the ping-pong default schedule: %v", r.Findings)
	}
	if s.Ordering != DoubleBufferReorder || s.RuleBase != RulesDoubleBufferDefault || len(s.RuleAppend) != 0 ||
		s.Prologue.Form != PrologueDerived || len(s.Prologue.Bootstrap) != 0 {
		t.Fatal("pingpong-default does not use the framework's defaults")
	}
}

// Each mutant changes one thing of the seed's schedule and fails with the
// seed's own reason for that choice.
func TestMutantsFailWithTheSeedsReasons(t *testing.T) {
	seed := load(t, "amd-4wave-fp8")
	cases := []struct {
		file, rule, op string
		half, mini     int
		says           []string
		differs        func(s *Schedule) bool
	}{
		{file: "4wave-mutant-reorder", rule: RuleReorder, op: "MMA(0,0)", half: -1, mini: 1,
			says:    []string{"double_buffer_reorder places MMA_LOAD_A[stage=cross, sub=0]", "ignoring the stage", "same partition"},
			differs: func(s *Schedule) bool { s.Ordering = seed.Ordering; return true }},
		{file: "4wave-mutant-auto-prologue", rule: RulePrologue, op: "MMA(0,0)", half: 0, mini: 1,
			says: []string{"k=1·BK data", "computes k=0·BK", "derived prologue copies the body's cross-stage fragment load"},
			differs: func(s *Schedule) bool {
				s.Prologue = seed.Prologue
				return true
			}},
		{file: "4wave-mutant-no-cross-half", rule: RuleRegRead, op: "MMA(0,0)", half: 1, mini: 1,
			says: []string{"B_quad[0]", "MMA_LOAD_B[stage=cross, sub=0] of iteration 0 half 0 mini-iter 4",
				"not drained at the half boundary", "cross_half"},
			differs: func(s *Schedule) bool { s.RuleAppend = seed.RuleAppend; return true }},
	}
	for _, c := range cases {
		s := load(t, c.file)
		r := Check(s)
		if r.Safe() {
			t.Errorf("%s passes the checker", c.file)
			continue
		}
		var hit *Finding
		for i, f := range r.Hazards() {
			if f.Rule == c.rule && f.Op == c.op && f.Half == c.half && f.Mini == c.mini {
				hit = &r.Hazards()[i]
				break
			}
		}
		if hit == nil {
			t.Errorf("%s: no %s hazard at half %d mini-iter %d %s; got %v", c.file, c.rule, c.half, c.mini, c.op, r.Hazards())
			continue
		}
		for _, want := range c.says {
			if !strings.Contains(hit.String(), want) {
				t.Errorf("%s: %q does not say %q", c.file, hit, want)
			}
		}
		// The mutant is the seed with exactly that one change.
		c.differs(s)
		s.Name, s.Note = seed.Name, seed.Note
		if !reflect.DeepEqual(s, seed) {
			t.Errorf("%s differs from the seed in more than the mutated field", c.file)
		}
	}
}

func TestCheckerFindsEachHazardKind(t *testing.T) {
	seed := load(t, "amd-4wave-fp8")
	mutate := func(f func(s *Schedule)) *Schedule {
		data, _ := Encode(seed)
		s, _ := Decode(data)
		f(s)
		return s
	}
	cases := []struct {
		name string
		s    *Schedule
		rule string
	}{
		// No rules: nothing waits for the global loads before the fragments read them.
		{"no rules", mutate(func(s *Schedule) { s.RuleBase, s.RuleAppend = RulesNone, nil }), RuleLDSRead},
		// The loads refill the cross stage, which the next half still reads: data it needs is gone.
		{"loads into the cross stage", mutate(func(s *Schedule) {
			for i := range s.Body {
				s.Body[i].Ops[0].Stage = Cross
			}
		}), RuleWrongData},
		// Without the WAR rule a refill overwrites a slot a fragment still reads.
		{"no frag->load rule", mutate(func(s *Schedule) {
			s.RuleBase = RulesNone
			s.RuleAppend = []EdgeRule{{From: GlobalLoad, To: FragmentLoad, Scope: AnyHalf, ConfigMatch: true},
				{From: FragmentLoad, To: MMAClass, Scope: AnyHalf, ConfigMatch: true}}
		}), RuleLDSWrite},
		// Mini-iter 3's cross-stage A0 moved to mini-iter 1 overwrites A_quad[0] before MMA(0,0)/(0,1) use it.
		{"early rotation", mutate(func(s *Schedule) {
			s.Body[0].Ops[1], s.Body[2].Ops[1] = s.Body[2].Ops[1], s.Body[0].Ops[1]
		}), RuleRegWrite},
		// An explicit prologue that loads nothing.
		{"empty prologue", mutate(func(s *Schedule) { s.Prologue = Prologue{Form: PrologueExplicit} }), RuleLDSRead},
	}
	for _, c := range cases {
		if err := c.s.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		found := false
		for _, f := range Check(c.s).Hazards() {
			found = found || f.Rule == c.rule
			if f.Op == "" || f.Message == "" {
				t.Errorf("%s: finding without op or explanation: %s", c.name, f)
			}
		}
		if !found {
			t.Errorf("%s: no %s hazard in %v", c.name, c.rule, Check(c.s).Hazards())
		}
	}
}

// A rule without config match drains more than needed: safe, with an
// excess-wait note.
func TestExcessWaitIsAdvisory(t *testing.T) {
	s := load(t, "amd-4wave-fp8")
	s.RuleAppend = append(s.RuleAppend, EdgeRule{From: FragmentLoad, To: MMAClass, Scope: SameHalf})
	r := Check(s)
	if !r.Safe() {
		t.Fatalf("hazards: %v", r.Hazards())
	}
	excess := 0
	for _, f := range r.Findings {
		if f.Rule == RuleExcessWait {
			excess++
			if !f.Advisory || !strings.Contains(f.Message, "does not depend on") {
				t.Errorf("bad excess-wait finding: %s", f)
			}
		}
	}
	if excess == 0 {
		t.Fatal("no excess wait reported for a class-wide drain")
	}
}

func TestGeneratorReproducesTheSeed(t *testing.T) {
	seed := load(t, "amd-4wave-fp8")
	gen := Seed4Wave.Schedule()
	gen.Name, gen.Note = seed.Name, seed.Note
	if !reflect.DeepEqual(gen, seed) {
		a, _ := Encode(gen)
		t.Fatalf("the generated 4-wave variant differs from testdata:\n%s", a)
	}
}

func TestReportJSON(t *testing.T) {
	out, err := json.Marshal(Check(load(t, "4wave-mutant-auto-prologue")))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Safe     bool
		Hazards  int
		Findings []Finding
	}
	if err := json.Unmarshal(out, &back); err != nil || back.Safe || back.Hazards == 0 ||
		back.Findings[0].Rule != RulePrologue || back.Findings[0].Mini != 1 {
		t.Fatalf("%s: %+v %v", out, back, err)
	}
}

// The listing shows the derived waits: with the cross-half rule the
// 4-wave schedule drains the previous half's cross-stage fragments
// (lgkmcnt(1): all but the fragment just issued) before each half's
// MMA(0,0); without it that wait is missing.
func TestListingShowsTheDerivedWaits(t *testing.T) {
	firstMMA := func(name string) string {
		for _, l := range Listing(load(t, name)) {
			if strings.HasPrefix(l, "mini-iter 1") && strings.HasSuffix(l, "MMA(0,0)") {
				return l
			}
		}
		return ""
	}
	if l := firstMMA("amd-4wave-fp8"); !strings.Contains(l, "s_waitcnt lgkmcnt(1)") {
		t.Errorf("4-wave MMA(0,0): %q", l)
	}
	if l := firstMMA("4wave-mutant-no-cross-half"); l == "" || strings.Contains(l, "lgkmcnt") {
		t.Errorf("no-cross-half MMA(0,0): %q", l)
	}
	l := Listing(load(t, "amd-4wave-fp8"))
	if len(l) < 20 || !strings.Contains(strings.Join(l, "\n"), "MMA_LOAD_B[stage=cross, sub=0] -> stage 1") {
		t.Errorf("listing: %q", l)
	}
}
