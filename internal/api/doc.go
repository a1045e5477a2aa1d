// Package api is the scheduler's HTTP JSON API, a front of the control
// plane: the server carries the operations of a control.Service (the
// scheduler's fleet, with its control.Fleet) over HTTP, and the Client is a
// control.Service and control.Fleet across the network, what `amkctl
// --server` and the MCP server's remote mode use. Requests, their checks
// and their events are control's; this package only decodes, routes,
// authorises and maps control's kinds of errors to statuses (and back, in
// the client).
//
// # Endpoints
//
//	GET  /healthz                        {"status": "ok", "campaigns": N} or 503
//	GET  /metrics                        Prometheus exposition (internal/metrics)
//	GET  /v1/campaigns                   [status, ...] of every campaign
//	POST /v1/campaigns                   create (CreateRequest) -> CreateResponse
//	GET  /v1/campaigns/{id}              status JSON (campaign.StatusReport); ?format=text
//	GET  /v1/campaigns/{id}/next         continue/stop (campaign.NextReport); ?format=text
//	GET  /v1/campaigns/{id}/report       wake-up report JSON; ?format=md, ?format=aggregate
//	POST /v1/campaigns/{id}/report       write report.{json,md,svg} and aggregate_report.md
//	GET  /v1/campaigns/{id}/trials/{n}   one trial: spec in flight, outcome once finished (control.TrialReport)
//	POST /v1/campaigns/{id}/record       an agent's experiment (RecordRequest), 201
//	POST /v1/campaigns/{id}/pause        optional body {"note": "..."}
//	POST /v1/campaigns/{id}/resume       optional body {"note": "..."}
//	POST /v1/campaigns/{id}/stop         optional body {"note": "..."}
//	POST /v1/campaigns/{id}/reopen       optional body {"note", "budget", "move_on"}
//	POST /v1/campaigns/{id}/note         {"note": "..."}: an operator's note, kept in the ledger and reports
//	PUT  /v1/campaigns/{id}/budget       {"iterations": N, "minutes": M} (0 = unbounded)
//	PUT  /v1/campaigns/{id}/criteria     move-on overrides (MoveOn)
//	GET  /v1/workers                     live workers
//	GET  /v1/queues                      queue depths, latency, processed/failed
//
// # Rules
//
// Every POST and PUT needs "Authorization: Bearer <token>" (compared in
// constant time); GETs are open, so the server binds to loopback by default.
// Errors are JSON, {"error": "...", "code": "..."}, with the status; the
// codes bad_value, not_found, conflict, unsupported and unavailable are
// control's kinds of errors (the client's *Error unwraps to them):
//
//	400 malformed_json   the body is not one JSON object, or repeats a key
//	                     (also one differing only in case)
//	400 unknown_field    a field the endpoint does not know (typos never pass)
//	400 bad_value        a field with a refused value (also a refused record)
//	401 unauthorized     missing or wrong token
//	404 not_found        unknown campaign or endpoint
//	405 method_not_allowed
//	409 conflict         the campaign's state refuses the command (pause a
//	                     paused campaign, record into a done one)
//	413 too_large        body over 1 MiB
//	415 unsupported_media_type  a Content-Type other than application/json
//	501 unsupported      e.g. workers of an in-process transport
//	503 unavailable      the campaign's driver did not answer in time
//
// Creating a campaign that exists is not a conflict: POST /v1/campaigns is
// "start or resume", like `amkctl autoresearch` on an existing campaign. It
// answers 200 with created=false and the campaign as it is (the request's
// settings are ignored; change a budget with PUT .../budget, or reopen a
// done campaign), and 201 with created=true for a new one.
package api
