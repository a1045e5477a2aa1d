package ir

import (
	"math"
	"strings"
	"testing"
)

func TestAMDTargetsAreRecorded(t *testing.T) {
	for _, name := range []string{"mi300x", "mi325x", "mi355x"} {
		tg, err := Target(name)
		if err != nil {
			t.Fatal(err)
		}
		if !tg.IsAMD() || tg.IsCUDA() || tg.Wavefront() != 64 {
			t.Errorf("%s: vendor %q cuda %v wavefront %d", name, tg.VendorName(), tg.IsCUDA(), tg.Wavefront())
		}
		if math.Abs(tg.MatrixPeakTFLOPS("fp8")-2*tg.MatrixPeakTFLOPS("fp16")) > 1 {
			t.Errorf("%s: fp8 peak %g is not twice fp16 %g", name, tg.MatrixPeakTFLOPS("fp8"), tg.MatrixPeakTFLOPS("fp16"))
		}
		if tg.Pipeline == nil || tg.LastLevelCacheBytes <= tg.L2Bytes || tg.L1BytesPerSM == 0 {
			t.Errorf("%s: pipeline timing, caches not recorded: %+v", name, tg)
		}
	}
	h, _ := Target("h100")
	if h.IsAMD() || h.Wavefront() != 32 || h.MatrixPeakTFLOPS("bf16") != h.FP16TFLOPS || h.MatrixPeakTFLOPS("fp8") != 0 {
		t.Errorf("h100: vendor %q wavefront %d bf16 %g fp8 %g", h.VendorName(), h.Wavefront(),
			h.MatrixPeakTFLOPS("bf16"), h.MatrixPeakTFLOPS("fp8"))
	}
}

func TestTargetReturnsADeepCopy(t *testing.T) {
	a, _ := Target("mi355x")
	a.MatrixTFLOPS["fp8"] = 1
	a.Pipeline.MMA.Busy = 1
	b, _ := Target("mi355x")
	if b.MatrixTFLOPS["fp8"] == 1 || b.Pipeline.MMA.Busy == 1 {
		t.Fatal("editing a returned target changed the registry")
	}
}

func TestTargetCodecKeepsAMDFieldsAndNVIDIAShape(t *testing.T) {
	for _, name := range TargetNames() {
		tg, _ := Target(name)
		p := &Program{IRVersion: IRVersion, ABIVersion: ABIVersion, Target: tg}
		data := Encode(p)
		back, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(Encode(back)) != string(data) {
			t.Errorf("%s: target does not round-trip", name)
		}
		if got := back.Target; got.VendorName() != tg.VendorName() || got.Wavefront() != tg.Wavefront() ||
			got.MatrixPeakTFLOPS("fp8") != tg.MatrixPeakTFLOPS("fp8") {
			t.Errorf("%s: decoded %+v", name, got)
		}
		if !tg.IsAMD() && strings.Contains(string(data), "wavefront_size") {
			t.Errorf("%s: an NVIDIA record gained amk-only keys", name)
		}
	}
	bad := strings.Replace(string(Encode(&Program{IRVersion: IRVersion, ABIVersion: ABIVersion, Target: mustTarget(t, "mi300x")})),
		`"vendor": "amd"`, `"vendor": "intel"`, 1)
	if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "unknown vendor") {
		t.Fatalf("unknown vendor accepted: %v", err)
	}
}

func mustTarget(t *testing.T, name string) *GpuTarget {
	t.Helper()
	tg, err := Target(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
