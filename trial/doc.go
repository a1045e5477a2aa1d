// Package trial is the one evaluation pipeline that both the embedded and the
// distributed modes call: a Spec (model, target, schedule point) goes in, an
// honest Verdict comes out. The pipeline parses and type-checks the point,
// lowers it, validates the program, checks launch feasibility against the
// target, runs the CPU reference VM against the eager oracle, and only then
// asks a Launcher for a latency (a cost-model prediction on the CPU, a timed
// launch on a GPU). No latency without correct=true; none below the floor.
package trial
