package mpk_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
)

var update = flag.Bool("update", false, "rewrite testdata/good exports, testdata/bad mutations and every expected report")

// The runtime the committed testdata is checked for: few workers with short
// queues, so that a queue overflow takes a small file to show.
var testdataRuntime = mpk.CheckOptions{Workers: 4, QueueLen: 32, GPUs: 2}

// mutation breaks a good graph in one way; code is the finding it must cause.
type mutation struct {
	name     string
	code     string
	fn       func(g *mpk.Graph, opt mpk.CheckOptions) bool // false: the graph offers no place for it
	optional bool                                          // may find no place in a graph
}

var mutations = []mutation{
	{"missing-trigger", mpk.CodeDeadlock, missingTrigger, false},
	{"extra-trigger", mpk.CodeExtraTrigger, extraTrigger, false},
	{"cycle", mpk.CodeCycle, cycle, false},
	{"overlapping-outputs", mpk.CodeOverlap, overlappingOutputs, false},
	{"queue-overflow", mpk.CodeQueue, queueOverflow, false},
	{"bad-task-range", mpk.CodeTaskRange, badTaskRange, false},
	{"unknown-gpu", mpk.CodeGPU, unknownGPU, false},
	{"second-iteration-step", mpk.CodeIteration, secondIterationStep, false},
	{"unordered-read", mpk.CodeRace, unorderedRead, true},
}

// unorderedRead: a task that reads what the tasks of its dependent_event
// write stops waiting for them.
func unorderedRead(g *mpk.Graph, _ mpk.CheckOptions) bool {
	for t := range g.Tasks {
		dep := g.Tasks[t].DependentEvent
		if !dep.Valid() {
			continue
		}
		for _, w := range triggersOf(g, dep.Index()) {
			for _, out := range g.Tasks[w].Outputs {
				for _, in := range g.Tasks[t].Inputs {
					if in.BasePtr == out.BasePtr {
						g.Tasks[t].DependentEvent = mpk.InvalidEventID
						return true
					}
				}
			}
		}
	}
	return false
}

// unknownGPU: a task signals its event as an event of the first gpu the
// launch does not have.
func unknownGPU(g *mpk.Graph, opt mpk.CheckOptions) bool {
	for t := range g.Tasks {
		if tr := g.Tasks[t].TriggerEvent; tr.Valid() {
			g.Tasks[t].TriggerEvent = mpk.MakeEventID(max(opt.GPUs, 1), tr.Index(), tr.NVSHMEM())
			return true
		}
	}
	return false
}

// secondIterationStep: an event that only joins tasks becomes a second
// EVENT_LAUNCH_DEPENDENT_TASKS of the iteration (launching nothing). In a
// graph without one, one trigger of the launching event signals a new
// EVENT_LAUNCH_DEPENDENT_TASKS instead, so the launching event fires (one
// trigger early) before the iteration's step.
func secondIterationStep(g *mpk.Graph, _ mpk.CheckOptions) bool {
	dependent := mpk.EventCode(g.Numbering(), mpk.KindLaunchDependentTasks)
	has := false
	for _, ev := range g.Events {
		has = has || ev.Kind() == mpk.KindLaunchDependentTasks
	}
	for e := range g.Events {
		ev := &g.Events[e]
		switch {
		case has && ev.Kind() == mpk.KindEmpty && len(consumers(g, e)) > 0:
			ev.EventType, ev.FirstTaskID, ev.LastTaskID = dependent, 0, 0
			return true
		case !has && ev.Kind() == mpk.KindLaunchTasks:
			g.Events = append(g.Events, mpk.Event{EventType: mpk.EventCode(g.Numbering(), mpk.KindLaunchDependentTasks), NumTriggers: ev.NumTriggers})
			for _, t := range triggersOf(g, e) {
				g.Tasks[t].DependentEvent = mpk.InvalidEventID
			}
			last := triggersOf(g, e)
			g.Tasks[last[len(last)-1]].TriggerEvent = mpk.MakeEventID(0, len(g.Events)-1, false)
			ev.NumTriggers--
			return true
		}
	}
	return false
}

