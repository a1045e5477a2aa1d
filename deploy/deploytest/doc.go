// Package deploytest checks amk's deployment against real parts and holds
// the helpers those checks use.
//
// The tests (run by `make test`; each skips with a reason when its tool is
// not installed, and `make deps` installs redis-server and prometheus):
//
//   - compose_test.go: deploy/compose.yaml parsed with a YAML library
//     (docker has no engine on CI machines): services, images and build
//     contexts, Dockerfiles, every mounted file, volumes, ports, GPU device
//     reservations and profiles; `docker compose config` as well when a
//     compose tool is installed.
//   - promtool_test.go: promtool check config on deploy/prometheus.yml,
//     check rules on deploy/alerts.yml, test rules on deploy/alerts_test.yml,
//     and every dashboard expression through promtool's PromQL parser.
//   - dashboards_test.go, the dashboard test: a real Prometheus (the OS
//     binary) on a free loopback port scrapes a real scheduler and two real
//     CPU gpuworkers (built from ./cmd/scheduler and ./cmd/gpuworker, over a
//     real redis-server from internal/redistest) while they run a short
//     campaign; then every PromQL expression of every panel of every
//     dashboard under grafana/dashboards (Grafana's variables substituted:
//     $campaign and $target from their own label_values queries,
//     $__rate_interval, $__interval, $__range) must return at least one
//     series, every metric a dashboard or alert rule names must have been
//     scraped, and every alert rule must evaluate without error. A metric
//     renamed in code therefore fails the test.
//   - fleet_faults_test.go, recovery_test.go, sentinel_test.go: the real
//     scheduler and gpuworkers through a worker SIGKILL, Redis restarts and
//     a Sentinel failover (primary, replica and three redis-sentinel
//     processes); nothing lost, nothing recorded twice; recovery times are
//     logged for docs/results/fleet-faults.md.
//   - two_workers_test.go: two gpuworkers with default flags on one host
//     both start, serve distinct metrics addresses, and a real Prometheus
//     scrapes both through the scheduler's service discovery.
//
// The dashboard test also renders the "Campaign roofline progress" panels
// from the same query results to a PNG (package chart, amk's one plotting
// path). The picture in docs/ comes from a longer run of the same test:
//
//	go test ./deploy/deploytest -run TestDashboards -timeout 10m -args \
//	  -dashtest.model small -dashtest.run 75s -dashtest.png "$PWD/docs/roofline-progress.png"
//
// Helpers: StartPrometheus runs the prometheus binary with a given
// configuration and Prometheus queries its HTTP API; ScrapeConfig derives a
// test configuration from deploy/prometheus.yml (same jobs and labels, the
// test's addresses, 1 s scrapes).
package deploytest
