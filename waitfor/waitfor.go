package waitfor

import (
	"testing"
	"time"
)

// First and Most are the first and the longest pause between two polls:
// short at first so that a quick event is seen at once, longer later so
// that a slow one does not keep a core busy.
const (
	First = 5 * time.Millisecond
	Most  = 100 * time.Millisecond
)

// Cond polls cond until it returns true. When limit passes first the test
// fails with "gave up waiting for WHAT after LIMIT".
func Cond(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(limit, cond) {
		t.Fatalf("gave up waiting for %s after %s", what, limit)
	}
}

// Check polls check until it returns nil. When limit passes first the test
// fails with check's last error, which should say what was seen.
func Check(t testing.TB, limit time.Duration, check func() error) {
	t.Helper()
	var last error
	if !poll(limit, func() bool { last = check(); return last == nil }) {
		t.Fatalf("gave up after %s: %v", limit, last)
	}
}

// poll calls done until it returns true (poll's answer) or limit passes
// (false); done is called at least once, and once more at the deadline.
func poll(limit time.Duration, done func() bool) bool {
	deadline := time.Now().Add(limit)
	pause := First
	for !done() {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, Most)
	}
	return true
}
