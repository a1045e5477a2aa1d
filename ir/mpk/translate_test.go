package mpk_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// lowered is the program amk lowers for a preset on h100 at the default point.
func lowered(t testing.TB, preset string) *ir.Program {
	t.Helper()
	cfg, err := model.Load(preset) // a preset, or a preset with a quantization scheme
	if err != nil {
		t.Fatal(err)
	}
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	p, err := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func exported(t testing.TB, p *ir.Program) []byte {
	t.Helper()
	g, err := mpk.ToGraph(p, mpk.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mpk.Encode(g)
}

// amk -> MPK -> amk gives the program back byte for byte, through the file.
func TestAMKRoundTripIsByteIdentical(t *testing.T) {
	for _, preset := range []string{"toy", "small", "llama-1b", "toy:w8a16", "small:w4a16"} {
		t.Run(preset, func(t *testing.T) {
			p := lowered(t, preset)
			want := ir.Encode(p)
			g, err := mpk.Decode(exported(t, p))
			if err != nil {
				t.Fatal(err)
			}
			back, err := mpk.ToProgram(g)
			if err != nil {
				t.Fatal(err)
			}
			if got := ir.Encode(back); !bytes.Equal(got, want) {
				t.Fatalf("round trip differs:\n%s", firstDiff(got, want))
			}
		})
	}
}

func firstDiff(a, b []byte) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			lo := max(0, i-200)
			return "got:  ..." + string(a[lo:min(len(a), i+100)]) + "\nwant: ..." + string(b[lo:min(len(b), i+100)])
		}
	}
	return "lengths differ"
}

// MPK -> amk -> MPK gives the same graph, for every committed graph: the
// hand-written ones (written by Mirage's rules, not amk's) and every
// mutation, whose structure the program must carry over unchanged.
func TestMPKRoundTripGivesTheSameGraph(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if len(files) < 10 {
		t.Fatalf("only %d testdata graphs", len(files))
	}
	for _, file := range files {
		g := readGraph(t, file)
		g.AMK = nil // translate what MPK itself says, task for task
		want := mpk.Encode(g)
		p, err := mpk.ToProgram(g)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		// through the program's JSON, as a user would hand it over
		p, err = ir.Decode(ir.Encode(p))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		back, err := mpk.ToGraph(p, mpk.ExportOptions{})
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if got := mpk.Encode(back); !bytes.Equal(got, want) {
			t.Errorf("%s: graph differs after the round trip:\n%s", file, firstDiff(got, want))
		}
	}
}

// An exported graph whose structure was edited translates to a program that
// carries the edit (the sidecar supplies only what MPK has no field for).
func TestSidecarImportFollowsTheGraph(t *testing.T) {
	p := lowered(t, "toy")
	g, err := mpk.Decode(exported(t, p))
	if err != nil {
		t.Fatal(err)
	}
	g.Tasks[3].DependentEvent = mpk.InvalidEventID // amk task 1 no longer waits
	back, err := mpk.ToProgram(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tasks[1].Waits) == 0 || len(back.Tasks[1].Waits) != 0 {
		t.Fatalf("waits before %v, after %v: the edit did not carry over", p.Tasks[1].Waits, back.Tasks[1].Waits)
	}
	g.Tasks[3].TriggerEvent = mpk.MakeEventID(0, 999, false)
	if _, err := mpk.ToProgram(g); err == nil || !strings.Contains(err.Error(), "all_tasks[3].trigger_event") {
		t.Fatalf("a trigger naming no event: %v", err)
	}
}

