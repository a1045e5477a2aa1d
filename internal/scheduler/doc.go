// Package scheduler is the core of the scheduler daemon: a Fleet runs every
// campaign of a workspace at once, one runner.Driver per campaign in daemon
// mode, over one shared transport (a dispatch.Mux over the redisq
// dispatcher in production, a dispatch.Local in tests), and serves them to
// the HTTP API and the web view (it is a control.Backend: Campaigns are
// its operations) and to the metrics collector. Each campaign's run comes
// from control's one create-and-run path (control.Local's StartRun and
// OpenRun, here on the fleet's view of the transport); the fleet adds the
// supervision.
//
// The workspace's ledgers are the truth. Start opens every campaign (the
// ledger repairs what a crash left undone) and starts its driver, which
// re-sends the trials the ledger still has in flight; outcomes that waited in
// the transport meanwhile are held by the Mux until the campaign's view is
// open and are recorded exactly once (the campaign refuses a trial id it has
// already recorded). The Mux holds them for a bounded time and number
// (Options.HoldOutcomes): outcomes of a campaign that does not open in time
// (another process holds it, or it is not in this workspace) are dropped,
// counted (amk_scheduler_outcomes_unheld_total) and logged. For a campaign
// of the workspace the redisq transport is told to forget it delivered them
// (Undeliver), so the campaign's resubmission once it is adopted gets them
// again from Redis; for a campaign the workspace does not have, the
// transport forgets the trials (Forget): no one here needs them.
// New warm campaigns take the workspace corpus from a follower that parsed
// it once and then reads only what was appended. Once a driver has recorded an outcome durably the fleet
// tells a transport that keeps trials for recovery (redisq.Dispatcher.Forget),
// so Redis holds the work in flight, not every finished trial; it does the
// same for a copy the campaign refuses (a trial already recorded or never
// in flight: runner.Driver.Refused). A campaign
// another process holds (amkctl autoresearch) is readable but not driven; a
// periodic scan adopts it once released. The fleet drives the campaigns
// started through it (Create writes their scheduler.json, below): a campaign
// created beside the scheduler (the demo's, amkctl start or autoresearch on
// the workspace) is left as it is until it is started through the fleet,
// unless Options.AdoptAll (the scheduler's --adopt) has it drive every one;
// such a campaign only for what is left of the limits of the run that last
// opened it (amkctl autoresearch --iters/--minutes, kept in its ledger:
// campaign.LeftOfLastRun), and not at all once they are used up. A driver
// that fails (e.g. Redis is unreachable) is restarted
// with backoff — at once, and with the backoff started over, as soon as the
// transport answers again; operator commands wait for it up to the API's
// timeout. A driver whose ledger a failed write stopped (a full or
// read-only disk) loads the ledger again from its files at each restart
// (runner.Ledger.Heal), so the campaign goes on by itself once the disk
// recovers; until then Health (/healthz) says "campaign <id> stalled:
// <error>" and commands answer at once that the campaign is stalled.
//
// An outcome must answer the spec its campaign issued for its trial
// (campaign.Campaign.CheckOutcome, trial.CheckBound: the spec's digest,
// which names the campaign's incarnation, and the verdict's model,
// position, batch and point): one that does not (a spec replaced on the
// queue, an outcome of an earlier campaign with the same id) is refused,
// counted (amk_scheduler_outcomes_rejected_total{reason="not_issued"}),
// and the trial is submitted again. A campaign names, when Create makes
// it, the weights its trials are for (control.CreateRequest.IdentifyWeights,
// hashed before the fleet's lock and stopped with the request), and every
// spec carries them, so a worker that would load other weights (a host
// without the checkpoint) refuses the trial (trial.PhaseWeights).
//
// Outcomes from the transport are not trusted for what the scheduler can
// compute itself (trust.go): every verdict's floors — bound_us, the
// streamed-bytes floor (weights once, the gathered embedding rows, the KV
// window at the campaign's position), and all_weights_bound_us, the seed's
// all-weights floor — its byte counts and pct_of_roofline (against the
// streamed-bytes floor) are recomputed from the campaign's model, target,
// position and batch (one lowering per campaign), and a latency below the
// streamed-bytes floor, not finite or without a correctness PASS is
// withheld, and so is a latency of another kind than the campaign's (a
// measurement in a predicted campaign). Create refuses (400) a campaign
// whose model no live worker of its target could hold (trial.EstimateMemory
// against each worker's announced memory), and a device cuda campaign whose
// live workers of its target all evaluate on the CPU. Campaign ids from requests follow campaign.ValidID.
//
// The number of trials a campaign keeps in flight is a driver setting, not
// campaign state: it is stored beside the ledger in scheduler.json, whose
// presence marks the campaign as the fleet's.
//
// RedisView adds what the dispatcher does not report: live workers, queue
// statistics (asynq's inspector, including its cumulative processed/failed
// counts) and a Redis ping for /healthz.
package scheduler
