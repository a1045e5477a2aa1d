// Package control is what the campaign verbs of amkctl (status, next,
// report, record, campaigns, start, pause, resume, stop, reopen, budget) act
// on: one interface, Campaigns, with two sides.
//
//   - Local is a workspace on this machine: reads load a campaign's ledger
//     without its lock (so they work while a driver runs); changes open the
//     ledger under its lock and apply one event, and are refused while
//     another process (amkctl autoresearch, a scheduler) drives the campaign.
//   - Remote is a scheduler, through its HTTP API (internal/api.Client); the
//     scheduler applies the same events to the campaigns it drives.
//
// A verb is written once against Campaigns, and --server picks the side.
// The package also holds WriteReports (the report files of a campaign,
// shared with the scheduler).
//
// Runs on this machine start here too: Local.StartRun creates or resumes a
// campaign under its lock and readies a runner.Driver on in-process
// evaluators (DeviceEvaluator: on a GPU under the watchdog; seeded weights
// kept once per workspace in Local.WeightsDir). amkctl autoresearch and loop
// and the MCP server's loop and autoresearch tools all use it, so the same
// options make the same campaign from either; they keep only their own
// argument checks, messages and output.
package control
