package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/trial"
)

// Lost workers and poison trials.
//
// Before it evaluates a trial a worker writes a running marker: a field of
// the namespace's hash "amk:running", keyed by the trial key, naming the
// worker (its registry id), the queue and the task (payload and budget
// headers included). It removes the marker once the evaluation has really
// returned. A marker whose worker stopped heartbeating therefore names a
// trial whose evaluator is gone: the dispatcher's lost-worker check finds it
// within LostAfter plus one check interval, claims it (atomically, once) and
// re-offers the trial as a new task "<key>#r<n>" on the same queue (a
// marker of a trial the dispatcher is not waiting for, left by a restore
// of Redis from a backup, is removed instead). The
// trial key, not the task id, identifies the outcome, so copies collapse as
// before: a finished trial leaves a done marker (its outcome, kept until
// the scheduler has recorded it, see forget.go, at most for the retention
// period), and any later attempt of that trial — asynq recovering the
// original task, a second re-offer — stores that outcome and completes
// without evaluating again. Forgetting a recorded trial deletes its tasks
// (the original, and the re-offers this dispatcher made) before its marker,
// waiting for a lost attempt's task to leave the active state, so such
// attempts still find the marker; only an attempt the dispatcher cannot see
// (a re-offer made before a scheduler restart) may start after the marker
// is gone and evaluate the trial again, and the campaign refuses that
// outcome as a copy (and the fleet forgets it).
//
// A worker whose evaluation ignored cancellation (the device is wedged, the
// process exits) first writes a poison marker for the trial (a key of its
// own, kept for poisonTTL). A trial with a poison marker is never evaluated
// again: whoever meets it next (the lost-worker check or a worker receiving
// the task) publishes a `crash` outcome once and the task is archived.

// DefaultLostAfter is how long a worker's heartbeat may be silent before
// the trial it was evaluating is re-offered (three missed beats).
const DefaultLostAfter = 3 * registryBeat

// DefaultLostCheckInterval is how often the dispatcher looks for trials of
// lost workers.
const DefaultLostCheckInterval = time.Second

// reofferSep separates a trial key from the re-offer number in a task id.
const reofferSep = "#r"

func runningKey(namespace string) string { return prefix(namespace) + "amk:running" }
func lossesKey(namespace string) string  { return prefix(namespace) + "amk:losses" }

// poisonKey is the poison marker of one trial. It expires after poisonTTL:
// by then every attempt of the trial has long ended (asynq's deadline,
// the retention period), and the campaign recorded its crash, so it is
// never submitted again.
func poisonKey(namespace, key string) string { return prefix(namespace) + "amk:poison:" + key }

// poisonTTL is how long a poison marker is kept.
const poisonTTL = 7 * 24 * time.Hour

func doneKey(namespace, key string) string {
	return prefix(namespace) + "amk:done:" + key
}

// running is the value of a running marker.
type running struct {
	Worker  string            `json:"worker"`
	Queue   string            `json:"queue"`
	Task    string            `json:"task"`
	Since   time.Time         `json:"since"`
	Payload json.RawMessage   `json:"payload"`
	Headers map[string]string `json:"headers,omitempty"`
}

// heldBy reports whether the marker of trial key is still held by w, the
// live registry entry of the worker it names: w heartbeats, and is either
// evaluating key or only just started it (a marker whose removal was lost —
// a failover to a replica that missed it — while the worker has long moved
// on to other work is not held).
func (m running) heldBy(key string, w WorkerInfo, lostAfter time.Duration) bool {
	if time.Since(w.Heartbeat) >= lostAfter {
		return false
	}
	moved := w.Current != key && time.Since(m.Since) > lostAfter && w.Heartbeat.After(m.Since.Add(registryBeat))
	return !moved
}

