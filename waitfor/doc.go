// Package waitfor waits, in a test, for something another goroutine or
// another process makes true: a campaign to finish, a worker to register,
// a child process to go. It polls (every few milliseconds at first, then
// less often) until the condition holds, and fails the test when the limit
// passes, saying what it waited for. The limit only keeps a broken test
// from hanging; it is not what a test measures.
//
// What a test waits for is an event, never a length of time: a test that
// needs time to pass in code that reads only the clock and channels runs
// in a testing/synctest bubble instead, where sleeping costs nothing.
// Inside a bubble these functions wait on the bubble's clock.
package waitfor
