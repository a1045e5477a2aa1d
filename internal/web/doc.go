// Package web is amk's web view: server-rendered HTML pages that show the
// campaigns of a scheduler or of a local workspace, and let an operator who
// holds the API token pause, resume or stop them.
//
// # Pages
//
//	GET  /ui/                        campaigns (status, best against the streamed-bytes floor), workers, queues
//	GET  /ui/live                    the live part of that page, an HTML fragment
//	GET  /ui/c/{id}                  one campaign: its progress chart and results table
//	GET  /ui/c/{id}/live             the live part of that page
//	GET  /ui/c/{id}/chart.svg        best latency against the streamed-bytes floor over the experiments
//	POST /ui/c/{id}/{pause|resume|stop}
//	GET  /ui/assets/...              the stylesheet and the polling script (embedded)
//
// The pages poll their live fragment every two seconds (a small embedded
// script; nothing is loaded from outside the server, the pages work on a
// machine with no network). Reading needs nothing; the three actions need
// the token, sent in the form's password field or as "Authorization:
// Bearer <token>", never in a URL. A wrong or missing token answers 401
// and changes nothing.
//
// Site puts the pages, the JSON API (internal/api) and an optional queue
// monitor (the asynq web UI, hibiken/asynqmon, which internal/scheduler
// builds over its Redis connection) under one handler: "/" redirects to
// /ui/.
//
// The pages are a front of the control plane: they show and steer a
// control.Service (the Campaigns of a workspace on this machine for amkctl
// dashboard, of the scheduler's fleet for the scheduler) and, with a
// fleet, its control.Fleet (workers, queues).
//
// The README's picture, docs/web-view.png, is the screenshot the browser
// test takes of a live campaign page in Debian's headless chromium:
// `make web-view` runs that test with -web.screenshot to write it.
package web
