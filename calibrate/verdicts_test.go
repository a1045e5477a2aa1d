package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// evalVerdict is a real verdict of toy at pos from the CPU pipeline
// (latency predicted), as JSON.
func evalVerdict(t *testing.T, gpu string, p schedule.Point, pos int) map[string]any {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	out := trial.Evaluate(context.Background(), trial.Spec{Model: "toy", GPU: gpu, Device: schedule.DeviceCPU, Point: raw, Token: trial.DefaultToken, Pos: pos}, trial.Options{})
	if out.Verdict == nil || !out.Verdict.Valid {
		t.Fatalf("evaluation: %+v", out)
	}
	b, _ := json.Marshal(out.Verdict)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// asMeasured relabels a verdict's latency as measured-gpu with a made-up
// figure: SYNTHETIC test data, never a measurement.
func asMeasured(v map[string]any, us float64) map[string]any {
	out := map[string]any{}
	maps.Copy(out, v)
	out["latency_kind"] = string(trial.KindMeasuredGPU)
	out["latency_us"] = us
	out["device"] = "synthetic"
	return out
}

func file(t *testing.T, name string, v map[string]any) VerdictFile {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return VerdictFile{Name: name, Data: b}
}

func TestFromVerdicts(t *testing.T) {
	tg := mustTarget(t, "h100")
	base := evalVerdict(t, "h100", schedule.DeviceDefault(), 5)
	good := asMeasured(base, 30)
	ms, _, err := FromVerdicts([]VerdictFile{file(t, "good.json", good)}, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].MeasuredUS != 30 || ms[0].Point.ID() != base["schedule_id"] || len(ms[0].Program.Tasks) != int(base["tasks"].(float64)) {
		t.Fatalf("measurement %+v", ms)
	}
	if !strings.Contains(ms[0].Label, "toy pos 5 ") || !strings.Contains(ms[0].Label, "good.json") {
		t.Errorf("label %q", ms[0].Label)
	}

	with := func(k string, x any) map[string]any {
		v := asMeasured(good, 30)
		if x == nil {
			delete(v, k)
		} else {
			v[k] = x
		}
		return v
	}
	otherPoint := schedule.DeviceDefault()
	otherPoint.Config.PipeliningDepth = 3
	otherRaw, _ := json.Marshal(otherPoint)
	refused := map[string]struct {
		v    map[string]any
		want string
	}{
		"predicted":    {base, "latency_kind predicted, not measured-gpu"},
		"incorrect":    {with("correct", false), "no correctness PASS"},
		"rejected":     {with("valid", false), "not valid"},
		"other target": {asMeasured(evalVerdict(t, "h200", schedule.DeviceDefault(), 5), 30), `target "h200", not h100`},
		"no latency":   {with("latency_us", nil), "no positive finite latency_us"},
		"no point":     {with("point", nil), "lacks model_spec, point or pos"},
		"no pos":       {with("pos", nil), "lacks model_spec, point or pos"},
		"no model":     {with("model_spec", nil), "lacks model_spec, point or pos"},
		"other point":  {with("point", json.RawMessage(otherRaw)), "the verdict says sch_"},
		"bad point":    {with("point", map[string]any{"pipelining_depth": "x"}), "point:"},
		"other model":  {with("model_spec", "toy-2L"), "the verdict measured toy(1L)"},
		"tasks":        {with("tasks", 3), "the lowering changed since the measurement"},
		"unknown key":  {with("latency", 3), "not a verdict"},
	}
	for name, c := range refused {
		_, _, err := FromVerdicts([]VerdictFile{file(t, "good.json", good), file(t, name+".json", c.v)}, tg)
		if err == nil || !strings.Contains(err.Error(), name+".json: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming the file and %q", name, err, c.want)
		}
	}
	if _, _, err := FromVerdicts(nil, tg); err == nil {
		t.Error("no verdicts accepted")
	}
	if _, _, err := FromVerdicts(make([]VerdictFile, MaxVerdictFiles+1), tg); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("too many files: %v", err)
	}
}

// A workload verdict gives one measurement per evaluated position, each
// lowered at its position with the workload's context (past toy's max_seq).
func TestFromWorkloadVerdict(t *testing.T) {
	tg := mustTarget(t, "h100")
	raw, _ := json.Marshal(schedule.DeviceDefault())
	w := trial.Workload{PromptLens: []int{300}, GenLen: 5, Batch: 1}
	out := trial.Evaluate(context.Background(), trial.Spec{Model: "toy", GPU: "h100", Device: schedule.DeviceCPU, Point: raw,
		Token: trial.DefaultToken, Workload: &w}, trial.Options{})
	v := out.Verdict
	if v == nil || v.LatencyUS == nil || len(v.Positions) != 3 {
		t.Fatalf("evaluation: %+v", out)
	}
	kind := trial.KindMeasuredGPU // SYNTHETIC test data, never a measurement
	v.LatencyKind, v.Device = &kind, "synthetic"
	for i := range v.Positions {
		v.Positions[i].LatencyUS = new(float64(30 + i))
	}
	b, _ := json.Marshal(v)
	ms, _, err := FromVerdicts([]VerdictFile{{Name: "w.json", Data: b}}, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("%d measurements, want one per position", len(ms))
	}
	for i, m := range ms {
		rows := 0
		for _, b := range m.Program.Buffers {
			if b.Name == schedule.KCacheName(0) {
				rows = b.Shape[0]
			}
		}
		if m.MeasuredUS != float64(30+i) || !strings.Contains(m.Label, fmt.Sprintf("toy pos %d ", v.Positions[i].Pos)) || rows != w.Context() {
			t.Errorf("measurement %d: %s, %v us", i, m.Label, m.MeasuredUS)
		}
	}
	v.Positions[1].LatencyUS = nil
	b, _ = json.Marshal(v)
	if _, _, err := FromVerdicts([]VerdictFile{{Name: "w.json", Data: b}}, tg); err == nil || !strings.Contains(err.Error(), "position 302") {
		t.Errorf("a position without a latency: %v", err)
	}
}

