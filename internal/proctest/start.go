package proctest

import (
	"os/exec"
	"testing"
	"time"
)

// cleanupTimeout bounds how long a cleanup waits for a killed group.
const cleanupTimeout = time.Minute

// Start starts cmd in a process group of its own (Isolate) and registers
// with tb's cleanup the end of that whole group and a wait for cmd, so
// nothing the command started outlives the test. Call it after the
// tb.TempDir() the process writes into, so that the stop runs before the
// directory's removal. The test may still Wait for cmd itself (not from a
// goroutine that could still be waiting when the test ends); the cleanup's
// second Wait then only returns an error that is ignored.
func Start(tb testing.TB, cmd *exec.Cmd) error {
	Isolate(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	tb.Cleanup(func() {
		if err := KillGroup(cmd, cleanupTimeout); err != nil {
			tb.Errorf("%v", err)
		}
		_ = cmd.Wait()
	})
	return nil
}
