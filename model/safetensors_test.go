package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// encode writes weights as a safetensors image.
func encode(t testing.TB, w Weights) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, w); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawFile builds a safetensors image from a literal header and data bytes.
func rawFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func readImage(img []byte, cfg Config) (Weights, error) {
	return ReadSafetensors(bytes.NewReader(img), int64(len(img)), cfg)
}

func sameWeights(t *testing.T, got, want Weights, cfg Config) {
	t.Helper()
	for _, spec := range Keys(cfg) {
		g, w := got[spec.Key], want[spec.Key]
		if g == nil || g.DType != cfg.DType || g.FloatCount() != w.FloatCount() {
			t.Fatalf("%s: got %+v", spec.Key, g)
		}
		gf, wf := g.Floats(), w.Floats()
		for i := range wf {
			if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
				t.Fatalf("%s[%d] = %v, want %v", spec.Key, i, gf[i], wf[i])
			}
		}
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.F16, ir.BF16} {
		for _, scheme := range []string{SchemeToy, SchemeHF} {
			cfg := tinyConfig(dt)
			cfg.KeyScheme = scheme
			cfg.NLayers = 2
			w, _ := InitWeights(cfg, 11)
			img := encode(t, w)
			if hl := binary.LittleEndian.Uint64(img); hl%8 != 0 {
				t.Errorf("header length %d is not 8-aligned", hl)
			}
			got, err := readImage(img, cfg)
			if err != nil {
				t.Fatalf("%s %s: %v", dt, scheme, err)
			}
			sameWeights(t, got, w, cfg)
		}
	}
	// A file on disk, through LoadSafetensors.
	cfg, _ := Preset("toy")
	w, _ := InitWeights(cfg, 0)
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, encode(t, w), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSafetensors(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameWeights(t, got, w, cfg)
}

func TestSafetensorsWidensExactlyAndRefusesNarrowing(t *testing.T) {
	bf := tinyConfig(ir.BF16)
	w, _ := InitWeights(bf, 2)
	f32 := tinyConfig(ir.F32)
	got, err := readImage(encode(t, w), f32)
	if err != nil {
		t.Fatalf("bf16 file into an F32 model: %v", err)
	}
	for k, tt := range got {
		if tt.DType != ir.F32 || !slices.Equal(tt.F, w[k].Floats()) {
			t.Fatalf("%s not widened exactly", k)
		}
	}
	wf, _ := InitWeights(f32, 2)
	_, err = readImage(encode(t, wf), bf)
	if err == nil || !strings.Contains(err.Error(), "dtype F32 in the file does not convert exactly to the model dtype BF16") {
		t.Errorf("F32 file into a BF16 model: %v", err)
	}
	f16 := tinyConfig(ir.F16)
	if _, err := readImage(encode(t, w), f16); err == nil {
		t.Error("bf16 file accepted into an fp16 model")
	}
}

