// Package cputime reads the CPU time this process has used, so that a
// benchmark can report what its work costs apart from the other load on
// the machine (wall time on a shared machine also counts the waits for a
// core). The benchmarks of ir, validate, runner and internal/scheduler
// report their cpu-ms/op from it.
package cputime
