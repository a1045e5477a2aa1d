//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFOInputsAreRefused: a named pipe given where a program, schedule,
// task graph or model config is read is refused as bad input at once; it
// used to hang the verb in open(2) waiting for a writer.
func TestFIFOInputsAreRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "input.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	for _, args := range [][]string{
		{"validate", fifo},
		{"verify", fifo},
		{"mpk", "import", fifo},
		{"pipeline", "check", fifo},
		{"propose", fifo, "--gpu", "h100"},
		{"eval", "toy", "--gpu", "h100", "--schedule", fifo},
	} {
		type result struct {
			code    int
			errText string
		}
		done := make(chan result, 1)
		go func() {
			code, _, errOut := runCmd(t, args...)
			done <- result{code, errOut}
		}()
		select {
		case r := <-done:
			if r.code != exitBadInput || !strings.Contains(r.errText, "named pipe") {
				t.Errorf("%v: code %d, stderr %q; want exit %d naming the pipe", args, r.code, r.errText, exitBadInput)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%v hangs on a FIFO", args)
		}
	}
}