// consumers are the tasks an event orders: those waiting on it and, for an
// event that launches tasks within an iteration, those it launches.
func consumers(g *mpk.Graph, e int) []int {
	var out []int
	for t := range g.Tasks {
		if d := g.Tasks[t].DependentEvent; d.Valid() && d.Index() == e {
			out = append(out, t)
		}
	}
	if k := g.Events[e].Kind(); k == mpk.KindLaunchTasks || k == mpk.KindLaunchMassiveTasks {
		for t := g.Events[e].FirstTaskID; t < g.Events[e].LastTaskID && t < int64(len(g.Tasks)); t++ {
			out = append(out, int(t))
		}
	}
	return out
}

func triggersOf(g *mpk.Graph, e int) []int {
	var out []int
	for t := range g.Tasks {
		if tr := g.Tasks[t].TriggerEvent; tr.Valid() && tr.Index() == e {
			out = append(out, t)
		}
	}
	return out
}

// usedEvent is the first event with consumers and at least minTriggers
// triggering tasks.
func usedEvent(g *mpk.Graph, minTriggers int) int {
	for e := range g.Events {
		if len(consumers(g, e)) > 0 && len(triggersOf(g, e)) >= minTriggers {
			return e
		}
	}
	return -1
}

// missingTrigger: one task of a joined event no longer signals it.
func missingTrigger(g *mpk.Graph, _ mpk.CheckOptions) bool {
	e := usedEvent(g, 2)
	if e < 0 {
		e = usedEvent(g, 1)
	}
	if e < 0 {
		return false
	}
	tr := triggersOf(g, e)
	g.Tasks[tr[len(tr)-1]].TriggerEvent = mpk.InvalidEventID
	return true
}

// extraTrigger: an event counts one trigger fewer than the tasks that signal it.
func extraTrigger(g *mpk.Graph, _ mpk.CheckOptions) bool {
	e := usedEvent(g, 2)
	if e < 0 {
		return false
	}
	g.Events[e].NumTriggers--
	return true
}

// cycle: a producer of an event waits for what one of its consumers signals.
func cycle(g *mpk.Graph, _ mpk.CheckOptions) bool {
	for e := range g.Events {
		tr := triggersOf(g, e)
		for _, y := range consumers(g, e) {
			if yt := g.Tasks[y].TriggerEvent; len(tr) > 0 && yt.Valid() {
				// waited on as this gpu's event (the testdata graphs are gpu 0's)
				g.Tasks[tr[0]].DependentEvent = mpk.MakeEventID(0, yt.Index(), yt.NVSHMEM())
				return true
			}
		}
	}
	return false
}

// overlappingOutputs: of two sibling tasks writing disjoint parts of one
// tensor, the second now writes the first's part.
func overlappingOutputs(g *mpk.Graph, _ mpk.CheckOptions) bool {
	type key struct {
		base string
		dep  mpk.EventID
	}
	first := map[key]int{}
	for t := range g.Tasks {
		for _, out := range g.Tasks[t].Outputs {
			k := key{out.BasePtr, g.Tasks[t].DependentEvent}
			f, seen := first[k]
			if !seen {
				first[k] = t
				continue
			}
			if f == t {
				continue
			}
			want := g.Tasks[f].Outputs[0]
			for i := range g.Tasks[t].Outputs {
				if g.Tasks[t].Outputs[i].BasePtr == want.BasePtr && g.Tasks[t].Outputs[i].Offset != want.Offset {
					g.Tasks[t].Outputs[i].Offset = want.Offset
					return true
				}
			}
		}
	}
	return false
}

// queueOverflow: the event launching the last tasks launches enough no-op
// tasks more that one worker's share exceeds its queue.
func queueOverflow(g *mpk.Graph, opt mpk.CheckOptions) bool {
	for e := range g.Events {
		ev := &g.Events[e]
		k := ev.Kind()
		if (k != mpk.KindLaunchTasks && k != mpk.KindLaunchMassiveTasks && k != mpk.KindLaunchDependentTasks) || ev.LastTaskID != int64(len(g.Tasks)) {
			continue
		}
		for n := ev.LastTaskID - ev.FirstTaskID; n <= int64(opt.Workers*opt.QueueLen); n++ {
			g.Tasks = append(g.Tasks, mpk.Task{TaskType: 121, TriggerEvent: mpk.InvalidEventID, DependentEvent: mpk.InvalidEventID,
				RequestID: -1, ExpertOffset: -1, KVIdx: -1, MergeTaskOffset: -1, TaskOffset: -1})
		}
		ev.LastTaskID = int64(len(g.Tasks))
		return true
	}
	return false
}

