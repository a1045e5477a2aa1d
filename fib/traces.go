package fib

import (
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
)

// Latency kinds (the verdict's latency_kind).
const (
	KindMeasuredGPU = flywheel.KindMeasuredGPU
	KindPredicted   = flywheel.KindPredicted
)

// Author is the author of the Solutions and Traces amk exports.
const Author = "amk"

// RunInfo says where a run's verdicts come from: the exported Definition
// they are about, its workload, and the environment fingerprint.
type RunInfo struct {
	// Kind is measured-gpu or predicted: the campaign's (or Loop 1's)
	// latency kind. It never changes per verdict.
	Kind string
	// Target is the GPU target record (h200); Env is the campaign's
	// environment (device, driver, toolkit, amk version).
	Target string
	Env    flywheel.Env
	// Timestamp is when the verdicts were taken (RFC 3339).
	Timestamp string
}

// Fact is what a verdict says, in the terms both results.tsv and a Trace
// can hold: the round trip through Traces keeps every field.
type Fact struct {
	Definition  string
	Solution    string
	Experiment  int
	Tag         string
	Correctness string   // PASS, FAIL, REJECTED, CRASH, TIMEOUT
	LatencyUS   *float64 // only with PASS
	Kind        string   // measured-gpu or predicted
	Target      string
}

// hardwareName is the FlashInfer-Bench hardware string: the GPU for a
// measurement, "predicted:" and the GPU for a cost-model prediction.
func hardwareName(target, kind string) string {
	hw := "NVIDIA_" + strings.ToUpper(target)
	if kind != KindMeasuredGPU {
		return "predicted:" + hw
	}
	return hw
}

// statusOf maps an amk correctness verdict onto an evaluation status.
func statusOf(correctness string) (string, error) {
	switch correctness {
	case flywheel.CorrectPass:
		return StatusPassed, nil
	case flywheel.CorrectFail:
		return StatusIncorrectNumerical, nil
	case flywheel.CorrectRejected:
		return StatusCompileError, nil // refused by the validator or the build: never launched
	case flywheel.CorrectCrash:
		return StatusRuntimeError, nil
	case flywheel.CorrectTimeout:
		return StatusTimeout, nil
	}
	return "", fmt.Errorf("unknown correctness %q", correctness)
}

// SolutionName is the Solution name of an amk schedule or Loop-1 variant.
func SolutionName(id string) string {
	var b strings.Builder
	b.WriteString("amk_")
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// factLine is the first line of an exported evaluation's log: the verdict
// in key=value form, read back by Facts.
const factPrefix = "amk verdict:"

// TracesFromFacts turns verdicts into Traces of the Definition def on the
// workload w, and one Solution per distinct solution name. A PASS without
// a latency (withheld below the streamed-bytes floor, or with no floor) has
// no FlashInfer-Bench form (PASSED needs a performance): it is left out and
// counted in skipped.
func TracesFromFacts(def *Definition, w Workload, run RunInfo, facts []Fact) (traces []Trace, sols []*Solution, skipped int, err error) {
	if run.Kind != KindMeasuredGPU && run.Kind != KindPredicted {
		return nil, nil, 0, fmt.Errorf("latency kind %q is neither %s nor %s", run.Kind, KindMeasuredGPU, KindPredicted)
	}
	env := Environment{Hardware: hardwareName(run.Target, run.Kind), Libs: map[string]string{
		"amk_latency_kind": run.Kind, TargetTag: run.Target, "go": runtime.Version()}}
	for k, v := range map[string]string{"amk": run.Env.AMKVersion, "amk_device": run.Env.Device,
		"amk_device_name": run.Env.DeviceName, "cuda_driver": run.Env.Driver, "cuda": run.Env.Toolkit} {
		if v != "" {
			env.Libs[k] = v
		}
	}
	seen := map[string]bool{}
	for _, f := range facts {
		f.Definition, f.Kind, f.Target = def.Name, run.Kind, run.Target
		status, err := statusOf(f.Correctness)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("experiment %d: %w", f.Experiment, err)
		}
		if f.Correctness == flywheel.CorrectPass && f.LatencyUS == nil {
			skipped++
			continue
		}
		if f.Correctness != flywheel.CorrectPass && f.LatencyUS != nil {
			return nil, nil, 0, fmt.Errorf("experiment %d: a latency without a correctness PASS", f.Experiment)
		}
		ev := &Evaluation{Status: status, Environment: env, Timestamp: run.Timestamp, Log: factLog(f)}
		switch status {
		case StatusPassed, StatusIncorrectNumerical:
			// results.tsv keeps the verdict, not the error maxima: NaN says "not recorded".
			ev.Correctness = &Correctness{MaxRelativeError: Float(math.NaN()), MaxAbsoluteError: Float(math.NaN()),
				Extra: map[string]any{"amk_correctness": f.Correctness}}
		}
		if status == StatusPassed {
			ev.Performance = &Performance{LatencyMS: ir.RoundTo(*f.LatencyUS/1000, 9)}
		}
		sol := SolutionName(f.Solution)
		traces = append(traces, Trace{Definition: def.Name, Workload: w, Solution: &sol, Evaluation: ev})
		if !seen[sol] {
			seen[sol] = true
			sols = append(sols, amkSolution(def, sol, f.Solution, run))
		}
	}
	return traces, sols, skipped, nil
}

