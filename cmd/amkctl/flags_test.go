package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgsInterleavesFlagsAndPositionals(t *testing.T) {
	cases := []struct {
		args []string
		want []string
		gpu  string
	}{
		{[]string{"toy", "--gpu", "h200"}, []string{"toy"}, "h200"},
		{[]string{"--gpu", "a100", "toy", "x"}, []string{"toy", "x"}, "a100"},
		{[]string{"toy", "--", "-odd", "--gpu"}, []string{"toy", "-odd", "--gpu"}, "h100"},
	}
	for _, c := range cases {
		fs := newFlagSet("t", "t", io.Discard)
		gpu := fs.String("gpu", "h100", "")
		got, err := parseArgs(fs, c.args)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !reflect.DeepEqual(got, c.want) || *gpu != c.gpu {
			t.Errorf("%v: positionals %v gpu %s, want %v %s", c.args, got, *gpu, c.want, c.gpu)
		}
	}
}

func TestUnknownVerbAndHelp(t *testing.T) {
	if code, _, _ := runCmd(t, "no-such-verb"); code != 2 {
		t.Errorf("unknown verb exit %d, want 2", code)
	}
	if code, out, _ := runCmd(t, "--help"); code != 0 || out == "" {
		t.Errorf("--help exit %d, output %q", code, out)
	}
	for name := range commands {
		if code, _, _ := runCmd(t, name, "-h"); code != 0 {
			t.Errorf("%s -h exit %d, want 0", name, code)
		}
	}
}

func TestPanicsBecomeOneLine(t *testing.T) {
	var out, errOut strings.Builder
	code := runGuarded(command{name: "boom", run: func([]string, io.Writer, io.Writer) int { panic("kaput") }}, nil, &out, &errOut)
	if code != 3 || !strings.Contains(errOut.String(), "internal error: kaput") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