// badTaskRange: a launching event's range runs past all_tasks.
func badTaskRange(g *mpk.Graph, _ mpk.CheckOptions) bool {
	for e := range g.Events {
		if k := g.Events[e].Kind(); k == mpk.KindLaunchTasks || k == mpk.KindLaunchMassiveTasks || k == mpk.KindLaunchDependentTasks {
			g.Events[e].LastTaskID = int64(len(g.Tasks)) + 3
			return true
		}
	}
	return false
}

// exportedTestdata are the good files amk's exporter writes. The small
// export (1.4 MB) is committed without its mutations, which the tests make
// in memory; llama-1b's (5.6 MB) is made in the tests only.
var exportedTestdata = map[string]string{"toy": "good/export_toy.json", "small": "large/export_small.json"}

func readGraph(t *testing.T, path string) *mpk.Graph {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := mpk.Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

// golden compares (or, with -update, writes) a file.
func golden(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ir/mpk -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date (run go test ./ir/mpk -update):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func goodFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "good", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no good testdata: %v", err)
	}
	sort.Strings(files)
	return files
}

// The committed exports are what the exporter writes today.
func TestExportedTestdataIsCurrent(t *testing.T) {
	for preset, file := range exportedTestdata {
		golden(t, filepath.Join("testdata", file), exported(t, lowered(t, preset)))
	}
}

// Every good graph is VALID with the expected report; every mutation of it
// is REJECTED with the expected report, which carries the mutation's code.
func TestGoodAndBadGraphs(t *testing.T) {
	for _, file := range goodFiles(t) {
		base := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(base, func(t *testing.T) {
			rep := mpk.Check(readGraph(t, file), testdataRuntime)
			if !rep.OK {
				t.Errorf("good graph rejected:\n%s", rep)
			}
			golden(t, strings.TrimSuffix(file, ".json")+".txt", []byte(rep.String()+"\n"))
			for _, m := range mutations {
				g := readGraph(t, file)
				if !m.fn(g, testdataRuntime) {
					if m.optional {
						continue
					}
					t.Fatalf("mutation %s finds no place in %s", m.name, file)
				}
				bad := filepath.Join("testdata", "bad", base+"."+m.name+".json")
				golden(t, bad, mpk.Encode(g))
				rep := mpk.Check(readGraph(t, bad), testdataRuntime)
				if rep.OK || !hasCode(rep, m.code) {
					t.Errorf("%s: want an error[%s], got:\n%s", bad, m.code, rep)
				}
				golden(t, strings.TrimSuffix(bad, ".json")+".txt", []byte(rep.String()+"\n"))
			}
		})
	}
}

func hasCode(rep mpk.Report, code string) bool {
	for _, f := range rep.Errors {
		if f.Code == code {
			return true
		}
	}
	return false
}

// The larger exports (small committed under testdata/large, llama-1b made
// here) are valid, and every mutation of them is caught.
func TestMutationsOfLargerExports(t *testing.T) {
	opt := mpk.CheckOptions{Workers: 16, QueueLen: 512, GPUs: 2}
	large := filepath.Join("testdata", "large", "export_small.json")
	golden(t, strings.TrimSuffix(large, ".json")+".txt", []byte(mpk.Check(readGraph(t, large), opt).String()+"\n"))
	for _, preset := range []string{"small", "llama-1b"} {
		p := lowered(t, preset)
		for _, m := range mutations {
			g, err := mpk.ToGraph(p, mpk.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep := mpk.Check(g, opt); !rep.OK {
				t.Fatalf("%s: %s", preset, rep)
			}
			if !m.fn(g, opt) && !m.optional {
				t.Fatalf("%s: mutation %s finds no place", preset, m.name)
			}
			if rep := mpk.Check(g, opt); rep.OK || !hasCode(rep, m.code) {
				t.Errorf("%s.%s: want an error[%s], got:\n%s", preset, m.name, m.code, rep)
			}
		}
	}
}
