// Package calibrate fits a target's cost record (schedule.CostParams, the
// constants of the cost model's formulas) to measured verdicts, so that a
// visit to a GPU turns into a committed data file (schedule/costs.json) in
// one command: amkctl calibrate.
//
// # Verdicts in
//
// FromVerdicts takes verdict files as amkctl eval writes them and refuses,
// each with its reason, any verdict that is not usable evidence: one that
// is not valid and correct (no correctness PASS), whose latency is not
// measured-gpu (a prediction never calibrates the model it came from), of
// another target, or that lacks what re-lowering needs (model_spec, point,
// pos: trial.Verdict carries them since this package exists). Each verdict's
// program is lowered again from its model, point, position and batch; a
// program whose task count differs from the verdict's says the lowering
// changed since the measurement, and is refused too. A campaign's trials
// log (trials.jsonl, one trial.Outcome a line, as amkctl autoresearch
// --device cuda leaves it) contributes its measured, correct verdicts; its
// failed, rejected, incorrect or predicted trials are skipped and counted,
// since a campaign records them all.
//
// # The fit
//
// Fit moves a chosen subset of the record (FitParams: the shared HBM
// fraction achievable_bw, the per-SM stream cap max_sm_stream_gbs, one
// scale of the three hop costs, the per-tile fixed cost tile_fixed_us,
// and optionally the HBM latency and the fused tiles' staging and epilogue
// costs) to minimise Σ ln(predicted / measured)² over the points, the
// predictions being schedule.PredictWith under the candidate record. Each
// parameter is fitted as its logarithm, within bounds:
//
//  1. one coordinate pass over a 7-value logarithmic grid per parameter
//     (from the defaults; this finds a per-SM cap that the defaults leave
//     off, where the local slope is zero);
//  2. Levenberg–Marquardt from there: forward-difference Jacobian (steps of
//     2% in each parameter), the damped normal equations, steps projected
//     onto the bounds, accepted only when the error falls;
//  3. identifiability: a parameter's partial sensitivity is
//     1 / sqrt(n · (JᵀJ)⁻¹ⱼⱼ), the RMS change of ln(prediction) per unit
//     change of its logarithm that no other fitted parameter can mimic.
//     Below MinSensitivity, or with a standard error of its logarithm
//     (from the residuals) above MaxStdErr, the points cannot tell its
//     value: it goes back to its default, is reported as kept, and the
//     rest is fitted again (the least identified first, one at a time).
//
// Everything is deterministic (no randomness; the predictions of one step
// run in parallel but each lands in its own slot). The record keeps the
// identified parameters only, rounded to 4 significant digits, and the
// "after" column is predicted under that rounded record.
package calibrate
