// Command gpuworker evaluates trials for one device. It consumes the Redis
// queue of one GPU target (trials:<target>) with concurrency 1, evaluates
// each trial with the trial pipeline, and publishes the outcome (see
// internal/redisq).
//
//	gpuworker --redis 127.0.0.1:6379 --target h100 --device cpu|0|1... [--metrics-listen ADDR] [--config FILE]
//
// --device cpu uses the CPU launcher (cost-model latencies, labelled
// predicted), so a whole fleet runs without a GPU. --device N selects CUDA
// device N; that needs a binary built with -tags cuda, which links the CUDA
// launcher (a file of this package behind the cuda tag sets cudaLauncher);
// other builds refuse to start with "CUDA launcher not available in this
// build".
//
// Every trial runs under a wall-clock watchdog: the spec's timeout_s or the
// configured trial_timeout. When it expires the evaluation is cancelled, the
// trial is reported as a `timeout` and the worker moves on; an evaluation
// that ignores the cancellation keeps the device locked, /healthz turns
// unhealthy and the process exits with status 1 so that its supervisor
// restarts it. The trial that wedged the device is marked poison first: it is
// reported as a `crash` once and never handed to another worker.
//
// Before a model is loaded its memory need is estimated
// (trial.EstimateMemory); a model that does not fit in what this worker may
// use — max_memory_mb, the cgroup limit or the host's available memory,
// whichever is smallest (internal/hostmem) — is refused as an infrastructure
// failure before anything is allocated. The worker announces its capacity to
// the scheduler, which refuses to start a campaign no worker could hold.
//
// With a fleet secret (redis.fleet_secret / --fleet-secret-file) every
// outcome carries its HMAC; without one the worker warns at startup.
//
// SIGTERM or SIGINT: stop taking work, let the running trial finish for
// shutdown_grace, then hand it back to the queue, and exit 0.
//
// The worker logs (log/slog) and stamps on every outcome's Worker field its
// fingerprint: host, target, device and device name, driver and toolkit where
// known, build version and Go version. Prometheus metrics and a health check
// are served on the listen address (default 127.0.0.1:9101; with that
// default CUDA device N takes port 9101+N, and a port that is taken falls
// back to a free one — the worker never stops because of its metrics
// endpoint; the address served is announced in the worker registry, where
// the scheduler's GET /v1/sd/workers lists it for Prometheus): /metrics with
// the worker series of internal/metrics, all labelled target and device
// (amk_worker_trials_total{outcome}, amk_worker_stage_duration_seconds{stage},
// amk_worker_trial_duration_seconds, amk_worker_busy,
// amk_worker_watchdog_kills_total, amk_worker_infra_errors_total,
// amk_worker_info{device_name,driver,version}), and /healthz.
//
// Settings come from flags, AMK_* environment variables and a YAML file, in
// that precedence (internal/config; deploy/gpuworker.example.yaml). Exit
// status: 0 after a clean shutdown, 1 on a runtime failure, 2 on a usage or
// configuration error.
package main
