//go:build !unix

package proctest

import (
	"os/exec"
	"time"
)

// Isolate does nothing where there are no process groups.
func Isolate(*exec.Cmd) {}

// KillGroup kills the started process alone where there are no process
// groups.
func KillGroup(cmd *exec.Cmd, _ time.Duration) error {
	if cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	return nil
}
