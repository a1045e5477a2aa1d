//go:build cuda

package tune

// GPU check of Loop 1 on the real device (entry kernels, in-process). Run on
// the GPU machine:
//
//	AMK_NVCC=$(command -v nvcc) go test -tags cuda -timeout 30m -run CUDA -v ./kernels/tune
//
// AMK_KERNEL_CACHE, when set, keeps compiled modules between runs.

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
)

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestCUDATuneEveryOp(t *testing.T) {
	if os.Getenv(build.EnvNVCC) == "" {
		t.Skip("AMK_NVCC not set")
	}
	cache := os.Getenv(build.EnvCache)
	if cache == "" {
		cache = t.TempDir()
	}
	dev, err := launch.Open(0)
	if err != nil {
		t.Fatalf("no CUDA device: %v", err)
	}
	ld, err := NewLaunchDevice(dev, launch.BuilderModules{Builder: &build.Builder{Toolchain: build.ToolchainFromEnv(), Dir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	for _, op := range SupportedOps() {
		for _, dt := range []ir.DType{ir.F32, ir.BF16} {
			s, err := Tune(context.Background(), ld, Options{Op: op, DType: dt, Target: ld.target, Budget: 3, Log: testLog{t}})
			if err != nil {
				t.Fatalf("%s %s: %v", op, dt, err)
			}
			if !s.OK() {
				t.Errorf("%s %s: not all correct: %+v", op, dt, s.TrialsDetail)
				continue
			}
			t.Logf("%s %s: best %s %.3f us (baseline %v, speedup %v), %d bytes, pct_of_roofline %v",
				op, dt, *s.BestVariant, *s.BestUS, deref(s.BaselineUS), deref(s.Speedup), s.OpBytes, deref(s.PctOfRoofline))
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
