package metrics

// LabelLatencyKind is the label of the scheduler's latency series (the best
// latency, its percentage of the floor, the speedup): predicted (the cost
// model) or measured-gpu, so that the two are never plotted as one figure.
const LabelLatencyKind = "latency_kind"

// Scheduler metric names (labels campaign, model, target).
const (
	SchedulerBestLatency = "amk_scheduler_best_latency_seconds"
	// SchedulerStreamedFloor is the roofline floor (bound_us): the bytes a
	// decode step streams at the HBM bandwidth; SchedulerAllWeightsFloor the
	// seed's floor (every weight byte), a second figure.
	SchedulerStreamedFloor      = "amk_scheduler_streamed_floor_seconds"
	SchedulerAllWeightsFloor    = "amk_scheduler_all_weights_floor_seconds"
	SchedulerBestRoofline       = "amk_scheduler_best_roofline_percent"
	SchedulerSpeedup            = "amk_scheduler_speedup_ratio"
	SchedulerTrials             = "amk_scheduler_trials_total"
	SchedulerExperiments        = "amk_scheduler_experiments_total"
	SchedulerConsecutiveReverts = "amk_scheduler_consecutive_reverts"
	SchedulerInFlight           = "amk_scheduler_inflight_trials"
	SchedulerCampaignStatus     = "amk_scheduler_campaign_status"
	SchedulerLastImprovement    = "amk_scheduler_last_improvement_timestamp_seconds"
	// SchedulerStepLatency is a campaign's time per decode step at each
	// KV length its workload is evaluated at (labels series: baseline,
	// best, floor; kv_len); SchedulerWorkload names the workload the
	// campaign tunes for (label workload, value 1).
	SchedulerStepLatency = "amk_scheduler_step_latency_seconds"
	SchedulerWorkload    = "amk_scheduler_campaign_workload_info"
	// SchedulerCampaignAlert is 1 for each alert a campaign has (label
	// kind: campaign.AlertKinds), 0 for the others.
	SchedulerCampaignAlert = "amk_scheduler_campaign_alert"
	// Fleet-wide (no campaign label): refused outcomes (label reason),
	// trials taken back from lost workers, outcomes no longer held.
	SchedulerOutcomesRejected = "amk_scheduler_outcomes_rejected_total"
	SchedulerLostWorkers      = "amk_scheduler_lost_workers_total"
	// Outcomes the scheduler stopped holding for campaigns it does not
	// drive (dispatch.MuxOptions).
	SchedulerOutcomesUnheld = "amk_scheduler_outcomes_unheld_total"
)

// Queue metric names (label queue).
const (
	QueueDepth     = "amk_queue_depth_tasks"
	QueueActive    = "amk_queue_active_tasks"
	QueueLatency   = "amk_queue_latency_seconds"
	QueueProcessed = "amk_queue_processed_total"
	QueueFailed    = "amk_queue_failed_total"
)

// Worker metric names (labels target, device).
const (
	WorkerTrials        = "amk_worker_trials_total"
	WorkerStageDuration = "amk_worker_stage_duration_seconds"
	WorkerTrialDuration = "amk_worker_trial_duration_seconds"
	WorkerBusy          = "amk_worker_busy"
	WorkerInfo          = "amk_worker_info"
	WorkerWatchdogKills = "amk_worker_watchdog_kills_total"
	WorkerInfraErrors   = "amk_worker_infra_errors_total"
)

// SchedulerNames lists the scheduler's metric names.
func SchedulerNames() []string {
	return []string{SchedulerBestLatency, SchedulerStreamedFloor, SchedulerAllWeightsFloor, SchedulerBestRoofline, SchedulerSpeedup,
		SchedulerTrials, SchedulerExperiments, SchedulerConsecutiveReverts, SchedulerInFlight,
		SchedulerCampaignStatus, SchedulerLastImprovement, SchedulerStepLatency, SchedulerWorkload, SchedulerCampaignAlert, SchedulerOutcomesRejected, SchedulerLostWorkers,
		SchedulerOutcomesUnheld}
}

// QueueNames lists the queue metric names.
func QueueNames() []string {
	return []string{QueueDepth, QueueActive, QueueLatency, QueueProcessed, QueueFailed}
}

// WorkerNames lists the worker's metric names.
func WorkerNames() []string {
	return []string{WorkerTrials, WorkerStageDuration, WorkerTrialDuration, WorkerBusy, WorkerInfo,
		WorkerWatchdogKills, WorkerInfraErrors}
}
