package redisq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/trial"
)

// process is the asynq handler of a trial task.
func (w *Worker) process(ctx context.Context, t *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	log := w.log.With("task", id)
	if t.Type() != TypeTrial {
		log.Error("unknown task type on trial queue; archived", "type", t.Type())
		return fmt.Errorf("task type %q is not %s: %w", t.Type(), TypeTrial, asynq.SkipRetry)
	}
	spec, err := w.decodeSpec(t.Payload(), id)
	var refused *specRefused
	if errors.As(err, &refused) {
		// Nothing of a spec the scheduler did not issue is evaluated or
		// published: the archived task is what the scheduler's sweep finds,
		// and it enqueues the spec it issued again.
		log.Error("trial payload refused: not evaluated, nothing published; archived", "err", err)
		if w.opts.Refused != nil {
			w.opts.Refused(refused.reason)
		}
		return fmt.Errorf("trial payload refused: %v: %w", err, asynq.SkipRetry)
	}
	if err != nil {
		campaign, trialID, kerr := ParseTaskID(id)
		if kerr != nil {
			log.Error("malformed trial payload with no trial id; archived", "err", err)
			return fmt.Errorf("malformed trial payload: %v: %w", err, asynq.SkipRetry)
		}
		log.Error("malformed trial payload; reporting a crash", "err", err)
		return w.publish(ctx, t, id, trial.Outcome{CampaignID: campaign, TrialID: trialID,
			Failure: &trial.Failure{Class: trial.FailCrash, Phase: "decode", Message: "malformed trial payload: " + err.Error()}})
	}
	key := TaskID(spec)
	if settled, err := w.alreadySettled(ctx, t, spec, log); settled || err != nil {
		return err
	}
	b := budgetFrom(t.Headers())
	infra := w.infraFailures(ctx, id)
	reoffers, _ := w.rdb.HGet(ctx, lossesKey(w.opts.Namespace), key).Int()
	if lost := max(retried-infra, reoffers); lost > 0 && lost >= b.losses {
		log.Error("trial keeps losing its worker; reporting a crash", "lost", lost)
		return w.publish(ctx, t, id, trial.Outcome{CampaignID: spec.CampaignID, TrialID: spec.TrialID, SpecDigest: spec.Digest(),
			Failure: &trial.Failure{Class: trial.FailCrash, Phase: "worker",
				Message: fmt.Sprintf("trial lost its worker %d times (killed, hung or cut off from Redis); not retried", lost)}})
	}
	out, ran := w.evaluate(ctx, t, id, spec)
	if !ran || ctx.Err() != nil {
		// The task was handed back (shutdown) or lost its lease: asynq has
		// already requeued or retried it, so this attempt publishes nothing.
		log.Warn("trial abandoned; it will run again", "err", ctx.Err())
		return ctx.Err()
	}
	if out.Failure != nil && out.Failure.Class == trial.FailInfra {
		if infra < b.infra {
			if err := w.rdb.Incr(ctx, infraKey(w.queue, id)).Err(); err == nil {
				w.rdb.Expire(ctx, infraKey(w.queue, id), 7*24*time.Hour)
			}
			log.Warn("infrastructure failure; retrying", "attempt", infra+1, "budget", b.infra, "message", out.Failure.Message)
			return fmt.Errorf("infrastructure failure (retry %d of %d): %s", infra+1, b.infra, out.Failure.Message)
		}
		out.Failure.Message = fmt.Sprintf("%s (gave up after %d infrastructure retries)", out.Failure.Message, b.infra)
	}
	return w.publish(ctx, t, id, out)
}

