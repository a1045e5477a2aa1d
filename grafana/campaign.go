package grafana

// campaignSel selects the chosen campaigns' series.
const campaignSel = `campaign=~"$campaign", target=~"$target"`

// latencySel selects the chosen campaigns' latency series of the chosen
// latency kinds. Every latency query keeps the latency_kind label and every
// legend shows it, so a predicted figure (the cost model, a CPU worker) is
// never plotted as a measured one (a CUDA worker) under one name.
const latencySel = campaignSel + `, latency_kind=~"$latency_kind"`

// kindNote ends the description of every panel that shows a latency.
const kindNote = " Each series names its latency kind: predicted (amk's cost model, on a CPU worker) or measured-gpu (timed on the GPU); the two are never compared."

// CampaignRoofline is the "Campaign roofline progress" dashboard: how close
// each campaign is to the roofline — the streamed-bytes floor — and how fast
// it is improving; the all-weights floor is shown beside it, named. Every
// latency series carries its kind (latencySel).
func CampaignRoofline() Dashboard {
	vars := []Variable{
		queryVariable("campaign", "Campaign", "Campaigns the scheduler exports.",
			"amk_scheduler_campaign_status"),
		queryVariable("target", "GPU target", "GPU targets of the chosen campaigns.",
			`amk_scheduler_campaign_status{campaign=~"$campaign"}`),
		queryVariable("latency_kind", "Latency kind", "predicted (amk's cost model) or measured-gpu (timed on a GPU).",
			`amk_scheduler_best_latency_seconds{campaign=~"$campaign"}`),
	}
	best := `min by (campaign, latency_kind) (amk_scheduler_best_latency_seconds{` + latencySel + `})`
	floor := `min by (campaign) (amk_scheduler_streamed_floor_seconds{` + campaignSel + `})`
	allWeights := `min by (campaign) (amk_scheduler_all_weights_floor_seconds{` + campaignSel + `})`
	pct := `min by (campaign, latency_kind) (amk_scheduler_best_roofline_percent{` + latencySel + `})`
	speedup := `max by (campaign, latency_kind) (amk_scheduler_speedup_ratio{` + latencySel + `})`
	since := `time() - max by (campaign) (amk_scheduler_last_improvement_timestamp_seconds{` + campaignSel + `})`

	pctThresholds := []Step{from(150, "yellow"), from(300, "orange"), from(1000, "red")}
	sinceThresholds := []Step{from(3600, "yellow"), from(4*3600, "red")}

	headline := []Panel{
		stat("Status", "The campaign's state: optimizing, paused or done.", "", 3,
			instant(`max by (campaign, status) (amk_scheduler_campaign_status{`+campaignSel+`}) == 1`, "{{campaign}}: {{status}}")).
			withOption("textMode", "name").withOption("graphMode", "none").withThresholds("blue"),
		stat("Best latency", "Best correct latency found so far."+kindNote, "s", 3, instant(best, "{{campaign}} ({{latency_kind}})")).
			withThresholds("text"),
		stat("Streamed-bytes floor", "Bytes a step streams (weights once, KV window, gathered embedding rows) / HBM bandwidth: the roofline, no schedule can be faster.", "s", 3, instant(floor, "{{campaign}}")).
			withThresholds("text"),
		stat("All-weights floor", "Every weight byte (the whole embedding table included) / HBM bandwidth: a second, looser floor, not the roofline.", "s", 3, instant(allWeights, "{{campaign}}")).
			withThresholds("text"),
		stat("% of roofline", "Best latency / streamed-bytes floor × 100. 100 = at the floor; lower is better."+kindNote, "percent", 3,
			instant(pct, "{{campaign}} ({{latency_kind}})")).withThresholds("green", pctThresholds...).withDecimals(1),
		stat("Speedup", "Baseline (default schedule) latency / best latency."+kindNote, "suffix:×", 3,
			instant(speedup, "{{campaign}} ({{latency_kind}})")).withThresholds("text").withDecimals(2),
		stat("Experiments", "Experiments recorded (results.tsv rows).", "short", 3,
			instant(`max by (campaign) (amk_scheduler_experiments_total{`+campaignSel+`})`, "{{campaign}}")).
			withThresholds("text"),
		stat("Since last improvement", "Time since the best latency last improved (the campaign's start before the first).", "s", 3,
			instant(since, "{{campaign}}")).withThresholds("green", sinceThresholds...).withOption("graphMode", "none"),
	}

	progress := []Panel{
		timeseries("Best latency vs streamed-bytes floor",
			"The best latency steps down as the search keeps faster schedules; the red dashed line is the streamed-bytes floor it cannot pass, the dotted one the all-weights floor (every weight byte)."+kindNote,
			"s", 16, 10, series(best, "{{campaign}} best ({{latency_kind}})"), series(floor, "{{campaign}} streamed-bytes floor"),
			series(allWeights, "{{campaign}} all-weights floor")).
			withCustom("lineInterpolation", "stepAfter").
			withOverride(".* streamed-bytes floor$",
				Property{ID: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
				Property{ID: "custom.fillOpacity", Value: 0},
				Property{ID: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}}).
			withOverride(".* all-weights floor$",
				Property{ID: "custom.lineStyle", Value: map[string]any{"fill": "dot", "dash": []int{0, 10}}},
				Property{ID: "custom.fillOpacity", Value: 0},
				Property{ID: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "text"}}),
		timeseries("% of roofline", "Best latency / streamed-bytes floor × 100; 100 = at the floor."+kindNote, "percent", 8, 10,
			series(pct, "{{campaign}} ({{latency_kind}})")).
			withCustom("lineInterpolation", "stepAfter").withCustom("axisSoftMin", 100).
			withThresholds("green", pctThresholds...),
	}

	activity := []Panel{
		timeseries("Trials per hour by outcome",
			"Experiments recorded per hour, by results.tsv tag (kept, tried, revert, rejected, failed, crash, timeout).",
			"short", 12, 8,
			series(`sum by (outcome) (rate(amk_scheduler_trials_total{`+campaignSel+`}[$__rate_interval])) * 3600`, "{{outcome}}")).
			withCustom("drawStyle", "bars").withCustom("fillOpacity", 80).
			withCustom("stacking", map[string]any{"mode": "normal", "group": "A"}),
		timeseries("Speedup vs baseline", "Baseline latency / best latency."+kindNote, "suffix:×", 12, 8,
			series(speedup, "{{campaign}} ({{latency_kind}})")).withCustom("lineInterpolation", "stepAfter"),
	}

	detail := []Panel{
		bargauge("Trials in range by outcome", "Experiments recorded in the dashboard's time range, by tag.", "short", 8, 8,
			instant(`sum by (outcome) (increase(amk_scheduler_trials_total{`+campaignSel+`}[$__range]))`, "{{outcome}}")).
			withDecimals(0),
		timeseries("Time since last improvement", "Grows while the search is on a plateau; drops to zero on every improvement.", "s", 8, 8,
			series(since, "{{campaign}}")).withThresholds("green", sinceThresholds...),
		timeseries("Search activity", "Trials in flight and the plateau counter (consecutive non-improvements).", "short", 8, 8,
			series(`sum by (campaign) (amk_scheduler_inflight_trials{`+campaignSel+`})`, "{{campaign}} in flight"),
			series(`max by (campaign) (amk_scheduler_consecutive_reverts{`+campaignSel+`})`, "{{campaign}} consecutive reverts")).
			withCustom("lineInterpolation", "stepAfter").withDecimals(0),
	}

	workload := []Panel{
		stat("Workload", "What the campaign tunes for: prompt length(s), tokens generated after each, batch. A trial's latency is the workload's mean time per decode step.", "", 8,
			instant(`max by (campaign, workload) (amk_scheduler_campaign_workload_info{`+campaignSel+`}) == 1`, "{{campaign}}: {{workload}}")).
			withOption("textMode", "name").withOption("graphMode", "none").withThresholds("blue"),
		bargauge("Time per decode step by KV length",
			"The baseline's (default schedule), the best's and the streamed-bytes floor's time per decode step at each KV length the workload is evaluated at: where a schedule gains or loses as the context grows.",
			"s", 16, 8,
			instant(`max by (campaign, series, kv_len) (amk_scheduler_step_latency_seconds{`+campaignSel+`})`, "{{campaign}} {{series}} at KV length {{kv_len}}")).
			withThresholds("text"),
	}

	return newDashboard("amk-campaign-roofline", "Campaign roofline progress",
		"How close each amk campaign is to its roofline (the streamed-bytes floor) and how fast it is improving.",
		vars, headline, progress, activity, detail, workload)
}
