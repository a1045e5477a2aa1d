package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/internal/daemon"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/internal/web"
	"github.com/amk-dev/amk/runner"
)

// monitorPath is where the asynq web UI is mounted.
const monitorPath = "/queues"

// deps are the parts tests tune.
type deps struct {
	// ready, when set, receives the API address once the scheduler serves.
	ready func(addr string)
	// tickEvery and rescanEvery override the fleet's intervals when set.
	tickEvery   time.Duration
	rescanEvery time.Duration
}

func main() {
	daemon.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stderr, deps{}) })
}

// command is the scheduler's command line.
var command = daemon.Command[config.Scheduler]{
	Name: "scheduler",
	Usage: []string{
		"usage: scheduler --redis ADDR --workspace DIR [--listen 127.0.0.1:8080] [--token-file F] [--config FILE]",
		"Runs every campaign of a workspace over Redis queues and serves the HTTP API, /metrics and /healthz.",
		"Secrets come from the environment or files: AMK_TOKEN or --token-file, AMK_REDIS_PASSWORD or --redis-password-file.",
		"Without a token the scheduler generates one in <workspace>/api-token.",
		"Precedence: flags > AMK_* environment > --config file > defaults.",
	},
	Flags: config.SchedulerFlags,
	Load:  config.LoadScheduler,
	Log:   func(cfg config.Scheduler) config.Log { return cfg.Log },
}

// run is the whole daemon; ctx ending is the shutdown signal.
func run(ctx context.Context, args []string, stderr io.Writer, d deps) int {
	return command.Run(args, stderr, func(cfg config.Scheduler, log *slog.Logger) error {
		return serve(ctx, cfg, log, d)
	})
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
		Targets: cfg.Targets, AdoptAll: cfg.Adopt, Logger: log, TickEvery: d.tickEvery, RescanEvery: d.rescanEvery,
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

	if err := metrics.RegisterProcess(reg); err != nil {
		return err
	}
	if err := metrics.RegisterScheduler(reg, fleet.Samples); err != nil {
		return err
	}
	if err := metrics.RegisterQueues(reg, view.QueueMetrics, log); err != nil {
		return err
	}
	campaigns := fleet.Campaigns()
	apiHandler, err := api.NewServer(api.Options{Service: campaigns, Token: token, Logger: log, ModelsDir: cfg.ModelsDir,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})})
	if err != nil {
		return err
	}
	monitor, closeMonitor, err := scheduler.Monitor(dopts.Conn, monitorPath)
	if err != nil {
		return err
	}
	defer func() { _ = closeMonitor() }()
	pages, err := web.Handler(web.Options{Campaigns: campaigns, Fleet: campaigns, Token: token,
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
	failed := daemon.ServeHTTP(srv, ln)
	addr := ln.Addr().String()
	ids, _ := fleet.IDs()
	log.Info("scheduler serving", "api", "http://"+addr, "web", "http://"+addr+"/ui/", "campaigns", len(ids))
	if d.ready != nil {
		d.ready(addr)
	}

	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down: stopping the drivers; trials in flight stay in the ledgers")
	case err := <-failed:
		failure = fmt.Errorf("API server: %w", err)
	}
	daemon.Shutdown(srv)
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
