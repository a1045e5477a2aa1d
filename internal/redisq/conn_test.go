package redisq

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch/dispatchtest"

	"github.com/amk-dev/amk/internal/redistest"
)

func TestConnOptions(t *testing.T) {
	cases := []struct {
		name     string
		conn     Conn
		addr     string
		user     string
		password string
		db       int
		tls      bool
	}{
		{"host:port", Conn{Addr: "127.0.0.1:6379"}, "127.0.0.1:6379", "", "", 0, false},
		{"url", Conn{Addr: "redis://amk:pw@redis.example:6380/2"}, "redis.example:6380", "amk", "pw", 2, false},
		{"tls url", Conn{Addr: "rediss://redis.example"}, "redis.example:6379", "", "", 0, true},
		{"fields override url", Conn{Addr: "redis://u:p@h:1/1", Username: "v", Password: "q", DB: 3}, "h:1", "v", "q", 3, false},
		{"forced tls", Conn{Addr: "h:6379", TLS: true}, "h:6379", "", "", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := c.conn.Options()
			if err != nil {
				t.Fatal(err)
			}
			if o.Addr != c.addr || o.Username != c.user || o.Password != c.password || o.DB != c.db || (o.TLSConfig != nil) != c.tls {
				t.Fatalf("got addr=%s user=%s password=%s db=%d tls=%v", o.Addr, o.Username, o.Password, o.DB, o.TLSConfig != nil)
			}
		})
	}
}

func TestConnErrorsNeverShowSecrets(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := []Conn{
		{},
		{Addr: "localhost"},
		{Addr: "http://u:hunter2@h:1"},
		{Addr: "redis://u:hunter2@h:1/notadb"},
		{Addr: "redis://u:hunter2@h:1/%zz"},
		{Addr: "h:1", DB: -1, Password: "hunter2"},
		{Addr: "h:1", CAFile: notPEM, Password: "hunter2"},
		{Addr: "rediss://u:hunter2@h:1", CAFile: notPEM},
		{Addr: "rediss://h:1", CAFile: filepath.Join(dir, "missing.pem")},
	}
	for _, c := range bad {
		_, err := c.Options()
		if err == nil {
			t.Errorf("%s: accepted", c)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

func TestConnStringRedacts(t *testing.T) {
	for _, c := range []Conn{
		{Addr: "redis://amk:hunter2@h:1/0"},
		{Addr: "h:1", Username: "amk", Password: "hunter2"},
		{Addr: "rediss://:hunter2@h:1"},
		{Addr: "redis://amk:hunter2@h:1/%zz"}, // unparsable: hidden whole
	} {
		showsAddr := !strings.Contains(c.Addr, "%zz")
		var logged strings.Builder
		slog.New(slog.NewTextHandler(&logged, nil)).Info("connecting", "redis", c)
		for _, s := range []string{c.String(), logged.String()} {
			if strings.Contains(s, "hunter2") {
				t.Errorf("password visible in %q", s)
			}
			if showsAddr && !strings.Contains(s, "h:1") {
				t.Errorf("address missing from %q", s)
			}
		}
	}
}

func TestPasswordProtectedRedis(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Password: "hunter2"})
	var calls dispatchtestCalls
	eval := calls.eval()
	if _, err := NewDispatcher(context.Background(), DispatcherOptions{Conn: Conn{Addr: srv.Addr, Password: "wrong"}}); err == nil ||
		strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: err = %v, want an error without the password", err)
	}
	d, err := NewDispatcher(context.Background(), DispatcherOptions{Conn: Conn{Addr: "redis://:hunter2@" + srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := NewWorker(WorkerOptions{Conn: Conn{Addr: srv.Addr, Password: "hunter2"}, Target: testTarget, Evaluate: eval})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Shutdown(context.Background())
	if err := d.Submit(context.Background(), dispatchtest.Spec("pw", 1)); err != nil {
		t.Fatal(err)
	}
	if o := next(t, d, 10*time.Second); o.Verdict == nil {
		t.Fatalf("got %+v", o)
	}
}
