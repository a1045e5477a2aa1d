// Package loop1 runs Loop 1 on FlashInfer-Bench workloads: it builds the
// Loop-1 case of each workload fib.Map maps (kernels/tune.NewShapedCase),
// checks the reference VM's output on that case against the Definition's
// semantics (the plain Go functions of package fib, written from the
// Definitions' PyTorch references), and on the CPU reports the cost
// model's prediction for the case (latency_kind predicted). On a GPU the
// same cases go through kernels/tune.Tune (measured-gpu).
//
// It is not a pure package: it imports kernels/tune, whose device side
// supervises processes.
package loop1
