package proctest

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A shell that leaves a background child behind: killing and reaping the
// shell alone leaves the child alive, and KillGroup ends it.
func TestKillGroupEndsWhatTheLeaderLeftBehind(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 600 & echo started; wait")
	Isolate(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh to start: %v", err)
	}
	t.Cleanup(func() { _ = KillGroup(cmd, 10*time.Second) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "started" {
		t.Fatalf("the shell said %q, %v", line, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	pgid := cmd.Process.Pid
	if n, err := liveMembers(pgid); err != nil || n != 1 {
		t.Fatalf("after the leader's exit, %d members alive (%v); want the background sleep", n, err)
	}
	if err := KillGroup(cmd, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := liveMembers(pgid); err != nil || n != 0 {
		t.Fatalf("after KillGroup, %d members alive (%v)", n, err)
	}
	// A second call finds nothing left and succeeds.
	if err := KillGroup(cmd, time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestKillGroupOfAnUnstartedCommandDoesNothing(t *testing.T) {
	if err := KillGroup(exec.Command("sh"), time.Second); err != nil {
		t.Fatal(err)
	}
}

// An isolated process leads a group of one, and liveMembers finds it (so
// the zero above is not /proc parsing that never matches).
func TestLiveMembersCountsARunningProcess(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	Isolate(cmd)
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	defer func() { _ = KillGroup(cmd, 10*time.Second) }()
	if n, err := liveMembers(cmd.Process.Pid); err != nil || n != 1 {
		t.Fatalf("a running sleep counts %d members (%v), want 1", n, err)
	}
}

// Start's cleanup ends the command and what it left behind, even when the
// test never waits for it.
func TestStartCleansUpTheWholeGroup(t *testing.T) {
	var pgid int
	t.Run("owner", func(t *testing.T) {
		cmd := exec.Command("sh", "-c", "sleep 600 & sleep 600")
		if err := Start(t, cmd); err != nil {
			t.Skipf("no sh to start: %v", err)
		}
		pgid = cmd.Process.Pid
	})
	if pgid == 0 {
		t.Skip("nothing started")
	}
	if n, err := liveMembers(pgid); err != nil || n != 0 {
		t.Fatalf("after the owner's cleanup, %d members alive (%v)", n, err)
	}
}
