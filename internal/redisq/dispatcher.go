package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/trial"
)

// Dispatcher defaults.
const (
	// DefaultRetention is how long a finished trial task and its outcome stay
	// in Redis, so a restarted scheduler that resubmits it gets the outcome
	// back instead of a second evaluation.
	DefaultRetention = 24 * time.Hour
	// DefaultHardTimeout is asynq's own deadline for one attempt of a trial;
	// the worker's watchdog normally ends a trial long before.
	DefaultHardTimeout = 6 * time.Hour
	// DefaultSweepInterval is how often the dispatcher checks on trials it is
	// still waiting for.
	DefaultSweepInterval = 30 * time.Second
)

// DispatcherOptions configures a Dispatcher.
type DispatcherOptions struct {
	Conn      Conn
	Namespace string
	Logger    *slog.Logger
	// InfraRetries and WorkerLosses are the per-trial retry budgets (0 =
	// default, negative = none); they travel with each task.
	InfraRetries int
	WorkerLosses int
	// Retention, HardTimeout, SweepInterval and PollInterval default to the
	// Default* constants when zero.
	Retention     time.Duration
	HardTimeout   time.Duration
	SweepInterval time.Duration
	PollInterval  time.Duration
	// Buffer is the capacity of the Outcomes channel (default 256).
	Buffer int
	// LostAfter is how long a worker's heartbeat may be silent before its
	// running trial is offered again (DefaultLostAfter when zero);
	// LostCheckInterval how often that is checked (DefaultLostCheckInterval).
	LostAfter         time.Duration
	LostCheckInterval time.Duration
	// Secret is the fleet secret: when set, only outcomes carrying its MAC
	// are accepted (see auth.go); OnReject, when set, is told the reason of
	// each refused outcome (for a metric).
	Secret   []byte
	OnReject func(reason string)
}

// Dispatcher is a dispatch.Dispatcher over asynq: it enqueues trials on
// trials:<gpu> and consumes outcomes from the results queue.
type Dispatcher struct {
	opts    DispatcherOptions
	budget  budget
	log     *slog.Logger
	outage  outageLog
	rdb     *redis.Client
	client  *asynq.Client
	insp    *asynq.Inspector
	srv     *asynq.Server
	out     chan trial.Outcome
	closing chan struct{}
	wg      sync.WaitGroup
	// lostWorkers counts running trials claimed from lost workers.
	lostWorkers atomic.Int64
	// orphans counts trials offered again because a Redis outage left
	// their task active with nothing working on it (orphan.go).
	orphans atomic.Int64

	mu     sync.Mutex
	closed bool
	// pending holds the trials submitted in this lifetime whose outcome has
	// not been delivered; delivered remembers delivered keys (until the
	// caller forgets them, at most for the retention period) so a second
	// copy of an outcome is dropped.
	pending   map[string]submitted
	delivered map[string]delivery
	// forgetting holds the recorded trials whose Redis state is to be
	// deleted (forget.go); reoffered the task ids of the re-offers this
	// dispatcher made (lost.go), for forgetting them with their trial.
	forgetting []forgetting
	reoffered  map[string]reoffers
}

// delivery is when a trial's outcome was delivered and the queue its task
// is on ("" when this dispatcher did not submit it).
type delivery struct {
	at    time.Time
	queue string
	// forgetting is set once the caller has forgotten the trial, while its
	// Redis state is being deleted (forget.go).
	forgetting bool
}

type submitted struct {
	spec  trial.Spec
	queue string
	at    time.Time
}

var _ dispatch.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher connects to Redis and starts consuming outcomes. Outcomes
// that waited in Redis while no dispatcher ran are delivered first.
func NewDispatcher(ctx context.Context, opts DispatcherOptions) (*Dispatcher, error) {
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.HardTimeout <= 0 {
		opts.HardTimeout = DefaultHardTimeout
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	if opts.LostAfter <= 0 {
		opts.LostAfter = DefaultLostAfter
	}
	if opts.LostCheckInterval <= 0 {
		opts.LostCheckInterval = DefaultLostCheckInterval
	}
	rdb, err := opts.Conn.Client()
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", opts.Conn, err)
	}
	d := &Dispatcher{
		opts:      opts,
		budget:    resolveBudget(opts.InfraRetries, opts.WorkerLosses),
		log:       orDiscard(opts.Logger).With("component", "redisq"),
		rdb:       rdb,
		client:    asynq.NewClientFromRedisClient(rdb),
		insp:      asynq.NewInspectorFromRedisClient(rdb),
		out:       make(chan trial.Outcome, opts.Buffer),
		closing:   make(chan struct{}),
		pending:   map[string]submitted{},
		delivered: map[string]delivery{},
		reoffered: map[string]reoffers{},
	}
	d.outage = outageLog{d.log}
	d.srv = asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:       2,
		Queues:            map[string]int{ResultQueue(opts.Namespace): 1},
		TaskCheckInterval: opts.PollInterval,
		// An outcome handler only waits on the Outcomes channel; on Close it
		// is handed back to the queue (no retry used) after this long.
		ShutdownTimeout:          100 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return time.Second },
		Logger:                   asynqLogger{d.log},
		LogLevel:                 asynq.WarnLevel,
	})
	if err := d.listenDoorbell(ctx); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	if err := d.srv.Start(asynq.HandlerFunc(d.receive)); err != nil {
		d.mu.Lock()
		d.closed = true
		close(d.closing)
		d.mu.Unlock()
		d.wg.Wait()
		_ = rdb.Close()
		return nil, err
	}
	d.wg.Add(3)
	go d.sweepLoop()
	go d.lostLoop()
	go d.forgetLoop()
	return d, nil
}

