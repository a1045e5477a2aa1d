package readmewalk

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/proctest"
)

// command is one command line of a README shell block, with the comment
// lines that directly follow it (the output the README shows for it).
type command struct {
	line   int    // README.md line number
	text   string // the command, without its trailing comment
	output []string
}

// readmeCommands returns the commands of README.md's ```sh blocks in order.
func readmeCommands(t *testing.T, path string) []command {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []command
	inBlock, follows := false, false
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock, follows = line == "```sh", false
		case !inBlock:
		case line == "":
			follows = false
		case strings.HasPrefix(line, "#"):
			if follows {
				out[len(out)-1].output = append(out[len(out)-1].output, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			}
		default:
			text := line
			if j := strings.Index(text, " #"); j >= 0 {
				text = strings.TrimSpace(text[:j])
			}
			out = append(out, command{line: i + 1, text: text})
			follows = true
		}
	}
	return out
}

// treatment is how the walk runs a README line it cannot run as written.
type treatment struct {
	why string
	// run replaces the line (each goes through the walk's rewrites too);
	// with help the line is only parsed (run with --help: its verb and
	// every flag it names exist); with skip it is not run at all.
	run  []string
	help bool
	skip bool
	// exit is the exit code the line (or the last of run) must end with.
	exit int
	// want are texts its output must contain.
	want []string
	// stdoutTo saves the line's standard output in this file.
	stdoutTo string
	// after checks what the line promised.
	after func(t *testing.T, w *walk)
}

// The demo's campaign, after the model rewrite.
const demoCampaign = "workspace/campaigns/toy-2L-h200-cpu"

