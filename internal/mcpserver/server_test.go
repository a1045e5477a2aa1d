package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/waitfor"
)

// harness is a server on a fresh local workspace and an SDK client
// connected to it over the SDK's in-memory transport.
type harness struct {
	t      *testing.T
	srv    *Server
	local  *control.Local
	client *mcp.ClientSession

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	local, err := control.OpenLocal(filepath.Join(t.TempDir(), "workspace"), true, flywheel.Env{AMKVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Campaigns: control.New(local), Version: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, local: local}
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "amk-test", Version: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, req.Params)
			h.mu.Unlock()
		},
	})
	if h.client, err = client.Connect(ctx, ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.client.Close()
		_ = ss.Wait()
		_ = srv.Close()
	})
	return h
}

// call calls a tool and returns its result; a protocol error fails the
// test.
func (h *harness) call(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured answer.
func (h *harness) ok(name string, args map[string]any, answer any) {
	h.t.Helper()
	res := h.call(context.Background(), name, args)
	if res.IsError {
		h.t.Fatalf("%s %v: tool error: %s", name, args, text(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(data, answer); err != nil {
		h.t.Fatalf("%s: answer %s: %v", name, data, err)
	}
}

// toolError calls a tool that must fail and returns its message.
func (h *harness) toolError(name string, args map[string]any) string {
	h.t.Helper()
	res := h.call(context.Background(), name, args)
	if !res.IsError {
		h.t.Fatalf("%s %v: want a tool error, got %s", name, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestListTools(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	res, err := h.client.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	schemas := map[string]map[string]any{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		data, _ := json.Marshal(tool.InputSchema)
		var schema map[string]any
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatal(err)
		}
		if schema["type"] != "object" {
			t.Errorf("%s: input schema type %v", tool.Name, schema["type"])
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
		schemas[tool.Name] = schema
	}
	slices.Sort(names)
	want := []string{"amk_autoresearch", "amk_doctor", "amk_eval", "amk_loop", "amk_orchestrate_next", "amk_orchestrate_record",
		"amk_orchestrate_report", "amk_orchestrate_status", "amk_propose",
		"autoresearch", "budget", "campaigns", "cancel", "criteria", "doctor", "eval", "loop", "next", "note", "pause", "propose", "record", "reopen", "report",
		"resume", "status", "stop", "trial", "tune_instruction"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	evalSchema := schemas["eval"]
	required, _ := evalSchema["required"].([]any)
	if !slices.Contains(required, any("model")) || !slices.Contains(required, any("gpu")) {
		t.Errorf("eval requires %v, want model and gpu", required)
	}
	props, _ := evalSchema["properties"].(map[string]any)
	for _, p := range []string{"model", "gpu", "schedule", "config", "device", "token_id", "pos", "weights", "batch"} {
		if _, ok := props[p]; !ok {
			t.Errorf("eval schema lacks %s: %v", p, props)
		}
	}
	loopProps, _ := schemas["loop"]["properties"].(map[string]any)
	if _, ok := loopProps["budget"]; !ok {
		t.Errorf("loop schema lacks budget: %v", loopProps)
	}
	templates, err := h.client.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, tmpl := range templates.ResourceTemplates {
		uris = append(uris, tmpl.URITemplate)
	}
	slices.Sort(uris)
	if !slices.Equal(uris, []string{"amk://campaigns/{id}/report.md", "amk://campaigns/{id}/results.tsv"}) {
		t.Errorf("resource templates %v", uris)
	}
}

// surface is the part of propose's answer the tests read.
type surface struct {
	Model          string         `json:"model"`
	ScheduleConfig map[string]any `json:"schedule_config"`
	ScheduleID     string         `json:"schedule_id"`
	SearchSpace    []struct {
		Path      string `json:"path"`
		Choices   []any  `json:"choices"`
		Default   any    `json:"default"`
		Effective bool   `json:"effective"`
	} `json:"search_space"`
}

// TestAgentCycle is docs/spec/loop.md's loop as an agent drives it: propose, edit one
// knob, eval, record the outcome into a campaign, ask next; then the
// resources show the agent's row.
func TestAgentCycle(t *testing.T) {
	h := newHarness(t)
	var surf surface
	h.ok("propose", map[string]any{"model": "toy", "gpu": "h100"}, &surf)
	if surf.Model == "" || surf.ScheduleID == "" || len(surf.ScheduleConfig) == 0 {
		t.Fatalf("propose answered %+v", surf)
	}
	var effective int
	for _, k := range surf.SearchSpace {
		if k.Effective {
			effective++
		}
	}
	if effective == 0 {
		t.Fatal("no effective knob in the search space")
	}

	// The incumbent first, then the same config with ONE knob edited.
	var base EvalAnswer
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": surf.ScheduleConfig}, &base)
	if !base.OK || !base.Valid || base.LatencyUS == nil || base.LatencyKind == nil || *base.LatencyKind != "predicted" {
		t.Fatalf("incumbent verdict %+v", base)
	}
	if base.ScheduleID != surf.ScheduleID {
		t.Errorf("eval schedule id %s, propose said %s", base.ScheduleID, surf.ScheduleID)
	}
	edited := map[string]any{}
	maps.Copy(edited, surf.ScheduleConfig)
	edited["pipelining_depth"] = 0
	var cand EvalAnswer
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": edited}, &cand)
	if !cand.OK || cand.LatencyUS == nil || *cand.LatencyKind != "predicted" {
		t.Fatalf("candidate verdict %+v", cand)
	}
	if cand.ScheduleID == base.ScheduleID {
		t.Fatalf("editing pipelining_depth kept the schedule id %s", cand.ScheduleID)
	}

	// A campaign to record into: the keep/revert loop's first trial.
	var loop RunAnswer
	h.ok("loop", map[string]any{"model": "toy", "gpu": "h100", "budget": 1, "cold": true}, &loop)
	if loop.Campaign == "" || !loop.Created || loop.Run == nil || loop.Run.Recorded != 1 || loop.Status.ExperimentsRun != 1 {
		t.Fatalf("loop answered %+v", loop)
	}
	if loop.Status.LatencyKind != "predicted" || loop.Report == nil || loop.Report.BestKind == nil || *loop.Report.BestKind != "predicted" {
		t.Fatalf("loop's latency kinds: status %q report %+v", loop.Status.LatencyKind, loop.Report)
	}

	// Honesty: a latency without a correctness PASS is refused.
	msg := h.toolError("record", map[string]any{"campaign": loop.Campaign, "status": "revert", "correctness": "FAIL",
		"latency_us": 1.0, "kind": "predicted"})
	if !strings.Contains(msg, "PASS") {
		t.Errorf("record of a latency without PASS: %q", msg)
	}

	tag := "tried"
	if *cand.LatencyUS < *base.LatencyUS*0.99 {
		tag = "kept"
	}
	var rec control.RecordResponse
	h.ok("record", map[string]any{"campaign": loop.Campaign, "status": tag, "correctness": "PASS",
		"latency_us": *cand.LatencyUS, "kind": *cand.LatencyKind, "pct_of_roofline": *cand.PctOfRoofline,
		"schedule": edited, "description": "agent: pipelining_depth 0"}, &rec)
	if len(rec.Rows) != 1 || rec.Rows[0].ScheduleID != cand.ScheduleID || rec.Campaign.ExperimentsRun != 2 {
		t.Fatalf("record answered %+v", rec)
	}

	var next NextAnswer
	h.ok("next", map[string]any{"campaign": loop.Campaign}, &next)
	if next.Decision != "continue" || next.ExperimentsRun != 2 || next.LatencyKind != "predicted" {
		t.Fatalf("next answered %+v", next)
	}

	var status StatusAnswer
	h.ok("status", map[string]any{"model": "toy", "gpu": "h100"}, &status)
	if status.ID != loop.Campaign || status.ExperimentsRun != 2 || status.Running {
		t.Fatalf("status answered %+v", status)
	}

	var list CampaignsAnswer
	h.ok("campaigns", nil, &list)
	if len(list.Campaigns) != 1 || list.Campaigns[0].ID != loop.Campaign {
		t.Fatalf("campaigns answered %+v", list)
	}

	var noted control.CommandResponse
	h.ok("note", map[string]any{"campaign": loop.Campaign, "note": "agent: depth 0 looked promising"}, &noted)
	if len(noted.Log) != 1 || noted.Log[0] != "note: agent: depth 0 looked promising" {
		t.Fatalf("note answered %+v", noted)
	}
	if msg := h.toolError("note", map[string]any{"campaign": loop.Campaign, "note": " "}); !strings.Contains(msg, "needs the note's text") {
		t.Errorf("an empty note: %q", msg)
	}

	var rep ReportAnswer
	h.ok("report", map[string]any{}, &rep)
	if rep.Report.ID != loop.Campaign || rep.Report.TotalExperiments != 2 || len(rep.Files.Files) == 0 {
		t.Fatalf("report answered %+v", rep)
	}
	if len(rep.Report.Notes) != 1 || rep.Report.Notes[0].Text != "agent: depth 0 looked promising" {
		t.Errorf("the report's notes: %+v", rep.Report.Notes)
	}

	ctx := context.Background()
	results, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "amk://campaigns/" + loop.Campaign + "/results.tsv"})
	if err != nil {
		t.Fatal(err)
	}
	if table := results.Contents[0].Text; !strings.Contains(table, "agent: pipelining_depth 0") || !strings.Contains(table, cand.ScheduleID) {
		t.Errorf("results.tsv lacks the agent's row:\n%s", table)
	}
	report, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "amk://campaigns/" + loop.Campaign + "/report.md"})
	if err != nil {
		t.Fatal(err)
	}
	if md := report.Contents[0].Text; !strings.Contains(md, loop.Campaign) || report.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("report.md:\n%s", md)
	}
	for _, bad := range []string{"amk://campaigns/../x/results.tsv", "amk://campaigns/" + loop.Campaign + "/ledger.json", "amk://campaigns/nope/results.tsv"} {
		if _, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: bad}); err == nil {
			t.Errorf("%s: read", bad)
		}
	}
}

// TestBadArguments: every bad argument is a tool error with a message that
// names it, a malformed config is a clean valid=false verdict, and the
// server keeps answering.
func TestBadArguments(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"eval", map[string]any{"gpu": "h100"}, "model"},
		{"eval", map[string]any{"model": "toy", "gpu": "h999"}, "argument gpu"},
		{"eval", map[string]any{"model": "no-such-model", "gpu": "h100"}, "argument model"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": "deep"}, "schedule"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "device": "tpu"}, "argument device"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "device": "cuda"}, "-tags cuda"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "pos": -1}, "argument pos"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "batch": 5000}, "argument batch"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "colour": "red"}, "colour"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "pos": 3, "workload": map[string]any{"prompt_lens": []int{16}, "gen_len": 4}}, "argument pos"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "workload": map[string]any{"prompt_lens": []int{16}, "gen_len": 0}}, "argument workload"},
		{"eval", map[string]any{"model": "toy", "gpu": "h100", "batch": 3, "workload": map[string]any{"prompt_lens": []int{16}, "gen_len": 4, "batch": 2}}, "argument workload"},
		{"autoresearch", map[string]any{"model": "toy", "gpu": "h100", "workload": map[string]any{"prompt_lens": []int{}, "gen_len": 4}}, "argument workload"},
		{"autoresearch", map[string]any{"model": "toy", "gpu": "h100", "speedup_target": -1}, "argument move_on"},
		{"propose", map[string]any{"model": "toy", "gpu": "h100", "incumbent": map[string]any{"pipelining_depth": "deep"}}, "argument incumbent"},
		{"loop", map[string]any{"model": "toy", "gpu": "h100", "budget": -2}, "argument budget"},
		{"autoresearch", map[string]any{"model": "toy", "gpu": "h100", "epsilon": 2}, "argument epsilon"},
		{"autoresearch", map[string]any{"model": "toy", "gpu": "h100", "workers": 1000000}, "argument workers"},
		{"loop", map[string]any{"model": "toy", "gpu": "h100", "budget": "many"}, "budget"},
		{"tune_instruction", map[string]any{"op": "gemv_tile", "gpu": "h100"}, "without CUDA support"},
		{"tune_instruction", map[string]any{"op": "fft", "gpu": "h100"}, "argument op"},
		{"status", map[string]any{}, "no campaigns"},
		{"record", map[string]any{"campaign": "nope", "status": "kept"}, "nope"},
		{"cancel", map[string]any{"campaign": "nope"}, "nope"},
	} {
		if msg := h.toolError(c.tool, c.args); !strings.Contains(msg, c.want) {
			t.Errorf("%s %v: error %q does not mention %q", c.tool, c.args, msg, c.want)
		}
	}
	// A malformed knob is not a bad argument: the verdict says why.
	var v EvalAnswer
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": map[string]any{"pipelining_depth": "deep"}}, &v)
	if v.OK || v.Valid || v.RejectedReason == nil || v.LatencyUS != nil || v.LatencyKind != nil {
		t.Fatalf("malformed knob: %+v", v)
	}
	var batched EvalAnswer
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "batch": 2}, &batched)
	if !batched.OK || batched.LatencyUS == nil {
		t.Fatalf("eval with batch 2: %+v", batched)
	}
	var workload EvalAnswer
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "batch": 2, "workload": map[string]any{"prompt_lens": []int{16}, "gen_len": 5}}, &workload)
	if !workload.OK || workload.LatencyUS == nil || len(workload.Positions) != 3 || workload.Positions[2].Pos != 20 {
		t.Fatalf("eval for a workload: %+v", workload)
	}
	var surf surface
	h.ok("propose", map[string]any{"model": "toy", "gpu": "h100"}, &surf)
}