// Submit enqueues spec on its target's queue. The task id is the trial key,
// so submitting a trial that is queued or running is a no-op, and so is
// submitting one whose outcome this dispatcher already delivered; submitting
// one that finished before this dispatcher started (within the retention
// period) delivers its stored outcome instead of evaluating it again.
func (d *Dispatcher) Submit(ctx context.Context, spec trial.Spec) error {
	if err := validTarget(spec.GPU); err != nil {
		return fmt.Errorf("redisq: trial %s: %w", TaskID(spec), err)
	}
	if _, err := json.Marshal(spec); err != nil {
		return fmt.Errorf("redisq: encode trial %s: %w", TaskID(spec), err)
	}
	key, queue := TaskID(spec), TrialQueue(d.opts.Namespace, spec.GPU)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return dispatch.ErrClosed
	}
	_, isPending := d.pending[key]
	_, isDelivered := d.delivered[key]
	if isPending || isDelivered {
		// queued, running, or its outcome already went out in this lifetime
		d.mu.Unlock()
		return nil
	}
	d.pending[key] = submitted{spec: spec, queue: queue, at: time.Now()}
	d.mu.Unlock()
	if err := d.enqueue(ctx, spec, queue); err != nil {
		d.mu.Lock()
		delete(d.pending, key)
		d.mu.Unlock()
		return err
	}
	return nil
}

// Withdraw takes a trial this dispatcher submitted back off its queue when
// no worker has started it (its task is pending, scheduled or waiting for
// a retry): the task is deleted and the trial is no longer awaited, so it
// yields no outcome and the sweep does not enqueue it again. A trial that
// runs, finished, was re-offered after a lost worker, or that this
// dispatcher did not submit is left as it is (false).
func (d *Dispatcher) Withdraw(ctx context.Context, spec trial.Spec) (bool, error) {
	key := TaskID(spec)
	d.mu.Lock()
	sub, ok := d.pending[key]
	_, reoffered := d.reoffered[key]
	if !ok || reoffered || d.closed {
		d.mu.Unlock()
		return false, nil
	}
	delete(d.pending, key) // the sweep must not enqueue it again meanwhile
	d.mu.Unlock()
	restore := func() {
		d.mu.Lock()
		if _, again := d.pending[key]; !again && !d.closed {
			d.pending[key] = sub
		}
		d.mu.Unlock()
	}
	info, err := d.insp.GetTaskInfo(sub.queue, key)
	if err != nil {
		restore()
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			return false, nil // the sweep enqueues it again, as before
		}
		return false, fmt.Errorf("redisq: look up trial %s: %w", key, err)
	}
	switch info.State {
	case asynq.TaskStatePending, asynq.TaskStateScheduled, asynq.TaskStateRetry:
	default:
		restore()
		return false, nil
	}
	if err := d.insp.DeleteTask(sub.queue, key); err != nil {
		restore() // a worker took it in between (or Redis failed): it is still awaited
		return false, nil
	}
	_ = d.rdb.Del(ctx, infraKey(sub.queue, key)).Err()
	return true, nil
}

