// Package runner drives campaigns: it feeds a campaign state machine its
// events, keeps the campaign's ledger on disk, and sends the trials the
// campaign asks for to a dispatch.Dispatcher.
//
// The ledger is the truth; the transport only carries work. A workspace holds
//
//	campaigns/<id>/ledger.json     the snapshot: campaign state (less its
//	                               growing lists), the sequence number of the
//	                               last event it holds, that event's outbox
//	                               (rows, corpus lines, trials lines) and how
//	                               much of the history it continues, written
//	                               atomically (temp file, fsync, rename)
//	campaigns/<id>/ledger.history  the state's growing lists (trajectory,
//	                               observations, prior examples, tried set):
//	                               what each snapshot added, one checksummed
//	                               line each (history.go), so a snapshot
//	                               writes O(events since the last one) bytes
//	campaigns/<id>/ledger.journal  the events since the snapshot, one
//	                               checksummed line each (journal.go)
//	campaigns/<id>/results.tsv     one row per experiment (flywheel format)
//	campaigns/<id>/trials.jsonl    every recorded outcome, once
//	campaigns/<id>/report.{json,md,svg}  the wake-up report and its plot
//	campaigns/<id>/lock            one driver per campaign (flock)
//	flywheel/corpus.jsonl          kept correct points of every campaign
//
// Exactly once: every event is applied to the state machine, then appended
// to the journal with its sequence number and a checksum of the decision
// (one write and one fsync of O(1) bytes: the event, not the state), then
// its outbox — rows, the trials.jsonl line, corpus records — is appended
// and trials are enqueued. Every SnapshotEvery events, or once the events
// since the last snapshot took replayBudget of state machine time, and on
// Close, what the history lacks of the state is appended to it (fsynced),
// the rest of the state goes to ledger.json atomically and the journal is
// emptied; trials.jsonl is fsynced first, as its lines are not fsynced one
// by one.
//
// Opening loads the snapshot and replays the journal's records after its
// sequence number through the state machine (it is deterministic, and the
// decision checksums prove the replay decided the same), which rebuilds the
// state and the outboxes of those events. A crash between a snapshot and
// emptying the journal leaves records the snapshot holds: their sequence
// numbers say so and they are skipped. A torn last record (a kill in the
// middle of an append) is cut off: its event never happened, its outbox was
// never written, and its trial is still in flight. The outboxes are then
// re-appended, skipping rows whose experiment number is already in
// results.tsv, trials already in trials.jsonl and corpus lines already
// present, and every trial still in flight is enqueued again (dispatchers
// and the campaign are idempotent by trial id, so a late duplicate outcome
// changes nothing). Opening also removes temporary files an interrupted
// atomic write left behind and rewrites trials.jsonl to one well-formed
// line per recorded trial (older versions logged every outcome received
// before recording it).
//
// No file of the workspace stays open for writing between two writes: the
// journal, results.tsv, trials.jsonl, the history and the corpus are opened
// for each append and closed after it, and the locks are held on
// descriptors opened for reading only. So a disk remounted read-only (which
// the kernel refuses while a file on it is open for writing) or replaced
// stalls the campaign only until it is writable again (Ledger.Heal), with
// no restart of the process.
//
// Workspace.View reads the same way without the lock, while a driver may be
// writing: a record still being appended is left out, and a snapshot taken
// between reading ledger.json and the journal is met by reading again.
//
// A version 1 ledger.json (before the journal) opens as a snapshot holding
// every event; binaries from before the journal refuse version 2, and
// binaries from before the history refuse version 3. A ledger.json without
// a history mark (versions 1 and 2) holds the whole state; its next
// snapshot moves the growing lists into the history.
package runner
