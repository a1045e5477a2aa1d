package control

import (
	"errors"
	"fmt"
	"strings"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// DeviceAuto is the device argument that picks the device: cuda when a CUDA
// device answers, the CPU otherwise (the reference's default).
const DeviceAuto = "auto"

// ErrNoCUDA is what an openCUDA function returns when the binary has no
// CUDA support at all.
var ErrNoCUDA = errors.New("this amkctl was built without CUDA support (rebuild with -tags cuda on a machine with the CUDA driver)")

// IsAutoDevice reports whether a device argument is auto (case and
// surrounding spaces do not matter).
func IsAutoDevice(arg string) bool { return strings.EqualFold(strings.TrimSpace(arg), DeviceAuto) }

// OpenDevice opens the latency source a device argument names: cpu (or
// empty) the cost model, cuda a CUDA device through openCUDA, emu the CPU
// emulator of the CUDA kernels through openEmu, auto a CUDA device when
// openCUDA opens one and the cost model otherwise. For auto, picked says
// which device was picked and why (for the user to read); it is empty for
// the others. openCUDA nil means no CUDA support; openEmu nil means the
// caller does not offer the emulator (it needs a GPU target to stand in for).
func OpenDevice(arg string, openCUDA, openEmu func() (trial.Launcher, error)) (l trial.Launcher, dev schedule.Device, picked string, err error) {
	if openCUDA == nil {
		openCUDA = func() (trial.Launcher, error) { return nil, ErrNoCUDA }
	}
	if IsAutoDevice(arg) {
		l, err := openCUDA()
		if err != nil {
			return trial.CPULauncher{}, schedule.DeviceCPU, fmt.Sprintf("device auto: cpu (latencies predicted by the cost model): no CUDA device answered: %v", err), nil
		}
		return l, schedule.DeviceCUDA, "device auto: cuda (a CUDA device answered; latencies measured on it)", nil
	}
	device, err := schedule.ParseDevice(arg)
	if err != nil {
		return nil, "", "", fmt.Errorf("%q is not cpu, emu, cuda or auto", arg)
	}
	switch device {
	case schedule.DeviceCPU:
		return trial.CPULauncher{}, device, "", nil
	case schedule.DeviceEmu:
		if openEmu == nil {
			return nil, "", "", errors.New("emu is not offered here: run amkctl eval, autoresearch, generate or verify with --device emu")
		}
		if l, err = openEmu(); err != nil {
			return nil, "", "", fmt.Errorf("emu: %w", err)
		}
		return l, device, "", nil
	}
	l, err = openCUDA()
	if err != nil {
		return nil, "", "", fmt.Errorf("cuda: %w", err)
	}
	return l, device, "", nil
}