func TestDoctor(t *testing.T) {
	h := newHarness(t)
	var r struct {
		Checks []struct{ Name, Status, Detail string } `json:"checks"`
		Ready  bool                                    `json:"ready"`
		GPU    bool                                    `json:"gpu"`
	}
	h.ok("doctor", nil, &r)
	if !r.Ready || r.GPU || len(r.Checks) < 3 {
		t.Fatalf("doctor on a CPU-only server: %+v", r)
	}
	var workspace bool
	for _, c := range r.Checks {
		workspace = workspace || (c.Name == "workspace" && c.Status == "OK" && strings.Contains(c.Detail, h.local.Workspace.Dir))
	}
	if !workspace {
		t.Errorf("doctor did not check the server's workspace %s: %+v", h.local.Workspace.Dir, r.Checks)
	}
}

func TestSafeRecoversAPanic(t *testing.T) {
	h := safe("boom", slog.New(slog.DiscardHandler), func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		panic(errors.New("a handler bug"))
	})
	_, _, err := h(context.Background(), nil, struct{}{})
	if err == nil || !strings.Contains(err.Error(), "boom: internal error") {
		t.Fatalf("err %v", err)
	}
}

// TestCancelledAutoresearch: autoresearch answers at once with the campaign
// id, the run goes on in the background, and cancel ends it, leaving the
// campaign resumable and unlocked.
func TestCancelledAutoresearch(t *testing.T) {
	h := newHarness(t)
	const iters = 100000
	var started RunAnswer
	h.ok("autoresearch", map[string]any{"model": "toy", "gpu": "h100", "iters": iters, "cold": true, "overnight": true, "workers": 1}, &started)
	if started.Campaign == "" || !started.Background || !started.Created {
		t.Fatalf("autoresearch answered %+v", started)
	}
	waitfor.Cond(t, 2*time.Minute, "a recorded experiment", func() bool {
		var st StatusAnswer
		h.ok("status", map[string]any{"campaign": started.Campaign}, &st)
		if !st.Running {
			t.Fatalf("the background run ended by itself: %+v", st)
		}
		return st.ExperimentsRun >= 2
	})
	msg := h.toolError("autoresearch", map[string]any{"model": "toy", "gpu": "h100", "cold": true})
	if !strings.Contains(msg, "already running") {
		t.Errorf("a second autoresearch of a running campaign: %q", msg)
	}
	// While it runs, an agent's record goes through the run's driver.
	var rec control.RecordResponse
	h.ok("record", map[string]any{"campaign": started.Campaign, "status": "rejected", "description": "agent: over-cap smem"}, &rec)
	if len(rec.Rows) != 1 || rec.Rows[0].Tag != "rejected" {
		t.Fatalf("record during the run: %+v", rec)
	}

	var cancelled RunAnswer
	h.ok("cancel", map[string]any{"campaign": started.Campaign}, &cancelled)
	if cancelled.Run == nil || cancelled.Run.Recorded < 1 || cancelled.Run.Recorded >= iters || cancelled.Status.Status != campaign.StatusOptimizing {
		t.Fatalf("cancel answered %+v", cancelled)
	}
	var list CampaignsAnswer
	h.ok("campaigns", nil, &list)
	if len(list.RunningHere) != 0 {
		t.Fatalf("still running after cancel: %v", list.RunningHere)
	}
	if msg := h.toolError("cancel", map[string]any{"campaign": started.Campaign}); !strings.Contains(msg, "not running") {
		t.Errorf("second cancel: %q", msg)
	}
	// The lock is released: the workspace takes a record directly.
	if _, err := control.New(h.local).Record(context.Background(), started.Campaign, control.RecordRequest{Status: "failed", Description: "after cancel"}); err != nil {
		t.Fatalf("record after cancel: %v", err)
	}
}

