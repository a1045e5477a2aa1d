// Package runner drives campaigns: it feeds a campaign state machine its
// events, keeps the campaign's ledger on disk, and sends the trials the
// campaign asks for to a dispatch.Dispatcher.
//
// The ledger is the truth; the transport only carries work. A workspace holds
//
//	campaigns/<id>/ledger.json   campaign state + the rows and corpus records
//	                             of the last event (the outbox), written
//	                             atomically (temp file, fsync, rename)
//	campaigns/<id>/results.tsv   one row per experiment (flywheel format)
//	campaigns/<id>/trials.jsonl  every recorded outcome, once, in the outbox
//	campaigns/<id>/report.{json,md,svg}  the wake-up report and its plot
//	campaigns/<id>/lock          one driver per campaign (flock)
//	flywheel/corpus.jsonl        kept correct points of every campaign
//
// Exactly once: every event is applied to the state machine, then the new
// state and that event's outbox are written in one atomic rename (write
// ahead), then the outbox rows, trials.jsonl lines and corpus records are
// appended and trials enqueued. A crash after the rename is repaired on the next open: the
// outbox is re-appended, skipping rows whose experiment number is already in
// results.tsv and corpus lines already present, and every trial still in
// flight is enqueued again (dispatchers and the campaign are idempotent by
// trial id, so a late duplicate outcome changes nothing). Opening also
// removes temporary files an interrupted atomic write left behind and
// rewrites trials.jsonl to one well-formed line per recorded trial (older
// versions logged every outcome received before recording it). A crash before the
// rename loses only that event, whose trial is still in flight and is re-run.
package runner
