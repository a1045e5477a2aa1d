package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/amk-dev/amk/internal/config"
)

// testConfig is a daemon configuration with one setting, "name", which
// must not be "bad".
type testConfig struct{ name string }

func testCommand() Command[testConfig] {
	var name *string
	return Command[testConfig]{
		Name:  "testd",
		Usage: []string{"usage: testd [--name N]", "A daemon of the tests."},
		Flags: func(fs *pflag.FlagSet) { name = fs.String("name", "x", "a setting") },
		Load: func(*pflag.FlagSet) (testConfig, error) {
			if *name == "bad" {
				return testConfig{}, errors.New("config: name: \"bad\" is not allowed")
			}
			return testConfig{name: *name}, nil
		},
		Log: func(testConfig) config.Log { return config.Log{Level: "info", Format: "text"} },
	}
}

func TestRunExitStatusesAndMessages(t *testing.T) {
	cases := []struct {
		args      []string
		serveErr  error
		wantCode  int
		wantText  string
		wantServe bool
	}{
		{[]string{"-h"}, nil, ExitOK, "usage: testd [--name N]\nA daemon of the tests.\n", false},
		{[]string{"--version"}, nil, ExitOK, "testd ", false},
		{[]string{"--no-such-flag"}, nil, ExitUsage, "testd -h lists the flags", false},
		{[]string{"extra"}, nil, ExitUsage, `unexpected argument "extra"`, false},
		{[]string{"--name", "bad"}, nil, ExitUsage, "testd: invalid configuration:\nconfig: name:", false},
		{[]string{"--name", "ok"}, nil, ExitOK, "", true},
		{[]string{"--name", "ok"}, errors.New("the port is taken"), ExitFailure, "testd stopped", true},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		served := ""
		code := testCommand().Run(c.args, &stderr, func(cfg testConfig, log *slog.Logger) error {
			served = cfg.name
			log.Info("serving")
			return c.serveErr
		})
		if code != c.wantCode || !strings.Contains(stderr.String(), c.wantText) || (served != "") != c.wantServe {
			t.Errorf("%q: exit %d, served %q, stderr:\n%s\nwant exit %d, served %v, stderr containing %q",
				c.args, code, served, stderr.String(), c.wantCode, c.wantServe, c.wantText)
		}
		if c.wantServe && (served != "ok" || !strings.Contains(stderr.String(), "component=testd")) {
			t.Errorf("%q: served %q; log without the component:\n%s", c.args, served, stderr.String())
		}
	}
}

func TestServeHTTPAndShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "up") })}
	failed := ServeHTTP(srv, ln)
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "up" {
		t.Fatalf("served %q", body)
	}
	Shutdown(srv)
	if err, open := <-failed; open {
		t.Fatalf("a shut-down server reported %v", err)
	}

	// A server that cannot serve reports why, then closes the channel.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	failed = ServeHTTP(&http.Server{}, closed)
	if err, open := <-failed; !open || err == nil {
		t.Fatalf("serving on a closed listener: %v, %v; want an error", err, open)
	}
	if _, open := <-failed; open {
		t.Fatal("the channel stayed open after the failure")
	}
}
