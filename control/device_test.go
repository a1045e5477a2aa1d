package control

import (
	"errors"
	"strings"
	"testing"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// cudaStub stands for a CUDA launcher: this machine has no GPU, and only
// which launcher OpenDevice returns is under test.
type cudaStub struct{ trial.CPULauncher }

func TestOpenDeviceAuto(t *testing.T) {
	answers := func() (trial.Launcher, error) { return cudaStub{}, nil }
	silent := func() (trial.Launcher, error) { return nil, errors.New("cuInit: no CUDA-capable device is detected") }
	for _, c := range []struct {
		arg    string
		open   func() (trial.Launcher, error)
		want   schedule.Device
		picked string
	}{
		{"auto", answers, schedule.DeviceCUDA, "device auto: cuda"},
		{" AUTO ", silent, schedule.DeviceCPU, "no CUDA-capable device"},
		{"auto", nil, schedule.DeviceCPU, "without CUDA support"},
		{"", answers, schedule.DeviceCPU, ""},
		{"cpu", answers, schedule.DeviceCPU, ""},
		{"cuda", answers, schedule.DeviceCUDA, ""},
	} {
		l, dev, picked, err := OpenDevice(c.arg, c.open, nil)
		if err != nil || dev != c.want || (c.picked == "") != (picked == "") || !strings.Contains(picked, c.picked) {
			t.Errorf("%q: %v %q %q %v", c.arg, l, dev, picked, err)
		}
		if _, isCUDA := l.(cudaStub); isCUDA != (dev == schedule.DeviceCUDA) {
			t.Errorf("%q: device %s with launcher %T", c.arg, dev, l)
		}
	}
	if _, _, _, err := OpenDevice("cuda", silent, nil); err == nil || !strings.Contains(err.Error(), "no CUDA-capable") {
		t.Errorf("cuda without a device: %v", err)
	}
	if _, _, _, err := OpenDevice("tpu", answers, nil); err == nil || !strings.Contains(err.Error(), "cpu, emu, cuda or auto") {
		t.Errorf("tpu: %v", err)
	}
}