// enqueue puts the trial task on queue; when a task with that id exists it
// resolves what the existing task means for this submission.
func (d *Dispatcher) enqueue(ctx context.Context, spec trial.Spec, queue string) error {
	key := TaskID(spec)
	payload, err := sealSpec(d.opts.Secret, spec)
	if err != nil {
		return fmt.Errorf("redisq: encode trial %s: %w", key, err)
	}
	// asynq's own deadline stays well behind the trial's watchdog.
	timeout := d.opts.HardTimeout
	if spec.TimeoutSeconds > 0 {
		timeout = max(timeout, 2*time.Duration(spec.TimeoutSeconds*float64(time.Second))+time.Minute)
	}
	for attempt := 0; ; attempt++ {
		_, err := d.client.EnqueueContext(ctx, asynq.NewTaskWithHeaders(TypeTrial, payload, d.budget.headers()),
			asynq.Queue(queue), asynq.TaskID(key), asynq.MaxRetry(d.budget.maxRetry()),
			asynq.Timeout(timeout), asynq.Retention(d.opts.Retention))
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			if err != nil {
				return fmt.Errorf("redisq: enqueue trial %s: %w", key, err)
			}
			return nil
		}
		info, err := d.insp.GetTaskInfo(queue, key)
		if errors.Is(err, asynq.ErrTaskNotFound) && attempt < 3 {
			continue // it expired or was deleted in between: enqueue again
		}
		if err != nil {
			return fmt.Errorf("redisq: look up existing trial %s: %w", key, err)
		}
		if d.settle(spec, queue, info) == settleRequeue && attempt < 3 {
			continue
		}
		return nil
	}
}

// settle outcomes.
const (
	settleWaiting = iota // the task will still produce an outcome
	settleDone           // an outcome was (or is being) delivered
	settleRequeue        // the task was removed: enqueue it again
)

// settle decides what an existing task means for the trial spec, which
// awaits an outcome: still in flight (wait), finished (deliver the stored
// outcome), archived (asynq gave up: deliver a crash) or unusable (delete,
// requeue). A stored outcome that does not answer spec (trial.CheckBound)
// is unusable, and so is an archived task whose payload is not the spec
// issued (replaced on the queue: its worker refused it): the trial runs
// again as issued.
func (d *Dispatcher) settle(spec trial.Spec, queue string, info *asynq.TaskInfo) int {
	key := TaskID(spec)
	rerun := func(why string, args ...any) int {
		d.log.Warn(why+"; running the trial again", append([]any{"task", key}, args...)...)
		if d.insp.DeleteTask(queue, key) != nil {
			return settleWaiting
		}
		// A done marker holding the same unusable outcome would answer the
		// new attempt with it.
		_ = d.rdb.Del(context.Background(), doneKey(d.opts.Namespace, key)).Err()
		return settleRequeue
	}
	switch info.State {
	case asynq.TaskStateCompleted:
		out, ok := d.open(info.Result, "stored result", key)
		if !ok || (out.Verdict == nil && out.Failure == nil) {
			return rerun("finished trial has no usable stored outcome")
		}
		if err := trial.CheckBound(spec, out); err != nil {
			d.reject(RejectNotIssued, "stored result", key, err)
			return rerun("the trial's stored outcome does not answer the spec issued", "err", err)
		}
		d.deliverAsync(out)
		return settleDone
	case asynq.TaskStateArchived:
		if err := d.issuedPayload(spec, info.Payload); err != nil {
			return rerun("the trial's archived task is not the spec issued (replaced on the queue, and refused by its worker)", "err", err)
		}
		d.log.Error("trial archived by asynq; reporting a crash", "task", key, "last_err", info.LastErr)
		out := trial.Outcome{CampaignID: spec.CampaignID, TrialID: spec.TrialID, SpecDigest: spec.Digest(), Failure: &trial.Failure{
			Class: trial.FailCrash, Phase: "queue", Message: "trial abandoned after repeated failures: " + info.LastErr}}
		_ = d.insp.DeleteTask(queue, key)
		d.deliverAsync(out)
		return settleDone
	}
	return settleWaiting
}

// issuedPayload reports whether a task's payload is spec as this
// dispatcher enqueues it (with its MAC when there is a secret).
func (d *Dispatcher) issuedPayload(spec trial.Spec, payload []byte) error {
	var s signedSpec
	if err := json.Unmarshal(payload, &s); err != nil {
		return fmt.Errorf("malformed payload: %v", err)
	}
	if err := checkSpecMAC(d.opts.Secret, s); err != nil {
		return err
	}
	if s.Spec.Digest() != spec.Digest() {
		return fmt.Errorf("payload spec %s is not the spec issued", s.Spec.Digest())
	}
	return nil
}

// issued refuses an outcome that does not answer the spec this dispatcher
// submitted under its trial (trial.CheckBound); an outcome of a trial not
// submitted in this lifetime is left to its campaign, which checks it the
// same way.
func (d *Dispatcher) issued(out trial.Outcome) error {
	d.mu.Lock()
	sub, pending := d.pending[outcomeKey(out)]
	d.mu.Unlock()
	if !pending {
		return nil
	}
	return trial.CheckBound(sub.spec, out)
}

