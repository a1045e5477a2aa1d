// Package dispatch defines how a campaign's trials reach evaluators and how
// their outcomes come back, independent of the transport.
//
// A Dispatcher accepts trial specs and delivers outcomes. Two implementations
// exist: Local (this package), which runs evaluators as goroutines in the
// same process — the embedded mode of `amkctl autoresearch` — and the Redis
// transport in internal/redisq, which puts specs on one asynq queue per GPU
// target for gpuworker daemons. Both pass the shared suite in
// dispatch/dispatchtest, so a campaign behaves the same over either.
//
// Contract: Submit is idempotent by (campaign id, trial id) — submitting a
// trial that is already queued or running is not an error and does not run
// it twice; each submitted trial yields exactly one Outcome on the Outcomes
// channel unless the dispatcher is closed first (the caller then resubmits
// after a restart; the campaign ledger, not the transport, is the truth).
//
// Watchdog guards the evaluations of one device: one at a time, each under a
// wall-clock limit, a panic made a crash, and a device whose evaluation
// ignores its cancellation reported wedged. The gpuworker daemon and
// amkctl's embedded --device cuda runs evaluate through it.
package dispatch
