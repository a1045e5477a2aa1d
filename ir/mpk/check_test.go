package mpk_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
)

// amk's exports of its lowered presets pass MPK's checker.
func TestExportsOfLoweredPresetsAreValid(t *testing.T) {
	for _, preset := range []string{"toy", "small", "llama-1b"} {
		t.Run(preset, func(t *testing.T) {
			g, err := mpk.ToGraph(lowered(t, preset), mpk.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep := mpk.Check(g, mpk.CheckOptions{}); !rep.OK {
				t.Fatal(rep)
			}
		})
	}
}

// A graph too large for the happens-before table is still checked, and says
// that its races were not.
func TestRaceCheckBoundIsReported(t *testing.T) {
	g := &mpk.Graph{Events: []mpk.Event{
		{EventType: mpk.EventCode(mpk.NumberingMirage, mpk.KindLaunchDependentTasks), NumTriggers: 1, FirstTaskID: 1, LastTaskID: 1<<15 + 2},
		{EventType: mpk.EventCode(mpk.NumberingMirage, mpk.KindEndOfTaskGraph), NumTriggers: 1},
	}}
	g.Tasks = append(g.Tasks, mpk.Task{TaskType: mpk.TaskBeginTaskGraph, TriggerEvent: mpk.MakeEventID(0, 0, false), DependentEvent: mpk.InvalidEventID})
	for len(g.Tasks) < 1<<15+2 {
		g.Tasks = append(g.Tasks, mpk.Task{TaskType: 121, TriggerEvent: mpk.InvalidEventID, DependentEvent: mpk.InvalidEventID})
	}
	g.Tasks[1].TriggerEvent = mpk.MakeEventID(0, 1, false)
	rep := mpk.Check(g, mpk.CheckOptions{Workers: 128, QueueLen: 1024})
	if !rep.OK || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0].Message, "races not checked") {
		t.Fatal(rep)
	}
}

// A warning (here: no end-of-graph event) does not stop the race check, and
// is not counted as an error.
func TestWarningsDoNotHideRaces(t *testing.T) {
	g := readGraph(t, filepath.Join("testdata", "good", "hand_seed.json"))
	g.Events[2].EventType = mpk.EventCode(mpk.NumberingSeed, mpk.KindEmpty)
	rep := mpk.Check(g, mpk.CheckOptions{})
	if !rep.OK || len(rep.Warnings) != 2 {
		t.Fatalf("without an end event:\n%s", rep)
	}
	g.Tasks[4].Outputs[0].Offset = g.Tasks[3].Outputs[0].Offset
	rep = mpk.Check(g, mpk.CheckOptions{})
	if rep.OK || len(rep.Errors) != 1 || rep.Errors[0].Code != mpk.CodeOverlap {
		t.Fatalf("overlap without an end event:\n%s", rep)
	}
}

// A task in two launching ranges runs twice per iteration.
func TestDoubleLaunchIsReported(t *testing.T) {
	g := readGraph(t, filepath.Join("testdata", "good", "hand_seed.json"))
	g.FirstTasks = append(g.FirstTasks, 3) // task 3 is also in e1's range
	rep := mpk.Check(g, mpk.CheckOptions{})
	if rep.OK || !strings.Contains(rep.String(), "error[launch]: task 3 (TASK_LINEAR) is launched twice in one iteration: it runs twice and over-counts e2") {
		t.Fatalf("%s", rep)
	}
}
