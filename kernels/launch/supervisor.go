package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// SupervisorConfig configures the parent side of the launcher child.
type SupervisorConfig struct {
	// Command returns a fresh command for each spawn: the launcher binary
	// (e.g. gpuworker's hidden launcher subcommand) for one device.
	Command func() *exec.Cmd
	// MaxFrame bounds one response frame (default DefaultMaxFrame).
	MaxFrame int
	// StderrTail is how much of the child's stderr is kept for crash
	// reports (default 8 KiB).
	StderrTail int
	// Log, when set, receives the child's stderr as it arrives.
	Log io.Writer
	// ShutdownGrace is how long Close waits for a clean exit (default 5 s).
	ShutdownGrace time.Duration
	// KillWait bounds how long a kill waits for the child to go (default
	// 10 s). A child stuck in the driver after a GPU fault can outlive
	// SIGKILL: it is then abandoned, the call fails as "infra" and the next
	// call starts a fresh child, so the worker never hangs on it.
	KillWait time.Duration
}

// Supervisor owns one launcher child process and talks to it one request at
// a time. A request that outlives its context deadline kills the child (a
// hung kernel ends as a "timeout" failure); a child that dies mid-request is
// a "crash" failure; a child that does not go within KillWait of its kill is
// abandoned ("infra"); in every case the next call spawns a fresh child, so
// the worker itself never hangs or dies with the kernel. Handles loaded in a
// previous child are gone after a restart: compare Generation before and
// after to know when to reload.
type Supervisor struct {
	cfg SupervisorConfig

	mu     sync.Mutex
	c      *child
	nextID uint64
	spawns int
}

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Closer
	frames chan frameResult
	done   chan struct{} // closed after the process exited and stdout drained
	tail   *tailWriter
	werr   error // Wait's error, valid after done
}

type frameResult struct {
	resp responseFrame
	raw  string
	err  error
}

// NewSupervisor returns a supervisor; the child starts on the first call.
func NewSupervisor(cfg SupervisorConfig) *Supervisor {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.StderrTail <= 0 {
		cfg.StderrTail = 8 << 10
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	if cfg.KillWait <= 0 {
		cfg.KillWait = DefaultKillWait
	}
	return &Supervisor{cfg: cfg}
}

// DefaultKillWait is SupervisorConfig.KillWait's default.
const DefaultKillWait = 10 * time.Second

// Generation counts the children spawned so far.
func (s *Supervisor) Generation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spawns
}

// PID is the running child's process id (0 if none).
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil || s.c.exited() {
		return 0
	}
	return s.c.cmd.Process.Pid
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (s *Supervisor) spawn() (*child, error) {
	if s.cfg.Command == nil {
		return nil, errors.New("launcher supervisor has no command")
	}
	cmd := s.cfg.Command()
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, stdout: stdout, frames: make(chan frameResult, 4), done: make(chan struct{}),
		tail: &tailWriter{max: s.cfg.StderrTail, fwd: s.cfg.Log}}
	cmd.Stderr = c.tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the launcher child: %w", err)
	}
	s.spawns++
	go c.read(stdout, s.cfg.MaxFrame)
	return c, nil
}

// read forwards response frames until stdout closes, then reaps the child.
func (c *child) read(stdout io.Reader, maxFrame int) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), maxFrame)
	for sc.Scan() {
		var f responseFrame
		fr := frameResult{raw: sc.Text()}
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			fr.err = fmt.Errorf("launcher child wrote a non-protocol line: %q", truncate(fr.raw, 200))
		} else {
			fr.resp = f
		}
		select {
		case c.frames <- fr:
		default: // nobody asked: an unsolicited frame; drop it
		}
	}
	c.werr = c.cmd.Wait()
	close(c.done)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// kill sends SIGKILL to the child's process group and waits up to wait for
// it to go. It reports false when the child is still there: a process stuck
// in the driver (uninterruptible) after a GPU fault ignores SIGKILL until
// the driver lets go, maybe never. Its output pipe is then closed, so the
// reader stops, and the child is left to the kernel.
func (c *child) kill(wait time.Duration) bool {
	killProcess(c.cmd)
	_ = c.stdin.Close()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		_ = c.stdout.Close()
		return false
	}
}

func (c *child) exitReport() string {
	status := "exited"
	if c.werr != nil {
		status = c.werr.Error()
	}
	if t := strings.TrimSpace(c.tail.String()); t != "" {
		return status + "; stderr: " + t
	}
	return status
}