func TestSafetensorsTiedAndShards(t *testing.T) {
	cfg := tinyConfig(ir.F32)
	cfg.KeyScheme, cfg.TiedEmbeddings, cfg.NLayers = SchemeHF, true, 2
	w, _ := InitWeights(cfg, 5)
	if _, has := w["lm_head.weight"]; has {
		t.Fatal("tied weights hold a separate lm_head")
	}
	// A tied checkpoint that still stores lm_head.weight, plus an inv_freq
	// buffer and a layer beyond the model: all ignored.
	extra := Weights{}
	maps.Copy(extra, w)
	extra["lm_head.weight"] = tensor.New(ir.F32, 8, 8)
	extra["model.layers.0.self_attn.rotary_emb.inv_freq"] = tensor.New(ir.F32, 1)
	extra["model.layers.5.self_attn.q_norm.weight"] = tensor.New(ir.F32, 2)
	got, err := readImage(encode(t, extra), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameWeights(t, got, w, cfg)

	// The same weights split over two shard files.
	dir := t.TempDir()
	a, b := Weights{}, Weights{}
	for i, spec := range Keys(cfg) {
		if i%2 == 0 {
			a[spec.Key] = w[spec.Key]
		} else {
			b[spec.Key] = w[spec.Key]
		}
	}
	pa, pb := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	os.WriteFile(pa, encode(t, a), 0o644)
	os.WriteFile(pb, encode(t, b), 0o644)
	got, err = LoadSafetensorsShards([]string{pa, pb}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameWeights(t, got, w, cfg)
	if _, err := LoadSafetensors(pa, cfg); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("one shard alone: %v", err)
	}
	if _, err := LoadSafetensorsShards([]string{pa, pa}, cfg); err == nil || !strings.Contains(err.Error(), "is in both") {
		t.Errorf("duplicate shard: %v", err)
	}
}

func TestSafetensorsKeyErrors(t *testing.T) {
	cfg := tinyConfig(ir.F32)
	cfg.KeyScheme = SchemeHF
	cfg.NLayers = 3
	w, _ := InitWeights(cfg, 1)
	names := KeyNames(cfg)
	delete(w, names.Layers[2].V)
	w[names.Layers[0].Up] = tensor.New(ir.F32, 4, 7)
	w["model.layers.1.self_attn.q_proj.bias"] = tensor.New(ir.F32, 8)
	w["model.layers.0.self_attn.q_norm.weight"] = tensor.New(ir.F32, 2)
	_, err := readImage(encode(t, w), cfg)
	var we *WeightsError
	if !errors.As(err, &we) {
		t.Fatalf("got %v, want a WeightsError", err)
	}
	for _, want := range []string{
		"1 expected tensor(s) missing", "model.layers.2.self_attn.v_proj.weight",
		"model.layers.0.mlp.up_proj.weight: shape [4 7] in the file, the model needs [4 8]",
		"projection bias tensor(s)", "model.layers.1.self_attn.q_proj.bias",
		"does not model (e.g. model.layers.0.self_attn.q_norm.weight)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	// An empty file lists 8 missing keys and counts the rest.
	_, err = readImage(encode(t, Weights{}), cfg)
	if err == nil || !strings.Contains(err.Error(), "30 expected tensor(s) missing") || !strings.Contains(err.Error(), "and 22 more") {
		t.Errorf("empty file: %v", err)
	}
	// A tensor in an unloadable dtype.
	img := rawFile(`{"model.embed_tokens.weight":{"dtype":"I64","shape":[8,8],"data_offsets":[0,512]}}`, make([]byte, 512))
	if _, err := readImage(img, cfg); err == nil || !strings.Contains(err.Error(), "dtype I64 cannot be loaded") {
		t.Errorf("I64 tensor: %v", err)
	}
}

func TestSafetensorsCorruptFiles(t *testing.T) {
	cfg := tinyConfig(ir.F32)
	good := encode(t, mustInit(t, cfg))
	hl := binary.LittleEndian.Uint64(good)
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	cases := []struct {
		name string
		img  []byte
		want string
	}{
		{"empty", nil, "shorter than the 8-byte header length"},
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"header over limit", append(huge, '{', '}'), "exceeds the 104857600-byte limit"},
		{"header past end", good[:8+hl-1], "exceeds the"},
		{"truncated data", good[:len(good)-1], "lie outside the"},
		{"bad json", rawFile(`{"a":`, nil), "header is not valid JSON"},
		{"not object", rawFile(`[1]`, nil), "header must be a JSON object"},
		{"entry not object", rawFile(`{"a": 3}`, nil), "entry must be an object"},
		{"no dtype", rawFile(`{"a": {"shape": [1], "data_offsets": [0, 4]}}`, make([]byte, 4)), "dtype must be a string"},
		{"bad shape", rawFile(`{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}`, make([]byte, 4)), "invalid dimension"},
		{"huge shape", rawFile(`{"a": {"dtype": "F32", "shape": [2147483647, 2147483647, 2147483647], "data_offsets": [0, 4]}}`, make([]byte, 4)), "too large"},
		{"offsets reversed", rawFile(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}`, make([]byte, 4)), "lie outside"},
		{"offsets short", rawFile(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`, make([]byte, 4)), "data_offsets must be"},
		{"length mismatch", rawFile(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}`, make([]byte, 4)), "needs 8 bytes, data_offsets span 4"},
		{"duplicate", rawFile(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`, make([]byte, 4)), "listed twice"},
	}
	for _, tc := range cases {
		_, err := readImage(tc.img, cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	// __metadata__ of any shape is ignored.
	meta := rawFile(`{"__metadata__": {"format": "pt", "x": [1]}}`, nil)
	if _, err := readImage(meta, cfg); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("metadata-only file: %v", err)
	}
}

