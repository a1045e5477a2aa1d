package model

import (
	"bytes"
	"testing"
)

// A model exported as config.json + HF-keyed safetensors reads back through
// the HuggingFace import path with the same shape and the same values.
func TestExportRoundTripsThroughTheHFImport(t *testing.T) {
	for _, name := range []string{"toy-2L", "llama-1b"} {
		cfg, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := HFConfigJSON(cfg)
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromHFConfig(data, 0)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, data)
		}
		if back.Hidden != cfg.Hidden || back.NHeads != cfg.NHeads || back.NKVHeads != cfg.NKVHeads || back.HeadDim != cfg.HeadDim ||
			back.Intermediate != cfg.Intermediate || back.Vocab != cfg.Vocab || back.NLayers != cfg.NLayers || back.RMSEps != cfg.RMSEps ||
			back.RopeTheta != cfg.RopeTheta || back.MaxSeq != cfg.MaxSeq || back.TiedEmbeddings != cfg.TiedEmbeddings || back.DType != cfg.DType {
			t.Errorf("%s: exported %+v, read back %+v", name, cfg, back)
		}
	}
	cfg, _ := Preset("toy-2L") // toy key scheme: renamed to HF keys on the way out
	w, err := InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	hf, err := ToHFKeys(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, hf); err != nil {
		t.Fatal(err)
	}
	data, _ := HFConfigJSON(cfg)
	hcfg, _ := FromHFConfig(data, 0)
	got, err := ReadSafetensors(bytes.NewReader(buf.Bytes()), int64(buf.Len()), hcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["model.layers.1.mlp.down_proj.weight"]; !ok {
		t.Fatalf("no HF keys: %d tensors", len(got))
	}
	hfKeys, toyKeys := Keys(hcfg), Keys(cfg)
	for i := range toyKeys {
		a, b := w[toyKeys[i].Key].Floats(), got[hfKeys[i].Key].Floats()
		if len(a) != len(b) {
			t.Fatalf("%s: %d values, want %d", hfKeys[i].Key, len(b), len(a))
		}
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("%s[%d] = %v, want %v", hfKeys[i].Key, j, b[j], a[j])
			}
		}
	}
}
