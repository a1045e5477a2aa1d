// Package controltest is the suite every implementation of control.Service
// passes, so that a workspace on this machine, a scheduler's fleet and a
// scheduler across its HTTP API answer every campaign operation alike:
// the same checks, the same kinds of errors, the same events applied.
//
// control's own tests run it over control.Local; internal/scheduler's over
// a Fleet; internal/api's over the client, the HTTP server and a fleet on a
// real redis-server with a worker. A new operation gets a case here.
package controltest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// Target is one implementation under test, fresh, with no campaigns.
type Target struct {
	Service control.Service
	// Driven: a campaign created starts running (a fleet); its experiments
	// grow by themselves until it is paused or done.
	Driven bool
	// LocalFiles: the report files are written on this machine, so the
	// paths WriteReport answers can be read here.
	LocalFiles bool
	// Workers: the implementation has a worker registry (control.Fleet's
	// Workers answers; otherwise ErrUnsupported).
	Workers bool
}

// Factory makes a fresh Target for one case; what it starts is stopped at
// the test's cleanup.
type Factory func(t *testing.T) Target

// timeout bounds each case's calls.
const timeout = 60 * time.Second

// Run runs the suite against factory, one fresh target per case.
func Run(t *testing.T, factory Factory) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, tg Target)
	}{
		{"unknown campaigns are not found", unknownCampaigns},
		{"bad create requests are bad values and create nothing", badCreates},
		{"create finds an existing campaign; selectors resolve it", createAndResolve},
		{"a campaign is for a workload", workloads},
		{"operator commands and their conflicts", lifecycle},
		{"records", records},
		{"records are checked as worker outcomes are", checkedRecords},
		{"an operator's note goes into the ledger and the reports", notes},
		{"reports", reports},
		{"one trial", trials},
		{"workers and queues", fleet},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			c.run(t, ctx, factory(t))
		})
	}
}

// request is a toy campaign that cannot end by itself while a case runs:
// overnight (no plateau), a large budget, one trial in flight.
func request(name string) control.CreateRequest {
	return control.CreateRequest{Model: "toy", GPU: "h200", Name: name, Cold: true, Overnight: true,
		Budget: &campaign.Budget{Iterations: 100000}, Workers: 1}
}

// create creates a toy campaign and pauses it at once, so that the case
// sees a campaign whose state only it changes (a driven one stops
// proposing trials).
func create(t *testing.T, ctx context.Context, tg Target, name string) string {
	t.Helper()
	resp, err := tg.Service.Create(ctx, request(name))
	if err != nil || !resp.Created {
		t.Fatalf("create %s: %+v %v", name, resp, err)
	}
	command(t, ctx, tg.Service, resp.ID, campaign.OpPause, control.CommandRequest{Note: "held by the suite"}, "paused: held by the suite", campaign.StatusPaused)
	return resp.ID
}

// wantKind fails unless err is of kind.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: %v, want an error of kind %q", what, err, kind)
	}
}

func unknownCampaigns(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("a fresh target lists %+v %v", list, err)
	}
	_, err := control.Resolve(ctx, s, control.Selector{})
	wantKind(t, "the only campaign of none", err, control.ErrNotFound)
	if err == nil || !strings.Contains(err.Error(), "no campaigns") {
		t.Errorf("the only campaign of none: %v", err)
	}
	for _, id := range []string{"no-such-campaign", "../x", ""} {
		_, err := s.Status(ctx, id)
		wantKind(t, "status of "+id, err, control.ErrNotFound)
		_, err = s.StatusText(ctx, id)
		wantKind(t, "status text of "+id, err, control.ErrNotFound)
		_, err = s.Next(ctx, id)
		wantKind(t, "next of "+id, err, control.ErrNotFound)
		_, err = s.Report(ctx, id)
		wantKind(t, "report of "+id, err, control.ErrNotFound)
		_, err = s.Command(ctx, id, campaign.OpPause, control.CommandRequest{})
		wantKind(t, "pause of "+id, err, control.ErrNotFound)
		_, err = s.Record(ctx, id, control.RecordRequest{Status: "failed"})
		wantKind(t, "record into "+id, err, control.ErrNotFound)
	}
	_, err = s.Status(ctx, "no-such-campaign")
	if err == nil || !strings.Contains(err.Error(), `no campaign "no-such-campaign"`) {
		t.Errorf("status of an unknown campaign: %v", err)
	}
}

