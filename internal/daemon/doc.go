// Package daemon is what amk's two long-running binaries, the scheduler and
// the gpuworker, share around their own work: the shutdown signals (Main),
// the command line (Command.Run: flags, -h, --version, the configuration
// and its errors, the logger, the exit statuses) and the graceful start and
// stop of their HTTP servers (ServeHTTP, Shutdown). cmd/scheduler and
// cmd/gpuworker wire their own parts into it.
package daemon