// claimScript removes a running marker only if it still holds the value
// the caller read, so one claimer wins.
var claimScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0`)

// markRunning writes this worker's running marker for key and returns its
// value (for release).
func (w *Worker) markRunning(ctx context.Context, key string, t *asynq.Task, taskID string) string {
	b, _ := json.Marshal(running{Worker: w.reg.snapshot().ID, Queue: w.queue, Task: taskID,
		Since: time.Now().UTC(), Payload: t.Payload(), Headers: t.Headers()})
	if err := w.rdb.HSet(ctx, runningKey(w.opts.Namespace), key, b).Err(); err != nil {
		w.outage.Warn("running_marker", "could not write a running marker", "task", key, "err", err)
	}
	return string(b)
}

// releaseRunning removes the running marker if it is still this worker's.
func (w *Worker) releaseRunning(key, value string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = claimScript.Run(ctx, w.rdb, []string{runningKey(w.opts.Namespace)}, key, value).Err()
}

// MarkPoison records that the trial of spec made its evaluator unusable
// (its evaluation ignored cancellation): no worker evaluates it again.
func (w *Worker) MarkPoison(spec trial.Spec, message string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := fmt.Sprintf("%s (worker %s)", message, w.reg.snapshot().ID)
	if err := w.rdb.Set(ctx, poisonKey(w.opts.Namespace, TaskID(spec)), msg, poisonTTL).Err(); err != nil {
		w.log.Error("could not record the trial as poison", "task", TaskID(spec), "err", err)
	}
}

// poisonCrash is the outcome of a poison trial (digest: its spec's).
func poisonCrash(campaign string, trialID int, digest, message string) trial.Outcome {
	return trial.Outcome{CampaignID: campaign, TrialID: trialID, SpecDigest: digest, Failure: &trial.Failure{Class: trial.FailCrash, Phase: "worker",
		Message: "trial killed its evaluator and is not handed to another: " + message}}
}

// doneOutcome is the stored outcome of a finished trial, if any.
func doneOutcome(ctx context.Context, rdb *redis.Client, namespace, key string) ([]byte, bool) {
	b, err := rdb.Get(ctx, doneKey(namespace, key)).Bytes()
	return b, err == nil && len(b) > 0
}

// reofferID is the task id of the n-th re-offer of a trial.
func reofferID(key string, n int64) string { return key + reofferSep + strconv.FormatInt(n, 10) }

// trialKeyOf strips a re-offer suffix from a task id.
func trialKeyOf(taskID string) string {
	if i := strings.LastIndex(taskID, reofferSep); i >= 0 {
		if _, err := strconv.Atoi(taskID[i+len(reofferSep):]); err == nil {
			return taskID[:i]
		}
	}
	return taskID
}

// lostLoop re-offers the trials of lost workers until the dispatcher
// closes.
func (d *Dispatcher) lostLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.LostCheckInterval)
	defer t.Stop()
	var healthySince time.Time
	outage := false
	var orphans orphanWatcher
	for {
		select {
		case <-d.closing:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := d.checkLost(ctx, healthySince)
		cancel()
		switch {
		case err != nil:
			outage, healthySince = true, time.Time{}
			d.outage.Warn("lost_check", "lost-worker check failed", "err", err)
		case healthySince.IsZero():
			healthySince = time.Now()
			if outage {
				// Redis is back, perhaps as a promoted replica that never
				// saw the last writes: look at every pending trial now
				// rather than after a sweep interval, then watch for
				// trials the outage orphaned (orphan.go).
				outage = false
				d.sweepOlderThan(0)
				orphans.startWatch(healthySince)
			}
		}
		if err == nil && orphans.due(time.Now()) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := d.checkOrphans(ctx, &orphans); err != nil {
				d.outage.Warn("orphan_check", "orphaned-trial check failed", "err", err)
			}
			cancel()
		}
	}
}

// checkLost claims and re-offers every running trial whose worker is gone.
// Right after Redis comes back (healthySince recent) workers have not had
// the time to beat again, so nothing is judged lost yet.
func (d *Dispatcher) checkLost(ctx context.Context, healthySince time.Time) error {
	marks, err := d.rdb.HGetAll(ctx, runningKey(d.opts.Namespace)).Result()
	if err != nil {
		return err
	}
	if len(marks) == 0 || healthySince.IsZero() || time.Since(healthySince) < d.opts.LostAfter+registryBeat {
		return nil
	}
	parsed := make(map[string]running, len(marks))
	var named []string
	for key, raw := range marks {
		var m running
		if json.Unmarshal([]byte(raw), &m) != nil {
			_ = d.rdb.HDel(ctx, runningKey(d.opts.Namespace), key).Err()
			continue
		}
		parsed[key] = m
		named = append(named, m.Worker)
	}
	// Only the workers the markers name are read: the check costs what is
	// running, not what Redis holds.
	live, err := workerInfos(ctx, d.rdb, d.opts.Namespace, named...)
	if err != nil {
		return err
	}
	for key, m := range parsed {
		raw := marks[key]
		if w, ok := live[m.Worker]; ok && m.heldBy(key, w, d.opts.LostAfter) {
			continue
		}
		n, err := claimScript.Run(ctx, d.rdb, []string{runningKey(d.opts.Namespace)}, key, raw).Int()
		if err != nil {
			return err
		}
		if n == 0 {
			continue // released or claimed meanwhile
		}
		d.mu.Lock()
		_, waiting := d.pending[key]
		d.mu.Unlock()
		if !waiting {
			// Nothing awaits this trial: it was recorded, and the marker is
			// a leftover (a restore of Redis from a backup taken while it
			// ran). Offering it again would only evaluate it twice; if a
			// scheduler restarted before submitting it again, asynq's own
			// lease recovery of the trial's task still runs it.
			d.log.Warn("running marker of a trial this scheduler is not waiting for (already recorded, or restored from a backup); removed, not offered again",
				"task", key, "worker", m.Worker)
			continue
		}
		d.lostWorkers.Add(1)
		if err := d.reoffer(ctx, key, m); err != nil {
			return err
		}
	}
	return nil
}

// reoffer hands the trial of a lost worker to the queue again, or reports a
// crash when it is poison or its loss budget is spent.
func (d *Dispatcher) reoffer(ctx context.Context, key string, m running) error {
	campaign, trialID, err := ParseTaskID(key)
	if err != nil {
		return nil // not a trial key: nothing to re-offer
	}
	if _, done := doneOutcome(ctx, d.rdb, d.opts.Namespace, key); done {
		return nil
	}
	losses, err := d.rdb.HIncrBy(ctx, lossesKey(d.opts.Namespace), key, 1).Result()
	if err != nil {
		return err
	}
	poison, _ := d.rdb.Get(ctx, poisonKey(d.opts.Namespace, key)).Result()
	budget := budgetFrom(m.Headers)
	// The crash answers the spec the lost worker held (its marker keeps
	// the payload the worker was handed).
	var held signedSpec
	_ = json.Unmarshal(m.Payload, &held)
	digest := held.Spec.Digest()
	switch {
	case poison != "":
		d.log.Error("lost worker's trial is poison; reporting a crash", "task", key, "worker", m.Worker)
		return d.publishCrash(ctx, poisonCrash(campaign, trialID, digest, poison))
	case int(losses) >= budget.losses:
		d.log.Error("trial keeps losing its worker; reporting a crash", "task", key, "lost", losses)
		return d.publishCrash(ctx, trial.Outcome{CampaignID: campaign, TrialID: trialID, SpecDigest: digest, Failure: &trial.Failure{
			Class: trial.FailCrash, Phase: "worker",
			Message: fmt.Sprintf("trial lost its worker %d times (killed, hung or cut off from Redis); not retried", losses)}})
	}
	id := reofferID(key, losses)
	d.log.Warn("worker lost mid-trial; trial offered again", "task", key, "worker", m.Worker, "as", id,
		"silent_for", time.Since(m.Since).Round(time.Second).String())
	// No retention: nothing reads a re-offer's stored result (the trial
	// key names the outcome: its done marker and the trial's own task hold
	// it), so asynq deletes the re-offer as soon as it completes.
	_, err = d.client.EnqueueContext(ctx, asynq.NewTaskWithHeaders(TypeTrial, m.Payload, m.Headers),
		asynq.Queue(m.Queue), asynq.TaskID(id), asynq.MaxRetry(budget.maxRetry()),
		asynq.Timeout(d.opts.HardTimeout))
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err
	}
	d.mu.Lock()
	r := d.reoffered[key]
	r.queue, r.at = m.Queue, time.Now()
	if !slices.Contains(r.tasks, id) {
		r.tasks = append(r.tasks, id)
	}
	d.reoffered[key] = r
	d.mu.Unlock()
	return nil
}

// reoffers are the re-offer tasks of one trial (on its queue), deleted
// with the trial's own when it is forgotten: one still queued then would
// only evaluate a recorded trial again.
type reoffers struct {
	queue string
	tasks []string
	at    time.Time
}

// publishCrash puts a crash outcome on the results queue under its trial key
// (a copy already there wins) and keeps it as the trial's done marker.
func (d *Dispatcher) publishCrash(ctx context.Context, out trial.Outcome) error {
	payload, err := sealOutcome(d.opts.Secret, out)
	if err != nil {
		return err
	}
	key := outcomeKey(out)
	defer d.rdb.HDel(context.WithoutCancel(ctx), lossesKey(d.opts.Namespace), key)
	if err := d.rdb.Set(ctx, doneKey(d.opts.Namespace, key), payload, d.opts.Retention).Err(); err != nil {
		return err
	}
	_, err = d.client.EnqueueContext(ctx, asynq.NewTask(TypeOutcome, payload),
		asynq.Queue(ResultQueue(d.opts.Namespace)), asynq.TaskID(key), asynq.MaxRetry(outcomeMaxRetry))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}
