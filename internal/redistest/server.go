package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/proctest"
)

// readyTimeout bounds how long Start waits for the first PONG.
const readyTimeout = 10 * time.Second

// Options configures a Server.
type Options struct {
	// AppendOnly turns on the append-only file (appendfsync always), so data
	// survives Kill + Restart.
	AppendOnly bool
	// Password, when set, is required from clients (requirepass).
	Password string
	// ReplicaOf, when set (host:port), makes the server a replica of that
	// primary.
	ReplicaOf string
}

// Server is one redis-server process owned by a test.
type Server struct {
	// Addr is the loopback host:port the server listens on.
	Addr string
	// Dir is the server's data directory (AOF, logs).
	Dir string

	binary string
	opts   Options
	tb     testing.TB // the owner, told when the server's processes outlive a stop

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a redis-server for tb with default options.
func Start(tb testing.TB) *Server { return StartWith(tb, Options{}) }

// StartWith starts a redis-server for tb. It skips tb when redis-server is not
// installed and fails it when the server does not come up.
func StartWith(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is not installed; run `make deps` (scripts/ensure-deps.sh) to install it")
	}
	s := &Server{Dir: tb.TempDir(), binary: bin, opts: opts, tb: tb}
	tb.Cleanup(s.Stop)
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: no free port: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = s.launch(); lastErr == nil {
			return s
		}
		s.Kill()
	}
	tb.Fatalf("redistest: redis-server did not start: %v", lastErr)
	return nil
}

// Restart starts the server again on the same address and directory after
// Stop or Kill; with AppendOnly the data is still there.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	var err error
	for range 20 {
		if err = s.launch(); err == nil {
			return
		}
		s.Kill()
		time.Sleep(100 * time.Millisecond) // the port may still be in TIME_WAIT
	}
	tb.Fatalf("redistest: restart on %s failed: %v", s.Addr, err)
}

// Stop shuts the server down gracefully (SIGTERM; it flushes the AOF) and
// waits for it to exit. It is safe to call on a stopped server.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill stops the server with SIGKILL, as a crash would.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	// A child forked for a background save or AOF rewrite survives a
	// SIGKILLed server and would go on writing into Dir.
	if err := proctest.KillGroup(cmd, 10*time.Second); err != nil {
		s.tb.Errorf("redistest: %v", err)
	}
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch() error {
	args := []string{
		"--port", strings.TrimPrefix(s.Addr, "127.0.0.1:"),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--daemonize", "no",
		"--save", "",
		"--logfile", filepath.Join(s.Dir, "redis.log"),
	}
	if s.opts.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	if s.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.opts.ReplicaOf)
		args = append(args, "--replicaof", host, port)
	}
	cmd := exec.Command(s.binary, args...)
	cmd.Dir = s.Dir
	proctest.Isolate(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ping(s.Addr, s.opts.Password)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited early (see %s): %v", filepath.Join(s.Dir, "redis.log"), err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG from %s within %s: %v", s.Addr, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends PING (after AUTH when a password is set) over a raw connection.
func ping(addr, password string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := fmt.Fprintf(c, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password); err != nil {
			return err
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("AUTH failed: %q %v", strings.TrimSpace(line), err)
		}
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New("unexpected reply " + strings.TrimSpace(line))
	}
	return nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Log returns the server's log file contents, for failure messages.
func (s *Server) Log() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}
