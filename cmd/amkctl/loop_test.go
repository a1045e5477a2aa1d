package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/mcpserver"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
)

// TestLoopAndReferencePaths: docs/spec/loop.md's loop verb runs --budget trials, and
// the reference's --state/--results/--corpus flags select amk's workspace
// and corpus.
func TestLoopAndReferencePaths(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "flywheel-elsewhere", "corpus.jsonl")
	code, out, errOut := runCmd(t, "loop", "toy", "--gpu", "h200", "--budget", "3",
		"--state", filepath.Join(dir, "amk_orchestration_state.json"), "--results", filepath.Join(dir, "results.tsv"),
		"--corpus", corpus, "--workers", "1")
	if code != 0 || !strings.Contains(out, "experiments  : 3") {
		t.Fatalf("loop: code %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "campaigns/<id>/results.tsv") {
		t.Errorf("no note says where results go:\n%s", errOut)
	}
	rows, err := flywheel.ReadRows(filepath.Join(dir, "campaigns", "toy-h200-cpu", "results.tsv"))
	if err != nil || len(rows) != 3 {
		t.Fatalf("results: %d rows, %v", len(rows), err)
	}
	if _, err := os.Stat(corpus); err != nil {
		t.Errorf("--corpus was not the corpus written: %v", err)
	}
	code, _, errOut = runCmd(t, "loop", "toy", "--gpu", "h200", "--budget", "1",
		"--state", filepath.Join(dir, "a", "s.json"), "--results", filepath.Join(dir, "b", "results.tsv"))
	if code != 2 || !strings.Contains(errOut, "one workspace") {
		t.Errorf("disagreeing paths: code %d %s", code, errOut)
	}
	code, _, _ = runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "2", "--batch", "2", "--workspace", filepath.Join(dir, "b2"), "--name", "b2")
	if code != 0 {
		t.Errorf("autoresearch --batch 2: code %d", code)
	}
}

