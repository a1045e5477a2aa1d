package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// FuzzDecode: any bytes either fail to decode with an error or give a
// schedule that the checker and the simulator handle without panicking
// and that round-trips through the codec.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"format": "amk-pipeline/1"}`))
	tg, err := ir.Target("mi355x")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			if s != nil {
				t.Fatal("a schedule with an error")
			}
			return
		}
		r := Check(s)
		if _, err := Simulate(s, tg); (err == nil) != r.Safe() {
			t.Fatalf("simulate error %v for a schedule with safe=%v", err, r.Safe())
		}
		a, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Decode(a)
		if err != nil {
			t.Fatalf("re-decoding the encoding: %v", err)
		}
		if b, _ := Encode(s2); !bytes.Equal(a, b) {
			t.Fatal("the encoding does not round-trip")
		}
	})
}

// FuzzCheck builds a valid schedule from every input (ops, stages,
// quadrants, rules, prologue and ordering all drawn from the bytes), so
// the checker sees far more shapes than JSON mutation reaches; it must
// never panic, and every finding names an op and explains itself.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("4wave schedule bytes"))
	tg, err := ir.Target("mi300x")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := scheduleFromBytes(data)
		if err := s.Validate(); err != nil {
			t.Fatalf("generated an invalid schedule: %v", err)
		}
		r := Check(s)
		for _, fd := range r.Findings {
			if fd.Op == "" || fd.Message == "" || fd.Rule == "" {
				t.Fatalf("finding without op, rule or message: %+v", fd)
			}
		}
		if tm, err := Simulate(s, tg); r.Safe() && (err != nil || tm.MMAUtilisation <= 0 || tm.MMAUtilisation > 1) {
			t.Fatalf("a safe schedule simulates to %+v, %v", tm, err)
		}
	})
}

func scheduleFromBytes(data []byte) *Schedule {
	pos := 0
	next := func(n int) int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[pos%len(data)])
		pos++
		return b % n
	}
	kindsAll := []Kind{LoadA, LoadB, MMALoadA, MMALoadB, MMA, Compute}
	quads := 1 + next(2)
	op := func() Op {
		o := Op{Kind: kindsAll[next(len(kindsAll))], Sub: next(quads), Stage: []Stage{Same, Cross}[next(2)]}
		if o.Kind == MMA {
			o.Sub, o.Stage, o.Quadrant = 0, "", [2]int{next(quads), next(quads)}
		}
		if o.Kind == Compute {
			o.Sub, o.Stage = 0, ""
		}
		return o
	}
	s := &Schedule{Name: "fuzz", Partitions: Partitions, Quadrants: quads,
		Ordering: []string{Identity, DoubleBufferReorder}[next(2)],
		RuleBase: []string{RulesDoubleBufferDefault, RulesNone}[next(2)],
		Prologue: Prologue{Form: []string{PrologueDerived, PrologueExplicit}[next(2)]}}
	for range 1 + next(6) {
		var m MiniIter
		for range 1 + next(4) {
			m.Ops = append(m.Ops, op())
		}
		s.Body = append(s.Body, m)
	}
	s.Body[len(s.Body)-1].Ops = append(s.Body[len(s.Body)-1].Ops, Op{Kind: MMA, Quadrant: [2]int{next(quads), next(quads)}})
	pairs := [][2]Class{{GlobalLoad, FragmentLoad}, {FragmentLoad, MMAClass}, {FragmentLoad, GlobalLoad}}
	for range next(4) {
		p := pairs[next(len(pairs))]
		s.RuleAppend = append(s.RuleAppend, EdgeRule{From: p[0], To: p[1],
			Scope: []Scope{SameHalf, CrossHalf, AnyHalf}[next(3)], ConfigMatch: next(2) == 0})
	}
	for range next(6) {
		o := op()
		if o.Kind == MMA {
			continue
		}
		if s.Prologue.Form == PrologueExplicit && next(2) == 0 {
			s.Prologue.Ops = append(s.Prologue.Ops, o)
		} else {
			s.Prologue.Bootstrap = append(s.Prologue.Bootstrap, o)
		}
	}
	return s
}
