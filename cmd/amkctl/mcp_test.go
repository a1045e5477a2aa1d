package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/internal/proctest"
)

// amkctlAsMain is a command running this test binary as amkctl.
func amkctlAsMain(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "AMKCTL_AS_MAIN=1")
	return cmd
}

// TestMCPStdio drives amkctl mcp over stdio with the SDK's client, as an
// agent that spawns it does.
func TestMCPStdio(t *testing.T) {
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "amk-test", Version: "test"}, nil)
	cmd := amkctlAsMain(t, "mcp", "--workspace", filepath.Join(t.TempDir(), "ws"))
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 11 {
		t.Fatalf("%d tools", len(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "eval", Arguments: map[string]any{"model": "toy", "gpu": "h100"}})
	if err != nil || res.IsError {
		t.Fatalf("eval: %v %+v", err, res)
	}
	v, _ := res.StructuredContent.(map[string]any)
	if v["ok"] != true || v["latency_kind"] != "predicted" {
		t.Fatalf("eval answered %v", v)
	}
	if code, _, stderr := runCmd(t, "mcp", "--http", "0.0.0.0:8765"); code != exitBadInput || !strings.Contains(stderr, "loopback") {
		t.Fatalf("--http on all interfaces: exit %d, %s", code, stderr)
	}
}

// TestMCPStdioBoundsAMessage: a line longer than the bound ends the
// session with a message, not a crash and not an unbounded buffer.
func TestMCPStdioBoundsAMessage(t *testing.T) {
	cmd := amkctlAsMain(t, "mcp", "--workspace", filepath.Join(t.TempDir(), "ws"))
	huge := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 9<<20) + "\"}}\n"
	cmd.Stdin = strings.NewReader(huge)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitRejected || !strings.Contains(stderr.String(), "maximum line length") {
		t.Fatalf("a 9 MiB line: %v\n%s", err, stderr.String())
	}
}

