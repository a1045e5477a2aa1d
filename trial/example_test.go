package trial_test

import (
	"context"
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/validate"
)

// A program file's way through amk's front doors: decode it, prove it
// safe, then check its numerics on the reference VM against the eager
// oracle (what amkctl validate and verify do with a file).
func Example_decodeValidateVerify() {
	// A program file: here the toy model's decode step, lowered under the
	// default schedule and encoded as amk writes it.
	cfg, _ := model.Load("toy")
	target, _ := ir.Target("h100")
	lowered, _ := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{})
	file := ir.Encode(lowered)

	prog, err := ir.Decode(file)
	if err != nil {
		fmt.Println("malformed:", err)
		return
	}
	rep := validate.Validate(prog)
	fmt.Println("valid:", rep.OK)

	lm, _ := trial.NewModelCache(0).Get("toy", "")
	check, err := trial.VerifyProgram(context.Background(), prog, lm, trial.DefaultToken)
	if err != nil {
		fmt.Println("not verified:", err)
		return
	}
	fmt.Println("correct:", check.Correct)
	// Output:
	// valid: true
	// correct: true
}

// One schedule config in, one verdict out: lowered, validated, checked
// against the oracle, and only then timed (here by the cost model, so the
// latency is labelled predicted).
func ExampleEvaluate() {
	spec := trial.Spec{Model: "toy", GPU: "h100", Device: "cpu", Token: trial.DefaultToken,
		Point: []byte(`{"threads_per_block": 128}`)}
	out := trial.Evaluate(context.Background(), spec, trial.Options{})
	v := out.Verdict
	fmt.Println("valid:", v.Valid, "correct:", *v.Correct, "kind:", *v.LatencyKind)
	fmt.Println("at or above the streamed-bytes floor:", *v.PctOfRoofline >= 100)
	// Output:
	// valid: true correct: true kind: predicted
	// at or above the streamed-bytes floor: true
}
