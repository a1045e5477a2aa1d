package trial

import (
	"errors"
	"fmt"

	"github.com/amk-dev/amk/vm"
)

// ClassRejected is a Launcher's deterministic refusal before launch (an
// opcode the device cannot run, co-residency, shared memory): the trial
// becomes valid=false with the message as its reason, never a crash.
const ClassRejected FailClass = "rejected"

// LaunchError is a Launcher failure that names its outcome, so a device-side
// timeout (the spin watchdog, the driver watchdog, a supervisor deadline)
// is recorded as FailTimeout and a retryable device loss as FailInfra
// rather than as a crash. Class is FailCrash, FailTimeout, FailInfra or
// ClassRejected; any other value counts as FailCrash.
type LaunchError struct {
	Class   FailClass
	Phase   string
	Message string
}

func (e *LaunchError) Error() string {
	if e.Phase != "" {
		return string(e.Class) + " (" + e.Phase + "): " + e.Message
	}
	return string(e.Class) + ": " + e.Message
}

// MismatchError says the device ran the program but its output disagrees
// with the reference VM's: the trial is incorrect (correct=false) and, like
// every incorrect trial, gets no latency.
type MismatchError struct {
	Device     string
	Comparison vm.Comparison
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s output differs from the reference VM: %s (max_abs_err %.4g, %.1f%% of the tolerance, top1 %.4f)",
		e.Device, e.Comparison.Reason, e.Comparison.MaxAbsErr, 100*e.Comparison.ToleranceShare, e.Comparison.Top1Agreement)
}

// launcherOutcome turns a Launcher error into the trial's result: a
// mismatch is an incorrect verdict, a refusal an invalid one, a classed
// failure keeps its class, anything else is a crash. No path carries a
// latency.
func launcherOutcome(v *Verdict, regions map[string]float64, err error) (*Verdict, *Timing, map[string]float64, *Failure) {
	var mm *MismatchError
	if errors.As(err, &mm) {
		correct := false
		v.Correct = &correct
		v.Notes = append(v.Notes, "device correctness FAIL: "+mm.Error()+"; no latency without a PASS")
		return v, nil, regions, nil
	}
	var le *LaunchError
	if errors.As(err, &le) {
		phase := le.Phase
		if phase == "" {
			phase = StageTiming
		}
		switch le.Class {
		case ClassRejected:
			reason := "device refused the program: " + le.Message
			incorrect := false
			v.Valid, v.RejectedReason = false, &reason
			v.Correct, v.MaxAbsErr, v.Top1Agreement, v.BoundUS = &incorrect, nil, nil, nil
			v.Notes = append(v.Notes, NoteDeviceRefused)
			return v, nil, nil, nil
		case FailTimeout, FailInfra:
			return nil, nil, nil, &Failure{Class: le.Class, Phase: phase, Message: le.Message}
		}
		return nil, nil, nil, &Failure{Class: FailCrash, Phase: phase, Message: le.Message}
	}
	return nil, nil, nil, &Failure{Class: FailCrash, Phase: StageTiming, Message: err.Error()}
}
