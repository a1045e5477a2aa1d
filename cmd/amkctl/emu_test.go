package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
)

// emuEnv points the emulator's builds at a fresh cache, with the shortest
// kernel builds, and makes the launcher child (this test binary re-executed)
// run amkctl.
func emuEnv(t *testing.T) {
	t.Helper()
	t.Setenv("AMKCTL_AS_MAIN", "1")
	t.Setenv(build.EnvCache, t.TempDir())
	t.Setenv(build.EnvEmuOpt, "-O0")
	t.Setenv(build.EnvCXX, "")
}

// TestDeviceEmu: eval, verify, generate and autoresearch with --device emu
// run the CUDA kernels on the CPU emulator through the launcher child:
// verdicts name the emulator and keep the cost model's latency, labelled
// predicted; verify checks a program file's step (position 3, from the
// history's KV caches) on the emulator; every autoresearch trial ran on it.
func TestDeviceEmu(t *testing.T) {
	emuEnv(t)
	code, out, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--device", "emu")
	var v trial.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitOK {
		t.Fatalf("eval: code %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if v.Device != "emu CPU emulator of h100" || v.LatencyKind == nil || *v.LatencyKind != trial.KindPredicted ||
		!strings.Contains(strings.Join(v.Notes, "\n"), "emulator logits match the reference VM") {
		t.Errorf("eval --device emu: device %q kind %v notes %q", v.Device, v.LatencyKind, v.Notes)
	}

	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.json")
	if code, _, errOut := runCmd(t, "lower", "toy", "--gpu", "h100", "--pos", "3", "--out", prog); code != exitOK {
		t.Fatalf("lower: %d %s", code, errOut)
	}
	code, out, errOut = runCmd(t, "verify", prog, "--device", "emu")
	if code != exitOK || !strings.Contains(out, "PASS") || !strings.Contains(out, "on emu CPU emulator of h100") {
		t.Errorf("verify --device emu: code %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = runCmd(t, "generate", "toy", "--gpu", "h100", "--device", "emu", "--prompt-ids", "1,2", "--max-tokens", "2", "--verify")
	if code != exitOK || len(strings.Fields(out)) != 2 || !strings.Contains(errOut, "emu tokens identical to eager greedy") {
		t.Errorf("generate --device emu: code %d\n%s\n%s", code, out, errOut)
	}

	// A sharded checkpoint from the HuggingFace cache: the emulator runs
	// on every shard's weights, checked against the reference VM (eval)
	// and eager greedy (generate) on the same weights.
	cfg, w := hfToy(t)
	e, err := model.NewEager(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.Greedy([]int32{1, 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "generate", "tiny-org/toy-sharded", "--gpu", "h100", "--device", "emu", "--prompt-ids", "1,2", "--max-tokens", "3", "--verify")
	if code != exitOK || strings.TrimSpace(out) != strings.Trim(fmt.Sprint(want), "[]") || !strings.Contains(errOut, "emu tokens identical to eager greedy") ||
		strings.Count(errOut, "-of-00003.safetensors") != 3 {
		t.Errorf("generate ORG/NAME --device emu: code %d, tokens %q (want the checkpoint's %v)\n%s", code, out, want, errOut)
	}
	code, out, errOut = runCmd(t, "eval", "tiny-org/toy-sharded", "--gpu", "h100", "--device", "emu", "--pos", "2")
	v = trial.Verdict{}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitOK {
		t.Fatalf("eval ORG/NAME --device emu: code %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if notes := strings.Join(v.Notes, "\n"); !strings.Contains(notes, "emulator logits match the reference VM") || !strings.Contains(notes, trial.CheckpointNotePrefix+"3 file(s)") {
		t.Errorf("eval ORG/NAME --device emu: notes %q", v.Notes)
	}

	ws := t.TempDir()
	code, _, errOut = runCmd(t, "autoresearch", "toy", "--gpu", "h100", "--device", "emu", "--iters", "2",
		"--prompt-len", "16", "--gen-len", "4", "--workspace", ws)
	if code != exitOK {
		t.Fatalf("autoresearch --device emu: code %d\n%s", code, errOut)
	}
	logs, _ := filepath.Glob(filepath.Join(ws, "campaigns", "toy-h100-emu*", "trials.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("want one emu campaign's trial log, found %v", logs)
	}
	journal, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	// One line per trial; each checks its workload's positions on the
	// emulator.
	n := 0
	for line := range strings.Lines(string(journal)) {
		if strings.Contains(line, "emulator logits match the reference VM") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d of 2 autoresearch trials ran on the emulator:\n%s", n, journal)
	}

	// The GPU visit's rehearsal on the emulator, with the kernel build above.
	t.Run("visit script", tinyVisit)
}

// TestDeviceEmuWithoutACompiler: a missing C++ compiler is a clear refusal
// before anything starts.
func TestDeviceEmuWithoutACompiler(t *testing.T) {
	emuEnv(t)
	t.Setenv(build.EnvCXX, filepath.Join(t.TempDir(), "no-such-g++"))
	code, out, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--device", "emu")
	if code != exitBadInput || out != "" || !strings.Contains(errOut, "--device emu: the emulator needs a C++ compiler") ||
		!strings.Contains(errOut, "AMK_CXX") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCmd(t, "eval", "toy", "--gpu", "mi300x", "--device", "emu")
	if code != exitBadInput || !strings.Contains(errOut, "not a CUDA target") {
		t.Errorf("an AMD target: code %d, stderr %q", code, errOut)
	}
}
