// Package flywheel owns amk's two append-only ledgers and the learned prior
// built on them:
//
//   - results.tsv: one row per experiment with the reference's exact header
//     (experiment, tag, loop, model, gpu, regime, correctness, latency_us,
//     pct_of_roofline, schedule_id, kernel_id, description). Every field is
//     escaped (`\` → `\\`, TAB → `\t`, LF → `\n`, CR → `\r`) and ReadRows
//     reverses it, so any description round-trips.
//   - corpus.jsonl: one JSON object per kept, correct point, with the
//     reference's fields plus the latency kind, the full model shape and an
//     environment fingerprint. ImportReference reads a reference corpus.
//   - the prior: WarmStart (best known points for the nearest model shape on
//     the same GPU and latency kind, re-checked against today's config rules)
//     and Ranker (one fixed deterministic backend: inverse-distance k-NN on
//     standardised shape and schedule features, target log(pct_of_roofline)).
//
// # Append discipline
//
// AppendRows and AppendCorpus create parent directories, open the file and
// take an exclusive flock(2) on it for the whole append, so appenders in any
// number of goroutines and processes are serialised. Under the lock the
// file's tail is checked first: a file that does not end with a newline was
// left by a writer that crashed mid-write, and the partial last line is
// truncated away before anything is appended (its content never counted: a
// reader ignores an unterminated last line too). Then the header (results.tsv
// only, when the file is empty) and all new lines are written with a single
// write call, and the file is fsynced before the lock is released. Every
// error is returned to the caller; nothing is swallowed. Paths always come
// from the caller, never from the working directory.
//
// The same flock is the workspace's one lock helper: TryLock (filelock.go)
// takes a lock file without waiting and names its holder, for the campaign
// ledgers and the scheduler's workspace lock in runner. Off unix, locking is
// refused (errors.ErrUnsupported) rather than skipped.
//
// pct_of_roofline follows one convention everywhere (docs/spec/rules.md R9): latency / floor ×
// 100 with the streamed-bytes floor (bound_us), so 100 is at that floor and lower is better.
package flywheel
