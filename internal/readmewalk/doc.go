// Package readmewalk holds one test: it walks README.md's shell blocks,
// command by command and in order, as a new user would type them in a
// fresh directory, with the real amkctl, scheduler and gpuworker binaries
// and a real redis-server on loopback. A command the README names that
// fails, or has been renamed, fails the test.
//
// Most lines run exactly as written. The few the walk cannot run as
// written (a whole night's campaign, a placeholder such as DIR, a tool
// outside amk such as docker) are listed in the test with what it runs in
// their place and why; a listed line the README no longer has fails the
// test too, so the list cannot go stale. Two rewrites apply to every line:
// the `small` model becomes `toy-2L` (an evaluation of `small` costs
// seconds of CPU, of `toy-2L` a few milliseconds, and the verbs, flags and
// files are the same), and the fleet's fixed loopback ports become free
// ones, so the walk can run beside other tests.
package readmewalk
