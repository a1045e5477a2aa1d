//go:build unix

package launch

import (
	"os"
	"os/exec"
	"syscall"
)

// alive reports whether a process exists (signal 0 probes without killing).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// leaveStuckHolder starts a process in a session of its own (out of reach of
// the supervisor's process-group kill) that keeps this child's stdout open
// for a minute: to the supervisor the killed child then looks exactly like
// one stuck in the driver, its pipe never closing. It returns the holder's
// pid, for the test to end it.
func leaveStuckHolder() (int, error) {
	cmd := exec.Command("sleep", "60")
	cmd.Stdout = os.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

func endProcess(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
