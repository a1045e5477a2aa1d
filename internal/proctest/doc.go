// Package proctest owns the life of the real processes a test starts:
// each runs in a process group of its own, and stopping it ends the whole
// group and waits until no member is left alive.
//
// Waiting for the started process alone is not enough. Some programs leave
// descendants behind: Debian's chromium is a shell script whose browser
// forks a zygote, renderers and a network service, and the network service
// outlives the browser for a moment, still writing into the profile;
// redis-server forks children for background saves and AOF rewrites. When
// such a descendant writes into a t.TempDir() while the testing package
// removes that directory, the test fails with "directory not empty". So a
// helper that starts a process calls Isolate before cmd.Start, and after
// the process has exited (or to end it) calls KillGroup, whose return
// means nothing of the process tree can touch the test's files any more.
//
// The helper must also register its stop with t.Cleanup after the
// t.TempDir() the process writes into: cleanups run last-registered first,
// so the stop then runs before the directory's removal.
//
// FilesOpenForWriting (Linux) lists the files under a directory that a
// process holds open for writing: the tests use it to check that a daemon
// keeps nothing in its workspace open for writing between two writes.
package proctest
