package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/waitfor"
)

// command sends one RESP command and returns the first reply line.
func command(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(line, "$") && !strings.HasPrefix(line, "$-1") {
		line, err = r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
	}
	return strings.TrimSpace(line)
}

func TestStartAnswersAndCleansUp(t *testing.T) {
	var dir string
	t.Run("inner", func(t *testing.T) {
		s := Start(t)
		dir = s.Dir
		if got := command(t, s.Addr, "PING"); got != "+PONG" {
			t.Fatalf("PING = %q", got)
		}
		if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
			t.Fatalf("address %q is not loopback", s.Addr)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory %s still exists after cleanup (err %v)", dir, err)
	}
}

func TestRestartKeepsAppendOnlyData(t *testing.T) {
	s := StartWith(t, Options{AppendOnly: true})
	if got := command(t, s.Addr, "SET", "k", "v1"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	s.Kill()
	if err := ping(s.Addr, ""); err == nil {
		t.Fatal("server still answers after Kill")
	}
	s.Restart(t)
	if got := command(t, s.Addr, "GET", "k"); got != "v1" {
		t.Fatalf("GET after restart = %q, want v1; log:\n%s", got, s.Log())
	}
}

func TestPasswordRequired(t *testing.T) {
	s := StartWith(t, Options{Password: "s3cret"})
	if got := command(t, s.Addr, "PING"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("PING without AUTH = %q, want NOAUTH", got)
	}
	if err := ping(s.Addr, "s3cret"); err != nil {
		t.Fatal(err)
	}
}

func TestSentinelsFailOverToTheReplica(t *testing.T) {
	primary := StartWith(t, Options{AppendOnly: true})
	replica := StartWith(t, Options{AppendOnly: true, ReplicaOf: primary.Addr})
	sentinels := StartSentinels(t, primary, SentinelOptions{})
	if got, err := sentinels.Primary(); err != nil || got != primary.Addr {
		t.Fatalf("primary %q %v, want %s", got, err, primary.Addr)
	}
	primary.Kill()
	waitfor.Check(t, 30*time.Second, func() error {
		if got, err := sentinels.Primary(); err != nil || got != replica.Addr {
			return fmt.Errorf("no failover to %s: primary %q %v\n%s", replica.Addr, got, err, sentinels.Log())
		}
		return nil
	})
}
