// Package fib speaks the FlashInfer-Bench dataset format (docs/spec/formats.md §2): kernel
// Definitions, and the dataset's Workload, Solution and Trace records.
//
// It owns the data model and its JSON codec (objects whose key order is a
// kernel's interface, such as axes, inputs and outputs, keep their order),
// the validator of every rule of that format (Validate, ValidateWorkload,
// ValidateTrace: each Problem names the field and says why), the constraint
// expression language (ParseExpr: a small Python subset over axis names),
// the export of the Definitions and workloads of every op of a model's
// decode step (Export), the export of a campaign's or a Loop 1 run's
// verdicts as Traces and their reading back (CampaignTraces,
// InstructionTraces, Facts), the dataset directory layout (ReadDataset,
// WriteDefinitions, WriteTraces), the table that maps a Definition onto an
// amk micro-kernel (Map, mapTable), plain Go implementations of the
// Definitions' semantics (semantics.go) that the reference VM is checked
// against (package fib/loop1), and the reports of the amkctl fib verbs
// (report.go: WriteValidation, WriteMappings, RunExport).
//
// The package is pure: no Redis, no network, no os/exec. It touches files
// only where it reads or writes a dataset or reads a campaign's ledger.
//
// Dataset layout (the public flashinfer-bench TraceSet):
//
//	definitions/<op_type>/<definition>.json
//	workloads/<op_type>/<definition>.jsonl          one workload-only Trace a line
//	solutions/<author>/<op_type>/<definition>/<solution>.json
//	traces/<author>/<op_type>/<definition>.jsonl    one Trace a line
//
// Honesty: a Trace made from an amk verdict says in its environment whether
// its latency was measured on a GPU or predicted by amk's cost model
// (libs.amk_latency_kind, and a hardware string that starts with
// "predicted:" for predictions), and a verdict without a correctness PASS
// never carries a latency.
package fib
