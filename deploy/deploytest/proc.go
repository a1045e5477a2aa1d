package deploytest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/proctest"
)

// stopTimeout is how long a stopped process may take to exit after SIGTERM
// before it is killed.
const stopTimeout = 15 * time.Second

// Proc is a child process owned by a test; its output is kept for failure
// messages.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	once sync.Once
	tb   testing.TB // the owner, told when the process's children outlive it
}

// lockedBuffer is safe for the process's two output pipes and the test
// reading it.
type lockedBuffer = proctest.LogBuffer

// StartProc starts bin with args (and extra environment variables) in a
// process group of its own and registers its stop with tb's cleanup. A
// directory the process writes into must come from tb.TempDir() before this
// call, so that its removal runs after the stop.
func StartProc(tb testing.TB, name string, env []string, bin string, args ...string) *Proc {
	tb.Helper()
	p := &Proc{Name: name, cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{}), tb: tb}
	p.cmd.Env = append(os.Environ(), env...)
	proctest.Isolate(p.cmd)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.Stop)
	return p
}

// Stop sends SIGTERM, waits for the exit and kills the process if it takes
// longer than stopTimeout; then it kills whatever the process left running
// in its group and waits for that too. It is safe to call more than once.
func (p *Proc) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.endGroup()
	})
}

// Kill sends SIGKILL (no chance to clean up, as in a crash) and waits for
// the exit, and for the end of every process it started.
func (p *Proc) Kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		p.endGroup()
	})
}

// endGroup kills and waits for the rest of the process's group.
func (p *Proc) endGroup() {
	if err := proctest.KillGroup(p.cmd, stopTimeout); err != nil {
		p.tb.Errorf("%s: %v", p.Name, err)
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Output is what the process wrote to stdout and stderr.
func (p *Proc) Output() string { return p.out.String() }

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitHTTP polls url until it answers 200, the process (when given) exits,
// or the timeout passes.
func WaitHTTP(url string, timeout time.Duration, p *Proc) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited", p.Name)
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %s: %v", url, timeout, last)
}

// RepoRoot is the module root (the directory holding go.mod), found from
// the working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// builds are the binaries BuildCommands built in this process, shared by
// every test that asks for them: each build links a whole daemon, seconds of
// CPU, and the binaries do not change during a test run.
var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

// BuildCommands builds the named ./cmd/<name> packages of the module and
// returns the binaries' paths by name. A command is built once per test
// process, into a directory RemoveBuilds removes (the package's TestMain
// calls it after the tests).
func BuildCommands(tb testing.TB, names ...string) map[string]string {
	tb.Helper()
	builds.Lock()
	defer builds.Unlock()
	var missing []string
	for _, n := range names {
		if _, ok := builds.bins[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		root, err := RepoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			tb.Skip("the go command is not on PATH; cannot build the daemons")
		}
		if builds.dir == "" {
			if builds.dir, err = os.MkdirTemp("", "amk-deploytest-bin-"); err != nil {
				tb.Fatal(err)
			}
			builds.bins = map[string]string{}
		}
		args := []string{"build", "-o", builds.dir + string(filepath.Separator)}
		for _, n := range missing {
			args = append(args, "./cmd/"+n)
		}
		cmd := exec.Command(gobin, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("go build %v: %v\n%s", missing, err, out)
		}
		for _, n := range missing {
			builds.bins[n] = filepath.Join(builds.dir, n)
		}
	}
	bins := map[string]string{}
	for _, n := range names {
		bins[n] = builds.bins[n]
	}
	return bins
}

// RemoveBuilds removes what BuildCommands built.
func RemoveBuilds() error {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir == "" {
		return nil
	}
	err := os.RemoveAll(builds.dir)
	builds.dir, builds.bins = "", nil
	return err
}