// treatments are keyed by the README's command text.
var treatments = map[string]treatment{
	"make demo": {why: "the demo's recipe (make -n demo) runs with 4 experiments a run instead of 40; it runs twice, as the README says to, and the second run must add experiments to the same campaign",
		after: func(t *testing.T, w *walk) {
			for _, f := range []string{"report.md", "best.json", "report.svg", "knobs.svg", "results.tsv", "ledger.json", "ledger.journal"} {
				if _, err := os.Stat(filepath.Join(w.dir, demoCampaign, f)); err != nil {
					t.Errorf("the demo wrote no %s: %v", f, err)
				}
			}
		}},
	"make test": {skip: true, why: "it is the suite this test belongs to"},
	"go run ./cmd/amkctl propose small --gpu h200": {stdoutTo: "cfg.json",
		why: "its answer is saved as cfg.json, the file the next line evaluates (eval takes propose's answer as it is)"},
	"go run ./cmd/amkctl autoresearch small --gpu h200 --minutes 480 --overnight": {
		why: "a night's campaign: the walk runs two experiments of it",
		run: []string{"go run ./cmd/amkctl autoresearch small --gpu h200 --minutes 480 --overnight --iters 2"}},
	"go run ./cmd/amkctl autoresearch small --gpu h200 --prompt-len 2048 --gen-len 128 --batch 4": {
		why: "a whole campaign: the walk runs one experiment of it",
		run: []string{"go run ./cmd/amkctl autoresearch small --gpu h200 --prompt-len 2048 --gen-len 128 --batch 4 --iters 1"}},
	"go run ./cmd/amkctl status | next | report | record kept --latency-us ... | campaigns": {
		why: "a list of verbs: each runs on the demo's campaign (the workspace now has two), record with a latency and the config the walk evaluated",
		run: []string{
			"go run ./cmd/amkctl status small-h200-cpu",
			"go run ./cmd/amkctl next small-h200-cpu",
			"go run ./cmd/amkctl report small-h200-cpu",
			"go run ./cmd/amkctl record kept small-h200-cpu --latency-us 30 --kind predicted --schedule cfg.json",
			"go run ./cmd/amkctl campaigns",
		}, want: []string{"small-h200-cpu-p2048-g128-b4"}},
	"go run ./cmd/amkctl status --watch": {help: true,
		why: "locally nothing drives a campaign between runs, so it would watch for ever; the fleet walk below watches a campaign to its end"},
	"go run ./cmd/amkctl trial 3": {why: "the workspace has two campaigns by now: the walk names the demo's",
		run: []string{"go run ./cmd/amkctl trial small-h200-cpu 3"}, want: []string{"Trial 3 of campaign"}},
	"go run ./cmd/amkctl verify [prog.json]": {why: "both forms of the line",
		run: []string{"go run ./cmd/amkctl verify prog.json", "go run ./cmd/amkctl verify"}, want: []string{"PASS"}},
	"go run ./cmd/amkctl corpus [--results results.tsv]": {
		why: "both forms of the line; results.tsv is the demo campaign's in AMK's format, as export-amk writes it (the import below reads the same files)",
		run: []string{"go run ./cmd/amkctl export-amk small --gpu h200 --out .", "go run ./cmd/amkctl corpus",
			"go run ./cmd/amkctl corpus --results results.tsv"}},
	"go run ./cmd/amkctl corpus merge corpus.jsonl": {why: "corpus.jsonl is a copy of the workspace's own corpus",
		run: []string{"cp workspace/flywheel/corpus.jsonl corpus.jsonl", "go run ./cmd/amkctl corpus merge corpus.jsonl"}},
	"go run ./cmd/amkctl autoresearch toy --gpu h200 --state workspace/amk_orchestration_state.json --corpus flywheel/corpus.jsonl": {
		why: "a whole campaign: the walk runs two experiments of it",
		run: []string{"go run ./cmd/amkctl autoresearch toy --gpu h200 --state workspace/amk_orchestration_state.json --corpus flywheel/corpus.jsonl --iters 2"}},
	"go run ./cmd/amkctl eval toy --gpu h100 --device emu":                      {help: true, why: emuWhy},
	"go run ./cmd/amkctl autoresearch toy-2L --gpu h100 --device emu --iters 8": {help: true, why: emuWhy},
	"go run ./cmd/amkctl verify --device emu":                                   {help: true, why: emuWhy},
	"go run ./cmd/amkctl tune-instruction gemv_tile --gpu h200 --budget 6": {exit: 2, want: []string{"-tags cuda"},
		why: "this build has no CUDA: the verb says which build has it, with exit 2"},
	"go run ./cmd/amkctl validate ir/mpk/testdata/bad/hand_mirage.missing-trigger.json": {exit: 1,
		why: "a graph the checker rejects (exit 1)"},
	"go run ./cmd/amkctl mpk rank --gpu h100 a.json b.json": {why: "a.json and b.json are two MPK graphs the walk lowers first",
		run: []string{"go run ./cmd/amkctl lower toy --gpu h100 --format mpk -o a.json",
			"go run ./cmd/amkctl lower toy --gpu h100 --schedule cfg.json --format mpk -o b.json",
			"go run ./cmd/amkctl mpk rank --gpu h100 a.json b.json"}, want: []string{"predicted"}},
	"go run ./cmd/amkctl fib import DIR": {why: "DIR stands for a dataset: the small model's export above",
		run: []string{"go run ./cmd/amkctl fib import fib-small"}, want: []string{"[MAPPED]"}},
	"go run ./cmd/amkctl tune-instruction --fib DIR --device cpu": {
		why: "DIR stands for a dataset: the small model's export above (llama-8b's workloads take minutes on the CPU)",
		run: []string{"go run ./cmd/amkctl tune-instruction --fib fib-small --device cpu"}, want: []string{"predicted"}},
	"claude mcp list": {skip: true, why: "Claude Code is not amk's; cmd/amkctl's MCP tests check .mcp.json and every tool"},
	"go run ./cmd/amkctl mcp --server http://127.0.0.1:8080": {help: true,
		why: "a server for an agent on standard input: internal/mcpserver's and cmd/amkctl's tests drive it"},
	"go run ./cmd/amkctl mcp --http 127.0.0.1:8765 --token-file workspace/api-token": {help: true,
		why: "a server for an agent: cmd/amkctl's MCP tests drive it over HTTP"},
	"npx @modelcontextprotocol/inspector@0.17.2 --cli go run ./cmd/amkctl mcp --method tools/list": {skip: true,
		why: "the Inspector comes from npm: cmd/amkctl's MCP test runs it when make deps installed it"},
	"make build": {skip: true, why: "the walk built bin/ with the same go build ./cmd/... before its first line",
		after: func(t *testing.T, w *walk) { w.demoRows = w.rows(t, demoCampaign) }},
	"bin/amkctl start small --gpu h200 --name fleet --iters 40 --workers 2": {want: []string{"small-h200-cpu-fleet"}},
	"bin/amkctl status small-h200-cpu-fleet --watch":                        {want: []string{"DONE"}},
	"bin/amkctl report small-h200-cpu-fleet --out report-small": {
		after: func(t *testing.T, w *walk) {
			if _, err := os.Stat(filepath.Join(w.dir, "report-toy-2L", "report.md")); err != nil {
				t.Errorf("report --out saved no report.md: %v", err)
			}
		}},
	"bin/amkctl workers": {want: []string{"h200"}},
	"bin/amkctl queues": {want: []string{"RECEIVED"},
		after: func(t *testing.T, w *walk) {
			// The scheduler drives the campaigns it was asked to start, not
			// the demo's it found in the workspace.
			if got := w.rows(t, demoCampaign); got != w.demoRows {
				t.Errorf("the demo's campaign went from %d to %d experiments while the scheduler ran: it drove a campaign nobody started through it", w.demoRows, got)
			}
		}},
	"docker compose -f deploy/compose.yaml --profile gpu up -d --build": {skip: true, why: dockerWhy},
	"docker compose -f deploy/compose.yaml --profile cpu up -d --build": {skip: true, why: dockerWhy},
}

