// Package chart is amk's one plotting path: a small model of line charts
// (Chart, Line) drawn by gonum.org/v1/plot to SVG or PNG, one chart or a
// grid of them under a title.
//
// Trajectory makes a campaign's progress chart (best latency against the
// streamed-bytes floor, experiment by experiment) from its wake-up report;
// ContextLatency a workload campaign's time per decode step against the KV
// length (baseline, best, floor) and ReportSVG both side by side. The report
// (runner: report.svg), the web view (internal/web) and the docs picture
// (deploy/deploytest, from Prometheus range queries) all draw with them.
package chart
