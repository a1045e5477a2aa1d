// Package mcpserver serves amk's loops to coding agents over the Model
// Context Protocol (MCP), with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): the tools of docs/spec/loop.md's loop
// contract and read-only resources of a campaign's reports. amkctl mcp wires
// it to stdio or to streamable HTTP on loopback.
//
// # Tools
//
// Every tool takes a JSON object whose schema is inferred from the input
// type of its handler (tools.go), except eval's, whose schedule and config
// arguments have the schedule config's JSON Schema (schedule.ConfigSchema,
// also the resource amk://schema/schedule_config.json; the server decodes
// eval's arguments itself, so a knob value the schema refuses is a
// valid=false verdict, not a refusal). eval's config and propose's
// incumbent are read as amkctl reads a --schedule file
// (schedule.ReadUserConfig): a key amk does not know is a tool error naming
// the key probably meant unless the call sets ignore_unknown_keys (amkctl's
// --ignore-unknown-keys), and propose's whole answer stands for its
// schedule_config. Each tool answers with the same JSON the
// matching amkctl verb prints, as structured content and as text. The
// reference system's names (referenceNames: amk_eval, amk_orchestrate_status,
// ...) are served too, by the same handlers, which take the reference's
// argument names (config, pct_roofline, device auto) as well:
//
//   - doctor: is this machine ready (the checks of amkctl doctor);
//   - propose: the edit surface (incumbent config, its id, the search space);
//   - eval: one verdict for one schedule config, with "ok" true iff valid
//     and correct (amkctl eval's exit code as a boolean);
//   - loop: docs/spec/loop.md's keep/revert loop of "budget" trials, waited for, with
//     progress notifications (the autoresearch engine on the local
//     workspace; on a scheduler the campaign is created there and watched);
//   - tune_instruction: Loop 1 on the local GPU (a cuda build only);
//   - autoresearch: creates or resumes a campaign and runs it in the
//     background; answers at once with the campaign id;
//   - cancel: ends this server's run of a campaign, background or loop (its
//     experiments stay; the next autoresearch or loop resumes it); on a
//     scheduler, pauses it;
//   - status, next, report, record, note, campaigns: the orchestrator,
//     through a control.Service, so they act on a local workspace or, with
//     Options.Campaigns a scheduler's api.Client, on a scheduler; note keeps
//     an operator's note in the campaign's ledger and reports;
//   - pause, resume, stop, reopen, budget, criteria: the operator commands
//     of amkctl's verbs and the HTTP API, each a control.Service Command
//     (control.Commands says what each takes); on a campaign this server
//     runs in the background they reach its driver (stop ends the run).
//
// # Honesty and failure
//
// Answers carry the verdicts and reports of the packages that make them, so
// a latency never comes without a correctness PASS and every latency says
// whether it is predicted (cost model) or measured-gpu. A bad argument (a
// schema violation, an unknown model or target, a malformed config) is a
// tool error with a message, never a protocol failure; a panic in a handler
// is recovered into a tool error naming the tool (safe), and a background
// run's panic ends that run only, and a wedged GPU (the dispatch watchdog)
// ends the run it wedged. Long calls (eval, loop, tune_instruction)
// stop when the client cancels the request; when the client asked for
// progress, loop sends one notification per recorded experiment and
// tune_instruction one per line of Loop 1's log.
//
// # Transports
//
// Run serves one session on any SDK transport (amkctl mcp: stdio);
// HTTPHandler serves MCP's streamable HTTP to clients with the bearer token,
// and CheckLoopback keeps its listener on this machine.
package mcpserver
