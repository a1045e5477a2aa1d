package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/version"
)

// Exit statuses of the daemons.
const (
	ExitOK      = 0
	ExitFailure = 1 // the daemon stopped on an error, which it logged
	ExitUsage   = 2 // bad flags, an argument, or an invalid configuration
)

// Main runs a daemon with a context that ends on SIGTERM or an interrupt
// (the daemon's shutdown signal) and exits the process with its status.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// Command is the command line of a daemon whose configuration is a C.
type Command[C any] struct {
	// Name is the binary's name, used in messages and as the log's
	// component.
	Name string
	// Usage is printed by -h before the flags.
	Usage []string
	// Flags registers the configuration's flags (config.WorkerFlags, ...).
	Flags func(*pflag.FlagSet)
	// Load reads and validates the configuration (config.LoadWorker, ...).
	Load func(*pflag.FlagSet) (C, error)
	// Log is the configuration's logging section.
	Log func(C) config.Log
}

// Run parses args. -h and --version print to stderr and return ExitOK;
// bad flags, an argument or an invalid configuration print why and return
// ExitUsage. Otherwise serve runs with the configuration and its logger
// (component Name, go-redis's log routed to it) until it returns: nil is
// ExitOK, an error is logged and is ExitFailure.
func (c Command[C]) Run(args []string, stderr io.Writer, serve func(cfg C, log *slog.Logger) error) int {
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		for _, ln := range c.Usage {
			fmt.Fprintln(stderr, ln)
		}
		fs.PrintDefaults()
	}
	c.Flags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "%s: %v (%s -h lists the flags)\n", c.Name, err, c.Name)
		return ExitUsage
	}
	if *showVersion {
		fmt.Fprintln(stderr, c.Name, version.Long())
		return ExitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", c.Name, fs.Arg(0))
		return ExitUsage
	}
	cfg, err := c.Load(fs)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%v\n", c.Name, err)
		return ExitUsage
	}
	log := c.Log(cfg).Logger(stderr).With("component", c.Name)
	redisq.RouteRedisLogs(log)
	if err := serve(cfg, log); err != nil {
		log.Error(c.Name+" stopped", "err", err)
		return ExitFailure
	}
	return ExitOK
}

// ShutdownTimeout bounds the graceful shutdown of a daemon's HTTP server.
const ShutdownTimeout = 5 * time.Second

// ServeHTTP serves srv on ln in the background. The channel receives the
// error serving failed with, if it does, and is closed once serving ends
// (after Shutdown, with nothing sent).
func ServeHTTP(srv *http.Server, ln net.Listener) <-chan error {
	failed := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			failed <- err
		}
		close(failed)
	}()
	return failed
}

// Shutdown stops srv gracefully, waiting at most ShutdownTimeout for the
// requests in progress.
func Shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(ctx)
}
