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
// The package also holds what the local side shares with the scheduler:
// StartEvent (a create request made into a campaign's first event) and
// WriteReports (the report files of a campaign).
package control