// alreadySettled handles a trial that must not be evaluated by this
// attempt: one that finished in an earlier attempt (its outcome becomes this
// task's result too), a poison trial (a crash is published once and the task
// archived), and one that a live worker is evaluating right now (a re-offer
// racing asynq's own recovery of the original task: this attempt waits for
// that evaluation instead of running a second one).
func (w *Worker) alreadySettled(ctx context.Context, t *asynq.Task, spec trial.Spec, log *slog.Logger) (bool, error) {
	key := TaskID(spec)
	for {
		if payload, ok := doneOutcome(ctx, w.rdb, w.opts.Namespace, key); ok {
			if err := w.answers(spec, payload); err != nil {
				// Not this spec's outcome (left by an earlier campaign with
				// this id, or put there by hand): this attempt evaluates.
				log.Warn("the trial's done marker does not answer this spec; evaluating it", "err", err)
				w.rdb.Del(ctx, doneKey(w.opts.Namespace, key))
				continue
			}
			if rw := t.ResultWriter(); rw != nil {
				_, _ = rw.Write(payload)
			}
			log.Info("trial already finished in an earlier attempt; not evaluated again")
			return true, nil
		}
		if msg, _ := w.rdb.Get(ctx, poisonKey(w.opts.Namespace, key)).Result(); msg != "" {
			log.Error("poison trial: reporting a crash and archiving it", "reason", msg)
			if err := w.publish(ctx, t, key, poisonCrash(spec.CampaignID, spec.TrialID, spec.Digest(), msg)); err != nil {
				return true, err
			}
			return true, fmt.Errorf("poison trial: %s: %w", msg, asynq.SkipRetry)
		}
		if !w.evaluatedElsewhere(ctx, key) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// answers reports whether a stored outcome (a done marker) answers spec:
// authentic (its MAC, with a secret) and bound to it (trial.CheckBound).
func (w *Worker) answers(spec trial.Spec, payload []byte) error {
	out, _, err := openOutcome(w.opts.Secret, payload)
	if err != nil {
		return err
	}
	return trial.CheckBound(spec, out)
}

// evaluatedElsewhere reports whether another live worker holds the trial's
// running marker.
func (w *Worker) evaluatedElsewhere(ctx context.Context, key string) bool {
	raw, err := w.rdb.HGet(ctx, runningKey(w.opts.Namespace), key).Result()
	if err != nil {
		return false
	}
	var m running
	if json.Unmarshal([]byte(raw), &m) != nil || m.Worker == w.reg.snapshot().ID {
		return false
	}
	live, err := workerInfos(ctx, w.rdb, w.opts.Namespace, m.Worker)
	if err != nil {
		return false
	}
	info, ok := live[m.Worker]
	return ok && m.heldBy(key, info, DefaultLostAfter)
}

// specRefused is decodeSpec's error for a payload the worker must not
// evaluate nor answer: not signed by the fleet's scheduler, or a signed
// spec of another trial moved under this task id.
type specRefused struct {
	reason string
	err    error
}

func (e *specRefused) Error() string { return e.err.Error() }

// Reasons a worker refuses a trial payload (WorkerOptions.Refused).
const (
	// RefuseUnsigned: with the fleet secret, the payload's MAC is missing
	// or wrong.
	RefuseUnsigned = "unsigned"
	// RefuseMisplaced: a signed spec under another trial's task id.
	RefuseMisplaced = "misplaced"
)

// decodeSpec parses and checks a trial payload. With a fleet secret a
// payload without the scheduler's MAC, or a signed spec of another trial,
// is a *specRefused; otherwise a payload that does not decode or check is
// malformed (reported as a crash of the trial its task id names).
func (w *Worker) decodeSpec(payload []byte, taskID string) (trial.Spec, error) {
	var signed signedSpec
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&signed); err != nil {
		if len(w.opts.Secret) > 0 {
			return signed.Spec, &specRefused{RefuseUnsigned, fmt.Errorf("bad JSON: %v", err)}
		}
		return signed.Spec, fmt.Errorf("bad JSON: %v", err)
	}
	spec := signed.Spec
	if dec.More() {
		if len(w.opts.Secret) > 0 {
			return spec, &specRefused{RefuseUnsigned, errors.New("bad JSON: data after the spec object")}
		}
		return spec, errors.New("bad JSON: data after the spec object")
	}
	if err := checkSpecMAC(w.opts.Secret, signed); err != nil {
		return spec, &specRefused{RefuseUnsigned, err}
	}
	if campaign, trialID, err := ParseTaskID(taskID); err == nil && (campaign != spec.CampaignID || trialID != spec.TrialID) {
		err := fmt.Errorf("payload is trial %s but the task id is %s", TaskID(spec), taskID)
		if len(w.opts.Secret) > 0 {
			return spec, &specRefused{RefuseMisplaced, err}
		}
		return spec, err
	}
	switch {
	case spec.Model == "":
		return spec, errors.New("missing model")
	case spec.GPU == "":
		return spec, errors.New("missing gpu")
	case spec.GPU != w.opts.Target:
		return spec, fmt.Errorf("spec is for gpu %q but this queue serves %q", spec.GPU, w.opts.Target)
	case len(spec.Point) == 0:
		return spec, errors.New("missing point")
	case spec.TrialID < 0:
		return spec, fmt.Errorf("negative trial id %d", spec.TrialID)
	case spec.TimeoutSeconds < 0:
		return spec, fmt.Errorf("negative timeout_s %v", spec.TimeoutSeconds)
	}
	return spec, nil
}

// evaluate runs the evaluator under the device semaphore and turns a panic
// into a crash outcome. ran is false when ctx ended before the device was
// free.
func (w *Worker) evaluate(ctx context.Context, t *asynq.Task, taskID string, spec trial.Spec) (out trial.Outcome, ran bool) {
	select {
	case w.device <- struct{}{}:
	case <-ctx.Done():
		return out, false
	}
	defer func() { <-w.device }()
	key := TaskID(spec)
	mark := w.markRunning(ctx, key, t, taskID)
	defer w.releaseRunning(key, mark)
	w.reg.begin(key)
	defer w.reg.end()
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("evaluator panicked", "task", key, "panic", r)
			out = trial.Outcome{Failure: &trial.Failure{Class: trial.FailCrash, Phase: "evaluate", Message: fmt.Sprint("panic: ", r)}}
		}
		out.CampaignID, out.TrialID, out.SpecDigest = spec.CampaignID, spec.TrialID, spec.Digest()
		if out.Verdict == nil && out.Failure == nil {
			out.Failure = &trial.Failure{Class: trial.FailCrash, Phase: "evaluate", Message: "evaluator returned neither a verdict nor a failure"}
		}
		if out.ElapsedS == 0 {
			out.ElapsedS = time.Since(start).Seconds()
		}
		ran = true
	}()
	return w.opts.Evaluate(ctx, spec), true
}

