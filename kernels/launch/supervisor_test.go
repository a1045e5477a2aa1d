package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/waitfor"
)

func newSup(t *testing.T, mode string) *Supervisor {
	t.Helper()
	s := NewSupervisor(SupervisorConfig{Command: childCommand(mode), ShutdownGrace: 2 * time.Second})
	t.Cleanup(func() { s.Close() })
	return s
}

func callPID(t *testing.T, s *Supervisor) int {
	t.Helper()
	var pid int
	if err := s.Call(context.Background(), "pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

func remoteClass(t *testing.T, err error) *RemoteError {
	t.Helper()
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want *RemoteError", err, err)
	}
	return re
}

func TestSupervisorEchoReusesTheChild(t *testing.T) {
	s := newSup(t, "basic")
	var got map[string]int
	if err := s.Call(context.Background(), "echo", map[string]int{"x": 7}, &got); err != nil || got["x"] != 7 {
		t.Fatalf("echo: %v %v", got, err)
	}
	p1, p2 := callPID(t, s), callPID(t, s)
	if p1 != p2 || s.Generation() != 1 || s.PID() != p1 {
		t.Errorf("child not reused: %d %d gen %d", p1, p2, s.Generation())
	}
}

func TestSupervisorKillsAHungChildAtTheDeadline(t *testing.T) {
	s := newSup(t, "basic")
	old := callPID(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Call(ctx, "hang", nil, nil)
	re := remoteClass(t, err)
	if re.Class != ClassTimeout || re.Phase != "hang" || !strings.Contains(re.Message, "killed") {
		t.Errorf("hang: %+v", re)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the deadline did not bound the call (%v)", time.Since(start))
	}
	if alive(old) {
		t.Errorf("hung child %d still alive", old)
	}
	if fresh := callPID(t, s); fresh == old || s.Generation() != 2 {
		t.Errorf("no restart after the kill: pid %d gen %d", fresh, s.Generation())
	}
}

func TestSupervisorAbandonsAChildThatOutlivesItsKill(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs unix sessions")
	}
	s := NewSupervisor(SupervisorConfig{Command: childCommand("basic"), KillWait: 300 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	old := callPID(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	re := remoteClass(t, s.Call(ctx, "wedge", nil, nil))
	if m := regexp.MustCompile(`holder (\d+)`).FindStringSubmatch(re.Message); m != nil { // the child's stderr tail
		pid, _ := strconv.Atoi(m[1])
		t.Cleanup(func() { endProcess(pid) })
	} else {
		t.Errorf("no stderr tail in %q", re.Message)
	}
	if re.Class != ClassInfra || re.Phase != "wedge" || !strings.Contains(re.Message, "abandoned") || !strings.Contains(re.Message, "deadline") {
		t.Errorf("wedge: %+v", re)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the kill was not bounded (%v)", took)
	}
	if fresh := callPID(t, s); fresh == old || s.Generation() != 2 {
		t.Errorf("no fresh child after abandoning one: pid %d (old %d), gen %d", fresh, old, s.Generation())
	}
}

func TestSupervisorReportsACrashAndRestarts(t *testing.T) {
	s := newSup(t, "basic")
	old := callPID(t, s)
	re := remoteClass(t, s.Call(context.Background(), "crash", nil, nil))
	if re.Class != ClassCrash || !strings.Contains(re.Message, "exit status 3") || !strings.Contains(re.Message, "simulated device fault") {
		t.Errorf("crash: %+v", re)
	}
	if fresh := callPID(t, s); fresh == old {
		t.Error("crashed child reused")
	}
}

func TestSupervisorPassesChildErrorsThrough(t *testing.T) {
	s := newSup(t, "basic")
	old := callPID(t, s)
	re := remoteClass(t, s.Call(context.Background(), "fail", nil, nil))
	if re.Class != ClassRejected || re.Phase != "load" || !strings.Contains(re.Message, "FUSED") {
		t.Errorf("fail: %+v", re)
	}
	if callPID(t, s) != old || s.Generation() != 1 {
		t.Error("an ordinary child error restarted the child")
	}
	re = remoteClass(t, s.Call(context.Background(), "nope", nil, nil))
	if re.Class != ClassCrash || !strings.Contains(re.Message, "unknown op") {
		t.Errorf("unknown op: %+v", re)
	}
}

func TestSupervisorFatalAndPanicEndTheChild(t *testing.T) {
	for _, op := range []string{"fatal", "panic"} {
		t.Run(op, func(t *testing.T) {
			s := newSup(t, "basic")
			old := callPID(t, s)
			re := remoteClass(t, s.Call(context.Background(), op, nil, nil))
			if re.Class != ClassCrash {
				t.Errorf("%s: %+v", op, re)
			}
			if op == "panic" && !strings.Contains(re.Message, "boom") {
				t.Errorf("panic message lost: %+v", re)
			}
			if fresh := callPID(t, s); fresh == old {
				t.Errorf("%s: child survived", op)
			}
		})
	}
}

func TestSupervisorRejectsAChildThatBreaksTheProtocol(t *testing.T) {
	s := newSup(t, "garbage")
	re := remoteClass(t, s.Call(context.Background(), "pid", nil, nil))
	if re.Class != ClassCrash || !strings.Contains(re.Message, "non-protocol line") || !strings.Contains(re.Message, "UnknownErrorCode:34") {
		t.Errorf("garbage: %+v", re)
	}
}

func TestSupervisorCloseStopsTheChild(t *testing.T) {
	s := NewSupervisor(SupervisorConfig{Command: childCommand("basic")})
	pid := callPID(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 5*time.Second, fmt.Sprintf("child %d to go after Close", pid), func() bool { return !alive(pid) })
	if s.PID() != 0 {
		t.Error("PID after Close")
	}
}

func TestSupervisorWithoutCommand(t *testing.T) {
	s := NewSupervisor(SupervisorConfig{})
	if re := remoteClass(t, s.Call(context.Background(), "pid", nil, nil)); re.Class != ClassInfra {
		t.Errorf("%+v", re)
	}
}

func TestServeHandlesMalformedFramesAndShutdown(t *testing.T) {
	in := strings.NewReader("not json\n" + `{"id":4,"op":"echo","body":{"a":1}}` + "\n" + `{"id":5,"op":"shutdown"}` + "\n" + `{"id":6,"op":"echo"}` + "\n")
	var out bytes.Buffer
	if err := Serve(context.Background(), in, &out, HandlerFunc(fakeChildHandler)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 responses (malformed, echo, shutdown), got %q", lines)
	}
	var f responseFrame
	if json.Unmarshal([]byte(lines[0]), &f); f.OK || f.Error == nil || f.Error.Phase != "protocol" {
		t.Errorf("malformed frame answer %s", lines[0])
	}
	if json.Unmarshal([]byte(lines[1]), &f); !f.OK || f.ID != 4 || string(f.Body) != `{"a":1}` {
		t.Errorf("echo answer %s", lines[1])
	}
	if json.Unmarshal([]byte(lines[2]), &f); !f.OK || f.ID != 5 {
		t.Errorf("shutdown answer %s", lines[2])
	}
}
