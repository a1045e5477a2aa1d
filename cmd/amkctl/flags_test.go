package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Flags may come before, between or after the positional arguments, and
// "--" ends the flags.
func TestFlagsInterleaveWithPositionals(t *testing.T) {
	cases := []struct {
		args []string
		want string
		gpu  string
	}{
		{[]string{"toy", "--gpu", "h200"}, "toy", "h200"},
		{[]string{"--gpu", "a100", "toy", "x"}, "toy x", "a100"},
		{[]string{"toy", "--", "-odd", "--gpu"}, "toy -odd --gpu", "h100"},
	}
	for _, c := range cases {
		var got, gpu string
		root := newRoot(io.Discard, io.Discard)
		probe := &cobra.Command{Use: "probe"}
		g := probe.Flags().String("gpu", "h100", "")
		probe.RunE = runVerb(func(args []string, _, _ io.Writer) int {
			got, gpu = strings.Join(args, " "), *g
			return exitOK
		})
		root.AddCommand(probe)
		if code := execute(root, append([]string{"probe"}, c.args...), io.Discard); code != exitOK {
			t.Fatalf("%v: exit %d", c.args, code)
		}
		if got != c.want || gpu != c.gpu {
			t.Errorf("%v: positionals %q gpu %s, want %q %s", c.args, got, gpu, c.want, c.gpu)
		}
	}
}

func TestUnknownVerbSuggestsAndHelp(t *testing.T) {
	code, _, errOut := runCmd(t, "no-such-verb")
	if code != exitBadInput || !strings.Contains(errOut, `unknown command "no-such-verb"`) {
		t.Errorf("unknown verb: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "stauts")
	if code != exitBadInput || !strings.Contains(errOut, "Did you mean this?") || !strings.Contains(errOut, "status") {
		t.Errorf("typo: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "status", "--jsno")
	if code != exitBadInput || !strings.Contains(errOut, "unknown flag: --jsno") {
		t.Errorf("unknown flag: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCmd(t, "--help"); code != exitOK || !strings.Contains(out, "Exit codes:") || !strings.Contains(out, "autoresearch") {
		t.Errorf("--help exit %d, output %q", code, out)
	}
	for _, c := range newRoot(io.Discard, io.Discard).Commands() {
		code, out, _ := runCmd(t, c.Name(), "-h")
		if code != exitOK {
			t.Errorf("%s -h exit %d, want 0", c.Name(), code)
		}
		if !c.Hidden && c.Name() != "help" && c.Name() != "completion" && !strings.Contains(out, "3  internal error") {
			t.Errorf("%s -h does not list the exit codes:\n%s", c.Name(), out)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, out, _ := runCmd(t, "--version")
	if code != exitOK || !strings.HasPrefix(out, "amkctl ") || len(strings.TrimSpace(out)) <= len("amkctl") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	// The version, the commit and the build date, each named.
	if !strings.Contains(out, ", commit ") || !regexp.MustCompile(`, built \d{4}-\d\d-\d\d `).MatchString(out) {
		t.Errorf("--version does not give the commit and the build date: %q", out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runCmd(t, "completion", shell)
		if code != exitOK || !strings.Contains(out, "amkctl") {
			t.Errorf("completion %s: exit %d, %d bytes, %s", shell, code, len(out), errOut)
		}
	}
	// The shell asks amkctl itself for the candidates.
	code, out, _ = runCmd(t, cobra.ShellCompRequestCmd, "eval", "toy", "--gpu", "h")
	if code != exitOK || !strings.Contains(out, "h100") || !strings.Contains(out, "h200") {
		t.Errorf("completion of --gpu: exit %d, %q", code, out)
	}
	code, out, _ = runCmd(t, cobra.ShellCompRequestCmd, "sta")
	if code != exitOK || !strings.Contains(out, "status") || !strings.Contains(out, "start") {
		t.Errorf("completion of a verb: exit %d, %q", code, out)
	}
}

// --output json|text is --json spelled another way; the old flag names
// still work.
func TestOutputFlagAndAliases(t *testing.T) {
	if code, _, errOut := runCmd(t, "campaigns", "--output", "yaml"); code != exitBadInput || !strings.Contains(errOut, "must be json or text") {
		t.Errorf("--output yaml: exit %d, %q", code, errOut)
	}
	ws := t.TempDir()
	if code, out, errOut := runCmd(t, "campaigns", "--workspace", ws, "--output", "json"); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("--output json: exit %d, %q %s", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "campaigns", "--workspace", ws, "--json", "--output", "text"); code != exitOK || !strings.Contains(out, "no campaigns") {
		t.Errorf("--output text after --json: exit %d, %q", code, out)
	}
	if code, _, errOut := runCmd(t, "lower", "toy", "--config", "/nonexistent/cfg.json"); code != exitBadInput || !strings.Contains(errOut, "/nonexistent/cfg.json") {
		t.Errorf("--config alias of --schedule: exit %d, %q", code, errOut)
	}
}

func TestPanicsBecomeOneLine(t *testing.T) {
	var out, errOut strings.Builder
	root := newRoot(&out, &errOut)
	root.AddCommand(&cobra.Command{Use: "boom", RunE: runVerb(func([]string, io.Writer, io.Writer) int { panic("kaput") })})
	code := execute(root, []string{"boom"}, &errOut)
	if code != exitInternal || errOut.String() != "amkctl boom: internal error: kaput (please report it with the command line)\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// Every verb that only groups subcommands behaves alike: bare, it says a
// subcommand is required, prints its help on stderr and exits 2; an
// unknown subcommand is a usage error that names the subcommands.
func TestBareGroupVerbsAgree(t *testing.T) {
	seen := 0
	for _, c := range newRoot(io.Discard, io.Discard).Commands() {
		if !c.HasAvailableSubCommands() || c.Name() == "corpus" || c.Name() == "help" || c.Name() == "completion" {
			continue // corpus summarises a corpus when bare
		}
		seen++
		code, out, errOut := runCmd(t, c.Name())
		if code != exitBadInput || out != "" || !strings.Contains(errOut, "a subcommand is required") || !strings.Contains(errOut, "Available Commands:") {
			t.Errorf("bare amkctl %s: exit %d, stdout %q, stderr %q", c.Name(), code, out, errOut)
		}
		sub := c.Commands()[0].Name()
		code, _, errOut = runCmd(t, c.Name(), sub+"x")
		if code != exitBadInput || !strings.Contains(errOut, "unknown subcommand") || !strings.Contains(errOut, sub) {
			t.Errorf("amkctl %s %sx: exit %d, stderr %q", c.Name(), sub, code, errOut)
		}
	}
	if seen < 4 {
		t.Errorf("only %d verbs with subcommands (fib, mpk, ir, pipeline at least)", seen)
	}
}
