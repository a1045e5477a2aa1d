package vm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/ir"
)

// ErrRejected is wrapped by the error New returns for a program that
// validate rejects.
var ErrRejected = errors.New("vm: program rejected by validate")

// RejectedError says why New refused a program.
type RejectedError struct {
	Reasons string // the validator's first reasons
}

func (e *RejectedError) Error() string {
	return "vm: refusing to load a program that validate rejects: " + e.Reasons
}

// Unwrap lets errors.Is(err, ErrRejected) match.
func (e *RejectedError) Unwrap() error { return ErrRejected }

// WaitState is one unmet wait of a stuck task.
type WaitState struct {
	Counter   int
	Value     int64 // the counter's value when the run stopped
	Threshold int
}

// StuckTask is a task that could never fire.
type StuckTask struct {
	ID    int
	Label string // Task.Describe(): "id:label"
	Waits []WaitState
}

// DeadlockError reports that no task was ready or running while some
// remained: their waits can never be met.
type DeadlockError struct {
	Stuck    []StuckTask
	Counters []int64 // every counter's value, by counter position
}

const maxStuckListed = 16

func (e *DeadlockError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deadlock: no progress with %d tasks stuck: [", len(e.Stuck))
	for i, s := range e.Stuck {
		if i == maxStuckListed {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Label)
		for j, w := range s.Waits {
			if j == 0 {
				b.WriteString(" waits ")
			} else {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "c%d=%d<%d", w.Counter, w.Value, w.Threshold)
		}
	}
	b.WriteString("]")
	return b.String()
}

// TimeoutError reports that Options.Timeout expired. It is a wall-clock
// guard, not evidence of a livelock: the run was still making progress
// unless a DeadlockError says otherwise (docs/spec/rules.md R30).
type TimeoutError struct {
	Timeout time.Duration
	Done    int
	Total   int
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timeout: reference VM stopped after %v with %d of %d tasks done (a wall-clock guard, not a deadlock)",
		e.Timeout, e.Done, e.Total)
}

// TaskError is an op failure: a shape, param or range problem found while
// executing one task.
type TaskError struct {
	TaskID int
	Label  string // Task.Describe()
	Op     ir.Op
	Err    error
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("task %s (%s): %v", e.Label, e.Op, e.Err)
}

func (e *TaskError) Unwrap() error { return e.Err }