// receive is the asynq handler of the results queue.
func (d *Dispatcher) receive(ctx context.Context, t *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	if t.Type() != TypeOutcome {
		d.log.Error("unknown task type on the results queue; archived", "task", id, "type", t.Type())
		return fmt.Errorf("task type %q is not %s: %w", t.Type(), TypeOutcome, asynq.SkipRetry)
	}
	out, ok := d.open(t.Payload(), "results queue", id)
	if !ok {
		return fmt.Errorf("outcome refused: %w", asynq.SkipRetry)
	}
	if err := d.issued(out); err != nil {
		d.reject(RejectNotIssued, "results queue", id, err)
		return fmt.Errorf("outcome refused: %v: %w", err, asynq.SkipRetry)
	}
	if !d.deliver(ctx, out) {
		// Closing: wait until asynq hands the task back to the queue, so
		// the outcome waits in Redis for the next dispatcher.
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// open decodes and authenticates an outcome read from Redis; a refused one
// is logged (rate-limited), counted and reported as not ok.
func (d *Dispatcher) open(payload []byte, from, task string) (trial.Outcome, bool) {
	out, reason, err := openOutcome(d.opts.Secret, payload)
	if err == nil {
		return out, true
	}
	d.reject(reason, from, task, err)
	return out, false
}

// reject counts and logs (rate-limited) an outcome refused for reason.
func (d *Dispatcher) reject(reason, from, task string, err error) {
	if d.opts.OnReject != nil {
		d.opts.OnReject(reason)
	}
	d.outage.Warn("reject:"+reason, "outcome refused", "from", from, "task", task, "reason", reason, "err", err)
}

// deliverAsync delivers an outcome found while submitting or sweeping,
// without blocking the caller on a full Outcomes channel. After Close it
// does nothing: the outcome stays stored in Redis.
func (d *Dispatcher) deliverAsync(out trial.Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.wg.Go(func() {
		d.deliver(context.Background(), out)
	})
}

// deliver hands out to the Outcomes channel at most once per submission:
// an outcome for a pending trial is delivered; one for a trial not
// submitted in this lifetime (a late verdict from before a restart) is
// delivered once; a second copy is dropped. It reports false when the
// outcome could not be handed over (ctx ended or the dispatcher is closing).
func (d *Dispatcher) deliver(ctx context.Context, out trial.Outcome) bool {
	key := outcomeKey(out)
	d.mu.Lock()
	sub, wasPending := d.pending[key]
	if !wasPending {
		if _, dup := d.delivered[key]; dup {
			d.mu.Unlock()
			d.log.Debug("duplicate outcome dropped", "task", key)
			return true
		}
	}
	delete(d.pending, key)
	d.delivered[key] = delivery{at: time.Now(), queue: sub.queue}
	d.mu.Unlock()
	select {
	case d.out <- out:
		d.countReceived()
		return true
	case <-ctx.Done():
	case <-d.closing:
	}
	d.mu.Lock()
	delete(d.delivered, key)
	if wasPending {
		d.pending[key] = sub
	}
	d.mu.Unlock()
	return false
}

// countReceived adds one to the namespace's count of outcomes handed to the
// scheduler (OutcomesReceived); a count Redis misses is logged, never
// retried: it informs, the outcome itself is already delivered.
func (d *Dispatcher) countReceived() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.rdb.Incr(ctx, receivedKey(d.opts.Namespace)).Err(); err != nil {
		d.log.Debug("outcome count not updated", "err", err)
	}
}

// OutcomesReceived is how many outcomes the dispatchers of namespace have
// handed to their scheduler since Redis started keeping its data: the one
// count of finished trials that does not depend on the path an outcome took
// (most come on the doorbell, and their results-queue copy is deleted
// unprocessed).
func OutcomesReceived(ctx context.Context, rdb *redis.Client, namespace string) (int64, error) {
	n, err := rdb.Get(ctx, receivedKey(namespace)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Outcomes returns the outcome channel. It is not closed by Close.
func (d *Dispatcher) Outcomes() <-chan trial.Outcome { return d.out }

// Close stops consuming outcomes and releases Redis. Outcomes not yet
// delivered stay in Redis for the next dispatcher; queued and running trials
// go on without it.
func (d *Dispatcher) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.closing)
	d.mu.Unlock()
	d.srv.Shutdown()
	d.wg.Wait()
	_ = d.client.Close()
	return d.rdb.Close()
}

// LostWorkers counts the trials this dispatcher took back from workers
// that stopped heartbeating.
func (d *Dispatcher) LostWorkers() int64 { return d.lostWorkers.Load() }

// OrphanedTrials is how many trials this dispatcher offered again because
// a Redis outage left their task active with no worker holding it.
func (d *Dispatcher) OrphanedTrials() int64 { return d.orphans.Load() }

// Workers lists the live workers of this namespace.
func (d *Dispatcher) Workers(ctx context.Context) ([]WorkerInfo, error) {
	return listWorkers(ctx, d.rdb, d.opts.Namespace)
}