// inspectorBin finds the MCP Inspector that scripts/ensure-deps.sh
// installs (or $AMK_MCP_INSPECTOR), skipping the test without it.
func inspectorBin(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("skipping the MCP Inspector test: no Node.js here (scripts/ensure-deps.sh installs the Inspector where Node is)")
	}
	if bin := os.Getenv("AMK_MCP_INSPECTOR"); bin != "" {
		return bin
	}
	found, _ := filepath.Glob(filepath.Join("..", "..", ".cache", "mcp-inspector", "*", "node_modules", ".bin", "mcp-inspector"))
	if len(found) == 0 {
		t.Skip("skipping the MCP Inspector test: not installed (run scripts/ensure-deps.sh, which needs npm and the npm registry)")
	}
	bin, err := filepath.Abs(found[len(found)-1])
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestMCPInspector: the MCP Inspector's command-line mode, a client no one
// here wrote, lists amkctl mcp's tools and calls propose and eval over stdio.
func TestMCPInspector(t *testing.T) {
	inspector := inspectorBin(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	workspace := filepath.Join(t.TempDir(), "ws")
	inspect := func(args ...string) map[string]any {
		t.Helper()
		argv := append([]string{"--cli", "-e", "AMKCTL_AS_MAIN=1", exe, "mcp", "--workspace", workspace}, args...)
		cmd := exec.Command(inspector, argv...)
		cmd.Stderr = &strings.Builder{}
		// The Inspector spawns amkctl mcp, which writes into the
		// workspace; it must be gone before the workspace is removed.
		proctest.Isolate(cmd)
		out, err := cmd.Output()
		if kerr := proctest.KillGroup(cmd, time.Minute); kerr != nil {
			t.Errorf("mcp-inspector %v: %v", args, kerr)
		}
		if err != nil {
			t.Fatalf("mcp-inspector %v: %v\n%s\n%s", args, err, out, cmd.Stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("mcp-inspector %v printed %s: %v", args, out, err)
		}
		return doc
	}

	list := inspect("--method", "tools/list")
	var names []string
	tools, _ := list["tools"].([]any)
	for _, tool := range tools {
		m, _ := tool.(map[string]any)
		name, _ := m["name"].(string)
		names = append(names, name)
	}
	for _, want := range []string{"doctor", "propose", "eval", "loop", "tune_instruction", "autoresearch", "status", "next", "report", "record", "campaigns"} {
		if !slices.Contains(names, want) {
			t.Errorf("the Inspector lists %v, without %s", names, want)
		}
	}

	surface := inspect("--method", "tools/call", "--tool-name", "propose", "--tool-arg", "model=toy", "--tool-arg", "gpu=h100")
	sc, _ := surface["structuredContent"].(map[string]any)
	cfg, _ := sc["schedule_config"].(map[string]any)
	if sc["schedule_id"] == nil || cfg == nil {
		t.Fatalf("propose through the Inspector: %v", surface)
	}
	cfg["pipelining_depth"] = 0
	edited, _ := json.Marshal(cfg)
	verdict := inspect("--method", "tools/call", "--tool-name", "eval", "--tool-arg", "model=toy", "--tool-arg", "gpu=h100",
		"--tool-arg", "schedule="+string(edited))
	v, _ := verdict["structuredContent"].(map[string]any)
	if verdict["isError"] == true || v["ok"] != true || v["correct"] != true || v["latency_kind"] != "predicted" || v["latency_us"] == nil {
		t.Fatalf("eval through the Inspector: %v", verdict)
	}
	rejected := inspect("--method", "tools/call", "--tool-name", "eval", "--tool-arg", "model=toy", "--tool-arg", "gpu=h100",
		"--tool-arg", `schedule={"threads_per_block": 512}`)
	r, _ := rejected["structuredContent"].(map[string]any)
	if r["ok"] != false || r["valid"] != false || r["latency_us"] != nil || r["latency_kind"] != nil || r["rejected_reason"] == nil {
		t.Fatalf("a rejected config through the Inspector: %v", rejected)
	}

	// Seed 001's loop through the reference's names and arguments
	// (amk_orchestrate_next and _report are called in process by
	// internal/mcpserver's TestReferenceNames: each call here starts Node
	// and the server, seconds apiece).
	for _, want := range []string{"amk_doctor", "amk_propose", "amk_eval", "amk_loop", "amk_autoresearch",
		"amk_orchestrate_status", "amk_orchestrate_next", "amk_orchestrate_report", "amk_orchestrate_record"} {
		if !slices.Contains(names, want) {
			t.Errorf("the Inspector lists %v, without %s", names, want)
		}
	}
	ref := func(tool string, args ...string) map[string]any {
		t.Helper()
		argv := []string{"--method", "tools/call", "--tool-name", tool}
		for _, a := range args {
			argv = append(argv, "--tool-arg", a)
		}
		doc := inspect(argv...)
		sc, _ := doc["structuredContent"].(map[string]any)
		if doc["isError"] == true || sc == nil {
			t.Fatalf("%s %v through the Inspector: %v", tool, args, doc)
		}
		return sc
	}
	refSurface := ref("amk_propose", "model=toy", "gpu=h100")
	refCfg, _ := json.Marshal(refSurface["schedule_config"])
	if refSurface["schedule_config_schema"] == nil {
		t.Errorf("amk_propose publishes no schedule_config_schema")
	}
	refBase := ref("amk_eval", "model=toy", "gpu=h100", "config="+string(refCfg), "device=auto")
	if refBase["ok"] != true || refBase["device"] != "cpu" || refBase["latency_kind"] != "predicted" {
		t.Fatalf("amk_eval through the Inspector: %v", refBase)
	}
	loop := ref("amk_loop", "model=toy", "gpu=h100", "budget=2", "device=auto")
	if st, _ := loop["status"].(map[string]any); st["experiments_run"] != 2.0 {
		t.Fatalf("amk_loop through the Inspector: %v", loop)
	}
	rec := ref("amk_orchestrate_record", "status=revert", fmt.Sprintf("latency_us=%v", refBase["latency_us"]),
		fmt.Sprintf("pct_roofline=%v", refBase["pct_of_roofline"]), "kind=predicted", "config="+string(refCfg), "description=the incumbent again")
	if c, _ := rec["campaign"].(map[string]any); c["experiments_run"] != 3.0 {
		t.Fatalf("amk_orchestrate_record through the Inspector: %v", rec)
	}
	if st := ref("amk_orchestrate_status"); st["experiments_run"] != 3.0 {
		t.Fatalf("amk_orchestrate_status through the Inspector: %v", st)
	}

	bad := inspect("--method", "tools/call", "--tool-name", "eval", "--tool-arg", "model=toy", "--tool-arg", "gpu=h999")
	if bad["isError"] != true || !strings.Contains(string(mustJSON(t, bad)), "argument gpu") {
		t.Fatalf("a bad argument through the Inspector: %v", bad)
	}
}

// TestMCPInspectorOverHTTP: the Inspector reaches amkctl mcp --http with
// the bearer token, and is refused without it.
func TestMCPInspectorOverHTTP(t *testing.T) {
	inspector := inspectorBin(t)
	server := amkctlAsMain(t, "mcp", "--workspace", filepath.Join(t.TempDir(), "ws"), "--http", "127.0.0.1:0", "--token", "mcp-token")
	stderr, err := server.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = server.Process.Signal(os.Interrupt)
		_ = server.Wait()
	}()
	lines := bufio.NewScanner(stderr)
	url := ""
	for url == "" && lines.Scan() {
		if _, after, ok := strings.Cut(lines.Text(), "serving MCP (streamable HTTP) on "); ok {
			url = after
		}
	}
	if url == "" {
		t.Fatal("amkctl mcp --http did not say where it serves")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	call := func(header ...string) ([]byte, error) {
		argv := []string{"--cli", url, "--transport", "http", "--method", "tools/call", "--tool-name", "eval", "--tool-arg", "model=toy", "--tool-arg", "gpu=h100"}
		argv = append(argv, header...)
		return exec.Command(inspector, argv...).Output()
	}
	out, err := call("--header", "Authorization: Bearer mcp-token")
	if err != nil {
		t.Fatalf("eval over HTTP through the Inspector: %v\n%s", err, out)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the Inspector printed %s: %v", out, err)
	}
	if v, _ := res["structuredContent"].(map[string]any); v["ok"] != true || v["latency_kind"] != "predicted" {
		t.Fatalf("eval over HTTP: %s", out)
	}
	if out, err := call(); err == nil {
		t.Fatalf("the Inspector without the token got %s", out)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestMCPJSONExample: the repository's .mcp.json registers amkctl mcp.
func TestMCPJSONExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", ".mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		MCPServers map[string]struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf(".mcp.json: %v", err)
	}
	amk, ok := doc.MCPServers["amk"]
	if !ok || amk.Type != "stdio" || amk.Command != "go" || !slices.Equal(amk.Args[:3], []string{"run", "./cmd/amkctl", "mcp"}) {
		t.Fatalf(".mcp.json's amk server: %+v", amk)
	}
	if code, _, stderr := runCmd(t, append([]string{"mcp", "--help"}, amk.Args[3:]...)...); code != exitOK {
		t.Fatalf("amkctl mcp %v: exit %d %s", amk.Args[3:], code, stderr)
	}
}