func factLog(f Fact) string {
	lat := "none"
	if f.LatencyUS != nil {
		lat = strconv.FormatFloat(*f.LatencyUS, 'g', -1, 64)
	}
	return fmt.Sprintf("%s experiment=%d tag=%s correctness=%s latency_us=%s latency_kind=%s target=%s id=%s\n"+
		"reference_latency_ms and speedup_factor are 0: amk does not time the PyTorch reference; "+
		"a predicted latency comes from amk's cost model, not a measurement; error maxima are NaN where amk's "+
		"results do not record them.",
		factPrefix, f.Experiment, f.Tag, f.Correctness, lat, f.Kind, f.Target, f.Solution)
}

func amkSolution(def *Definition, name, id string, run RunInfo) *Solution {
	desc, _ := json.Marshal(map[string]string{"amk_id": id, "latency_kind": run.Kind, "target": run.Target,
		"note": "amk's megakernel schedule or tuned kernel variant; built and launched by amk (amkctl eval / tune-instruction), not by flashinfer-bench"})
	return &Solution{Name: name, Definition: def.Name, Author: Author,
		Description: "amk schedule " + id,
		Spec: BuildSpec{Language: "cuda", TargetHardware: []string{hardwareName(run.Target, KindMeasuredGPU)},
			EntryPoint: "amk.json::run"},
		Sources: []SourceFile{{Path: "amk.json", Content: string(desc) + "\n"}}}
}

// Facts reads verdicts back out of Traces that TracesFromFacts wrote.
func Facts(traces []Trace) ([]Fact, error) {
	var out []Fact
	for i, t := range traces {
		if t.Evaluation == nil {
			continue
		}
		first, _, _ := strings.Cut(t.Evaluation.Log, "\n")
		rest, ok := strings.CutPrefix(first, factPrefix)
		if !ok {
			return nil, fmt.Errorf("trace %d: not an amk verdict (log starts %q)", i, first)
		}
		kv := map[string]string{}
		for field := range strings.FieldsSeq(rest) {
			k, v, _ := strings.Cut(field, "=")
			kv[k] = v
		}
		f := Fact{Definition: t.Definition, Tag: kv["tag"], Correctness: kv["correctness"], Kind: kv["latency_kind"],
			Target: kv["target"], Solution: kv["id"]}
		n, err := strconv.Atoi(kv["experiment"])
		if err != nil {
			return nil, fmt.Errorf("trace %d: experiment %q", i, kv["experiment"])
		}
		f.Experiment = n
		if lat := kv["latency_us"]; lat != "none" {
			v, err := strconv.ParseFloat(lat, 64)
			if err != nil {
				return nil, fmt.Errorf("trace %d: latency %q", i, lat)
			}
			f.LatencyUS = &v
		}
		// The structured fields must agree with the log line.
		if want, _ := statusOf(f.Correctness); want != t.Evaluation.Status {
			return nil, fmt.Errorf("trace %d: status %s but the verdict says %s", i, t.Evaluation.Status, f.Correctness)
		}
		if p := t.Evaluation.Performance; (p != nil) != (f.LatencyUS != nil) ||
			p != nil && math.Abs(p.LatencyMS*1000-*f.LatencyUS) > 1e-6 { // latency_ms keeps 9 decimals
			return nil, fmt.Errorf("trace %d: performance and the verdict's latency disagree", i)
		}
		if got := t.Evaluation.Environment.Libs["amk_latency_kind"]; got != f.Kind ||
			t.Evaluation.Environment.Hardware != hardwareName(f.Target, f.Kind) {
			return nil, fmt.Errorf("trace %d: environment (%s, %s) disagrees with latency kind %s",
				i, t.Evaluation.Environment.Hardware, got, f.Kind)
		}
		out = append(out, f)
	}
	return out, nil
}

// FactsFromRows reads results.tsv rows as verdicts.
func FactsFromRows(rows []flywheel.Row) []Fact {
	out := make([]Fact, 0, len(rows))
	for _, r := range rows {
		id := r.ScheduleID
		if id == "" {
			id = r.KernelID
		}
		out = append(out, Fact{Solution: id, Experiment: r.Experiment, Tag: r.Tag, Correctness: r.Correctness,
			LatencyUS: r.LatencyUS})
	}
	return out
}
