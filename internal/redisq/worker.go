package redisq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/trial"
)

// Worker defaults.
const (
	// DefaultPollInterval is how long an idle asynq server waits between
	// polls of an empty queue (asynq sleeps between a half and one and a half
	// of it, and polls again at once after a trial while its queue has
	// work). asynq polls rather than blocks, so an idle fleet costs Redis a
	// poll per worker per interval, and a trial waits for the next poll of
	// an idle worker: with n idle workers about PollInterval/(n+1), with one
	// about half of it, at most one and a half. 50 ms keeps that wait far
	// below a GPU trial's hundreds of milliseconds while 256 idle workers
	// cost Redis about 5 % of a core (docs/results/fleet-scale.md, "Idle
	// fleet"); a busy fleet, whose queue has work, never waits for it.
	DefaultPollInterval = 50 * time.Millisecond
	// DelayedCheckFloor is the least interval at which a worker's asynq
	// server moves due retries (an infrastructure failure's backoff, a
	// recovered lease) back onto its queue: each check costs Redis a few
	// calls per worker, and a retry that waits up to a second longer is
	// noise against the backoff itself.
	DelayedCheckFloor = time.Second
	// DefaultShutdownGrace is how long Shutdown lets a running trial finish
	// before handing it back to the queue.
	DefaultShutdownGrace = 30 * time.Second
	// DefaultRetryDelay is the first delay before an infrastructure retry.
	DefaultRetryDelay = time.Second
)

// WorkerOptions configures a Worker.
type WorkerOptions struct {
	Conn      Conn
	Namespace string
	// Target is the GPU target whose queue the worker serves (trials:<target>).
	Target string
	// Evaluate evaluates one trial. It must respect ctx: the context ends
	// when the trial is handed back (shutdown) or its task is lost.
	Evaluate dispatch.Evaluator
	// Device labels the device in the worker registry ("cpu", "cuda:0").
	Device string
	// Identity is the worker's fingerprint, stamped on every outcome whose
	// Worker field the evaluator left empty.
	Identity string
	Logger   *slog.Logger
	// PollInterval, ShutdownGrace and RetryDelay default to the Default*
	// constants when zero.
	PollInterval  time.Duration
	ShutdownGrace time.Duration
	RetryDelay    time.Duration
	// Published, when set, is called after each outcome reached Redis.
	Published func(trial.Outcome)
	// MemoryBytes and MetricsAddr are announced in the worker registry
	// (see WorkerInfo).
	MemoryBytes int64
	MetricsAddr string
	// Secret is the fleet secret; when set every outcome carries its MAC
	// and only trial payloads with the scheduler's MAC are evaluated (see
	// auth.go).
	Secret []byte
	// Host names the machine in the worker registry and in the host
	// memory ledger the workers of one machine share (HostMemory); empty:
	// os.Hostname(). Workers in containers of one machine need the same
	// name here to share one memory budget.
	Host string
	// Resident, when set, reports this worker's resident memory in bytes,
	// which the host memory ledger counts as already allocated.
	Resident func() (int64, error)
	// Refused, when set, is told the reason (Refuse*) of every trial
	// payload the worker refused to evaluate (for a metric).
	Refused func(reason string)
}

// Worker consumes one target's trial queue with concurrency 1 and publishes
// each outcome to the results queue.
type Worker struct {
	opts   WorkerOptions
	log    *slog.Logger
	outage outageLog
	queue  string
	rdb    *redis.Client
	client *asynq.Client
	srv    *asynq.Server
	reg    *registration
	host   *HostMemory

	// device admits one evaluation at a time. asynq frees its worker slot
	// as soon as a handler's context ends, even while the handler still
	// runs; the semaphore keeps the next trial off the device until the
	// previous evaluation has really returned.
	device chan struct{}

	mu        sync.Mutex
	redisErr  error
	started   bool
	shutdowns sync.Once
}

