package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/internal/daemon"
	"github.com/amk-dev/amk/internal/hostmem"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/kernels/gpu"
	"github.com/amk-dev/amk/trial"
)

// deps are the parts tests replace.
type deps struct {
	// evaluate is the trial pipeline (trial.Evaluate).
	evaluate func(context.Context, trial.Spec, trial.Options) trial.Outcome
	// stopGrace overrides the wedge limit when positive.
	stopGrace time.Duration
	// ready, when set, receives the metrics address once the worker serves.
	ready func(metricsAddr string)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == gpu.ChildCommand { // the supervised launcher process of --device N or emu
		os.Exit(runLauncherChild(os.Args[2:]))
	}
	daemon.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Stderr, deps{evaluate: trial.Evaluate})
	})
}

// command is gpuworker's command line.
var command = daemon.Command[config.Worker]{
	Name: "gpuworker",
	Usage: []string{
		"usage: gpuworker --redis ADDR --target GPU --device cpu|emu|N [--metrics-listen ADDR] [--config FILE]",
		"Evaluates the trials of one GPU target's queue on one device.",
		"Secrets come from the environment or files: AMK_REDIS_PASSWORD or --redis-password-file.",
		"Precedence: flags > AMK_* environment > --config file > defaults.",
	},
	Flags: config.WorkerFlags,
	Load:  config.LoadWorker,
	Log:   func(cfg config.Worker) config.Log { return cfg.Log },
}

// run is the whole daemon; ctx ending is the shutdown signal.
func run(ctx context.Context, args []string, stderr io.Writer, d deps) int {
	return command.Run(args, stderr, func(cfg config.Worker, log *slog.Logger) error {
		return serve(ctx, cfg, log, d)
	})
}

// serve runs the worker until ctx ends (clean shutdown, nil) or it fails.
func serve(ctx context.Context, cfg config.Worker, log *slog.Logger, d deps) error {
	ordinal, cpu, _ := cfg.DeviceOrdinal()
	emulate := ""
	if cfg.Emulated() {
		emulate = cfg.Target
	}
	launcher, devInfo, release, err := openLauncher(ordinal, cpu, emulate)
	if err != nil {
		return err
	}
	defer func() {
		if err := release(); err != nil {
			log.Warn("releasing the device failed", "err", err)
		}
	}()
	fp := newFingerprint(cfg.Target, cfg.Device, devInfo)
	log = log.With("target", cfg.Target, "device", cfg.Device)
	log.Info("gpuworker starting", "fingerprint", fp.String(), "config", cfg)

	reg := prometheus.NewRegistry() // never the global default
	if err := metrics.RegisterProcess(reg); err != nil {
		return err
	}
	m, err := metrics.NewWorker(reg, cfg.Target, cfg.Device)
	if err != nil {
		return err
	}
	m.SetInfo(devInfo.Name, devInfo.Driver, fp.Version)

	grace := dispatch.DefaultStopGrace
	if d.stopGrace > 0 {
		grace = d.stopGrace
	}
	// One model cache for the worker's life: models, weights and oracle
	// logits are loaded once, not per trial. A model that would not fit in
	// the memory this worker has is refused before anything is allocated.
	memory := hostmem.System(int64(cfg.MaxMemoryMB) << 20)
	opts := trial.Options{Launcher: launcher, Models: trial.NewModelCache(0).WithMemoryProbe(memory.Available), Environment: fp.String()}
	// The trial that wedges the device is marked poison before the worker
	// goes down (worker is set below, before any trial can run).
	var worker *redisq.Worker
	onWedge := func(spec trial.Spec, message string) {
		if worker != nil {
			worker.MarkPoison(spec, message)
		}
	}
	dog := dispatch.NewWatchdog(func(ctx context.Context, spec trial.Spec) trial.Outcome {
		return d.evaluate(ctx, spec, opts)
	}, dispatch.WatchdogOptions{Limit: cfg.TrialTimeout, StopGrace: grace, Observer: m, Log: log, OnWedge: onWedge})

	wopts, err := cfg.WorkerOptions()
	if err != nil {
		return err
	}
	if wopts.Secret, err = cfg.Redis.Secret(); err != nil {
		return err
	}
	if wopts.Secret == nil {
		log.Warn("no fleet secret (redis.fleet_secret / --fleet-secret-file): outcomes are sent unauthenticated; a scheduler with a secret refuses them")
	}
	if capacity, source, err := memory.Capacity(); err == nil {
		wopts.MemoryBytes = capacity
		log.Info("memory for trials", "mib", capacity>>20, "from", source)
	}

	// The metrics endpoint never stops the worker: a taken port falls back
	// to a free one, and the address actually served is announced in the
	// worker registry, where the scheduler's service discovery finds it.
	ln, note, err := metrics.Listen(cfg.MetricsListen())
	switch {
	case err != nil:
		log.Error("no metrics endpoint; serving trials without one", "err", err)
	case note != "":
		log.Warn("metrics listener moved", "why", note)
	}
	if ln != nil {
		wopts.MetricsAddr = metrics.Advertised(ln.Addr())
	}
	wopts.Evaluate = dog.Evaluate
	wopts.Identity = fp.String()
	wopts.Logger = log
	wopts.Published = func(o trial.Outcome) { m.Published(redisq.Label(o)) }
	wopts.Refused = m.SpecRefused
	wopts.Resident = memory.Resident
	worker, err = redisq.NewWorker(wopts)
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return err
	}
	// The workers of this host share one memory budget: a model is
	// admitted only when it fits beside what the others were admitted.
	opts.Models.WithHostAdmission(worker.HostMemory())

	if ln != nil {
		httpSrv := &http.Server{Handler: handler(reg, worker, dog), ReadHeaderTimeout: 5 * time.Second}
		failed := daemon.ServeHTTP(httpSrv, ln)
		go func() {
			for err := range failed {
				log.Error("metrics server failed; trials go on", "err", err)
			}
		}()
		defer daemon.Shutdown(httpSrv)
	}

	startCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = worker.Start(startCtx)
	cancel()
	if err != nil {
		_ = worker.Shutdown(context.Background())
		return err
	}
	metricsAddr := ""
	if ln != nil {
		metricsAddr = ln.Addr().String()
	}
	log.Info("gpuworker serving", "queue", worker.Queue(), "metrics", "http://"+metricsAddr+"/metrics")
	if d.ready != nil {
		d.ready(metricsAddr)
	}

	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing or handing back the current trial", "grace", cfg.ShutdownGrace)
	case <-dog.Wedged():
		failure = dog.Health()
		log.Error("shutting down: device wedged; exiting so that a supervisor restarts the worker")
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace+grace+5*time.Second)
	defer cancel()
	if err := worker.Shutdown(sctx); err != nil && failure == nil {
		failure = err
	}
	if failure == nil {
		failure = dog.Health() // a trial handed back on the way out wedged the device
	}
	if failure == nil {
		log.Info("gpuworker stopped")
	}
	return failure
}

// handler serves /metrics and /healthz.
func handler(reg *prometheus.Registry, worker *redisq.Worker, dog *dispatch.Watchdog) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		for _, check := range []func() error{worker.Healthy, dog.Health} {
			if err := check(); err != nil {
				http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