func badCreates(t *testing.T, ctx context.Context, tg Target) {
	negative, two, big := -1, 2.0, control.MaxWorkers+1
	for name, req := range map[string]control.CreateRequest{
		"no model":         {GPU: "h200"},
		"no gpu":           {Model: "toy"},
		"unknown gpu":      {Model: "toy", GPU: "v100"},
		"unknown model":    {Model: "gpt-9", GPU: "h200"},
		"unknown device":   {Model: "toy", GPU: "h200", Device: "tpu"},
		"negative budget":  {Model: "toy", GPU: "h200", Budget: &campaign.Budget{Iterations: -1}},
		"bad criteria":     {Model: "toy", GPU: "h200", MoveOn: &control.MoveOn{ConsecutiveReverts: &negative}},
		"epsilon above 1":  {Model: "toy", GPU: "h200", Epsilon: &two},
		"too many workers": {Model: "toy", GPU: "h200", Workers: big},
		"batch 0":          {Model: "toy", GPU: "h200", Batch: new(0)},
		"no generation":    {Model: "toy", GPU: "h200", Workload: &trial.Workload{PromptLens: []int{64}, GenLen: 0}},
		"no prompt length": {Model: "toy", GPU: "h200", Workload: &trial.Workload{GenLen: 8}},
		"context too long": {Model: "toy", GPU: "h200", Workload: &trial.Workload{PromptLens: []int{trial.MaxContext}, GenLen: 8}},
		"two batches":      {Model: "toy", GPU: "h200", Workload: &trial.Workload{PromptLens: []int{64}, GenLen: 8, Batch: 2}, Batch: new(4)},
		"speedup below 0":  {Model: "toy", GPU: "h200", MoveOn: &control.MoveOn{SpeedupTarget: new(-1.0)}},
	} {
		_, err := tg.Service.Create(ctx, req)
		wantKind(t, name, err, control.ErrBadValue)
	}
	if list, err := tg.Service.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("bad requests created %+v %v", list, err)
	}
}

func createAndResolve(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	req := request("")
	req.GPU = " H200 " // normalised
	resp, err := s.Create(ctx, req)
	if err != nil || !resp.Created || resp.ID != "toy-h200-cpu" || resp.Campaign.ID != resp.ID || resp.Campaign.Device != "cpu" {
		t.Fatalf("create: %+v %v", resp, err)
	}
	again, err := s.Create(ctx, control.CreateRequest{Model: "toy", GPU: "h200", Seed: 99})
	if err != nil || again.Created || again.ID != resp.ID || again.Campaign.Settings.Budget.Iterations != 100000 {
		t.Fatalf("second create (the existing campaign, its settings kept): %+v %v", again, err)
	}
	for _, sel := range []control.Selector{{}, {Arg: resp.ID}, {Arg: "toy", GPU: "h200", Device: "cpu"}, {ID: resp.ID}} {
		if id, err := control.Resolve(ctx, s, sel); err != nil || id != resp.ID {
			t.Errorf("resolve %+v: %q %v", sel, id, err)
		}
	}
	_, err = control.Resolve(ctx, s, control.Selector{Arg: "toy"})
	wantKind(t, "a lone model", err, control.ErrNotFound)
	_, err = control.Resolve(ctx, s, control.Selector{Arg: "x", Extra: []string{"y"}})
	wantKind(t, "extra arguments", err, control.ErrBadValue)
	_, err = control.Resolve(ctx, s, control.Selector{ID: "a", Arg: "b"})
	wantKind(t, "an id and an argument", err, control.ErrBadValue)
	if _, err := s.Create(ctx, request("second")); err != nil {
		t.Fatal(err)
	}
	_, err = control.Resolve(ctx, s, control.Selector{})
	wantKind(t, "the only campaign of two", err, control.ErrBadValue)
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "toy-h200-cpu" || list[1].ID != "toy-h200-cpu-second" {
		t.Fatalf("list: %+v %v", list, err)
	}
	// A start of a campaign that is done would do nothing: it is refused,
	// with the commands that would do something.
	command(t, ctx, s, "toy-h200-cpu-second", campaign.OpStop, control.CommandRequest{}, "stopped by operator", campaign.StatusDone)
	_, err = s.Create(ctx, request("second"))
	wantKind(t, "a start of a done campaign", err, control.ErrConflict)
	if err == nil || !strings.Contains(err.Error(), "amkctl reopen toy-h200-cpu-second --iters") || !strings.Contains(err.Error(), "--name NAME") {
		t.Errorf("a start of a done campaign says %v, want the reopen and --name commands", err)
	}
}

