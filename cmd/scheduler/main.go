package main

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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/internal/web"
	"github.com/amk-dev/amk/runner"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// monitorPath is where the asynq web UI is mounted.
const monitorPath = "/queues"

// shutdownTimeout bounds the HTTP server's graceful shutdown.
const shutdownTimeout = 5 * time.Second

// deps are the parts tests tune.
type deps struct {
	// ready, when set, receives the API address once the scheduler serves.
	ready func(addr string)
	// tickEvery and rescanEvery override the fleet's intervals when set.
	tickEvery   time.Duration
	rescanEvery time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr, deps{}))
}

// run is the whole daemon; ctx ending is the shutdown signal.
func run(ctx context.Context, args []string, stderr io.Writer, d deps) int {
	fs := pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scheduler --redis ADDR --workspace DIR [--listen 127.0.0.1:8080] [--token-file F] [--config FILE]")
		fmt.Fprintln(stderr, "Runs every campaign of a workspace over Redis queues and serves the HTTP API, /metrics and /healthz.")
		fmt.Fprintln(stderr, "Secrets come from the environment or files: AMK_TOKEN or --token-file, AMK_REDIS_PASSWORD or --redis-password-file.")
		fmt.Fprintln(stderr, "Without a token the scheduler generates one in <workspace>/api-token.")
		fmt.Fprintln(stderr, "Precedence: flags > AMK_* environment > --config file > defaults.")
		fs.PrintDefaults()
	}
	config.SchedulerFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "scheduler: %v (scheduler -h lists the flags)\n", err)
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintln(stderr, "scheduler", version.String())
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scheduler: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := config.LoadScheduler(fs)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: invalid configuration:\n%v\n", err)
		return exitUsage
	}
	log := cfg.Log.Logger(stderr).With("component", "scheduler")
	redisq.RouteRedisLogs(log)
	if err := serve(ctx, cfg, log, d); err != nil {
		log.Error("scheduler stopped", "err", err)
		return exitFailure
	}
	return exitOK
}

// serve runs the scheduler until ctx ends (nil) or it fails.
func serve(ctx context.Context, cfg config.Scheduler, log *slog.Logger, d deps) error {
	ws, err := runner.OpenWorkspace(cfg.Workspace)
	if err != nil {
		return err
	}
	lock, err := ws.LockForScheduler()
	if err != nil {
		return err
	}
	defer lock.Close()
	token, err := apiToken(cfg, ws.Dir, log)
	if err != nil {
		return err
	}
	log.Info("scheduler starting", "version", version.String(), "config", cfg)

	dopts, err := cfg.DispatcherOptions()
	if err != nil {
		return err
	}
	dopts.Logger = log
	if dopts.Secret, err = cfg.Redis.Secret(); err != nil {
		return err
	}
	if dopts.Secret == nil {
		log.Warn("no fleet secret (redis.fleet_secret / --fleet-secret-file): outcomes from the queue are accepted unauthenticated; anyone who can write to Redis can forge results (floor and percentages are still recomputed here)")
	}
	reg := prometheus.NewRegistry()
	var disp *redisq.Dispatcher
	fleetMetrics, err := metrics.RegisterFleet(reg, func() float64 {
		if disp == nil {
			return 0
		}
		return float64(disp.LostWorkers())
	})
	if err != nil {
		return err
	}
	dopts.OnReject = fleetMetrics.Rejected
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	disp, err = redisq.NewDispatcher(cctx, dopts)
	cancel()
	if err != nil {
		return err
	}
	view, err := scheduler.NewRedisView(disp, dopts.Conn, dopts.Namespace)
	if err != nil {
		_ = disp.Close()
		return err
	}
	defer view.Close()
	fleet, err := scheduler.New(scheduler.Options{
		Workspace: ws, Transport: disp, Workers: view.Workers, Queues: view.Queues, Health: view.Health,
		Targets: cfg.Targets, Logger: log, TickEvery: d.tickEvery, RescanEvery: d.rescanEvery,
		Version: version.String(), Unheld: fleetMetrics.Unheld,
	})
	if err != nil {
		_ = disp.Close()
		return err
	}
	defer func() {
		if err := fleet.Close(); err != nil {
			log.Warn("closing the fleet", "err", err)
		}
	}()

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := metrics.RegisterScheduler(reg, fleet.Samples); err != nil {
		return err
	}
	if err := metrics.RegisterQueues(reg, view.QueueMetrics, log); err != nil {
		return err
	}
	apiHandler, err := api.NewServer(api.Options{Service: fleet, Token: token, Logger: log, ModelsDir: cfg.ModelsDir,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})})
	if err != nil {
		return err
	}
	monitor, closeMonitor, err := scheduler.Monitor(dopts.Conn, monitorPath)
	if err != nil {
		return err
	}
	defer func() { _ = closeMonitor() }()
	pages, err := web.Handler(web.Options{Campaigns: web.ServiceSource(fleet, nil), Fleet: fleet, Token: token,
		MonitorPath: monitorPath, Metrics: true, Where: "scheduler, workspace " + ws.Dir, Logger: log})
	if err != nil {
		return err
	}
	handler := web.Site(pages, apiHandler, monitor, monitorPath)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("API listener: %w", err)
	}
	if host, _, _ := net.SplitHostPort(cfg.Listen); !isLoopback(host) {
		log.Warn("the API listens beyond loopback: reads (status, reports, metrics) are open to the network; only state changes need the token", "listen", cfg.Listen)
	}
	if err := fleet.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	log.Info("scheduler serving", "api", "http://"+addr, "web", "http://"+addr+"/ui/", "campaigns", len(fleet.IDs()))
	if d.ready != nil {
		d.ready(addr)
	}

	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down: stopping the drivers; trials in flight stay in the ledgers")
	case err := <-served:
		failure = fmt.Errorf("API server: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if failure == nil {
		log.Info("scheduler stopped")
	}
	return failure
}

// apiToken is the configured token, or the workspace's generated one.
func apiToken(cfg config.Scheduler, workspace string, log *slog.Logger) (string, error) {
	token, err := cfg.APIToken()
	if err != nil || token != "" {
		return token, err
	}
	token, path, replaced, err := generatedToken(workspace)
	if err != nil {
		return "", err
	}
	if replaced != "" {
		log.Warn("API token file not reused: "+replaced, "token_file", path)
	}
	log.Warn("no API token configured; state-changing calls need the generated one (amkctl --token-file)", "token_file", path)
	return token, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
