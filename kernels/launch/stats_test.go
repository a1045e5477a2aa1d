package launch

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/amk-dev/amk/kernels"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3})
	if s.N != 5 || s.MedianUS != 3 || s.MinUS != 1 || s.MaxUS != 5 || s.MeanUS != 3 || !near(s.StdUS, math.Sqrt(2.5)) {
		t.Errorf("%+v", s)
	}
	if !near(s.P10US, 1.4) || !near(s.P90US, 4.6) || !near(s.Spread(), 3.2/3) {
		t.Errorf("percentiles %+v spread %v", s, s.Spread())
	}
	if e := Summarize([]float64{2, 4}); e.MedianUS != 3 {
		t.Errorf("even median %v", e.MedianUS)
	}
	if z := Summarize(nil); z.N != 0 || !math.IsNaN(z.Spread()) {
		t.Errorf("empty %+v", z)
	}
	c := Compare([]float64{90, 100, 110}, []float64{190, 200, 210})
	if c.Incumbent == nil || !near(c.Ratio, 0.5) {
		t.Errorf("compare %+v", c)
	}
	if solo := Compare([]float64{1, 2}, nil); solo.Incumbent != nil || solo.Ratio != 0 {
		t.Errorf("solo %+v", solo)
	}
}

func TestFloorGuard(t *testing.T) {
	if ok, note := FloorGuard(120, 129.8, "op-bytes floor"); ok || !strings.Contains(note, "below the op-bytes floor 129.800 us") {
		t.Errorf("below floor: %v %q", ok, note)
	}
	if ok, note := FloorGuard(260, 129.8, "op-bytes floor"); !ok || note != "" {
		t.Errorf("above floor: %v %q", ok, note)
	}
	if ok, _ := FloorGuard(math.NaN(), 10, "op-bytes floor"); ok {
		t.Error("NaN latency passed")
	}
	if ok, note := FloorGuard(5, math.NaN(), "streamed-bytes floor"); !ok || !strings.Contains(note, "no streamed-bytes floor") {
		t.Errorf("no floor: %v %q", ok, note)
	}
}

func TestStatusClasses(t *testing.T) {
	want := map[Status]string{StatusOK: "", StatusTrap: ClassCrash, StatusError: ClassCrash,
		StatusWatchdog: ClassTimeout, StatusTimeout: ClassTimeout}
	for s, c := range want {
		if s.Class() != c {
			t.Errorf("%s -> %q, want %q", s, s.Class(), c)
		}
	}
	if StatusOf(kernels.AbortNone) != StatusOK || StatusOf(kernels.AbortWatchdog) != StatusWatchdog ||
		StatusOf(kernels.TrapKVPos) != StatusTrap || StatusOf(kernels.AbortHost) != StatusError {
		t.Error("StatusOf mapping")
	}
}

func TestMatchTarget(t *testing.T) {
	cases := []struct {
		info  Info
		want  string
		notes int
	}{
		{Info{Name: "NVIDIA H200", CCMajor: 9, SMs: 132}, "h200", 0},
		{Info{Name: "NVIDIA H100 80GB HBM3", CCMajor: 9, SMs: 132}, "h100", 0},
		{Info{Name: "NVIDIA GB200", CCMajor: 10, SMs: 148}, "gb200", 0},
		{Info{Name: "NVIDIA B200", CCMajor: 10, SMs: 148}, "b200", 0},
		{Info{Name: "NVIDIA A10G", CCMajor: 8, CCMinor: 6, SMs: 80}, "a10g", 0},
		{Info{Name: "NVIDIA A100-SXM4-40GB", CCMajor: 8, SMs: 108}, "a100", 0},
		{Info{Name: "NVIDIA GeForce RTX 5090 Laptop GPU", CCMajor: 12, SMs: 82}, "rtx5090", 0},
		{Info{Name: "NVIDIA H100 PCIe", CCMajor: 9, SMs: 114}, "h100", 1},
	}
	for _, c := range cases {
		tg, notes, err := MatchTarget(c.info, "")
		if err != nil || tg.Name != c.want || len(notes) != c.notes {
			t.Errorf("%s: %v %v %v, want %s with %d notes", c.info.Name, tg, notes, err, c.want, c.notes)
		}
	}
	if _, _, err := MatchTarget(Info{Name: "NVIDIA RTX A6000", CCMajor: 8, CCMinor: 6, SMs: 84}, ""); err == nil ||
		!strings.Contains(err.Error(), "no target record") {
		t.Errorf("unknown GPU: %v", err)
	}
	// A configured record is used as is; every disagreement becomes a note.
	tg, notes, err := MatchTarget(Info{Name: "NVIDIA H200", CCMajor: 9, SMs: 132}, "a100")
	if err != nil || tg.Name != "a100" || len(notes) != 3 {
		t.Errorf("configured mismatch: %v %v %v", tg, notes, err)
	}
	if _, _, err := MatchTarget(Info{Name: "x"}, "mi300x"); err == nil {
		t.Error("non-CUDA record accepted")
	}
	if _, _, err := MatchTarget(Info{Name: "x"}, "nope"); err == nil {
		t.Error("unknown record accepted")
	}
	if a := (Info{CCMajor: 9}).Arch(); a != "sm_90a" {
		t.Errorf("arch %s", a)
	}
	if a := (Info{CCMajor: 8, CCMinor: 6}).Arch(); a != "sm_86" {
		t.Errorf("arch %s", a)
	}
	if s := (Info{Ordinal: 1, Name: "NVIDIA H200", SMs: 132, CCMajor: 9, DriverVersion: 12080}).String(); !strings.Contains(s, "driver 12.8") {
		t.Errorf("info string %q", s)
	}
}

func TestStubOpenWithoutCUDA(t *testing.T) {
	if CUDAEnabled {
		t.Skip("cuda build")
	}
	d, err := Open(0)
	if d != nil || err != ErrNoCUDA || !strings.Contains(err.Error(), "rebuild with -tags cuda") {
		t.Errorf("Open: %v %v", d, err)
	}
	if err := RunChild(context.Background(), ChildConfig{}); err != ErrNoCUDA {
		t.Errorf("RunChild: %v", err)
	}
}
