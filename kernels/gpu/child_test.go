package gpu

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

func TestChildMainWithoutCUDA(t *testing.T) {
	if launch.CUDAEnabled {
		t.Skip("cuda build: ChildMain would open a device")
	}
	var stdout, stderr bytes.Buffer
	code := ChildMain(context.Background(), []string{"--device", "0", "--cache", t.TempDir()}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "built without CUDA support") || stdout.Len() != 0 {
		t.Fatalf("code %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestChildMainArguments(t *testing.T) {
	for _, args := range [][]string{{"--device", "-1", "--cache", "x"}, {"--device", "0"}, {"--bogus"}, {"--cache", "x", "extra"}} {
		var stdout, stderr bytes.Buffer
		if code := ChildMain(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != 2 {
			t.Errorf("%v: code %d, want 2", args, code)
		}
	}
	var stderr bytes.Buffer
	if code := ChildMain(context.Background(), []string{"-h"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 0 {
		t.Errorf("-h: code %d", code)
	}
}

func TestChildConfigArgsRoundTrip(t *testing.T) {
	cc := ChildConfig{Ordinal: 3, Toolchain: build.Toolchain{NVCC: "/opt/nvcc", HostArgs: []string{"-ccbin", "g++-12"}}, CacheDir: "cache"}
	want := []string{"--device", "3", "--nvcc", "/opt/nvcc", "--cache", "cache", "--nvcc-arg=-ccbin", "--nvcc-arg=g++-12"}
	if got := cc.Args(); !slices.Equal(got, want) {
		t.Fatalf("args %q", got)
	}
}

func TestWeightProviderBuildsTheTrialWeights(t *testing.T) {
	cfg, _ := model.Preset("toy-2L")
	check := cfg
	check.NLayers = 1
	want, err := model.InitWeights(check, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &WeightProvider{}
	src := launch.WeightSource{Kind: SourceSeeded, Model: encodeModel(cfg)}
	got, err := p.Weights(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The full model's weights contain the truncated check model's, value for value.
	for key, w := range want {
		g, ok := got[key]
		if !ok || !slices.Equal(g.F, w.F) || !slices.Equal(g.Half, w.Half) || g.DType != w.DType {
			t.Fatalf("weight %s differs from the check model's", key)
		}
	}
	again, _ := p.Weights(context.Background(), src, nil)
	if again[model.KeyNames(cfg).Embed] != got[model.KeyNames(cfg).Embed] {
		t.Fatal("the same source was rebuilt instead of reused")
	}
	for _, bad := range []launch.WeightSource{{Kind: "inline?", Model: encodeModel(cfg)}, {Kind: SourceSeeded, Model: "{"},
		{Kind: SourceSafetensors, Model: encodeModel(cfg)}, {Kind: SourceSeeded, Model: encodeModel(cfg), Seed: -1}} {
		if _, err := p.Weights(context.Background(), bad, nil); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}

func TestModelSpecKeepsTheDType(t *testing.T) {
	cfg, _ := model.Preset("small")
	back, err := decodeModel(encodeModel(cfg))
	if err != nil || back != cfg {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if _, err := decodeModel(`{"config": {"name": "x"}, "dtype": "BF16"}`); err == nil {
		t.Fatal("an invalid shape was accepted")
	}
	if _, err := decodeModel(`{"config": {}, "dtype": "BOGUS"}`); err == nil {
		t.Fatal("an unknown dtype was accepted")
	}
}

func TestVariantOfMapsKnobs(t *testing.T) {
	p := schedule.Default()
	p.Knobs["cols_per_warp"] = 4
	p.Knobs["lb_maxthreads"] = 256
	v, notes, err := variantOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if v["cols_per_warp"] != 4 || v["cpasync"] != 1 || len(v) != 4 {
		t.Fatalf("variant %v", v)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "lb_maxthreads=256") {
		t.Fatalf("notes %v", notes)
	}
	p.Knobs["cpa_stages"] = 99
	if _, _, err := variantOf(p); err == nil {
		t.Fatal("an out-of-range knob was accepted")
	}
}

func TestSameLayout(t *testing.T) {
	cfg, _ := model.Preset("toy")
	target, _ := ir.Target("h200")
	lower := func(pos int, point schedule.Point) *ir.Program {
		p, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: pos})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	def := schedule.Default()
	if !sameLayout(lower(0, def), lower(7, def)) {
		t.Fatal("whole-window attention changes layout across positions")
	}
	split := schedule.Default()
	split.Config.SetTile("attention", "n_partitions", 4)
	if sameLayout(lower(0, split), lower(40, split)) {
		t.Fatal("split-KV shard counts differ but the layouts compare equal")
	}
	a := lower(0, def)
	b := lower(0, def)
	b.Buffers[0].Shape = []int{2}
	if sameLayout(a, b) {
		t.Fatal("a buffer shape change was not seen")
	}
}

func TestStepInputs(t *testing.T) {
	in, err := stepInputs([]int32{42}, 9)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int32{schedule.TokenInput: 42, schedule.PosInput: 9, schedule.ReshapeInput: 0} {
		tt, err := in[name].Tensor()
		if err != nil || tt.DType != ir.I32 || !slices.Equal(tt.I, []int32{want}) {
			t.Errorf("%s: %+v %v", name, tt, err)
		}
	}
}

func TestDriverRelease(t *testing.T) {
	if DriverRelease(12080) != "12.8" || DriverRelease(13000) != "13.0" || DriverRelease(-1) != "" {
		t.Fatal("driver release")
	}
}

// A quantised model travels to the child with its scheme, and the child
// builds the trial's quantised weights: the int8/int4 bytes and the scales
// of the reference VM's weights.
func TestWeightProviderBuildsQuantizedWeights(t *testing.T) {
	cfg, err := model.Load("toy:w4a16-g32")
	if err != nil {
		t.Fatal(err)
	}
	want, err := model.InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&WeightProvider{}).Weights(context.Background(), launch.WeightSource{Kind: SourceSeeded, Model: encodeModel(cfg)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := "layers.0.attn.q_proj.weight"
	if g, w := got[key], want[key]; g == nil || g.DType != w.DType || !slices.Equal(g.Packed, w.Packed) ||
		!slices.Equal(got[key+".scales"].Half, want[key+".scales"].Half) {
		t.Fatalf("the child's %s is not the trial's", key)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	t.Setenv(EnvLoadTimeout, "")
	t.Setenv(EnvRunTimeout, "20s")
	t.Setenv(EnvTimeTimeout, "1m30s")
	o, err := OptionsFromEnv()
	if err != nil || o.LoadTimeout != 0 || o.RunTimeout != 20*time.Second || o.TimeTimeout != 90*time.Second {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, bad := range []string{"20", "500ms", "2h", "soon"} {
		t.Setenv(EnvRunTimeout, bad)
		if _, err := OptionsFromEnv(); err == nil || !strings.Contains(err.Error(), EnvRunTimeout) {
			t.Errorf("%s=%q: %v", EnvRunTimeout, bad, err)
		}
	}
}
