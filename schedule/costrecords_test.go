package schedule

import (
	"reflect"
	"strings"
	"testing"
)

// The embedded file loads (a broken costs.json fails here, never in a
// user's run), and a target without a record costs DefaultCostParams.
func TestEmbeddedCostRecordsLoad(t *testing.T) {
	recs, err := CalibratedCosts()
	if err != nil {
		t.Fatalf("schedule/costs.json: %v", err)
	}
	for name, r := range recs {
		want := DefaultCostParams()
		if err := r.Apply(&want); err != nil {
			t.Fatal(err)
		}
		if got := TargetCosts(name); got != want {
			t.Errorf("TargetCosts(%s) = %+v, want the record applied: %+v", name, got, want)
		}
	}
	for _, name := range []string{"h100", "h200", "mi300x"} {
		if _, ok := recs[name]; !ok && TargetCosts(name) != DefaultCostParams() {
			t.Errorf("TargetCosts(%s) without a record differs from the defaults", name)
		}
	}
}

func TestPredictWithTargetCostsIsPredict(t *testing.T) {
	tg := mustTarget(t, "h100")
	p := DeviceDefault()
	prog := mustLower(t, mustPreset(t, "toy"), tg, p, LowerOptions{Pos: 3})
	a, b := Predict(prog, tg, p), PredictWith(prog, tg, p, TargetCosts("h100"))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("Predict %+v != PredictWith(TargetCosts) %+v", a, b)
	}
	slow := TargetCosts("h100")
	slow.DispatchUS *= 4
	if c := PredictWith(prog, tg, p, slow); !(c.PredictedUS > a.PredictedUS) {
		t.Fatalf("four times the dispatch cost predicts %.3f µs, not above %.3f", c.PredictedUS, a.PredictedUS)
	}
}

const goodRecords = `{"h100": {"params": {"achievable_bw": 0.7, "tile_fixed_us": 0.2},
 "provenance": {"date": "2026-11-24", "device": "cuda:0 NVIDIA H100", "command": "amkctl calibrate --target h100 verdicts",
  "points": 12, "rms_log_error_before": 0.3, "rms_log_error_after": 0.05,
  "fitted": ["achievable_bw", "tile_fixed_us"], "kept_default": ["max_sm_stream_gbs"]}}}`

func TestParseCostRecords(t *testing.T) {
	recs, err := ParseCostRecords([]byte(goodRecords))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultCostParams()
	if err := recs["h100"].Apply(&c); err != nil || c.AchievableBW != 0.7 || c.TileFixedUS != 0.2 || c.DispatchUS != DefaultCostParams().DispatchUS {
		t.Fatalf("applied record: %+v, %v", c, err)
	}
	out, err := recs.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseCostRecords(out)
	if err != nil || !reflect.DeepEqual(again, recs) {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
	if empty, err := (CostRecords(nil)).Marshal(); err != nil || strings.TrimSpace(string(empty)) != "{}" {
		t.Fatalf("empty records marshal to %q, %v", empty, err)
	}
	bad := map[string]string{
		"unknown field":      strings.Replace(goodRecords, `"params"`, `"parms": {}, "params"`, 1),
		"unknown parameter":  strings.Replace(goodRecords, `"tile_fixed_us": 0.2`, `"tile_us": 0.2`, 1),
		"out of range":       strings.Replace(goodRecords, `"achievable_bw": 0.7`, `"achievable_bw": 1.7`, 1),
		"negative":           strings.Replace(goodRecords, `"tile_fixed_us": 0.2`, `"tile_fixed_us": -0.2`, 1),
		"non-finite":         strings.Replace(goodRecords, `"tile_fixed_us": 0.2`, `"tile_fixed_us": 1e999`, 1),
		"unknown target":     strings.Replace(goodRecords, `"h100"`, `"h900"`, 1),
		"duplicate target":   `{"h100": {}, "h100": {}}`,
		"duplicate param":    strings.Replace(goodRecords, `"tile_fixed_us": 0.2`, `"tile_fixed_us": 0.2, "tile_fixed_us": 0.3`, 1),
		"bad date":           strings.Replace(goodRecords, `2026-11-24`, `24.11.2026`, 1),
		"no points":          strings.Replace(goodRecords, `"points": 12`, `"points": 0`, 1),
		"no device":          strings.Replace(goodRecords, `"cuda:0 NVIDIA H100"`, `" "`, 1),
		"no params":          strings.Replace(goodRecords, `"achievable_bw": 0.7, "tile_fixed_us": 0.2`, ``, 1),
		"unknown fitted":     strings.Replace(goodRecords, `"fitted": ["achievable_bw"`, `"fitted": ["bw"`, 1),
		"trailing data":      goodRecords + "{}",
		"not an object":      `[]`,
		"null":               `null`,
		"negative rms error": strings.Replace(goodRecords, `"rms_log_error_after": 0.05`, `"rms_log_error_after": -1`, 1),
	}
	for name, data := range bad {
		if _, err := ParseCostRecords([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseCostRecords(make([]byte, MaxCostRecordsBytes+1)); err == nil {
		t.Error("an oversized file was accepted")
	}
}

func TestSetParam(t *testing.T) {
	var c CostParams
	for _, name := range CostParamNames() {
		lo, hi, ok := CostParamRange(name)
		if !ok || !(lo < hi) {
			t.Fatalf("%s: range [%g, %g] %v", name, lo, hi, ok)
		}
		if err := c.SetParam(name, hi); err != nil {
			t.Fatal(err)
		}
		if v, _ := c.Param(name); v != hi {
			t.Fatalf("%s: set %g, read %g", name, hi, v)
		}
		if err := c.SetParam(name, hi*2+1); err == nil {
			t.Errorf("%s: %g accepted", name, hi*2+1)
		}
	}
	if c.HopUS() != 150 {
		t.Fatalf("every field set to its upper bound: hop %g µs, want 150", c.HopUS())
	}
}

func FuzzParseCostRecords(f *testing.F) {
	f.Add([]byte(goodRecords))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"h100": {"params": {"achievable_bw": 1e-300}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ParseCostRecords(data)
		if err != nil {
			return
		}
		out, err := recs.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseCostRecords(out); err != nil {
			t.Fatalf("a parsed record does not parse again: %v\n%s", err, out)
		}
	})
}
