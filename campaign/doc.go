// Package campaign is amk's campaign brain: a pure, deterministic state
// machine, one per campaign. Events go in (Start, Propose, Finished, Tick,
// Command, Record), decisions come out (trial specs to enqueue, results.tsv
// rows and corpus records to append, the status, log lines). It does no I/O,
// reads no clock and starts no goroutines: time arrives in events and
// randomness comes from a PCG generator whose state is part of the campaign
// state, so replaying the same events — or reloading the serialised state
// mid-way — yields the same decisions.
//
// # What it implements
//
//   - The proposer of docs/spec/loop.md §2: trial 0 is the canonical
//     default (a cold run) or the prior's best warm seed, followed by the
//     default as the "baseline" trial (docs/spec/rules.md R10) and the other seeds; then an
//     explore fraction of schedule.Random points, and otherwise one-knob
//     schedule.Mutate moves of the incumbent — drawn as a pool ranked by the
//     flywheel prior when it is trained (source "prior"), with probability
//     epsilon a plain mutation. In overnight mode, after restart_after
//     consecutive non-improvements the search basin-hops: a fresh random
//     point becomes the exploration anchor (source "restart") while the
//     global best is kept; within the new region the anchor follows local
//     improvements, and only a global win is "kept". Points already tried or
//     in flight are never proposed again (docs/spec/rules.md R6, across resumes); when no fresh
//     point turns up in a bounded number of draws, proposing stops and says
//     the space is exhausted.
//   - The model proposer (Settings.Proposer "model", the default; "" or
//     "reference" is the proposer above): after the opening points and 5
//     scored outcomes (a warm campaign: after the opening points), a
//     Bayesian linear surrogate of log(score) over the
//     searchable knobs' one-hot levels (main effects and, while the space
//     is small enough, pairwise interactions; a knob that does not apply to
//     a point, schedule.Point.Applies, has no effect there) is fitted to
//     the campaign's
//     Observations — on a warm campaign also to the prior's corpus rows,
//     weaker evidence with an offset of their own — and one posterior
//     sample picks the untried point it predicts fastest (source "model";
//     every untried point of a space up to 4096 points is scored, else the
//     sample's optimum over the whole space, by coordinate descent, or its
//     neighbours when it was tried, and a few random points). The fit reads
//     sufficient statistics updated as outcomes arrive, so a proposal costs
//     the same however long the history. The choice is restricted to
//     the incumbent's untried one-knob neighbours on a warm campaign (all
//     trial ids but every 8th; ranked by the posterior mean less half its
//     standard deviation: a hill climb from the corpus's best) and, on any
//     campaign, once the consecutive
//     reverts reach 20% of the plateau threshold. Draws come from the PCG
//     state.
//   - With Settings.PlateauScaling the plateau threshold is the configured
//     consecutive_reverts × a cost factor (1 for an evaluator taking ≥ 60 s
//     a trial, 2 for ≤ 1 s) × a space factor (1 for ≤ 64 untried points,
//     2 for ≥ 4096), both logarithmic between; status and next show the
//     effective threshold.
//   - Keep/revert as docs/spec/loop.md §3 (the reference's `_better`): only a valid,
//     correct candidate with a latency is eligible; with no incumbent it is
//     kept; a strict ≥ min_gain latency win is kept; within ±min_gain a
//     measured latency beats a predicted one and, at equal kind, the simpler
//     point (schedule.Point.Complexity) wins if it is not slower (the
//     reference's tie-break also took slower simpler points, and chained
//     they walked a best up to slower than the baseline); and the canonical
//     default, at the best's kind, is kept whenever it is faster than the
//     best: a campaign's best is never slower than its baseline. When the outcome carries a
//     side-by-side ratio against the incumbent it was measured with (docs/spec/rules.md R7), the
//     ratio decides; if the incumbent changed while the trial was in flight,
//     the ratio is chained through the incumbents' recorded scores, so
//     latencies from different devices are never compared directly.
//   - MOVE_ON_CRITERIA in the reference's order and wording (docs/spec/loop.md §5), every
//     threshold configurable (0 disables one), elapsed time counted from the
//     campaign's start across resumes, excluding paused time (docs/spec/rules.md R5); then the
//     campaign's own budget (experiments and/or minutes). Overnight campaigns
//     never stop on the plateau, roofline or speedup criteria: only time and
//     budget end them.
//   - Several trials in flight: proposals are made against the current
//     incumbent, outcomes are recorded in any order and idempotently by trial
//     id — a duplicate or unknown trial id changes nothing and is reported.
//   - status / next / report rendering as text like the reference and as
//     JSON, and the wake-up report (WakeUp) with a trajectory for plots;
//     both also in the reference's file forms (amkfiles.go: AMKState for
//     amk_orchestration_state.json, AMKOvernight for
//     amk_overnight_report.json).
//
// # Workloads
//
// A campaign is for a workload (Settings.Workload, trial.Workload: prompt
// lengths, tokens generated, batch; a 512-token prompt, 128 generated
// tokens, batch 1 by default): every spec carries it, every trial is
// evaluated at its positions and scored by its mean time per decode step,
// the baseline's and the best's per-position figures are kept for the
// report (WakeUp's latency against KV length), and status names it. A
// campaign saved before workloads has none and checks one step at Pos.
//
// # Row tags
//
//	outcome                               tag       correctness  latency
//	correct, new incumbent                kept      PASS         yes
//	correct, not a win (or no latency)    tried     PASS         yes/blank
//	valid but incorrect                   revert    FAIL         blank
//	invalid (lowering/validate/launch)    rejected  REJECTED     blank
//	evaluator crashed                     crash     CRASH        blank
//	watchdog or wall clock expired        timeout   TIMEOUT      blank
//	infra failure after retries, or a     failed    CRASH (PASS  blank
//	malformed verdict                               if correct)
//
// The reference's autoresearch writes "revert" for a correct point that was
// not kept and "failed" for an incorrect one; amk uses docs/spec/loop.md's tags above.
// Every outcome is one experiment and one row; every kept row with a floor
// also yields a corpus record. An infrastructure failure does not mark the
// point as tried (it was never evaluated), and a baseline or warm-seed trial
// lost that way is queued again.
//
// # Done campaigns
//
// A campaign becomes done when a criterion trips or an operator stops it.
// A done campaign refuses Record events and proposes nothing until it is
// reopened (docs/spec/rules.md R3). Outcomes of trials that were already in flight when it
// became done are still recorded: they were issued while the campaign was
// live, the work is real, and dropping them would leave an issued trial
// unaccounted for (the ledger must hold every issued trial exactly once).
// They can still improve the best, but never reopen the campaign.
//
// # Driving it
//
// A driver persists the state (Marshal) before acting on a decision: specs
// are written ahead into the state before they are enqueued, and a row's
// experiment number is its idempotency key when a crash forces a replay.
package campaign
