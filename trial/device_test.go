package trial

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/amk-dev/amk/schedule"
)

// fakeGPU is a GPU launcher that says so and claims a measurement.
type fakeGPU struct{ timed int }

func (*fakeGPU) Name() string { return "cuda:0 fake" }
func (*fakeGPU) OnGPU() bool  { return true }
func (f *fakeGPU) Time(context.Context, TimeRequest) (Timing, error) {
	f.timed++
	return Timing{LatencyUS: 1e6, Kind: KindMeasuredGPU}, nil
}

// A trial's latency is of its device's kind whatever the evaluator has: a
// device cuda trial on an evaluator without a GPU is refused before
// anything runs (not given a prediction where a measurement was asked),
// and a device cpu trial on a GPU evaluator is predicted by the cost model.
func TestLatencyKindFollowsTheTrialsDevice(t *testing.T) {
	spec := Spec{CampaignID: "c", Model: "toy", GPU: "h200", Point: json.RawMessage(`{}`), Token: 7}

	spec.Device = schedule.DeviceCUDA
	o := Evaluate(context.Background(), spec, Options{})
	if o.Verdict != nil || !o.Failure.Refusal() || o.Failure.Phase != PhaseDevice {
		t.Fatalf("a cuda trial on the CPU: %+v %+v, want a device refusal", o.Verdict, o.Failure)
	}

	gpu := &fakeGPU{}
	spec.Device = schedule.DeviceCPU
	v := Evaluate(context.Background(), spec, Options{Launcher: gpu}).Verdict
	if v == nil || v.LatencyKind == nil || *v.LatencyKind != KindPredicted || gpu.timed != 0 {
		t.Fatalf("a cpu trial on a GPU evaluator: %+v (timed on the GPU %d times), want a prediction", v, gpu.timed)
	}
	spec.Device = schedule.DeviceCUDA
	v = Evaluate(context.Background(), spec, Options{Launcher: gpu}).Verdict
	if v == nil || v.LatencyKind == nil || *v.LatencyKind != KindMeasuredGPU || gpu.timed != 1 {
		t.Fatalf("a cuda trial on a GPU evaluator: %+v, want its measurement", v)
	}
}

// fakeEmulator is an emulator launcher: it runs (here: counts) the kernels
// and predicts.
type fakeEmulator struct{ ran int }

func (*fakeEmulator) Name() string   { return "emu fake" }
func (*fakeEmulator) Emulates() bool { return true }
func (f *fakeEmulator) Time(ctx context.Context, req TimeRequest) (Timing, error) {
	f.ran++
	return CPULauncher{}.Time(ctx, req)
}

// A device emu trial runs on an emulator launcher and nowhere else: on the
// CPU launcher it is refused before anything runs, and an emulator
// evaluator gives a device cpu trial the cost model alone.
func TestEmuTrialsRunOnTheEmulatorOnly(t *testing.T) {
	spec := Spec{CampaignID: "c", Model: "toy", GPU: "h200", Point: json.RawMessage(`{}`), Token: 7, Device: schedule.DeviceEmu}
	o := Evaluate(context.Background(), spec, Options{})
	if o.Verdict != nil || !o.Failure.Refusal() || o.Failure.Phase != PhaseDevice {
		t.Fatalf("an emu trial on the CPU launcher: %+v %+v, want a device refusal", o.Verdict, o.Failure)
	}
	emu := &fakeEmulator{}
	if v := Evaluate(context.Background(), spec, Options{Launcher: emu}).Verdict; v == nil || emu.ran != 1 {
		t.Fatalf("an emu trial on the emulator: %+v, ran %d times, want one run", v, emu.ran)
	}
	spec.Device = schedule.DeviceCPU
	if v := Evaluate(context.Background(), spec, Options{Launcher: emu}).Verdict; v == nil || emu.ran != 1 {
		t.Fatalf("a cpu trial on the emulator: %+v, ran %d times, want the cost model alone", v, emu.ran)
	}
}