// workloads: a request's workload, batch and speedup target reach the
// campaign's settings and reports; a workload other than the default names
// its campaign; an existing campaign is found only for its own workload.
func workloads(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	def, err := s.Create(ctx, request(""))
	if err != nil || !def.Created || def.ID != "toy-h200-cpu" {
		t.Fatalf("create with the default workload: %+v %v", def, err)
	}
	if w := def.Campaign.Settings.Workload; w == nil || !w.Equal(trial.DefaultWorkload()) || def.Campaign.Workload != trial.DefaultWorkload().String() {
		t.Errorf("the default workload: %+v %q", w, def.Campaign.Workload)
	}
	command(t, ctx, s, def.ID, campaign.OpPause, control.CommandRequest{}, "paused", campaign.StatusPaused)

	req := request("")
	req.Workload = &trial.Workload{PromptLens: []int{64, 32}, GenLen: 8}
	req.Batch = new(2)
	req.MoveOn = &control.MoveOn{SpeedupTarget: new(0.0)}
	resp, err := s.Create(ctx, req)
	want := trial.Workload{PromptLens: []int{64, 32}, GenLen: 8, Batch: 2}
	if err != nil || !resp.Created || resp.ID != "toy-h200-cpu-p64_32-g8-b2" {
		t.Fatalf("create for a workload: %+v %v", resp, err)
	}
	command(t, ctx, s, resp.ID, campaign.OpPause, control.CommandRequest{}, "paused", campaign.StatusPaused)
	st, err := s.Status(ctx, resp.ID)
	if err != nil || st.Settings.Workload == nil || !st.Settings.Workload.Equal(want) || st.Settings.MoveOn.SpeedupTarget != 0 ||
		st.Settings.MoveOn.ConsecutiveReverts != campaign.DefaultMoveOn().ConsecutiveReverts || st.Workload != want.String() {
		t.Fatalf("the workload campaign's settings: %+v %v", st.Settings, err)
	}
	if text, err := s.StatusText(ctx, resp.ID); err != nil || !strings.Contains(text, want.String()) {
		t.Errorf("status text does not name the workload %q: %v\n%s", want, err, text)
	}
	if wake, err := s.Report(ctx, resp.ID); err != nil || wake.Workload == nil || !wake.Workload.Equal(want) {
		t.Errorf("report's workload: %+v %v", wake.Workload, err)
	}
	same := request("")
	same.Workload = &trial.Workload{PromptLens: []int{64, 32}, GenLen: 8, Batch: 2}
	if again, err := s.Create(ctx, same); err != nil || again.Created || again.ID != resp.ID {
		t.Errorf("create for the same workload (the batch in it): %+v %v", again, err)
	}
	other := request("p64_32-g8-b2")
	other.Workload = &trial.Workload{PromptLens: []int{64}, GenLen: 8}
	_, err = s.Create(ctx, other)
	wantKind(t, "another workload under the campaign's name", err, control.ErrConflict)
	if err == nil || !strings.Contains(err.Error(), want.String()) {
		t.Errorf("another workload under the campaign's name: %v", err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 2 {
		t.Errorf("list after the refused create: %+v %v", list, err)
	}
}

// command applies a command and checks its log and the status after it.
func command(t *testing.T, ctx context.Context, s control.Service, id, op string, req control.CommandRequest, log string, status campaign.Status) control.CommandResponse {
	t.Helper()
	resp, err := s.Command(ctx, id, op, req)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if resp.ID != id || !strings.Contains(strings.Join(resp.Log, "\n"), log) || (status != "" && resp.Campaign.Status != status) {
		t.Fatalf("%s: %+v, want a log with %q and status %q", op, resp, log, status)
	}
	return resp
}

func lifecycle(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	id := create(t, ctx, tg, "life")
	_, err := s.Command(ctx, id, campaign.OpPause, control.CommandRequest{})
	wantKind(t, "a second pause", err, control.ErrConflict)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a second pause: %v", err)
	}
	_, err = s.Command(ctx, id, campaign.OpBudget, control.CommandRequest{})
	wantKind(t, "budget without a budget", err, control.ErrBadValue)
	_, err = s.Command(ctx, id, campaign.OpBudget, control.CommandRequest{Budget: &campaign.Budget{Iterations: -3}})
	wantKind(t, "a negative budget", err, control.ErrBadValue)
	_, err = s.Command(ctx, id, campaign.OpPause, control.CommandRequest{Budget: &campaign.Budget{Iterations: 3}})
	wantKind(t, "pause with a budget", err, control.ErrBadValue)
	_, err = s.Command(ctx, id, "bogus", control.CommandRequest{})
	wantKind(t, "an unknown command", err, control.ErrBadValue)
	_, err = s.Command(ctx, id, campaign.OpNote, control.CommandRequest{Note: strings.Repeat("x", campaign.MaxNoteBytes+1)})
	wantKind(t, "an oversized note", err, control.ErrBadValue)

	command(t, ctx, s, id, campaign.OpBudget, control.CommandRequest{Budget: &campaign.Budget{Iterations: 200000, Minutes: 600}},
		"budget set: 200000 experiments, 600 minutes", campaign.StatusPaused)
	zero, maxMinutes := 0, 900.0
	resp := command(t, ctx, s, id, campaign.OpCriteria, control.CommandRequest{MoveOn: &control.MoveOn{ConsecutiveReverts: &zero, MaxMinutes: &maxMinutes}},
		"move-on criteria set", campaign.StatusPaused)
	if mo := resp.Campaign.Settings.MoveOn; mo.ConsecutiveReverts != 0 || mo.MaxMinutes != 900 || mo.PctRooflineTarget != campaign.DefaultMoveOn().PctRooflineTarget {
		t.Errorf("criteria after the command (others kept): %+v", mo)
	}
	command(t, ctx, s, id, campaign.OpResume, control.CommandRequest{}, "resumed", "")
	command(t, ctx, s, id, campaign.OpStop, control.CommandRequest{Note: "by hand"}, "stopped by operator: by hand", campaign.StatusDone)
	st, err := s.Status(ctx, id)
	if err != nil || st.Status != campaign.StatusDone || !strings.Contains(st.MoveOnReason, "by hand") {
		t.Fatalf("status after stop: %+v %v", st, err)
	}
	_, err = s.Command(ctx, id, campaign.OpPause, control.CommandRequest{})
	wantKind(t, "pause of a done campaign", err, control.ErrConflict)
	lat := 3.0
	_, err = s.Record(ctx, id, control.RecordRequest{Status: "kept", LatencyUS: &lat, Kind: "predicted"})
	wantKind(t, "record into a done campaign", err, control.ErrConflict)
	if err == nil || !strings.Contains(err.Error(), "done") {
		t.Errorf("record into a done campaign: %v", err)
	}
	reverts := 5
	resp = command(t, ctx, s, id, campaign.OpReopen, control.CommandRequest{Note: "more", Budget: &campaign.Budget{Iterations: 300000},
		MoveOn: &control.MoveOn{ConsecutiveReverts: &reverts}}, "reopened: more", "")
	if resp.Campaign.Settings.Budget.Iterations != 300000 || resp.Campaign.Settings.MoveOn.ConsecutiveReverts != 5 || resp.Campaign.Settings.MoveOn.MaxMinutes != 900 {
		t.Errorf("settings after reopen: %+v", resp.Campaign.Settings)
	}
	command(t, ctx, s, id, campaign.OpPause, control.CommandRequest{}, "paused", campaign.StatusPaused)
}

func records(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	id := create(t, ctx, tg, "rec")
	for name, req := range map[string]control.RecordRequest{
		"no status":                {},
		"an unknown status":        {Status: "sideways"},
		"kept without a latency":   {Status: "kept"},
		"a latency without a kind": {Status: "kept", LatencyUS: new(2.0)},
	} {
		_, err := s.Record(ctx, id, req)
		wantKind(t, name, err, control.ErrBadValue)
	}
	resp, err := s.Record(ctx, id, control.RecordRequest{Status: "failed", Description: "by hand", Source: "test",
		Config: []byte(`{"threads_per_block": 128}`)})
	if err != nil || resp.ID != id || len(resp.Rows) != 1 || !strings.HasPrefix(resp.Rows[0].Description, "by hand") || !strings.Contains(resp.Rows[0].Description, campaign.RecordedMark) || resp.Rows[0].Correctness != "FAIL" {
		t.Fatalf("record: %+v %v", resp, err)
	}
	if resp.Campaign.Status != campaign.StatusPaused || resp.Campaign.ExperimentsRun < 1 {
		t.Errorf("campaign after the record: %+v", resp.Campaign)
	}
}

func notes(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	id := create(t, ctx, tg, "notes")
	_, err := s.Command(ctx, id, campaign.OpNote, control.CommandRequest{Note: "  "})
	wantKind(t, "a note without text", err, control.ErrBadValue)
	command(t, ctx, s, id, campaign.OpNote, control.CommandRequest{Note: "swapped the fan"}, "note: swapped the fan", campaign.StatusPaused)
	command(t, ctx, s, id, campaign.OpStop, control.CommandRequest{}, "campaign done", campaign.StatusDone)
	command(t, ctx, s, id, campaign.OpNote, control.CommandRequest{Note: "read after the stop"}, "note: read after the stop", campaign.StatusDone)
	wake, err := s.Report(ctx, id)
	if err != nil || len(wake.Notes) != 2 || wake.Notes[0].Text != "swapped the fan" || wake.Notes[1].Text != "read after the stop" || wake.Notes[0].Time.IsZero() {
		t.Fatalf("notes in the report: %+v %v", wake.Notes, err)
	}
	if md := wake.Markdown(); !strings.Contains(md, "## Operator notes") || !strings.Contains(md, ": swapped the fan") {
		t.Errorf("wake-up report:\n%s", md)
	}
	if md, err := s.AggregateReport(ctx, id); err != nil || !strings.Contains(md, ": read after the stop") {
		t.Errorf("campaign report: %v\n%s", err, md)
	}
}

func reports(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	id := create(t, ctx, tg, "reports")
	text, err := s.StatusText(ctx, id)
	if err != nil || !strings.Contains(text, "AMK Autoresearch Orchestration Status") || !strings.Contains(text, "PAUSED") {
		t.Fatalf("status text: %v\n%s", err, text)
	}
	n, err := s.Next(ctx, id)
	if err != nil || n.Decision != "paused" || n.Campaign == "" {
		t.Fatalf("next: %+v %v", n, err)
	}
	command(t, ctx, s, id, campaign.OpStop, control.CommandRequest{}, "campaign done", campaign.StatusDone)
	if n, err := s.Next(ctx, id); err != nil || n.Decision != "stop" || !strings.HasPrefix(n.Text(), "DECISION: STOP") {
		t.Fatalf("next of a done campaign: %+v %v", n, err)
	}
	wake, err := s.Report(ctx, id)
	if err != nil || wake.ID != id || wake.Status != campaign.StatusDone || wake.Honesty == "" {
		t.Fatalf("report: %+v %v", wake, err)
	}
	if md, err := s.AggregateReport(ctx, id); err != nil || !strings.Contains(md, "Campaign Report") || !strings.Contains(md, id) {
		t.Fatalf("campaign report: %v\n%s", err, md)
	}
	files, err := s.WriteReport(ctx, id)
	if err != nil || files.ID != id {
		t.Fatalf("report files: %+v %v", files, err)
	}
	// A driven campaign may have finished a trial before the pause, and so
	// have a best to write.
	want := control.AggregateReportFile + " report.json report.md report.svg"
	if wake.BestFile != "" {
		want += " " + wake.BestFile
	}
	var names []string
	for _, f := range files.Files {
		names = append(names, filepath.Base(f))
		if !tg.LocalFiles {
			continue
		}
		if data, err := os.ReadFile(f); err != nil || len(data) == 0 {
			t.Errorf("report file %s: %v", f, err)
		}
	}
	if got := strings.Join(names, " "); got != want {
		t.Errorf("report files %s, want %s", got, want)
	}
}

func trials(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	_, err := s.Trial(ctx, "no-such-campaign", 0)
	wantKind(t, "a trial of an unknown campaign", err, control.ErrNotFound)
	if !tg.Driven {
		id := create(t, ctx, tg, "trials")
		_, err = s.Trial(ctx, id, 0)
		wantKind(t, "a trial of a campaign that ran none", err, control.ErrNotFound)
		if err == nil || !strings.Contains(err.Error(), "has no trial 0") {
			t.Errorf("a trial of a campaign that ran none: %v", err)
		}
		return
	}
	// A driven campaign with one trial in flight at a time finishes trial 0
	// first.
	resp, err := s.Create(ctx, request("trials"))
	if err != nil {
		t.Fatal(err)
	}
	WaitStatus(t, s, resp.ID, timeout, "its first experiment", Ran(1))
	command(t, ctx, s, resp.ID, campaign.OpPause, control.CommandRequest{}, "paused", campaign.StatusPaused)
	rep, err := s.Trial(ctx, resp.ID, 0)
	if err != nil || rep.State != control.TrialFinished || rep.Outcome == nil || rep.Outcome.Verdict == nil ||
		rep.Experiment == nil || rep.Outcome.Worker == "" || len(rep.Outcome.Stages) == 0 {
		t.Fatalf("trial 0: %+v %v", rep, err)
	}
	if text := rep.Text(); !strings.Contains(text, "Trial 0 of campaign "+resp.ID+": finished") || !strings.Contains(text, "worker: ") {
		t.Errorf("trial 0 as text:\n%s", text)
	}
	_, err = s.Trial(ctx, resp.ID, 1_000_000)
	wantKind(t, "a trial never issued", err, control.ErrNotFound)
}

func fleet(t *testing.T, ctx context.Context, tg Target) {
	f, ok := tg.Service.(control.Fleet)
	if !ok {
		t.Fatalf("%T is not a control.Fleet", tg.Service)
	}
	if err := f.Health(ctx); err != nil {
		t.Errorf("health: %v", err)
	}
	workers, werr := f.Workers(ctx)
	_, qerr := f.Queues(ctx)
	if !tg.Workers {
		wantKind(t, "workers", werr, control.ErrUnsupported)
		wantKind(t, "queues", qerr, control.ErrUnsupported)
		return
	}
	if werr != nil || qerr != nil {
		t.Fatalf("workers %v, queues %v", werr, qerr)
	}
	// A worker announces itself shortly after it starts.
	waitfor.Check(t, timeout/2, func() error {
		if workers, werr = f.Workers(ctx); werr != nil || len(workers) == 0 || workers[0].Target == "" {
			return fmt.Errorf("workers of a fleet with one: %+v %v", workers, werr)
		}
		return nil
	})
}

// checkedRecords: an agent's record gets the checks a worker's outcome
// gets. The floor and the percentage are the campaign's own, recomputed;
// a latency below the floor, or of another kind than the campaign's device
// measures, is refused; and what an agent recorded is marked as such in
// results.tsv, the reports and the trajectory.
func checkedRecords(t *testing.T, ctx context.Context, tg Target) {
	s := tg.Service
	id := create(t, ctx, tg, "checked")
	st, err := s.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	floor, err := control.FloorOf(st.Model, st.GPU, st.Settings.Pos, st.Settings.Batch, st.Settings.Workload)
	if err != nil {
		t.Fatal(err)
	}
	tiny, above := 0.000001, floor.StreamedUS*3
	one, forgedBound := 1.0, floor.StreamedUS/2
	for name, req := range map[string]control.RecordRequest{
		"a measured-gpu latency in a cpu campaign": {Status: "kept", LatencyUS: &tiny, Kind: "measured-gpu"},
		"a measured-gpu latency above the floor":   {Status: "kept", LatencyUS: &above, Kind: "measured-gpu"},
		"a latency below the floor":                {Status: "kept", LatencyUS: &tiny, Kind: "predicted"},
		"a percentage without a latency":           {Status: "tried", PctOfRoofline: &one},
	} {
		_, err := s.Record(ctx, id, req)
		wantKind(t, name, err, control.ErrBadValue)
	}
	after, err := s.Status(ctx, id)
	if err != nil || after.Counts.Recorded != 0 || (after.BestUS != nil && *after.BestUS < floor.StreamedUS) || after.Status != campaign.StatusPaused {
		t.Fatalf("refused records changed the campaign: %+v %v", after, err)
	}
	// Figures that are not the campaign's (a percentage of another floor,
	// another floor) are replaced by its own, and the answer says so.
	resp, err := s.Record(ctx, id, control.RecordRequest{Status: "kept", LatencyUS: &above, Kind: "predicted", Description: "by hand",
		PctOfRoofline: &one, BoundUS: &forgedBound})
	if err != nil || len(resp.Rows) != 1 {
		t.Fatalf("a latency at three times the floor: %+v %v", resp, err)
	}
	if log := strings.Join(resp.Log, "\n"); !strings.Contains(log, "pct_of_roofline 1 replaced") || !strings.Contains(log, "bound_us") {
		t.Errorf("the answer does not say the agent's figures were replaced: %s", log)
	}
	row := resp.Rows[0]
	if want, _ := ir.PctOfRoofline(above, floor.StreamedUS); row.PctOfRoofline == nil || *row.PctOfRoofline != want {
		t.Errorf("row pct_of_roofline %v, want %v (latency / the campaign's floor)", row.PctOfRoofline, want)
	}
	if !strings.Contains(row.Description, campaign.RecordedMark) {
		t.Errorf("results.tsv row %q does not say an agent recorded it", row.Description)
	}
	if resp.Campaign.Status == campaign.StatusDone {
		t.Errorf("one record flipped the campaign to done: %s", resp.Campaign.MoveOnReason)
	}
	wake, err := s.Report(ctx, id)
	if err != nil || wake.BoundUS == nil || *wake.BoundUS != floor.BoundUS() {
		t.Fatalf("report: floor %v, want the campaign's %v (%v)", wake.BoundUS, floor.BoundUS(), err)
	}
	recorded := 0
	for _, p := range wake.Trajectory {
		if p.Recorded != (p.Trial < 0) {
			t.Errorf("trajectory point %+v: recorded %v for trial %d", p, p.Recorded, p.Trial)
		}
		if p.Recorded {
			recorded++
		}
	}
	if recorded != 1 || !wake.BestRecorded {
		t.Errorf("%d trajectory points and the best (recorded: %v) are marked as an agent's, want the one record", recorded, wake.BestRecorded)
	}
	if md := wake.Markdown(); !strings.Contains(md, "recorded by an agent") {
		t.Errorf("the wake-up report does not say the best was recorded by an agent:\n%s", md)
	}
	if md, err := s.AggregateReport(ctx, id); err != nil || !strings.Contains(md, "recorded by an agent") {
		t.Errorf("the campaign report does not say the best was recorded by an agent: %v\n%s", err, md)
	}
}