func TestWriteSafetensorsRefusesBadTensors(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, Weights{"a": tensor.New(ir.I32, 2)}); err == nil {
		t.Error("int tensor written")
	}
	if err := WriteSafetensors(&buf, Weights{"a": {DType: ir.F32, Shape: []int{3}, F: []float32{1}}}); err == nil {
		t.Error("tensor with a short value slice written")
	}
	if err := WriteSafetensors(&buf, Weights{"a": nil}); err == nil {
		t.Error("nil tensor written")
	}
}

func mustInit(t testing.TB, cfg Config) Weights {
	t.Helper()
	w, err := InitWeights(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func FuzzLoadSafetensors(f *testing.F) {
	cfg := tinyConfig(ir.F32)
	good := encode(f, mustInit(f, cfg))
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(encode(f, mustInit(f, tinyConfig(ir.BF16))))
	f.Add(rawFile(`{"embed.weight": {"dtype": "F32", "shape": [8, 8], "data_offsets": [0, 256]}}`, make([]byte, 256)))
	f.Add(rawFile(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 99999999999]}}`, nil))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	// Quantised checkpoints (int8 and packed int4 with F16 scales) of a
	// small quantised model, read by the same parser.
	q8 := quantConfig(ir.BF16, Quantization{Bits: 8})
	q4 := quantConfig(ir.BF16, Quantization{Bits: 4, Group: 32})
	f.Add(encode(f, mustInit(f, q8)))
	f.Add(encode(f, mustInit(f, q4)))
	f.Add(rawFile(`{"layers.0.attn.q_proj.weight": {"dtype": "U8", "shape": [128, 64], "data_offsets": [0, 8192]}, `+
		`"layers.0.attn.q_proj.weight.scales": {"dtype": "BF16", "shape": [128, 4], "data_offsets": [8192, 9216]}}`, make([]byte, 9216)))
	f.Fuzz(func(t *testing.T, img []byte) {
		for _, c := range []Config{cfg, q8, q4} {
			w, err := readImage(img, c)
			if err == nil {
				if cerr := w.Check(c); cerr != nil {
					t.Fatalf("%s: loaded weights fail Check: %v", c.Name, cerr)
				}
			}
			if _, merr := MapSafetensors(img, c); (merr == nil) != (err == nil) {
				t.Fatalf("%s: ReadSafetensors: %v, MapSafetensors: %v", c.Name, err, merr)
			}
		}
	})
}

// within reports whether p points into data.
func within(p unsafe.Pointer, data []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return uintptr(p) >= lo && uintptr(p) < lo+uintptr(len(data))
}

// MapSafetensors views the image's bytes in place when they are aligned
// (the weights are not copied) and copies them when they are not, with the
// values of ReadSafetensors either way.
func TestMapSafetensorsViewsAlignedImages(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.BF16, ir.F16} {
		cfg := tinyConfig(dt)
		img := encode(t, mustInit(t, cfg))
		want, err := readImage(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		aligned := make([]byte, len(img)+8)[8:] // Go allocations are 8-aligned
		copy(aligned, img)
		odd := make([]byte, len(img)+1)[1:]
		copy(odd, img)
		for _, c := range []struct {
			data []byte
			view bool
		}{{aligned, littleEndianHost}, {odd, false}} {
			got, err := MapSafetensors(c.data, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sameWeights(t, got, want, cfg)
			for k, tt := range got {
				p := unsafe.Pointer(unsafe.SliceData(tt.F))
				if dt != ir.F32 {
					p = unsafe.Pointer(unsafe.SliceData(tt.Half))
				}
				if within(p, c.data) != c.view {
					t.Fatalf("%s %s: viewing the image is %v, want %v", dt, k, !c.view, c.view)
				}
			}
		}
	}
}
