// Package metrics defines amk's Prometheus metrics: the collectors of the
// scheduler (per campaign), of the trial queues and of a gpuworker. Every
// constructor takes the registry to register on; nothing touches the global
// default registry.
//
// # Catalog
//
// Names follow amk_<subsystem>_<name>_<unit>; counters end in _total. Labels
// are small and bounded (campaign, model, target, device, outcome, stage,
// status, queue, series, kv_len: a workload's few evaluated KV lengths, workload), never a trial id. Dashboards and alert rules are written
// against exactly these names (the exported constants below):
//
//	scheduler, labels campaign, model, target (one series set per campaign);
//	the three latency series also carry latency_kind (predicted: amk's cost
//	model; measured-gpu: timed on a GPU), so the two never share a series:
//	  amk_scheduler_best_latency_seconds{latency_kind}  gauge   best correct latency
//	  amk_scheduler_streamed_floor_seconds              gauge   the roofline floor, bound_us: the bytes a step streams
//	                                                            (weights once, gathered embedding rows, KV window) / bandwidth
//	  amk_scheduler_all_weights_floor_seconds           gauge   the all-weights floor (every weight byte / bandwidth),
//	                                                            a second figure, never the roofline
//	  amk_scheduler_best_roofline_percent{latency_kind} gauge   best latency / streamed floor x 100 (100 = at the floor)
//	  amk_scheduler_speedup_ratio{latency_kind}         gauge   baseline / best
//	  amk_scheduler_trials_total{outcome}               counter experiments by results.tsv row tag
//	                                                            (kept, tried, revert, rejected, failed, crash, timeout)
//	  amk_scheduler_experiments_total                   counter experiments recorded (results.tsv rows)
//	  amk_scheduler_consecutive_reverts                 gauge   the plateau counter
//	  amk_scheduler_inflight_trials                     gauge   trials issued and not yet recorded
//	  amk_scheduler_campaign_status{status}             gauge   1 for the current status, 0 for the others
//	                                                            (optimizing, paused, done)
//	  amk_scheduler_last_improvement_timestamp_seconds  gauge   when the best last improved (unix time)
//	  amk_scheduler_step_latency_seconds{series,kv_len} gauge   time per decode step at each KV length the workload
//	                                                            is evaluated at (series baseline, best, floor)
//	  amk_scheduler_campaign_workload_info{workload}    gauge   1, naming the workload the campaign tunes for
//	  amk_scheduler_campaign_alert{kind}                gauge   1 for each alert the campaign has, 0 for the others
//	                                                            (no_driver, unserved, stalled, stuck_trials, queue_wait; control
//	                                                            judges them, amkctl status says what to do); a campaign
//	                                                            the scheduler does not drive is exported while it has one
//
//	scheduler, fleet-wide:
//	  amk_scheduler_outcomes_rejected_total{reason}     counter outcomes refused (missing_mac, bad_mac, malformed,
//	                                                            not_issued: another spec than the trial's)
//	  amk_scheduler_lost_workers_total                  counter trials taken back from silent workers and re-offered
//	  amk_scheduler_outcomes_unheld_total               counter outcomes no longer held for campaigns not driven here
//	                                                            (redelivered when the campaign resubmits the trial)
//
//	queues, label queue (trials:<target> and results, with the namespace prefix):
//	  amk_queue_depth_tasks      gauge   tasks waiting for a consumer (pending + scheduled + retry)
//	  amk_queue_active_tasks     gauge   tasks being processed
//	  amk_queue_latency_seconds  gauge   age of the oldest pending task
//	  amk_queue_processed_total  counter tasks processed (succeeded or failed), as counted by asynq
//	  amk_queue_failed_total     counter task attempts that failed, as counted by asynq
//
//	worker, labels target, device:
//	  amk_worker_trials_total{outcome}              counter trials published, by outcome
//	                                                        (ok, no_latency, rejected, incorrect, crash, timeout, infra)
//	  amk_worker_stage_duration_seconds{stage}      histogram per pipeline stage (parse, lower, validate,
//	                                                          reference_vm, timing; build on the GPU path)
//	  amk_worker_trial_duration_seconds             histogram whole evaluation wall time
//	  amk_worker_busy                               gauge   1 while an evaluation holds the device
//	  amk_worker_info{device_name, driver, version} gauge   constant 1
//	  amk_worker_watchdog_kills_total               counter evaluations the wall-clock watchdog cancelled
//	  amk_worker_infra_errors_total                 counter infrastructure failures (retried or final)
//	  amk_worker_specs_refused_total{reason}        counter trial payloads refused unevaluated (unsigned: no
//	                                                        valid fleet-secret MAC; misplaced: another trial's)
//
// # How values are collected
//
// The scheduler and queue collectors are pulled at scrape time: the
// scheduler's series are read from the campaigns' live state (the ledger),
// so they are current after every recorded outcome or command, and counters
// carry on across scheduler restarts because they come from the persisted
// counts; the queue series come from asynq's inspector. The worker's series
// are pushed by the gpuworker as it evaluates.
//
// amk_scheduler_last_improvement_timestamp_seconds is the campaign's start
// plus the campaign time of its last kept experiment; campaign time excludes
// paused time, so after a pause the value is earlier than the wall clock by
// the time spent paused. Before the first improvement it is the start time.
package metrics