// A campaign's trials log gives its measured, correct verdicts and skips
// the rest; a broken line or a foreign verdict in it still refuses.
func TestFromTrialsLog(t *testing.T) {
	tg := mustTarget(t, "h100")
	predicted := evalVerdict(t, "h100", schedule.DeviceDefault(), 5)
	measured := asMeasured(predicted, 30)
	incorrect := asMeasured(predicted, 30)
	incorrect["correct"] = false
	line := func(trialID int, v map[string]any) string {
		b, err := json.Marshal(map[string]any{"trial_id": trialID, "verdict": v})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	log := line(0, measured) + line(1, predicted) + line(2, incorrect) + `{"trial_id": 3, "failure": {"class": "timeout", "message": "watchdog"}}` + "\n\n" + line(4, asMeasured(predicted, 31))
	ms, skipped, err := FromVerdicts([]VerdictFile{{Name: "trials.jsonl", Data: []byte(log)}}, tg)
	if err != nil || len(ms) != 2 || skipped != 3 || ms[1].MeasuredUS != 31 || !strings.Contains(ms[1].Label, "trials.jsonl#2") {
		t.Fatalf("%d measurements, %d skipped, %v", len(ms), skipped, err)
	}
	for name, bad := range map[string]string{
		"broken line":     log + "{\n",
		"unknown field":   log + `{"trial_id": 5, "verdikt": {}}` + "\n",
		"foreign verdict": log + line(5, asMeasured(evalVerdict(t, "h200", schedule.DeviceDefault(), 5), 30)),
	} {
		if _, _, err := FromVerdicts([]VerdictFile{{Name: "trials.jsonl", Data: []byte(bad)}}, tg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := FromVerdicts([]VerdictFile{{Name: "trials.jsonl", Data: []byte(line(1, predicted))}}, tg); err == nil || !strings.Contains(err.Error(), "no measured verdicts") {
		t.Errorf("a log without a measured verdict: %v", err)
	}
}

func TestParseVerdict(t *testing.T) {
	for name, data := range map[string]string{
		"trailing": `{"valid": true} {}`, "null": `null`, "array": `[]`, "unknown": `{"valid": true, "x": 1}`, "empty": ``,
		"oversized": `{"notes": ["` + strings.Repeat("x", MaxVerdictBytes) + `"]}`,
	} {
		if _, err := ParseVerdict([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if v, err := ParseVerdict([]byte(`{"valid": true, "gpu": "h100"}`)); err != nil || !v.Valid || v.GPU != "h100" {
		t.Fatalf("%+v %v", v, err)
	}
}

func FuzzParseVerdict(f *testing.F) {
	f.Add([]byte(`{"valid": true, "correct": true, "latency_us": 12.5, "latency_kind": "measured-gpu", "gpu": "h100",
		"model_spec": "toy", "point": {"pipelining_depth": 1}, "pos": 0, "tasks": 27, "schedule_id": "sch_0"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseVerdict(data)
		if err != nil {
			return
		}
		if v == nil {
			t.Fatal("nil verdict without an error")
		}
		if CheckVerdict(v, "h100") == nil && (v.LatencyUS == nil || v.Pos == nil || len(v.Point) == 0) {
			t.Fatalf("a verdict without latency, pos or point passed the check: %s", data)
		}
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(v); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseVerdict(buf.Bytes()); err != nil {
			t.Fatalf("a parsed verdict does not parse again: %v", err)
		}
	})
}

func FuzzTrialsLog(f *testing.F) {
	f.Add([]byte(`{"trial_id": 1, "verdict": {"valid": true, "correct": true, "latency_us": 3, "latency_kind": "measured-gpu"}}` + "\n" +
		`{"trial_id": 2, "failure": {"class": "crash", "message": "x"}}`))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		verdicts, skipped, err := trialsLogVerdicts(data)
		if err != nil {
			return
		}
		if skipped < 0 {
			t.Fatal("negative skip count")
		}
		for _, v := range verdicts {
			if _, err := ParseVerdict(v); err != nil {
				t.Fatalf("a log's verdict does not parse: %v\n%s", err, v)
			}
		}
	})
}
