//go:build linux

package build

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel runs cmd in its own process group and kills the whole
// group when its context ends (nvcc runs cicc and ptxas as children); the
// kernel also kills the compiler when the process that started it dies
// (a step of a GPU visit killed by timeout(1), say), so that no nvcc
// outlives its builder.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
