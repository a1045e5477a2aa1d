package main

import (
	"strings"
	"testing"
)

// amkctl generate decodes (trial.GreedyDecode) and reports the check
// against the eager oracle.
func TestGenerateVerifiesAgainstEager(t *testing.T) {
	cases := []struct {
		model, prompt, tokens string
	}{
		{"toy", "1,2,3", "12"},
		{"toy-2L", "5,9", "12"},
	} // bf16 decodes: trial.TestGreedyDecodeMatchesEager
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			code, out, errOut := runCmd(t, "generate", c.model, "--gpu", "h200", "--prompt-ids", c.prompt, "--max-tokens", c.tokens, "--verify")
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if got := len(strings.Fields(out)); got != atoi(c.tokens) {
				t.Fatalf("%d tokens generated, want %s: %q", got, c.tokens, out)
			}
			if !strings.Contains(errOut, "tokens identical") {
				t.Fatalf("no verification summary: %s", errOut)
			}
		})
	}
}

func TestGenerateRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"generate", "toy", "--prompt-ids", ""},
		{"generate", "toy", "--prompt-ids", "1,x"},
		{"generate", "toy", "--prompt-ids", "999999"},
		{"generate", "toy", "--prompt-ids", "1", "--max-tokens", "100000"},
		{"generate", "no-such-model", "--prompt-ids", "1"},
	} {
		if code, _, errOut := runCmd(t, args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d (%q), want 2 with a message", args, code, errOut)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