// Call sends one request and decodes the response body into resp (which
// may be nil). Failures are *RemoteError values: the child's own errors as
// it classified them, "timeout" when ctx expired (the child is killed),
// "crash" when the child died or broke the protocol.
func (s *Supervisor) Call(ctx context.Context, op string, req, resp any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil || s.c.exited() {
		c, err := s.spawn()
		if err != nil {
			return &RemoteError{Class: ClassInfra, Phase: op, Message: err.Error()}
		}
		s.c = c
	}
	c := s.c
	s.nextID++
	id := s.nextID
	var body json.RawMessage
	if req != nil {
		data, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", op, err)
		}
		body = data
	}
	line, _ := json.Marshal(requestFrame{ID: id, Op: op, Body: body})
	wrote := make(chan error, 1)
	go func() {
		_, err := c.stdin.Write(append(line, '\n'))
		wrote <- err
	}()

	// abandon drops a child that outlived its kill: the call fails as an
	// infrastructure problem (retried elsewhere or later), never a hang.
	abandon := func(what string) error {
		s.c = nil
		msg := fmt.Sprintf("%s; the launcher child (pid %d) was killed but had not exited %v later (stuck in the driver after a GPU fault?): abandoned it, the next request starts a fresh child",
			what, c.cmd.Process.Pid, s.cfg.KillWait)
		if t := strings.TrimSpace(c.tail.String()); t != "" {
			msg += "; stderr: " + t
		}
		return &RemoteError{Class: ClassInfra, Phase: op, Message: msg}
	}
	crash := func(what string) error {
		if !c.kill(s.cfg.KillWait) {
			return abandon(what)
		}
		return &RemoteError{Class: ClassCrash, Phase: op, Message: what + ": " + c.exitReport()}
	}
	for {
		select {
		case err := <-wrote:
			wrote = nil
			if err != nil {
				return crash("writing to the launcher child failed (" + err.Error() + ")")
			}
		case fr := <-c.frames:
			if fr.err != nil {
				return crash(fr.err.Error())
			}
			if fr.resp.ID != id {
				return crash(fmt.Sprintf("launcher child answered request %d while %d was pending", fr.resp.ID, id))
			}
			if fr.resp.Exit && !c.kill(s.cfg.KillWait) { // the child is going down after this answer: reap it now
				s.c = nil
			}
			if !fr.resp.OK {
				if fr.resp.Error == nil {
					return &RemoteError{Class: ClassCrash, Phase: op, Message: "launcher child failed without a reason"}
				}
				return fr.resp.Error
			}
			if resp != nil && len(fr.resp.Body) > 0 {
				if err := json.Unmarshal(fr.resp.Body, resp); err != nil {
					return &RemoteError{Class: ClassCrash, Phase: op, Message: "decoding the child's answer: " + err.Error()}
				}
			}
			return nil
		case <-c.done:
			select { // a last frame written just before exiting still counts
			case fr := <-c.frames:
				if fr.err == nil && fr.resp.ID == id && !fr.resp.OK && fr.resp.Error != nil {
					return fr.resp.Error
				}
				if fr.err == nil && fr.resp.ID == id && fr.resp.OK {
					if resp != nil && len(fr.resp.Body) > 0 {
						_ = json.Unmarshal(fr.resp.Body, resp)
					}
					return nil
				}
			default:
			}
			return &RemoteError{Class: ClassCrash, Phase: op, Message: "launcher child died: " + c.exitReport()}
		case <-ctx.Done():
			what := fmt.Sprintf("launcher child gave no answer to %q before the deadline (%v)", op, ctx.Err())
			if !c.kill(s.cfg.KillWait) {
				return abandon(what)
			}
			return &RemoteError{Class: ClassTimeout, Phase: op, Message: what + "; killed it"}
		}
	}
}

// Close asks the child to shut down and kills it after the grace period.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	c := s.c
	s.c = nil
	s.mu.Unlock()
	if c == nil || c.exited() {
		return nil
	}
	line, _ := json.Marshal(requestFrame{ID: 0, Op: OpShutdown})
	go func() { _, _ = c.stdin.Write(append(line, '\n')); _ = c.stdin.Close() }()
	select {
	case <-c.done:
	case <-time.After(s.cfg.ShutdownGrace):
		c.kill(s.cfg.KillWait)
	}
	return nil
}

// tailWriter keeps the last max bytes written and forwards everything.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
	fwd io.Writer
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	if t.fwd != nil {
		_, _ = t.fwd.Write(p)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
