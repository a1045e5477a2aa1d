package trial

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amk-dev/amk/vm"
)

// errLauncher fails every Time call with err.
type errLauncher struct{ err error }

func (errLauncher) Name() string { return "cuda:0 fake" }
func (l errLauncher) Time(context.Context, TimeRequest) (Timing, error) {
	return Timing{}, l.err
}

func TestDeviceMismatchIsIncorrectWithoutLatency(t *testing.T) {
	mm := &MismatchError{Device: "cuda:0 fake", Comparison: vm.Comparison{Reason: "value mismatch", MaxAbsErr: 0.5, Top1Agreement: 0}}
	out := evalToy(t, `{}`, Options{Launcher: errLauncher{fmt.Errorf("check: %w", mm)}})
	v := out.Verdict
	if out.Failure != nil || v == nil {
		t.Fatalf("want a verdict, got failure %+v", out.Failure)
	}
	if !v.Valid || v.Correct == nil || *v.Correct {
		t.Fatalf("a device mismatch must be valid and correct=false: %+v", v)
	}
	if v.LatencyUS != nil || v.LatencyKind != nil || v.PctOfRoofline != nil {
		t.Fatalf("a mismatching device run carries a latency: %+v", v)
	}
	if !strings.Contains(strings.Join(v.Notes, " "), "device correctness FAIL") {
		t.Fatalf("no note explains the device mismatch: %v", v.Notes)
	}
}

func TestLaunchErrorClassesBecomeFailureClasses(t *testing.T) {
	for _, c := range []struct {
		err   error
		class FailClass
	}{
		{&LaunchError{Class: FailTimeout, Phase: "run", Message: "WATCHDOG: task 3 waited on counter 2"}, FailTimeout},
		{&LaunchError{Class: FailInfra, Message: "starting the launcher child failed"}, FailInfra},
		{&LaunchError{Class: FailCrash, Phase: "run", Message: "TRAP"}, FailCrash},
		{&LaunchError{Class: "weird", Message: "unknown class"}, FailCrash},
		{errors.New("plain error"), FailCrash},
	} {
		out := evalToy(t, `{}`, Options{Launcher: errLauncher{c.err}})
		if out.Verdict != nil || out.Failure == nil || out.Failure.Class != c.class {
			t.Errorf("%v: want failure class %s, got %+v / %+v", c.err, c.class, out.Failure, out.Verdict)
		}
	}
}

func TestLaunchRefusalIsAnInvalidVerdict(t *testing.T) {
	err := &LaunchError{Class: ClassRejected, Phase: "load", Message: "co-residency: needs 133 blocks"}
	out := evalToy(t, `{}`, Options{Launcher: errLauncher{err}})
	v := out.Verdict
	if out.Failure != nil || v == nil {
		t.Fatalf("want a verdict, got %+v", out.Failure)
	}
	if v.Valid || v.RejectedReason == nil || !strings.Contains(*v.RejectedReason, "co-residency") {
		t.Fatalf("want valid=false naming the refusal, got %+v", v)
	}
	if v.Correct == nil || *v.Correct || v.LatencyUS != nil || v.LatencyKind != nil || v.BoundUS != nil {
		t.Fatalf("a refused program must say correct=false with no latency or floor: %+v", v)
	}
}