// TestLoopProgressAndCancellation: loop reports progress per experiment,
// and a cancelled loop request stops the run and leaves it resumable.
func TestLoopProgressAndCancellation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{"model": "toy", "gpu": "h100", "budget": 3, "cold": true, "workers": 1}}
	params.SetProgressToken("loop-1")
	res, err := h.client.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("loop: %v %s", err, text(res))
	}
	h.mu.Lock()
	got := slices.Clone(h.progress)
	h.mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no progress notification")
	}
	for i, p := range got {
		if p.ProgressToken != "loop-1" || p.Total != 3 || p.Message == "" || (i > 0 && p.Progress <= got[i-1].Progress) {
			t.Fatalf("progress %d: %+v", i, p)
		}
	}
	if last := got[len(got)-1]; last.Progress != 3 {
		t.Errorf("last progress %v of 3", last.Progress)
	}

	// A long loop, cancelled by the client after its first experiment.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.mu.Lock()
	h.progress = nil
	h.mu.Unlock()
	long := &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{"model": "toy", "gpu": "h100", "budget": 100000, "cold": true, "overnight": true, "workers": 1, "name": "long"}}
	long.SetProgressToken("loop-2")
	done := make(chan error, 1)
	go func() {
		_, err := h.client.CallTool(cctx, long)
		done <- err
	}()
	waitfor.Cond(t, 2*time.Minute, "the long loop's first progress", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.progress) > 0
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled loop returned %v", err)
	}
	waitfor.Cond(t, 2*time.Minute, "the cancelled loop to release its campaign", func() bool {
		var list CampaignsAnswer
		h.ok("campaigns", nil, &list)
		return len(list.RunningHere) == 0
	})
	var st StatusAnswer
	h.ok("status", map[string]any{"model": "toy", "gpu": "h100", "name": "long"}, &st)
	if st.ExperimentsRun < 1 || st.ExperimentsRun >= 100000 {
		t.Fatalf("cancelled loop's campaign: %+v", st)
	}
	// It resumes.
	var again RunAnswer
	h.ok("loop", map[string]any{"model": "toy", "gpu": "h100", "budget": 1, "cold": true, "name": "long"}, &again)
	if again.Created || again.Status.ExperimentsRun <= st.ExperimentsRun {
		t.Fatalf("resumed loop: %+v (before: %d)", again, st.ExperimentsRun)
	}
	// A campaign that is done has nothing to run.
	if _, err := control.New(h.local).Command(ctx, again.Campaign, campaign.OpStop, control.CommandRequest{Note: "test"}); err != nil {
		t.Fatal(err)
	}
	if msg := h.toolError("loop", map[string]any{"model": "toy", "gpu": "h100", "name": "long"}); !strings.Contains(msg, "is done") {
		t.Errorf("loop on a done campaign: %q", msg)
	}
}