const (
	emuWhy    = "each compiles the megakernel for the host with g++ (minutes on a cold cache): cmd/amkctl's and kernels/gpu's emulator tests run these verbs"
	dockerWhy = "Docker is not on the test machine: deploy/deploytest checks compose.yaml against the repository and runs the stack's parts without it"
)

// walk is the fresh directory the README's commands run in, and their
// environment.
type walk struct {
	root, dir string
	env       []string
	// rewrites apply to every line the walk runs, in order.
	rewrites []rewrite
	demoRows int
}

type rewrite struct {
	re   *regexp.Regexp
	with string
}

// commandTimeout bounds one command of the walk.
const commandTimeout = 3 * time.Minute

// prelude makes the README's `go run ./cmd/amkctl` the amkctl binary the
// walk built (what `make build` puts in bin/).
const prelude = `go() { if [ "$1 $2" = "run ./cmd/amkctl" ]; then shift 2; amkctl "$@"; else echo "the README walk runs only go run ./cmd/amkctl, not go $*" >&2; return 127; fi; }
`

// TestTheReadmeWalksThrough runs README.md's commands in order (see the
// package's doc for what it runs in place of the few it cannot run as
// written). It takes about 20 CPU-seconds beyond building the binaries.
func TestTheReadmeWalksThrough(t *testing.T) {
	for _, tool := range []string{"bash", "make", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps installs redis-server): %v", tool, err)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	w := &walk{root: root, dir: t.TempDir()}
	bin := filepath.Join(w.dir, "bin")
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin+string(filepath.Separator), "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
	// The checked-in files the README's commands read.
	for _, name := range []string{"ir", "pipeline", "deploy"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(w.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	w.env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AMK_SERVER=", "AMK_TOKEN=", "TMPDIR="+tmp, "XDG_CONFIG_HOME="+filepath.Join(w.dir, "config"))
	redisPort := port(t, 6379)
	w.rewrites = []rewrite{
		{regexp.MustCompile(`\bsmall\b`), "toy-2L"},
		{regexp.MustCompile(`--iters 40\b`), "--iters 4"},
		{regexp.MustCompile(`^redis-server `), "redis-server --port " + redisPort + " "},
		{regexp.MustCompile(`127\.0\.0\.1:6379\b`), "127.0.0.1:" + redisPort},
	}
	for _, p := range []int{8080, 8765, 9101, 9102} {
		w.rewrites = append(w.rewrites, rewrite{regexp.MustCompile(`127\.0\.0\.1:` + strconv.Itoa(p) + `\b`), "127.0.0.1:" + port(t, p)})
	}

	seen := map[string]bool{}
	for _, c := range readmeCommands(t, filepath.Join(root, "README.md")) {
		tr, listed := treatments[c.text]
		seen[c.text] = true
		where := fmt.Sprintf("README.md:%d %q", c.line, c.text)
		switch {
		case tr.skip:
			t.Logf("%s: not run: %s", where, tr.why)
		case c.text == "make demo":
			for run := 1; run <= 2; run++ {
				before := w.rows(t, demoCampaign)
				for _, line := range w.makeRecipe(t, "demo") {
					w.sh(t, where, line, tr, c.output)
				}
				if after := w.rows(t, demoCampaign); after <= before {
					t.Fatalf("%s, run %d: the demo campaign has %d experiments, %d before: the run added none", where, run, after, before)
				}
			}
		case tr.help:
			t.Logf("%s: only parsed (--help): %s", where, tr.why)
			w.sh(t, where, c.text+" --help", treatment{want: []string{"Usage"}}, nil)
		case strings.HasSuffix(c.text, "&"):
			w.background(t, where, strings.TrimSpace(strings.TrimSuffix(c.text, "&")))
		case strings.HasPrefix(c.text, "export "):
			w.export(t, where, c.text)
		case len(tr.run) > 0:
			t.Logf("%s: runs %q: %s", where, tr.run, tr.why)
			for i, line := range tr.run {
				step := treatment{}
				if i == len(tr.run)-1 {
					step = tr
				}
				w.sh(t, where, line, step, c.output)
			}
		default:
			if listed && tr.why != "" {
				t.Logf("%s: %s", where, tr.why)
			}
			w.sh(t, where, c.text, tr, c.output)
		}
		if tr.after != nil {
			tr.after(t, w)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for text := range treatments {
		if !seen[text] {
			t.Errorf("the walk lists %q, which the README no longer has: a command was renamed or removed (update the README or this list)", text)
		}
	}
}

// port is a free loopback port standing in for the README's fixed one.
func port(t *testing.T, readme int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("a free port for the README's %d: %v", readme, err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func (w *walk) rewrite(line string) string {
	for _, r := range w.rewrites {
		line = r.re.ReplaceAllString(line, r.with)
	}
	return line
}

// makeRecipe is what make would run for target (make -n), less the echo
// lines and the go build the walk did before its first line.
func (w *walk) makeRecipe(t *testing.T, target string) []string {
	t.Helper()
	out, err := exec.Command("make", "--no-print-directory", "-n", "-C", w.root, target).Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", target, err)
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "echo ") && !strings.HasPrefix(l, "go build ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("make -n %s runs nothing but the build:\n%s", target, out)
	}
	return lines
}

// sh runs one line in bash and checks its exit code and output; README
// output lines (want) must each appear in its output.
func (w *walk) sh(t *testing.T, where, line string, tr treatment, readmeOutput []string) {
	t.Helper()
	line = w.rewrite(line)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", prelude+line)
	cmd.Dir, cmd.Env, cmd.WaitDelay = w.dir, w.env, 10*time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %s: %v", where, line, err)
	}
	both := stdout.String() + stderr.String()
	if ctx.Err() != nil {
		t.Fatalf("%s: %s ran past %s:\n%s", where, line, commandTimeout, tail(both))
	}
	if code != tr.exit {
		t.Fatalf("%s: %s exited %d, want %d:\n%s", where, line, code, tr.exit, tail(both))
	}
	for _, want := range append(append([]string(nil), tr.want...), readmeOutput...) {
		if !strings.Contains(both, w.rewrite(want)) {
			t.Fatalf("%s: %s: the output lacks %q:\n%s", where, line, want, tail(both))
		}
	}
	if tr.stdoutTo != "" {
		if err := os.WriteFile(filepath.Join(w.dir, tr.stdoutTo), stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %s: exit %d in %.1f s", where, line, code, time.Since(began).Seconds())
}

// background starts a daemon line (one the README ends with &) and waits
// until every address it listens on answers.
func (w *walk) background(t *testing.T, where, line string) {
	t.Helper()
	line = w.rewrite(line)
	cmd := exec.Command("bash", "-c", prelude+"exec "+line)
	cmd.Dir, cmd.Env = w.dir, w.env
	logs := &proctest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := proctest.Start(t, cmd); err != nil {
		t.Fatalf("%s: %s: %v", where, line, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var addrs []string
	for _, m := range regexp.MustCompile(`--(?:port|listen|metrics-listen) (\S+)`).FindAllStringSubmatch(line, -1) {
		a := m[1]
		if !strings.Contains(a, ":") {
			a = "127.0.0.1:" + a
		}
		addrs = append(addrs, a)
	}
	deadline := time.Now().Add(time.Minute)
	for _, a := range addrs {
		for {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-exited:
				t.Fatalf("%s: %s exited:\n%s", where, line, tail(logs.String()))
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s does not answer on %s:\n%s", where, line, a, tail(logs.String()))
			}
		}
	}
	t.Logf("%s: %s: serving on %v", where, line, addrs)
}

// export sets a variable for the lines that follow, as the shell would.
func (w *walk) export(t *testing.T, where, line string) {
	t.Helper()
	name, _, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
	cmd := exec.Command("bash", "-c", prelude+w.rewrite(line)+"\nprintf %s \"$"+name+"\"")
	cmd.Dir, cmd.Env = w.dir, w.env
	out, err := cmd.Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("%s: %s: %v (value %q)", where, line, err, out)
	}
	w.env = append(w.env, name+"="+string(out))
}

// rows is the number of experiments in a campaign's results.tsv (0 when
// it has none yet).
func (w *walk) rows(t *testing.T, campaignDir string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(w.dir, campaignDir, "results.tsv"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := -1 // the header
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return max(n, 0)
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
