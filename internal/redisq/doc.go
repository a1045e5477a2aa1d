// Package redisq is the Redis transport of the fleet: a dispatch.Dispatcher
// over asynq for the scheduler, and the Worker that a gpuworker runs.
//
// # Queues and ids
//
// Trials go on one asynq queue per GPU target, "trials:<target>" (e.g.
// "trials:h100"; with a Namespace, "<ns>:trials:<target>", so several fleets
// can share one Redis). A trial task has type "amk:trial", its payload is the
// JSON trial.Spec, and its task id is the trial key campaign + "/" + trial id
// (dispatch.Key). Re-enqueueing a trial after a restart therefore collapses
// into the existing task: asynq answers ErrTaskIDConflict, which Submit treats
// as "already there" and then looks at the existing task (below).
//
// # How outcomes come back: a results queue plus result retention
//
// A worker that finishes a trial (1) writes the JSON trial.Outcome as the
// trial task's asynq result, (2) enqueues the same JSON as an "amk:outcome"
// task on the "results" queue under the same trial key, and (3) completes the
// trial task, which asynq keeps with its result for the retention period
// (DefaultRetention, 24 h). The dispatcher consumes the results queue with its
// own asynq server and hands each outcome to its Outcomes channel.
//
// Both mechanisms are used because each covers the other's gap. The results
// queue gives low latency and durability while the scheduler is away: a
// scheduler that crashed or is restarting finds every outcome produced in
// the meantime waiting in Redis, and gets it as soon as it is back. Retention
// covers the window in which an outcome has been taken off the results queue
// but not yet written to the scheduler's ledger when the scheduler dies: on
// restart the scheduler resubmits the trials its ledger still has in flight;
// Submit finds the completed task and delivers its stored outcome instead of
// evaluating the trial again. A trial that has vanished from Redis altogether
// (Redis restarted without persistence) is enqueued again by the sweep, and a
// trial resubmitted after its retention expired simply runs again.
//
// Once the scheduler has written an outcome to its ledger it calls
// Dispatcher.Forget, and the finished task and the trial's done marker are
// deleted a couple of seconds later (forget.go): Redis holds the trials in
// flight and the last few seconds' outcomes, not every trial of the
// retention period (docs/results/fleet-scale.md has the figures).
//
// Delivery guarantee: each Submit yields exactly one outcome on the Outcomes
// channel in this dispatcher's lifetime (copies of an outcome — a worker that
// died after publishing, so the trial ran twice — collapse on the task id in
// Redis or are dropped by the dispatcher); across restarts delivery is
// at-least-once, and the scheduler records idempotently by trial id. Nothing
// is lost as long as Redis keeps its data (run it with appendonly yes).
//
// # Retries
//
// A verdict of any kind (valid, rejected, incorrect) and the deterministic
// failures — `crash` (compile error, device trap, evaluator panic) and
// `timeout` (the worker's watchdog) — are final: the worker publishes them
// and completes the task; it is never retried. An infrastructure failure
// (trial.FailInfra: device unavailable, worker-side I/O) is retried with
// backoff up to InfraRetries times (default 3), after which the infra
// failure itself is the outcome. A worker that is lost mid-trial (killed,
// hung past the task's asynq deadline, cut off from Redis past its lease) is
// a separate budget, WorkerLosses (default 3): asynq requeues the task when
// its lease expires, and the worker that next receives it computes the losses
// so far as asynq's retry count minus the recorded infrastructure failures;
// once the budget is spent it publishes a `crash` outcome ("trial lost its
// worker N times") instead of running the trial again. asynq's own retry
// limit is set above both budgets, so it never archives a trial silently; if
// it ever does, Submit and the sweep report the archived trial as a crash.
// Both budgets travel as task headers, so workers need no configuration.
//
// Malformed payloads (bad JSON, missing model/gpu/point, a spec for another
// target, a payload whose trial differs from its task id) never reach the
// evaluator: when the task id names a trial the worker publishes a `crash`
// outcome with phase "decode"; otherwise it logs an error and returns
// asynq.SkipRetry, so the task is archived for an operator to look at.
// With a fleet secret a payload that does not carry the scheduler's MAC,
// or a signed spec under another trial's task id, is refused instead:
// nothing is evaluated or published, the task is archived, and the
// dispatcher's sweep enqueues the spec it issued again (auth.go).
//
// # Worker lost, shutdown, device lock
//
// A Worker runs an asynq server on its target's queue with concurrency 1.
// asynq frees the slot as soon as a handler's context ends (hand-back on
// shutdown, lease lost, deadline) even while the handler still runs, so the
// worker keeps its own device semaphore: the next trial starts only after the
// previous evaluation has returned. Shutdown stops taking work, lets the
// running trial finish for the shutdown grace, then hands it back to the queue
// (asynq requeues it without counting a retry; another worker runs it) and
// waits for the evaluation to stop. An attempt whose context ended publishes
// nothing: the trial's next run publishes its outcome.
//
// A worker killed with SIGKILL cannot hand its trial back. Its heartbeat
// stops, and the dispatcher's lost-worker check (lost.go) re-offers the
// trial it held within DefaultLostAfter plus a second, as a new task
// "<key>#r<n>"; the trial key still names the outcome, so whichever attempt
// finishes first is the one recorded, and later attempts find its done
// marker and complete without evaluating. Re-offers count against the
// WorkerLosses budget. A trial whose evaluation wedged its worker (ignored
// cancellation) is marked poison by that worker before it exits and is
// never evaluated again: the next to meet it publishes a `crash` once and
// the task is archived. A trial whose task a Redis outage left active with
// no worker holding it (a dequeue whose reply was lost) is offered again
// the same way within about 15 s of Redis answering again (orphan.go),
// rather than after asynq's own lease recovery, 60 to 120 s later.
//
// # Host memory
//
// The workers of one machine (WorkerOptions.Host, by default the hostname)
// share one memory budget through a ledger in Redis (hostmem.go): a model
// is admitted only when it fits in the worker's own probe less what the
// machine's other workers were admitted and have not allocated yet, in one
// atomic step; reservations ride on the registry heartbeat and stop
// counting when a killed worker's lease runs out.
//
// # Authentication
//
// With a fleet secret every outcome carries an HMAC-SHA256 of its canonical
// JSON (auth.go); a dispatcher with a secret refuses outcomes without a
// valid MAC from every path (results queue, doorbell, stored result) and
// reports each refusal (DispatcherOptions.OnReject). Trial payloads are
// signed too, and a worker with the secret evaluates only those the
// scheduler signed. Every outcome names the digest of the spec it answers
// (trial.Outcome.SpecDigest), and the dispatcher delivers an outcome only
// for the spec it submitted under that trial (trial.CheckBound): an outcome
// of a replaced spec, or captured from an earlier campaign with the same
// id, is refused (RejectNotIssued) whatever its MAC. Without a secret
// outcomes are accepted as they come (still bound to their spec).
//
// # Outages
//
// asynq's and go-redis's own complaints, heartbeat and sweep failures are
// logged at most once per kind per DefaultOutageLogEvery per process, the
// next line saying how many were suppressed. When Redis answers again (or
// a Sentinel failover promoted a replica) the dispatcher re-checks every
// trial it waits for at once.
//
// # Latency
//
// asynq polls queues instead of blocking on them. A worker that finishes a
// trial polls again at once, so a busy fleet (work waiting on the queue)
// never waits; an idle worker sleeps about PollInterval (default 50 ms)
// between polls, which costs Redis a poll per idle worker per interval and
// makes a trial wait for the next poll of an idle worker: with many idle
// workers a millisecond or two, with one about half the interval
// (BenchmarkIdleWorkers; docs/results/fleet-scale.md, "Idle fleet"). The
// return hop does not wait for a poll: after storing an outcome the worker
// also publishes it on a Redis pub/sub channel (the "doorbell"), and the
// dispatcher delivers it from there at once and deletes the results-queue
// copy. Pub/sub is best effort; the results queue and the stored result stay
// the durable path. With a no-op evaluator on loopback and an idle worker
// polling every 2 ms the round trip is about 1 ms at the median (see
// BenchmarkRoundTrip, which sets that interval).
//
// # Connections
//
// Conn takes host:port or a redis:// / rediss:// URL (TLS, with an optional
// CA file), or a list of Redis Sentinels and the primary's name (a failover
// client that follows the promoted replica), an ACL user and a password. Its
// String and LogValue redact the password, so connection details can be
// logged.
package redisq
