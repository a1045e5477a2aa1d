//go:build unix

package proctest

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Isolate makes cmd, once started, the leader of a new process group that
// its descendants inherit, and (on Linux) has the kernel kill it when the
// test binary dies. Call it before cmd.Start.
func Isolate(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
}

// KillGroup sends SIGKILL to every process in the group that cmd leads (see
// Isolate) and waits up to timeout until none of them is alive; a zombie,
// which can no longer write anything, counts as gone. The leader itself
// must still be reaped by whoever called cmd.Start (cmd.Wait). KillGroup
// returns an error when members are still alive at the timeout. It does
// nothing when cmd was never started.
func KillGroup(cmd *exec.Cmd, timeout time.Duration) error {
	if cmd.Process == nil {
		return nil
	}
	pgid := cmd.Process.Pid
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Kill(-pgid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("proctest: killing process group %d: %w", pgid, err)
		}
		alive, err := liveMembers(pgid)
		if err != nil {
			return err
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proctest: %d processes of group %d still alive %s after SIGKILL", alive, pgid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
