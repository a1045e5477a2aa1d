package waitfor

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestCondSeesAnEventOfAnotherGoroutine: Cond returns once another
// goroutine makes the condition true, on the bubble's clock: the event
// came after 40 ms, and the wait ended within one pause of it.
func TestCondSeesAnEventOfAnotherGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var set atomic.Bool
		start := time.Now()
		go func() {
			time.Sleep(40 * time.Millisecond)
			set.Store(true)
		}()
		Cond(t, time.Minute, "the flag", set.Load)
		if waited := time.Since(start); waited < 40*time.Millisecond || waited > 40*time.Millisecond+Most {
			t.Errorf("waited %s for an event at 40ms", waited)
		}
	})
}

// TestPollGivesUpAtTheLimit: a condition that never holds ends the wait at
// the limit (to the nanosecond, on the bubble's clock), having been asked
// once more at the deadline.
func TestPollGivesUpAtTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		if poll(time.Second, func() bool { calls++; return false }) {
			t.Fatal("poll of a condition that never holds answered true")
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("gave up after %s, want the limit 1s", waited)
		}
		// At 0, after 5+10+20+40+80 ms, after eight pauses of 100 ms and
		// after the last 45 ms to the deadline: 15 calls.
		if calls != 15 {
			t.Errorf("%d polls in 1s, want 15", calls)
		}
	})
}

// TestCheckFailsWithTheLastError: the test fails naming the last error the
// check returned.
func TestCheckFailsWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		fake := &recorder{TB: t}
		func() {
			defer func() { _ = recover() }()
			Check(fake, 200*time.Millisecond, func() error { n++; return fmt.Errorf("seen %d", n) })
		}()
		if want := fmt.Sprintf("gave up after 200ms: seen %d", n); fake.msg != want {
			t.Errorf("Check failed with %q, want %q", fake.msg, want)
		}
	})
}

// recorder is a testing.TB whose Fatalf records the message and stops the
// caller (as Fatalf does) with a panic.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}
