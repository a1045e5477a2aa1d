// Package grafana owns amk's Grafana dashboards and their provisioning.
//
// The dashboards are defined in Go (campaign.go, fleet.go) and committed as
// JSON under dashboards/, which is what Grafana loads: the provisioning files
// under provisioning/ declare the Prometheus datasource (uid
// DatasourceUID) and a file provider that reads the dashboards directory.
// After changing a definition, regenerate the JSON with
//
//	go test ./grafana -run TestDashboardFiles -update
//
// and commit both; TestDashboardFiles fails while the committed JSON and the
// Go definitions disagree.
//
// Two dashboards:
//
//   - "Campaign roofline progress" (uid amk-campaign-roofline): per campaign,
//     the best latency over time against the streamed-bytes floor (the
//     roofline; the all-weights floor beside it, named as such; every latency
//     series named predicted or measured-gpu, variable latency_kind), the
//     percentage of that floor (100 = at the floor, lower is better), the
//     speedup over the
//     baseline, trials per hour by results.tsv tag, and the time since the
//     last improvement. Variables: campaign, target, latency_kind.
//   - "Fleet" (uid amk-fleet): the workers and their state (busy, idle,
//     down), per-device utilisation, trial-duration percentiles by pipeline
//     stage, queue depth and latency, failures by class. Variable: target.
//
// Every panel and every query names the Prometheus datasource by uid. The
// queries are written against the metric catalog of internal/metrics and the
// job names of deploy/prometheus.yml ("scheduler", "gpuworker"; worker
// targets carry a "profile" label, gpu or cpu, so that the workers of the
// compose profile that is not running do not show as down).
//
// Load reads the committed dashboards back; Queries lists every PromQL
// expression of a dashboard and Expand substitutes Grafana's variables, so
// a test can run each expression against a real Prometheus
// (deploy/deploytest).
package grafana