// What MPK cannot express is an error naming the program field.
func TestExportRefusesWhatMPKCannotExpress(t *testing.T) {
	cases := map[string]func(p *ir.Program){
		"an MPK event has one num_triggers": func(p *ir.Program) {
			p.Tasks[1].Waits[0].Threshold = 7
			p.Tasks = append(p.Tasks, p.Tasks[1])
			p.Tasks[len(p.Tasks)-1].ID = len(p.Tasks) - 1
			p.Tasks[len(p.Tasks)-1].Waits = []ir.Wait{{Counter: p.Tasks[1].Waits[0].Counter, Threshold: 1}}
		},
		"buffers[1].name": func(p *ir.Program) { p.Buffers[1].Name = p.Buffers[0].Name },
		"tasks[0].inputs": func(p *ir.Program) { p.Tasks[0].Inputs = make([]int, 8) },
		"tasks[2].id":     func(p *ir.Program) { p.Tasks[2].ID = 7 },
	}
	for field, edit := range cases {
		p := lowered(t, "toy")
		edit(p)
		_, err := mpk.ToGraph(p, mpk.ExportOptions{})
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

// The cost model ranks an imported graph through its translation: an amk
// export predicts exactly what its program predicts, and a graph Mirage's
// rules wrote gets a finite prediction above the streamed-bytes floor.
func TestImportedGraphsArePredicted(t *testing.T) {
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	p := lowered(t, "small")
	g, err := mpk.Decode(exported(t, p))
	if err != nil {
		t.Fatal(err)
	}
	back, err := mpk.ToProgram(g)
	if err != nil {
		t.Fatal(err)
	}
	want := schedule.Predict(p, target, schedule.Default()).PredictedUS
	if got := schedule.Predict(back, target, schedule.Default()).PredictedUS; got != want {
		t.Fatalf("predicted %v µs through MPK, %v µs directly", got, want)
	}
	hand, err := mpk.ToProgram(readGraph(t, filepath.Join("testdata", "good", "hand_mirage.json")))
	if err != nil {
		t.Fatal(err)
	}
	c := schedule.Predict(hand, target, schedule.Default())
	if !(c.PredictedUS > 0) || c.PredictedUS < c.BandwidthBoundUS || c.NTasks != 7 {
		t.Fatalf("hand-written graph: %+v", c)
	}
}

// Every program of the validator's testdata (good and bad) either comes back
// byte for byte through MPK or is refused with the field MPK cannot hold.
func TestValidatorTestdataRoundTrips(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "validate", "testdata", "*", "*.json"))
	identical := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ir.Decode(data)
		if err != nil {
			continue // a malformed-file case
		}
		g, err := mpk.ToGraph(p, mpk.ExportOptions{})
		if err != nil {
			if !regexp.MustCompile(`^(tasks|buffers|counters)\[\d+\]`).MatchString(err.Error()) {
				t.Errorf("%s: refused without naming the field: %v", f, err)
			}
			continue
		}
		g, err = mpk.Decode(mpk.Encode(g))
		if err != nil {
			t.Fatal(err)
		}
		back, err := mpk.ToProgram(g)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !bytes.Equal(ir.Encode(back), ir.Encode(p)) {
			t.Errorf("%s: the program differs after the round trip", f)
			continue
		}
		identical++
	}
	if identical < 60 {
		t.Fatalf("only %d of %d programs round-trip", identical, len(files))
	}
}

// A quantised program's graph carries its stored dtypes: int8 and int4
// weights and their float16 scales as Mirage data types, which an import
// without amk's sidecar reads back.
func TestMPKExportCarriesQuantizedDTypes(t *testing.T) {
	for _, c := range []struct {
		spec string
		want ir.DType
	}{{"toy:w8a16", ir.I8}, {"toy:w4a16-g32", ir.I4}} {
		p := lowered(t, c.spec)
		g, err := mpk.Decode(exported(t, p))
		if err != nil {
			t.Fatal(err)
		}
		g.AMK = nil
		back, err := mpk.ToProgram(g)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]ir.DType{}
		for _, b := range back.Buffers {
			got[b.Name] = b.DType
		}
		if d := got["layers.0.attn.q_proj.weight"]; d != c.want {
			t.Errorf("%s: q_proj comes back as %s", c.spec, d)
		}
		if d := got["layers.0.attn.q_proj.weight"+ir.ScalesSuffix]; d != ir.F16 {
			t.Errorf("%s: q_proj's scales come back as %s", c.spec, d)
		}
	}
}
