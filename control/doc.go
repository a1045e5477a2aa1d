// Package control is amk's control plane: every campaign operation, once,
// behind one interface, Service — create, list, status, next, report (and
// writing it), record, and the operator commands (pause, resume, stop,
// reopen, budget, criteria, note) — with the request types, their checks,
// their translation into campaign events and the kinds of service errors
// (errors.go). Fleet is the small extension only a fleet of workers has
// (workers, queues, health). ExportAMKFiles (amkfiles.go) writes one
// campaign of a workspace here under the reference's (AMK's) file names.
//
// # Implementations
//
// Campaigns implements Service over a Backend, the seam between the
// operations and where campaigns live:
//
//   - Local is a workspace on this machine, with the runs this process
//     drives;
//   - internal/scheduler's Fleet drives every campaign of a workspace over
//     a transport of workers, and serves its Campaigns to the HTTP API;
//   - internal/api's Client implements Service (and Fleet) across the
//     network, so `amkctl --server` needs no second implementation.
//
// The fronts are adapters: amkctl's verbs, the HTTP server
// (internal/api), the MCP server (internal/mcpserver) and the web view
// (internal/web) take a Service and carry its requests and answers. The
// suite in control/controltest holds every implementation to the same
// behaviour.
//
// # Health
//
// health.go judges, once for every front, what is wrong with a campaign
// where it lives: nothing drives it, no live worker serves its target, its
// driver is stalled, a trial is stuck. Each is a campaign.Alert with what
// to do, in every status report (with the last event's time); a campaign
// nothing drives is reported at its last event, so its elapsed time stops.
// Backends say who drives a campaign (Drivers); a fleet's workers come
// from Fleet.
//
// # One create-and-run path
//
// A campaign runs on this machine or in a fleet by the same path:
// Local.StartRun (or OpenRun, for one that exists) opens or creates it
// under its lock and readies its driver on a dispatch.Dispatcher; Run.Drive
// drives it. amkctl autoresearch and loop and the MCP server's loop and
// autoresearch tools let StartRun evaluate in process (DeviceEvaluator:
// on a GPU under the watchdog); the scheduler passes its Redis transport
// and restarts a drive that fails. While a run is open every event for its
// campaign from the process goes through it.
//
// # Adding an operation
//
// The note command is the template. An operator command (an event on one
// campaign) is:
//
//  1. its case in the campaign's state machine (campaign/command.go) and a
//     campaign.Op* constant;
//  2. one line in Commands (requests.go): what it takes and whether a
//     refusal is a conflict with the campaign's state — Campaigns.Command
//     checks, translates and applies it for every implementation;
//  3. one line per front: a route in internal/api's server
//     ("/v1/campaigns/{id}/note": {"POST": s.command(campaign.OpNote)}),
//     the client needs none (Client.Command posts to the op's path); a tool
//     in internal/mcpserver (addTool(s, "note", ..., s.command(campaign.OpNote)));
//     a verb in cmd/amkctl (addVerb(...)); the web view shows what the
//     reports show;
//  4. a case in controltest's suite, which then runs on the workspace,
//     the fleet and the scheduler across HTTP.
//
// An operation of another shape (a query, a request of its own) is a
// method of Service, implemented once in Campaigns and once in the
// client, with the same front lines and a case in the suite.
package control
