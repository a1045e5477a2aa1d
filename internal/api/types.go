package api

import (
	"encoding/json"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// CreateRequest is the body of POST /v1/campaigns. Model and GPU are
// required; everything else has the defaults of `amkctl autoresearch`.
type CreateRequest struct {
	// Model is a preset name or a path to a HuggingFace config.json (or its
	// directory) relative to the scheduler's models directory (models_dir).
	Model string `json:"model"`
	GPU   string `json:"gpu"`
	// Device is "cpu" (predicted latencies, the default) or "cuda".
	Device schedule.Device `json:"device,omitempty"`
	// Name distinguishes campaigns on one model, GPU and device.
	Name    string `json:"name,omitempty"`
	Weights string `json:"weights,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	// Cold ignores the flywheel prior (no warm start, no ranking).
	Cold bool `json:"cold,omitempty"`
	// Overnight never stops on a plateau and basin-hops after
	// RestartAfter consecutive non-improvements.
	Overnight     bool     `json:"overnight,omitempty"`
	RestartAfter  *int     `json:"restart_after,omitempty"`
	Epsilon       *float64 `json:"epsilon,omitempty"`
	Explore       *float64 `json:"explore_fraction,omitempty"`
	MinGain       *float64 `json:"min_gain,omitempty"`
	TrialTimeoutS *float64 `json:"trial_timeout_s,omitempty"`
	// Batch is the decode batch every trial lowers and checks (B > 1:
	// GEMM tiles; CPU evaluation only): the workload's batch.
	Batch *int `json:"batch,omitempty"`
	// Workload is what the campaign tunes for (default: a 512-token
	// prompt, 128 generated tokens, batch 1; Batch, when set, is its
	// batch). A campaign for another workload than the default without a
	// Name is named after it (trial.Workload.Name), so it is a campaign of
	// its own.
	Workload *trial.Workload `json:"workload,omitempty"`
	// Budget bounds the whole campaign (0 = unbounded).
	Budget *campaign.Budget `json:"budget,omitempty"`
	// MoveOn overrides some of the move-on criteria.
	MoveOn *MoveOn `json:"move_on,omitempty"`
	// Workers is the most trials the campaign keeps in flight (default:
	// the scheduler's).
	Workers int `json:"workers,omitempty"`
}

// MoveOn overrides move-on thresholds; a field left out keeps its value
// (0 disables a criterion).
type MoveOn struct {
	ConsecutiveReverts *int     `json:"consecutive_reverts,omitempty"`
	PctRooflineTarget  *float64 `json:"pct_roofline_target,omitempty"`
	MaxMinutes         *float64 `json:"max_minutes,omitempty"`
	SpeedupTarget      *float64 `json:"speedup_target,omitempty"`
}

// Over returns base with the overrides applied.
func (m *MoveOn) Over(base campaign.MoveOn) campaign.MoveOn {
	if m == nil {
		return base
	}
	if m.ConsecutiveReverts != nil {
		base.ConsecutiveReverts = *m.ConsecutiveReverts
	}
	if m.PctRooflineTarget != nil {
		base.PctRooflineTarget = *m.PctRooflineTarget
	}
	if m.MaxMinutes != nil {
		base.MaxMinutes = *m.MaxMinutes
	}
	if m.SpeedupTarget != nil {
		base.SpeedupTarget = *m.SpeedupTarget
	}
	return base
}

// CreateResponse answers POST /v1/campaigns: 201 when the campaign was
// created, 200 when it already existed (it is returned as it is; the
// request's settings are ignored).
type CreateResponse struct {
	ID       string                `json:"id"`
	Created  bool                  `json:"created"`
	Workers  int                   `json:"workers"`
	Campaign campaign.StatusReport `json:"campaign"`
}

// CommandRequest is the optional body of pause, resume, stop and reopen.
// Budget and MoveOn are only accepted by reopen (replacing the budget and
// criteria that ended the campaign).
type CommandRequest struct {
	Note   string           `json:"note,omitempty"`
	Budget *campaign.Budget `json:"budget,omitempty"`
	MoveOn *MoveOn          `json:"move_on,omitempty"`
}

// CommandResponse answers a command: the campaign's log lines and its
// status afterwards.
type CommandResponse struct {
	ID       string                `json:"id"`
	Log      []string              `json:"log"`
	Campaign campaign.StatusReport `json:"campaign"`
}

// RecordRequest is the body of POST /v1/campaigns/{id}/record: an outside
// agent's own experiment, with the fields of `amkctl record`.
type RecordRequest struct {
	// Status is kept, revert, tried, failed, crash, timeout, rejected or
	// baseline (and the reference's synonyms).
	Status        string            `json:"status"`
	Correctness   string            `json:"correctness,omitempty"`
	LatencyUS     *float64          `json:"latency_us,omitempty"`
	PctOfRoofline *float64          `json:"pct_of_roofline,omitempty"`
	BoundUS       *float64          `json:"bound_us,omitempty"`
	Kind          trial.LatencyKind `json:"kind,omitempty"`
	// Config is the schedule config JSON the experiment used.
	Config      json.RawMessage    `json:"config,omitempty"`
	ScheduleID  string             `json:"schedule_id,omitempty"`
	Description string             `json:"description,omitempty"`
	Source      string             `json:"source,omitempty"`
	Regions     map[string]float64 `json:"regions,omitempty"`
}

// RecordResponse answers a record: the results.tsv rows written.
type RecordResponse struct {
	ID       string                `json:"id"`
	Rows     []flywheel.Row        `json:"rows"`
	Log      []string              `json:"log"`
	Campaign campaign.StatusReport `json:"campaign"`
}

// ReportFiles answers POST /v1/campaigns/{id}/report: the files written in
// the campaign's directory on the scheduler's machine.
type ReportFiles struct {
	ID    string   `json:"id"`
	Dir   string   `json:"dir"`
	Files []string `json:"files"`
}

// Queue is one queue of the transport (GET /v1/queues).
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
}

// QueueCountsNote explains why a trials queue can show more processed
// tasks than the results queue (`amkctl queues` prints it under the table).
const QueueCountsNote = `PROCESSED and FAILED count finished runs (asynq's cumulative counters), failed runs included.
A trial runs once per attempt: a retried infrastructure failure, a lost worker or an
interrupted run counts again on trials:<target> (and in its FAILED), while the trial's
outcome is one message on results (a second copy collapses into the first). So
trials:<target> PROCESSED minus FAILED is the number of outcomes published, and results
PROCESSED the number the scheduler received; the surplus on a trials queue is retried attempts.`

// Worker is a live worker (GET /v1/workers): the record a worker announces
// itself with in the worker registry (internal/redisq's WorkerInfo is this
// type), passed through as it is.
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

// SDGroup is one target group of Prometheus's HTTP service discovery
// (GET /v1/sd/workers): a worker's metrics address and its labels.
type SDGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Health answers GET /healthz.
type Health struct {
	Status    string `json:"status"`
	Campaigns int    `json:"campaigns"`
}
