// Command scheduler runs many campaigns at once over Redis queues and serves
// the HTTP API that `amkctl --server` talks to.
//
//	scheduler --redis 127.0.0.1:6379 --workspace DIR [--listen 127.0.0.1:8080] [--token-file F] [--config FILE]
//
// The workspace on disk is the ledger (internal/scheduler, runner): one
// scheduler per workspace, enforced by an flock on DIR/scheduler.lock (a
// second scheduler exits with an error naming the holder). On start every
// campaign of the workspace is reloaded and driven in daemon mode: trials
// that were in flight are re-sent (idempotently, by task id) and outcomes
// that arrived while the scheduler was down are recorded exactly once. All
// campaigns share one redisq dispatcher through a dispatch.Mux.
//
// The API (internal/api) listens on 127.0.0.1:8080 by default; /metrics
// (internal/metrics: amk_scheduler_*, amk_queue_* plus Go and process
// metrics) and /healthz are on the same address. State-changing requests
// need the bearer token from token / AMK_TOKEN or token_file; when none is
// configured the scheduler generates one into DIR/api-token (mode 0600) and
// logs its path, never its value. GET /v1/sd/workers lists the workers'
// metrics addresses for Prometheus's http_sd_configs
// (deploy/prometheus-hosts.yml).
//
// With a fleet secret (redis.fleet_secret / --fleet-secret-file) only
// outcomes carrying its HMAC are accepted, refusals counted in
// amk_scheduler_outcomes_rejected_total; without one the scheduler warns at
// startup that outcomes are unauthenticated and accepts them. Redis may be
// reached through Sentinel (--redis-sentinels, --redis-sentinel-master).
//
// Settings come from flags, AMK_* environment variables and a YAML file, in
// that precedence (internal/config; deploy/scheduler.example.yaml), and are
// validated before anything starts; the configuration is logged with
// secrets redacted. Logs are structured (log/slog, text or JSON).
//
// SIGTERM or SIGINT: stop serving, stop the drivers (trials in flight stay
// in the ledgers and on the queues; workers keep evaluating them and their
// outcomes wait in Redis), close the transport, release the lock, exit 0.
// Exit status: 0 after a clean shutdown, 1 on a runtime failure (Redis
// unreachable at start, workspace locked, ...), 2 on a usage or
// configuration error.
package main
