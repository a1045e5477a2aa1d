//go:build linux

package launch

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in its own process group (so a kill takes
// its children too) and has the kernel kill it if the worker dies first.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killProcess(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
}
