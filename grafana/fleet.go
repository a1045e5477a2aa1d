package grafana

// workerSel selects the chosen targets' worker series.
const workerSel = `target=~"$target"`

// workerDown is 0 for each worker target Prometheus cannot scrape, counting
// only the compose profile (gpu or cpu) of which some worker is up, so the
// workers of the profile that is not running never show as down.
const workerDown = `(up{job="gpuworker"} == 0) and on (profile) (max by (profile) (up{job="gpuworker"}) == 1)`

// Fleet is the "Fleet" dashboard: workers, devices, queues and failures.
func Fleet() Dashboard {
	vars := []Variable{
		queryVariable("target", "GPU target", "GPU targets the workers serve.", "amk_worker_info"),
	}
	utilisation := func(window string) string {
		return `avg by (instance, device) (avg_over_time(amk_worker_busy{` + workerSel + `}[` + window + `]))`
	}
	quantile := func(q string) string {
		return `histogram_quantile(` + q + `, sum by (le, stage) (rate(amk_worker_stage_duration_seconds_bucket{` +
			workerSel + `}[$__rate_interval])))`
	}
	hourly := func(metric, by string) string {
		return `sum` + by + ` (rate(` + metric + `[$__rate_interval])) * 3600`
	}

	headline := []Panel{
		stat("Workers up", "Workers Prometheus scrapes successfully.", "short", 4,
			instant(`count(amk_worker_info{`+workerSel+`})`, "")).withThresholds("red", from(1, "green")),
		stat("Workers busy", "Workers evaluating a trial now.", "short", 4,
			instant(`sum(amk_worker_busy{`+workerSel+`})`, "")).withThresholds("text"),
		stat("Workers down", "Worker targets of the running profile that do not answer.", "short", 4,
			instant(`count(`+workerDown+`) or vector(0)`, "")).withThresholds("green", from(1, "red")),
		stat("Campaigns optimizing", "Campaigns the scheduler is searching now.", "short", 4,
			instant(`count(amk_scheduler_campaign_status{status="optimizing"} == 1) or vector(0)`, "")).withThresholds("text"),
		stat("Trials in flight", "Trials issued by the scheduler and not yet recorded.", "short", 4,
			instant(`sum(amk_scheduler_inflight_trials)`, "")).withThresholds("text"),
		stat("Fleet trials per hour", "Trials the workers published per hour.", "short", 4,
			instant(hourly(`amk_worker_trials_total{`+workerSel+`}`, ""), "")).withThresholds("text").withDecimals(0),
	}

	workers := []Panel{
		stateTimeline("Worker state", "busy: evaluating; idle: waiting for a trial; down: not answering Prometheus.", 14, 8,
			series(`max by (instance) (1 + amk_worker_busy{`+workerSel+`}) or on (instance) max by (instance) (`+workerDown+`)`,
				"{{instance}}")).
			withValueText(map[string][2]string{"0": {"down", "red"}, "1": {"idle", "yellow"}, "2": {"busy", "green"}}),
		table("Workers", "One row per worker: its target, device, device name, driver and build.", 10, 8,
			[]string{"Time", "Value", "__name__", "job"},
			tableOf(`max by (instance, target, device, device_name, driver, version) (amk_worker_info{`+workerSel+`})`)),
	}

	utilisationRow := []Panel{
		timeseries("Device utilisation", "Fraction of time each device spends evaluating.", "percentunit", 16, 8,
			series(utilisation("$__rate_interval"), "{{instance}} ({{device}})")).withRange(new(float64(0)), new(float64(1))),
		bargauge("Utilisation over the range", "Fraction of the dashboard's time range each device spent evaluating.",
			"percentunit", 8, 8, instant(utilisation("$__range"), "{{instance}} ({{device}})")).
			withRange(new(float64(0)), new(float64(1))).withThresholds("red", from(0.5, "yellow"), from(0.8, "green")),
	}

	stages := []Panel{
		timeseries("Trial duration by stage (p50, p90, p99)",
			"Percentiles of each evaluation stage's wall time: parse, lower, validate, reference VM, build, timing.", "s", 16, 9,
			series(quantile("0.5"), "p50 {{stage}}"), series(quantile("0.9"), "p90 {{stage}}"),
			series(quantile("0.99"), "p99 {{stage}}")).withOption("legend", legend("table")),
		bargauge("Mean stage duration over the range", "Mean wall time of each stage in the dashboard's time range.", "s", 8, 9,
			instant(`sum by (stage) (increase(amk_worker_stage_duration_seconds_sum{`+workerSel+`}[$__range])) / `+
				`sum by (stage) (increase(amk_worker_stage_duration_seconds_count{`+workerSel+`}[$__range]))`, "{{stage}}")),
	}

	failures := []Panel{
		timeseries("Failures by class (per hour)",
			"Worker outcomes other than ok: rejected and incorrect verdicts, crash, timeout, infra; watchdog kills, infrastructure errors, outcomes the scheduler refused (missing or wrong fleet-secret MAC, or not answering the spec issued for their trial), trial payloads workers refused unevaluated (not signed by the scheduler, or another trial's), trials the scheduler took back from workers whose heartbeat stopped (killed, hung or cut off), and outcomes the scheduler stopped holding for campaigns it does not drive (delivered again when the campaign resubmits its trials).",
			"short", 12, 8,
			series(hourly(`amk_worker_trials_total{`+workerSel+`, outcome!~"ok|no_latency"}`, " by (outcome)"), "{{outcome}}"),
			series(hourly(`amk_worker_watchdog_kills_total{`+workerSel+`}`, ""), "watchdog kills"),
			series(hourly(`amk_worker_infra_errors_total{`+workerSel+`}`, ""), "infrastructure errors"),
			series(hourly(`amk_scheduler_outcomes_rejected_total`, " by (reason)"), "outcomes refused: {{reason}}"),
			series(hourly(`amk_worker_specs_refused_total{`+workerSel+`}`, " by (reason)"), "specs refused by workers: {{reason}}"),
			series(hourly(`amk_scheduler_lost_workers_total`, ""), "trials taken back from lost workers"),
			series(hourly(`amk_scheduler_outcomes_unheld_total`, ""), "outcomes no longer held for undriven campaigns")).
			withCustom("drawStyle", "bars").withCustom("fillOpacity", 80).
			withCustom("stacking", map[string]any{"mode": "normal", "group": "A"}),
		timeseries("Trials per hour by device", "Trials each worker published per hour.", "short", 12, 8,
			series(hourly(`amk_worker_trials_total{`+workerSel+`}`, " by (instance, device)"), "{{instance}} ({{device}})")),
	}

	queues := []Panel{
		timeseries("Queue depth", "Tasks waiting for a consumer (pending, scheduled, retry), per queue.", "short", 8, 8,
			series(`max by (queue) (max_over_time(amk_queue_depth_tasks[$__interval]))`, "{{queue}}")).withDecimals(0),
		timeseries("Queue latency", "Age of each queue's oldest pending task.", "s", 8, 8,
			series(`max by (queue) (max_over_time(amk_queue_latency_seconds[$__interval]))`, "{{queue}}")),
		timeseries("Queue throughput", "Tasks processed and failed attempts per second, per queue.", "short", 8, 8,
			series(`sum by (queue) (rate(amk_queue_processed_total[$__rate_interval]))`, "{{queue}} processed"),
			series(`sum by (queue) (rate(amk_queue_failed_total[$__rate_interval]))`, "{{queue}} failed")).
			withOverride(".* failed$", Property{ID: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}}),
	}

	health := []Panel{
		table("Campaigns with each alert", "How many campaigns have each alert now: no_driver (nothing drives it), unserved (no live worker serves its target), stalled (its driver writes nothing), stuck_trials (a trial in flight far too long), queue_wait (its trials wait in a queue that backs up). amkctl campaigns names them, amkctl status CAMPAIGN says what to do.",
			24, 6, []string{"Time", "__name__"},
			tableOf(`sum by (kind) (amk_scheduler_campaign_alert)`)),
	}

	return newDashboard("amk-fleet", "Fleet",
		"amk's workers and devices: who is busy, how long each evaluation stage takes, how the queues and failures look, which campaigns are in trouble.",
		vars, headline, workers, utilisationRow, stages, failures, queues, health)
}
