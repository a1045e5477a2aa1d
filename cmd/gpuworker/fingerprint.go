package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/internal/version"
)

// fingerprint identifies the worker and its environment.
type fingerprint struct {
	Host    string
	Target  string
	Device  string
	Info    deviceInfo
	Version string
	Go      string
	OSArch  string
}

func newFingerprint(target, device string, info deviceInfo) fingerprint {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fingerprint{Host: host, Target: target, Device: device, Info: info, Version: version.String(),
		Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the one-line form stamped on every outcome's Worker field.
func (f fingerprint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host=%s target=%s device=%s device_name=%s", f.Host, f.Target, f.Device, strconv.Quote(f.Info.Name))
	if f.Info.Driver != "" {
		fmt.Fprintf(&b, " driver=%s", f.Info.Driver)
	}
	if f.Info.Toolkit != "" {
		fmt.Fprintf(&b, " toolkit=%s", f.Info.Toolkit)
	}
	fmt.Fprintf(&b, " build=%s go=%s os=%s", f.Version, f.Go, f.OSArch)
	return b.String()
}

// cpuModel names the CPU (from /proc/cpuinfo where there is one).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return fmt.Sprintf("%s (%d cores)", strings.TrimSpace(v), runtime.NumCPU())
			}
		}
	}
	return fmt.Sprintf("%s CPU (%d cores)", runtime.GOARCH, runtime.NumCPU())
}