// NewWorker checks opts and connects; Start begins consuming.
func NewWorker(opts WorkerOptions) (*Worker, error) {
	if err := validTarget(opts.Target); err != nil {
		return nil, err
	}
	if opts.Evaluate == nil {
		return nil, errors.New("redisq: worker needs an evaluator")
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	rdb, err := opts.Conn.Client()
	if err != nil {
		return nil, err
	}
	w := &Worker{
		opts:   opts,
		log:    orDiscard(opts.Logger).With("target", opts.Target),
		queue:  TrialQueue(opts.Namespace, opts.Target),
		rdb:    rdb,
		client: asynq.NewClientFromRedisClient(rdb),
		device: make(chan struct{}, 1),
	}
	w.outage = outageLog{w.log}
	w.reg = newRegistration(rdb, opts.Namespace, opts.Host, WorkerInfo{
		Target: opts.Target, Device: opts.Device, Identity: opts.Identity, Queue: w.queue,
		MemoryBytes: opts.MemoryBytes, MetricsAddr: opts.MetricsAddr,
	})
	info := w.reg.snapshot()
	w.host = newHostMemory(rdb, opts.Namespace, info.Host, info.ID, opts.Resident, w.outage)
	w.reg.host = w.host
	delay := retryDelay(opts.RetryDelay)
	w.srv = asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              1,
		Queues:                   map[string]int{w.queue: 1},
		TaskCheckInterval:        opts.PollInterval,
		DelayedTaskCheckInterval: max(opts.PollInterval, DelayedCheckFloor),
		ShutdownTimeout:          opts.ShutdownGrace,
		RetryDelayFunc:           func(n int, _ error, _ *asynq.Task) time.Duration { return delay(n) },
		HealthCheckFunc:          w.healthCheck,
		HealthCheckInterval:      5 * time.Second,
		Logger:                   asynqLogger{w.log},
		LogLevel:                 asynq.WarnLevel,
	})
	return w, nil
}

// Queue is the queue the worker consumes.
func (w *Worker) Queue() string { return w.queue }

// Start pings Redis and begins consuming.
func (w *Worker) Start(ctx context.Context) error {
	if err := w.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", w.opts.Conn, err)
	}
	if err := w.srv.Start(asynq.HandlerFunc(w.process)); err != nil {
		return err
	}
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	w.reg.start(w.log)
	w.log.Info("worker consuming", "queue", w.queue, "redis", w.opts.Conn, "identity", w.opts.Identity)
	return nil
}

// Shutdown stops taking work, lets the running trial finish for the shutdown
// grace, then hands it back to the queue (it runs again elsewhere, without
// using up a retry), and waits until the evaluation has really stopped or ctx
// ends. It reports an error when the evaluation is still running.
func (w *Worker) Shutdown(ctx context.Context) error {
	var err error
	w.shutdowns.Do(func() {
		w.srv.Shutdown()
		select {
		case w.device <- struct{}{}:
			<-w.device
		case <-ctx.Done():
			err = errors.New("redisq: evaluation still running after shutdown")
		}
		w.reg.stop()
		_ = w.client.Close()
		_ = w.rdb.Close()
	})
	return err
}

// Healthy reports the last Redis health check.
func (w *Worker) Healthy() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return errors.New("not started")
	}
	return w.redisErr
}

func (w *Worker) healthCheck(err error) {
	w.mu.Lock()
	prev := w.redisErr
	w.redisErr = err
	w.mu.Unlock()
	switch {
	case err != nil && prev == nil:
		w.log.Error("redis unreachable", "err", err)
	case err == nil && prev != nil:
		w.log.Info("redis reachable again")
	}
}

// HostMemory is the worker's side of its host's memory ledger, for its
// model cache (trial.ModelCache.WithHostAdmission).
func (w *Worker) HostMemory() *HostMemory { return w.host }

// Info is what the worker publishes in the registry.
func (w *Worker) Info() WorkerInfo { return w.reg.snapshot() }
