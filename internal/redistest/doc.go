// Package redistest starts a real redis-server for a test or benchmark.
//
// Start launches redis-server on a free loopback port in a fresh temporary
// directory, waits until it answers PING, and registers cleanup that stops the
// server and removes the directory. When redis-server is not installed the
// test is skipped with a message saying how to install it (`make deps`, which
// runs scripts/ensure-deps.sh; `make test` does this first, so CI always runs
// these tests).
//
// A Server can be stopped, killed and restarted on the same port and data
// directory, with the append-only file on when the test asks for it, so fault
// tests can restart Redis under a running fleet.
package redistest