// infraFailures reads how many infrastructure failures the task has had.
func (w *Worker) infraFailures(ctx context.Context, id string) int {
	n, err := w.rdb.Get(ctx, infraKey(w.queue, id)).Int()
	if err != nil {
		return 0
	}
	return n
}

// publish stores out as the trial task's result (kept for the retention
// period, so a restarted scheduler can recover it) and enqueues it on the
// results queue under the trial's id (a second copy collapses into the
// first). Redis errors are retried until the task's context ends.
func (w *Worker) publish(ctx context.Context, t *asynq.Task, id string, out trial.Outcome) error {
	if out.Worker == "" {
		out.Worker = w.opts.Identity
	}
	payload, err := sealOutcome(w.opts.Secret, out)
	if err != nil {
		return fmt.Errorf("encode outcome: %v: %w", err, asynq.SkipRetry)
	}
	key := outcomeKey(out)
	delay := 20 * time.Millisecond
	for {
		err = w.store(ctx, t, key, payload)
		if err == nil {
			break
		}
		w.outage.Warn("publish", "could not publish outcome; retrying", "task", id, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish outcome: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
	if w.opts.Published != nil {
		w.opts.Published(out)
	}
	bg := context.WithoutCancel(ctx)
	w.rdb.Publish(bg, doorbellChannel(w.opts.Namespace), payload)
	w.rdb.Del(bg, infraKey(w.queue, id))
	w.rdb.Set(bg, doneKey(w.opts.Namespace, key), payload, DefaultRetention)
	w.rdb.HDel(bg, lossesKey(w.opts.Namespace), key)
	w.log.Info("trial done", "task", id, "outcome", Label(out), "elapsed_s", out.ElapsedS)
	return nil
}

func (w *Worker) store(ctx context.Context, t *asynq.Task, key string, payload []byte) error {
	if rw := t.ResultWriter(); rw != nil {
		if _, err := rw.Write(payload); err != nil {
			return err
		}
	}
	_, err := w.client.EnqueueContext(ctx, asynq.NewTask(TypeOutcome, payload),
		asynq.Queue(ResultQueue(w.opts.Namespace)), asynq.TaskID(key), asynq.MaxRetry(outcomeMaxRetry))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // an earlier attempt's outcome is still waiting: one is enough
	}
	return err
}

// outcomeMaxRetry bounds redeliveries of an outcome the scheduler could not
// take (it only fails them while shutting down).
const outcomeMaxRetry = 1000

// outcomeKey is the trial key of an outcome (dispatch.Key of its spec).
func outcomeKey(o trial.Outcome) string {
	return dispatch.Key(trial.Spec{CampaignID: o.CampaignID, TrialID: o.TrialID})
}

// Label classifies an outcome for logs and metrics: ok, rejected, incorrect,
// no_latency, or the failure class (crash, timeout, infra).
func Label(o trial.Outcome) string {
	switch {
	case o.Failure != nil:
		if o.Failure.Class == "" {
			return "failure"
		}
		return string(o.Failure.Class)
	case o.Verdict == nil:
		return "empty"
	case !o.Verdict.Valid:
		return "rejected"
	case o.Verdict.Correct != nil && !*o.Verdict.Correct:
		return "incorrect"
	case o.Verdict.LatencyUS == nil:
		return "no_latency"
	}
	return "ok"
}
