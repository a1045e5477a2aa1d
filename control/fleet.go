package control

import (
	"context"
	"time"
)

// Fleet is what only a fleet of workers has, beside the campaign
// operations: its workers, its queues and its health. The campaigns of a
// workspace on this machine answer ErrUnsupported for the first two.
type Fleet interface {
	// Workers lists the live workers.
	Workers(ctx context.Context) ([]Worker, error)
	// Queues reports the transport's queues.
	Queues(ctx context.Context) ([]Queue, error)
	// Health is nil while the campaigns can be served.
	Health(ctx context.Context) error
}

// Queue is one queue of the transport (GET /v1/queues, amkctl queues).
type Queue struct {
	Queue     string `json:"queue"`
	Pending   int    `json:"pending"`
	Active    int    `json:"active"`
	Scheduled int    `json:"scheduled"`
	Retry     int    `json:"retry"`
	Archived  int    `json:"archived"`
	Completed int    `json:"completed"`
	// LatencySeconds is the age of the oldest pending task.
	LatencySeconds float64 `json:"latency_seconds"`
	Paused         bool    `json:"paused"`
	// ProcessedTotal and FailedTotal are asynq's cumulative counts of
	// finished handler runs, failed runs included (QueueCountsNote).
	ProcessedTotal int64 `json:"processed_total"`
	FailedTotal    int64 `json:"failed_total"`
	// OutcomesReceived, on the results queue's row only, is how many trial
	// outcomes the scheduler received, whichever way they came.
	OutcomesReceived *int64 `json:"outcomes_received_total,omitempty"`
}

// QueueCountsNote explains the queue counters (`amkctl queues` prints it
// under the table): the results queue's PROCESSED is not the number of
// outcomes received, because most outcomes never pass through it.
const QueueCountsNote = `RECEIVED is the number of trial outcomes the scheduler received. Most arrive at once on a
fast path (a Redis message) and their copy on the results queue is deleted unread, so results
PROCESSED counts only the outcomes that came the slow way (while the scheduler was away, or
when the fast path missed them): it is normally far below RECEIVED, and nothing is lost.
PROCESSED and FAILED on trials:<target> count finished runs, failed runs included: a retried
infrastructure failure, a lost worker or an interrupted run counts once per attempt, so
PROCESSED minus FAILED there is the number of outcomes the workers published.`

// Worker is a live worker (GET /v1/workers, amkctl workers): the record a
// worker announces itself with in the worker registry, passed through as
// it is.
type Worker struct {
	ID        string    `json:"id"`
	Target    string    `json:"target"`
	Device    string    `json:"device"`
	Identity  string    `json:"identity"`
	Queue     string    `json:"queue"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// Current is the trial being evaluated (campaign/trial), if any.
	Current      string     `json:"current,omitempty"`
	CurrentSince *time.Time `json:"current_since,omitempty"`
	// Trials counts evaluations this worker finished.
	Trials int64 `json:"trials"`
	// MemoryBytes is the host memory the worker may use at most (its
	// cgroup limit, MemTotal or max_memory), for the scheduler's check that
	// some worker can hold a new campaign's model; 0 when unknown.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// MetricsAddr is where the worker serves /metrics (host:port), for
	// Prometheus service discovery through the scheduler.
	MetricsAddr string `json:"metrics_addr,omitempty"`
}

// Health answers GET /healthz.
type Health struct {
	Status    string `json:"status"`
	Campaigns int    `json:"campaigns"`
}
