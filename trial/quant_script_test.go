package trial

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// A safetensors file with int8 weights and scales, written by an
// independent script (scripts/quantize_w8a16.py: the Python standard
// library only, nothing of amk) from a bf16 checkpoint, loads directly (its
// scheme read from the file) and holds exactly the weights amk's own
// --quantize w8a16 makes of the same bf16 file; both decode the same
// greedy tokens through the reference VM, every step checked against the
// eager oracle.
func TestIndependentW8A16FileDecodesLikeQuantize(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: the independent quantiser cannot run")
	}
	dir := t.TempDir()
	cfg := model.Config{Name: "qscript", Hidden: 128, NHeads: 4, NKVHeads: 2, HeadDim: 32, Intermediate: 256, Vocab: 96,
		NLayers: 2, RMSEps: 1e-5, RopeTheta: 10000, MaxSeq: 64, DType: ir.BF16, KeyScheme: model.SchemeHF}
	js, err := model.HFConfigJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	bf16Path, int8Path := filepath.Join(dir, "bf16.safetensors"), filepath.Join(dir, "int8.safetensors")
	if err := os.WriteFile(cfgPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := model.InitWeights(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := model.WriteSafetensors(&buf, w); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bf16Path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, filepath.Join("..", "scripts", "quantize_w8a16.py"), bf16Path, int8Path).CombinedOutput(); err != nil {
		t.Fatalf("the script: %v\n%s", err, out)
	}
	cache := NewModelCache(0)
	fromFile, err := cache.Get(cfgPath, int8Path)
	if err != nil {
		t.Fatal(err)
	}
	if fromFile.Config.Quant != (model.Quantization{Bits: 8}) {
		t.Fatalf("the int8 file loads as %+v", fromFile.Config.Quant)
	}
	ours, err := cache.Get(cfgPath+":w8a16", bf16Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range model.Keys(ours.Config) {
		a, b := fromFile.Weights[spec.Key], ours.Weights[spec.Key]
		if !bytes.Equal(a.Bytes, b.Bytes) || !slices.Equal(a.Half, b.Half) {
			t.Fatalf("%s differs between the script's file and --quantize w8a16", spec.Key)
		}
	}
	tg, _ := ir.Target("h200")
	var tokens [][]int32
	for _, m := range []*LoadedModel{fromFile, ours} {
		res, err := GreedyDecode(context.Background(), Decode{Config: m.Config, Weights: m.Weights, Target: tg,
			Point: schedule.DeviceDefault(), Prompt: []int32{5, 17}, Tokens: 12, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Mismatches) > 0 {
			t.Fatalf("the VM disagrees with the eager oracle: %+v", res.Mismatches)
		}
		tokens = append(tokens, res.Tokens)
	}
	if !slices.Equal(tokens[0], tokens[1]) || len(tokens[0]) != 12 {
		t.Fatalf("the script's weights decode %v, --quantize w8a16 %v", tokens[0], tokens[1])
	}
}
