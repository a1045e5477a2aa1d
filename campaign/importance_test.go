package campaign

import (
	"strings"
	"testing"
	"time"
)

// TestKnobImportancesFindTheKnobThatMatters: trials whose latency depends
// only on the first searched knob rank that knob first with nearly all the
// importance, give its values' means, and slice every trial along it; too
// few trials give nothing.
func TestKnobImportancesFindTheKnobThatMatters(t *testing.T) {
	c := New()
	if _, err := c.Step(Start{Time: time.Unix(0, 0), Model: "toy", GPU: "h100", Device: "cpu", Cold: true, Settings: DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	knobs := c.searchKnobs()
	if len(knobs) < 2 {
		t.Fatalf("%d searched knobs, want at least 2", len(knobs))
	}
	for i := range 12 {
		levels := make([]int, len(knobs))
		levels[0] = i % 2       // 100 µs or 200 µs
		levels[1] = (i / 2) % 2 // no effect at all
		us := 100.0 * float64(1+levels[0])
		c.st.Observations = append(c.st.Observations, Observation{Levels: levels, Score: new(us)})
		if i == 4 {
			if imp, slice := c.KnobImportances(); imp != nil || slice != nil {
				t.Errorf("5 trials gave an importance view: %v", imp)
			}
		}
	}
	c.st.Observations = append(c.st.Observations, Observation{Levels: make([]int, len(knobs)), Score: new(1.0), Prior: true}) // not the campaign's own
	imp, slice := c.KnobImportances()
	if len(imp) != len(knobs) || imp[0].Knob != knobs[0].Path || imp[0].Importance < 0.99 || imp[0].VarianceExplained < 0.99 {
		t.Fatalf("importances %+v, want %s first with all of it", imp, knobs[0].Path)
	}
	for _, k := range imp[1:] {
		if k.Importance > 0.01 {
			t.Errorf("%s has importance %.3f, want about 0", k.Knob, k.Importance)
		}
	}
	if v := imp[0].Values; len(v) != 2 || v[0].Trials != 6 || v[0].MeanUS != 100 || v[1].MeanUS != 200 || imp[0].bestValue() != v[0].Value {
		t.Errorf("values %+v", v)
	}
	if slice == nil || slice.Knob != knobs[0].Path || len(slice.Points) != 12 || len(slice.Values) != len(knobs[0].Choices) {
		t.Errorf("slice %+v", slice)
	}
	md := c.WakeUp(time.Unix(60, 0)).Markdown()
	if !strings.Contains(md, "## Which knobs mattered") || !strings.Contains(md, "| "+knobs[0].Path+" | 1.00 |") || !strings.Contains(md, "](knobs.svg)") {
		t.Errorf("the report has no importance table for %s:\n%s", knobs[0].Path, md)
	}
}
