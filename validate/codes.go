package validate

// Diagnostic codes. They are stable: tools and tests match on them. doc.go
// lists each with its rule and severity.
const (
	CodeNilProgram = "nil-program"
	CodeInternal   = "internal"

	// docs/spec/rules.md R18 and structural sanity.
	CodeDenseIDs = "dense-ids"
	CodeBadShape = "bad-shape"

	// Step 1: referential integrity, ABI caps, arity and params.
	CodeMissingBuffer  = "missing-buffer"
	CodeMissingCounter = "missing-counter"
	CodeABICap         = "abi-cap"
	CodeRankCap        = "rank-cap"
	CodeBadThreshold   = "bad-threshold"
	CodeSelfWait       = "self-wait"
	CodeUnknownOp      = "unknown-op"
	CodeArity          = "arity"
	CodeMissingParam   = "missing-param"
	CodeUnknownParam   = "unknown-param" // warning
	CodeParamType      = "param-type"
	CodeFusedPattern   = "fused-pattern"

	// Step 2: wait satisfiability and the shared-counter all-join rule.
	CodeUnsatisfiable = "unsatisfiable-wait"
	CodePartialJoin   = "partial-join"

	// Step 3: acyclicity.
	CodeCycle = "cycle"

	// Steps 4 and 5: transitive RAW provenance, KV ordering, multi-writer WAW.
	CodeRaceRAW       = "race-raw"
	CodeRaceKV        = "race-kv"
	CodeNeverProduced = "never-produced"
	CodeSelfRead      = "self-read" // an error in amk, a warning in the reference (docs/spec/rules.md R31)
	CodeRaceWAW       = "race-waw"

	// Steps 6 and 7: on-chip locality, per-SM queues.
	CodeOnChipCrossSM  = "onchip-cross-sm"
	CodeOnChipUnplaced = "onchip-unplaced" // warning
	CodeSMQueueOrder   = "sm-queue-order"
	CodeSMRange        = "sm-range"

	// Step 8: page aliasing.
	CodePageAlias   = "page-alias"
	CodePageBinding = "page-binding"

	// Step 9: outputs and labelling.
	CodeOutputUnproduced = "output-unproduced"
	CodeGPULabel         = "gpu-label" // warning

	// docs/spec/rules.md R19: bounds, coverage, shapes and dtypes.
	CodeTileBounds    = "tile-bounds"
	CodeTileCoverage  = "tile-coverage"
	CodeBadK          = "bad-K"
	CodeKVBounds      = "kv-bounds"
	CodeKVPos         = "kv-pos"
	CodeShapeMismatch = "shape-mismatch"
	CodeDTypeMismatch = "dtype-mismatch"
	CodeQuantScales   = "quant-scales"

	// docs/spec/rules.md R31: the memory model.
	CodeReadOnlyWrite = "readonly-write"
	CodeCounterInit   = "counter-init"
)