func TestVerifyVerb(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "p.json")
	if code, _, errOut := runCmd(t, "lower", "toy-2L", "--gpu", "h100", "--pos", "2", "-o", prog); code != 0 {
		t.Fatalf("lower: %d %s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "verify", prog); code != 0 || !strings.HasPrefix(out, "PASS") {
		t.Fatalf("verify: %d %q %q", code, out, errOut)
	}
	data, _ := os.ReadFile(prog)
	tampered := filepath.Join(dir, "t.json")
	// Every norm's epsilon changed: the program still validates but
	// computes something else.
	edited := strings.ReplaceAll(string(data), `"eps": 1e-06`, `"eps": 10.0`)
	if edited == string(data) {
		t.Fatal("the fixture edit did not apply")
	}
	if err := os.WriteFile(tampered, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCmd(t, "verify", tampered); code != 1 || !strings.HasPrefix(out, "FAIL") {
		t.Errorf("tampered: %d %q", code, out)
	}
	foreign := filepath.Join(dir, "f.json")
	_ = os.WriteFile(foreign, []byte(`{"foo": 1}`), 0o644)
	if code, _, _ := runCmd(t, "verify", foreign); code != 2 {
		t.Errorf("foreign JSON: %d", code)
	}
	// A token the model cannot embed is bad input, not a failed check.
	for _, tok := range []string{"-1", "256"} {
		code, out, errOut := runCmd(t, "verify", prog, "--token-id", tok)
		if code != exitBadInput || out != "" || !strings.Contains(errOut, "--token-id "+tok+" is outside") {
			t.Errorf("verify --token-id %s: code %d, stdout %q, stderr %q; want exit 2 naming the token", tok, code, out, errOut)
		}
	}
	if code, out, _ := runCmd(t, "verify"); code != 0 || strings.Count(out, "PASS") != 10 {
		t.Errorf("built-in proofs: %d\n%s", code, out)
	}
}

func TestDoctorVerb(t *testing.T) {
	code, out, errOut := runCmd(t, "doctor", "--workspace", t.TempDir())
	if code != 0 || !strings.Contains(out, "numerics") || !strings.Contains(out, "status") {
		t.Fatalf("doctor: %d\n%s\n%s", code, out, errOut)
	}
	if code, _, _ := runCmd(t, "doctor", "extra"); code != 2 {
		t.Errorf("doctor with an argument: %d", code)
	}
}

// TestCorpusVerb: AMK's state, results.tsv and corpus come in, and the
// summary joins AMK's rows to the imported point by schedule id.
func TestCorpusVerb(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	fly := filepath.Join("..", "..", "flywheel", "testdata")
	code, out, errOut := runCmd(t, "corpus", "import", "--workspace", ws, "--state", filepath.Join(fly, "amk_orchestration_state.json"),
		"--results", filepath.Join(fly, "amk_results.tsv"))
	if code != 0 || !strings.Contains(out, "sch_35332a9ac1") || !strings.Contains(out, "added to") || !strings.Contains(out, "3 rows, 1 join") {
		t.Fatalf("import: %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "corpus", "import", "--workspace", ws, "--state", filepath.Join(fly, "amk_orchestration_state.json")); code != 0 || !strings.Contains(out, "already in") {
		t.Errorf("second import: %d %s", code, out)
	}
	code, out, errOut = runCmd(t, "corpus", "merge", "--workspace", ws, filepath.Join(fly, "reference_corpus.jsonl"), filepath.Join(fly, "reference_corpus.jsonl"))
	if code != 0 || !strings.Contains(out, "added") {
		t.Fatalf("merge: %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCmd(t, "corpus", "--workspace", ws, "--results", filepath.Join(fly, "amk_results.tsv"))
	if code != 0 || !strings.Contains(out, "toy(1L)") || !strings.Contains(out, "1 join a corpus point") {
		t.Fatalf("inspect: %d\n%s", code, out)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.json")
	if err := os.WriteFile(garbage, []byte("garbage{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"corpus", "import"}, {"corpus", "bogus"}, {"corpus", "merge"},
		{"corpus", "import", "--state", filepath.Join(fly, "amk_results.tsv")},
		{"corpus", "merge", "--workspace", ws, garbage}} { // a file without one record is not a corpus
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: code %d", args, code)
		}
	}
}

// --batch, --prompt-len and --gen-len make the campaign's workload; a
// workload other than the default names a campaign of its own.
func TestStartBatch(t *testing.T) {
	ws := t.TempDir()
	if code, _, errOut := runCmd(t, "start", "toy", "--gpu", "h200", "--batch", "3", "--workspace", ws); code != 0 {
		t.Fatalf("start --batch 3: %d %s", code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(ws, "campaigns", "toy-h200-cpu-p512-g128-b3", "ledger.json"))
	if err != nil || !strings.Contains(string(data), `"workload":{"prompt_lens":[512],"gen_len":128,"batch":3}`) {
		t.Fatalf("the campaign's settings lack batch 3: %v", err)
	}
	if code, _, errOut := runCmd(t, "start", "toy", "--gpu", "h200", "--prompt-len", "100,200", "--gen-len", "8", "--workspace", ws); code != 0 {
		t.Fatalf("start --prompt-len 100,200 --gen-len 8: %d %s", code, errOut)
	}
	data, err = os.ReadFile(filepath.Join(ws, "campaigns", "toy-h200-cpu-p100_200-g8", "ledger.json"))
	if err != nil || !strings.Contains(string(data), `"workload":{"prompt_lens":[100,200],"gen_len":8,"batch":1}`) {
		t.Fatalf("the campaign's settings lack the workload: %v", err)
	}
	for _, bad := range [][]string{{"--prompt-len", "x"}, {"--gen-len", "0"}, {"--prompt-len", "-1"}, {"--workload", "/nonexistent"}} {
		if code, _, _ := runCmd(t, append([]string{"start", "toy", "--gpu", "h200", "--workspace", ws, "--name", "bad"}, bad...)...); code != 2 {
			t.Errorf("%v: code %d, want 2", bad, code)
		}
	}
	if code, _, _ := runCmd(t, "start", "toy", "--gpu", "h200", "--batch", "0", "--workspace", ws, "--name", "z"); code != 2 {
		t.Errorf("--batch 0: code %d", code)
	}
}

// TestLoopFromCLIAndMCPAgree: amkctl loop and the MCP server's loop tool,
// given the same options (a workload and a speedup target among them),
// run the same campaign (one implementation,
// control's StartRun): the same id, settings, environment and,
// with one worker and a seed, the same trials.
func TestLoopFromCLIAndMCPAgree(t *testing.T) {
	dir := t.TempDir()
	cliWS, mcpWS := filepath.Join(dir, "cli"), filepath.Join(dir, "mcp")
	code, _, errOut := runCmd(t, "loop", "toy", "--gpu", "h200", "--budget", "3", "--seed", "7", "--cold", "--overnight",
		"--restart-after", "4", "--epsilon", "0.2", "--batch", "2", "--prompt-len", "40,20", "--gen-len", "4", "--speedup-target", "0",
		"--workers", "1", "--name", "same", "--workspace", cliWS)
	if code != exitOK {
		t.Fatalf("amkctl loop: exit %d\n%s", code, errOut)
	}

	local, err := control.OpenLocal(mcpWS, true, flywheel.Env{AMKVersion: version.String()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Options{Campaigns: control.New(local), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := mcp.NewClient(&mcp.Implementation{Name: "amk-test", Version: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close(); _ = ss.Wait() }()
	res, err := client.CallTool(ctx, &mcp.CallToolParams{Name: "loop", Arguments: map[string]any{"model": "toy", "gpu": "h200",
		"budget": 3, "seed": 7, "cold": true, "overnight": true, "restart_after": 4, "epsilon": 0.2, "batch": 2,
		"workload": map[string]any{"prompt_lens": []int{40, 20}, "gen_len": 4}, "speedup_target": 0, "workers": 1, "name": "same"}})
	if err != nil || res.IsError {
		t.Fatalf("MCP loop: %v %+v", err, res)
	}

	id := campaign.ID("toy", "h200", "cpu", "same")
	var states [2]campaign.State
	var trials [2][]string
	for i, ws := range []string{cliWS, mcpWS} {
		w, err := runner.OpenWorkspace(ws)
		if err != nil {
			t.Fatal(err)
		}
		c, err := w.View(id)
		if err != nil {
			t.Fatalf("%s: %v", ws, err)
		}
		states[i] = c.State()
		rows, err := flywheel.ReadRows(filepath.Join(w.CampaignDir(id), "results.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			trials[i] = append(trials[i], r.ScheduleID+" "+r.Tag+" "+r.Correctness)
		}
	}
	cli, viaMCP := states[0], states[1]
	want := trial.Workload{PromptLens: []int{40, 20}, GenLen: 4, Batch: 2}
	if cli.Settings.Workload == nil || !cli.Settings.Workload.Equal(want) || cli.Settings.MoveOn.SpeedupTarget != 0 || cli.Settings.RestartAfter != 4 || cli.Settings.Epsilon != 0.2 || !cli.Settings.Overnight || !cli.Cold || cli.Seed != 7 {
		t.Errorf("the CLI's options were not kept: %+v seed %d cold %v", cli.Settings, cli.Seed, cli.Cold)
	}
	if !reflect.DeepEqual(cli.Settings, viaMCP.Settings) || cli.Seed != viaMCP.Seed || cli.Cold != viaMCP.Cold || cli.Env != viaMCP.Env ||
		cli.Shape != viaMCP.Shape || cli.LatencyKind != viaMCP.LatencyKind || cli.ExperimentsRun != 3 || viaMCP.ExperimentsRun != 3 {
		t.Errorf("the campaigns differ:\nCLI %+v seed %d cold %v env %+v, %d experiments\nMCP %+v seed %d cold %v env %+v, %d experiments",
			cli.Settings, cli.Seed, cli.Cold, cli.Env, cli.ExperimentsRun, viaMCP.Settings, viaMCP.Seed, viaMCP.Cold, viaMCP.Env, viaMCP.ExperimentsRun)
	}
	if !slices.Equal(trials[0], trials[1]) || len(trials[0]) != 3 {
		t.Errorf("the trials differ:\nCLI %v\nMCP %v", trials[0], trials[1])
	}
	// Both keep the seeded weights they generated in their workspace.
	for _, ws := range []string{cliWS, mcpWS} {
		if files, _ := filepath.Glob(filepath.Join(ws, "weights", "*.safetensors")); len(files) == 0 {
			t.Errorf("no generated weights in %s", ws)
		}
	}
}
