package trial

import (
	"context"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
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

// vmDevice is a ProgramDevice that runs the step on the reference VM (a
// device as correct as it gets), shifted by offset, and records the KV
// caches it was given.
type vmDevice struct {
	offset float32
	kv     []map[string]*tensor.Tensor
}

func (d *vmDevice) Name() string { return "a test device" }

func (d *vmDevice) RunProgram(ctx context.Context, prog *ir.Program, m *LoadedModel, token int32, pos int, kv map[string]*tensor.Tensor) ([]float32, error) {
	d.kv = append(d.kv, kv)
	out, err := RunStep(prog, m.Weights, token, pos, kv)
	if err != nil {
		return nil, err
	}
	logits := append([]float32(nil), out.Logits...)
	for i := range logits {
		logits[i] += d.offset
	}
	return logits, nil
}

// TestVerifyProgramOnADevice: the device runs the step from the history's
// KV caches (none at position 0); logits that match keep the program
// correct and name the device, logits that do not make it incorrect with
// the device in the reason; a batched program stays on the VM, with a note.
func TestVerifyProgramOnADevice(t *testing.T) {
	lm, err := testModels.Get("toy", "")
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := ir.Target("h200")
	for _, pos := range []int{0, 3} {
		prog, err := schedule.Lower(lm.Config, tg, schedule.Default(), schedule.LowerOptions{Pos: pos})
		if err != nil {
			t.Fatal(err)
		}
		good := &vmDevice{}
		res, err := VerifyProgramOn(context.Background(), prog, lm, 9, good)
		if err != nil || !res.Correct || res.Device != "a test device" || res.DeviceMaxAbsErr == nil || *res.DeviceMaxAbsErr != 0 {
			t.Fatalf("pos %d: a matching device: %+v %v", pos, res, err)
		}
		if len(good.kv) != 1 || (pos == 0) != (good.kv[0] == nil) {
			t.Errorf("pos %d: the device got KV caches %v", pos, good.kv)
		}
		bad := &vmDevice{offset: 1}
		res, err = VerifyProgramOn(context.Background(), prog, lm, 9, bad)
		if err != nil || res.Correct || !strings.Contains(res.Reason, "on a test device the logits differ from the reference VM's") {
			t.Errorf("pos %d: a wrong device: %+v %v", pos, res, err)
		}
	}
	batched, err := schedule.Lower(lm.Config, tg, schedule.Default(), schedule.LowerOptions{Pos: 0, B: 2})
	if err != nil {
		t.Fatal(err)
	}
	dev := &vmDevice{}
	res, err := VerifyProgramOn(context.Background(), batched, lm, 9, dev)
	if err != nil || !res.Correct || res.Device != "" || len(dev.kv) != 0 || !strings.Contains(strings.Join(res.Notes, "|"), "not run on a test device") {
		t.Errorf("a batched program: %+v %v (device ran %d times)", res, err, len(dev.kv))
	}
}
