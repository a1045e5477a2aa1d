package trial

import (
	"context"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// TestVerifyProgram: a lowered program (any position, any batch) checks out
// against the eager oracle; a program whose numerics were tampered with
// does not; a rejected one is reported as such.
func TestVerifyProgram(t *testing.T) {
	lm, err := testModels.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := ir.Target("h200")
	for _, c := range []struct{ pos, b int }{{0, 1}, {4, 1}, {3, 2}} {
		prog, err := schedule.Lower(lm.Config, tg, schedule.Default(), schedule.LowerOptions{Pos: c.pos, B: c.b})
		if err != nil {
			t.Fatal(err)
		}
		// Through the file format, as the verb reads it.
		prog, err = ir.Decode(ir.Encode(prog))
		if err != nil {
			t.Fatal(err)
		}
		res, err := VerifyProgram(context.Background(), prog, lm, 9)
		if err != nil || !res.Valid || !res.Correct || res.Pos != c.pos || res.Batch != c.b {
			t.Fatalf("pos %d batch %d: %+v %v", c.pos, c.b, res, err)
		}
		// Tamper: scale the final norm's epsilon way up.
		for i := range prog.Tasks {
			task := &prog.Tasks[i]
			if task.Op == ir.OpRMSNORM && task.Label == "final_norm" {
				task.Params = ir.Params{ir.FloatParam("eps", 10), ir.IntParam("hidden", int64(lm.Config.Hidden))}
			}
		}
		if res, err := VerifyProgram(context.Background(), prog, lm, 9); err != nil || !res.Valid || res.Correct {
			t.Errorf("pos %d: a tampered program verified: %+v %v", c.pos, res, err)
		}
	}
	bad := ir.NewProgram()
	bad.AddTask(ir.Task{Op: ir.OpADD, Inputs: []int{5, 6}, Outputs: []int{7}})
	if res, err := VerifyProgram(context.Background(), bad, lm, 9); err != nil || res.Valid || res.Report == "" {
		t.Errorf("a rejected program: %+v %v", res, err)
	}
}

func TestVerifySuitePasses(t *testing.T) {
	cases := VerifySuite(context.Background(), testModels)
	if len(cases) != 10 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		if !c.OK() {
			t.Errorf("%s: %+v %s", c.Name, c.Result, c.Error)
		}
	}
}
