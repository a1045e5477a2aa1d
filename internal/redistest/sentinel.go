package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/proctest"
)

// SentinelOptions configures StartSentinels.
type SentinelOptions struct {
	// Master is the name the sentinels monitor the primary under
	// (default "amk").
	Master string
	// N is the number of sentinels (default 3); the quorum is a majority.
	N int
	// DownAfter is how long the primary must be unreachable before it is
	// judged down (default 1 s); FailoverTimeout bounds a failover
	// (default 5 s).
	DownAfter       time.Duration
	FailoverTimeout time.Duration
}

// Sentinels are redis-sentinel processes owned by a test, monitoring one
// primary on loopback.
type Sentinels struct {
	// Addrs are the sentinels' loopback host:port addresses.
	Addrs []string
	// Master is the monitored primary's name.
	Master string
	procs  []*exec.Cmd
	dones  []chan struct{}
	dirs   []string
	tb     testing.TB // the owner, told when a sentinel's processes outlive a stop
}

// StartSentinels starts sentinels monitoring primary. It skips tb when
// redis-sentinel is not installed (Debian's redis-sentinel package; make
// deps installs it) and fails it when they do not come up.
func StartSentinels(tb testing.TB, primary *Server, opts SentinelOptions) *Sentinels {
	tb.Helper()
	bin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		tb.Skip("redis-sentinel is not installed; run `make deps` (scripts/ensure-deps.sh) to install it")
	}
	if opts.Master == "" {
		opts.Master = "amk"
	}
	if opts.N <= 0 {
		opts.N = 3
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = time.Second
	}
	if opts.FailoverTimeout <= 0 {
		opts.FailoverTimeout = 5 * time.Second
	}
	host, port, _ := net.SplitHostPort(primary.Addr)
	s := &Sentinels{Master: opts.Master, tb: tb}
	// The directories first: their removal then runs after Stop (cleanups
	// run last-registered first), never under a sentinel still rewriting
	// its config and log there.
	for range opts.N {
		s.dirs = append(s.dirs, tb.TempDir())
	}
	tb.Cleanup(s.Stop)
	for i, dir := range s.dirs {
		p, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: no free port: %v", err)
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\nsentinel parallel-syncs %s 1\n",
			p, dir, filepath.Join(dir, "sentinel.log"),
			opts.Master, host, port, opts.N/2+1, opts.Master, opts.DownAfter.Milliseconds(),
			opts.Master, opts.FailoverTimeout.Milliseconds(), opts.Master)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(bin, conf)
		cmd.Dir = dir
		proctest.Isolate(cmd)
		if err := cmd.Start(); err != nil {
			tb.Fatalf("redistest: start sentinel %d: %v", i, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		s.Addrs, s.procs, s.dones = append(s.Addrs, addr), append(s.procs, cmd), append(s.dones, done)
	}
	deadline := time.Now().Add(readyTimeout)
	for _, addr := range s.Addrs {
		for {
			got, err := s.primaryFrom(addr)
			if err == nil && got == primary.Addr {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: sentinel %s does not report the primary %s (got %q, %v)\n%s", addr, primary.Addr, got, err, s.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s
}

// Primary is the address the first answering sentinel reports for the
// monitored primary.
func (s *Sentinels) Primary() (string, error) {
	var last error
	for _, addr := range s.Addrs {
		got, err := s.primaryFrom(addr)
		if err == nil {
			return got, nil
		}
		last = err
	}
	return "", last
}

// primaryFrom asks one sentinel for the primary's address.
func (s *Sentinels) primaryFrom(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	cmd := fmt.Sprintf("*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$%d\r\n%s\r\n", len(s.Master), s.Master)
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(head, "*2") {
		return "", fmt.Errorf("unexpected reply %q", strings.TrimSpace(head))
	}
	var parts []string
	for range 2 {
		if _, err := r.ReadString('\n'); err != nil { // $<len>
			return "", err
		}
		v, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		parts = append(parts, strings.TrimSpace(v))
	}
	return net.JoinHostPort(parts[0], parts[1]), nil
}

// Stop ends every sentinel.
func (s *Sentinels) Stop() {
	for i, cmd := range s.procs {
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.dones[i]:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-s.dones[i]
		}
		if err := proctest.KillGroup(cmd, 10*time.Second); err != nil {
			s.tb.Errorf("redistest: sentinel %d: %v", i, err)
		}
		s.procs[i] = nil
	}
}

// Log is every sentinel's log, for failure messages.
func (s *Sentinels) Log() string {
	var b strings.Builder
	for i, dir := range s.dirs {
		text, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
		fmt.Fprintf(&b, "--- sentinel %d\n%s", i, text)
	}
	return b.String()
}
