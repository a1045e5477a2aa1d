package model

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// quantConfig is a small model that every scheme fits: hidden and
// intermediate multiples of 128.
func quantConfig(dt ir.DType, q Quantization) Config {
	cfg := Config{
		Name: "qtiny", Hidden: 128, NHeads: 4, NKVHeads: 2, HeadDim: 32, Intermediate: 256, Vocab: 64,
		NLayers: 2, RMSEps: 1e-6, RopeTheta: 10000, MaxSeq: 16, DType: dt, KeyScheme: SchemeToy,
	}
	return cfg.Quantized(q)
}

func mustQuant(t testing.TB, s string) Quantization {
	t.Helper()
	q, err := ParseQuantization(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestParseQuantization(t *testing.T) {
	good := map[string]Quantization{
		"":                 {},
		"none":             {},
		"w8a16":            {Bits: 8},
		"W8A16":            {Bits: 8},
		"w4a16":            {Bits: 4, Group: 128},
		"w4a16-g32":        {Bits: 4, Group: 32},
		"w8a16-g64":        {Bits: 8, Group: 64},
		"w4a16-g64-fphead": {Bits: 4, Group: 64, FloatLMHead: true},
		"w8a16-fphead":     {Bits: 8, FloatLMHead: true},
	}
	for s, want := range good {
		q, err := ParseQuantization(s)
		if err != nil || q != want {
			t.Errorf("%q: %+v, %v; want %+v", s, q, err, want)
		}
		if back, err := ParseQuantization(q.String()); err != nil || back != q {
			t.Errorf("%q: String %q reads back as %+v, %v", s, q.String(), back, err)
		}
	}
	for _, s := range []string{"w4a8", "w4a16-g48", "w4a16-g", "int8", "w8a16-g128x", "w8a16-fphead-g64"} {
		if _, err := ParseQuantization(s); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	for spec, want := range map[string]string{"small:w8a16": "small", "small": "small", "dir/x:y/config.json": "dir/x:y/config.json"} {
		name, _, err := SplitModelSpec(spec)
		if err != nil || name != want {
			t.Errorf("SplitModelSpec(%q) = %q, %v", spec, name, err)
		}
	}
	if _, _, err := SplitModelSpec("small:w4a16-g48"); err == nil {
		t.Error("a misspelt scheme is taken for part of a path")
	}
	if name, q, _ := SplitModelSpec(ModelSpec("toy", Quantization{Bits: 4, Group: 32})); name != "toy" || q.Group != 32 {
		t.Errorf("ModelSpec round trip: %q %+v", name, q)
	}
}

func TestQuantizationValidate(t *testing.T) {
	cfg := quantConfig(ir.BF16, Quantization{Bits: 4})
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "int4 quantization needs a group") {
		t.Errorf("int4 without a group: %v", err)
	}
	cfg = quantConfig(ir.BF16, Quantization{Bits: 4, Group: 128})
	cfg.Hidden = 192 // hidden = heads*head_dim stays 128: q's K is 192
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "hidden (192) is not a multiple") {
		t.Errorf("hidden not a multiple of the group: %v", err)
	}
	for _, name := range []string{"small", "llama-1b", "tinyllama", "llama-8b", "toy"} {
		base, _ := Preset(name)
		schemes := []string{"w8a16", "w4a16", "w4a16-g32"}
		if name == "toy" {
			schemes = []string{"w8a16", "w4a16-g32", "w4a16-g64"} // hidden 64
		}
		for _, s := range schemes {
			qc := base.Quantized(mustQuant(t, s))
			if err := qc.Validate(); err != nil {
				t.Errorf("%s %s: %v", name, s, err)
			}
		}
	}
}

// Keys of a quantised model: the projections at their integer dtype, each
// followed by its F16 scales; norms and the embedding at the model dtype;
// a tied model's quantised lm_head stored apart from the table.
func TestQuantizedKeysAndBytes(t *testing.T) {
	small, _ := Preset("small")
	w8, w4 := small.Quantized(mustQuant(t, "w8a16")), small.Quantized(mustQuant(t, "w4a16"))
	specs := Keys(w4)
	byKey := map[string]KeySpec{}
	for _, s := range specs {
		byKey[s.Key] = s
	}
	q := byKey["layers.0.attn.q_proj.weight"]
	sc := byKey["layers.0.attn.q_proj.weight.scales"]
	if q.DType != ir.I4 || sc.DType != ir.F16 || sc.Role != RoleScales || sc.Shape[0] != 2048 || sc.Shape[1] != 16 {
		t.Errorf("q %+v, scales %+v", q, sc)
	}
	if e := byKey["embed.weight"]; e.DType != ir.BF16 {
		t.Errorf("embedding %+v", e)
	}
	if byKey["lm_head.weight"].DType != ir.I4 {
		t.Errorf("lm_head %+v", byKey["lm_head.weight"])
	}
	// The floor's numerator: a quarter of bf16 for w4a16 (+ its scales).
	fb, b8, b4 := small.WeightBytes(), w8.WeightBytes(), w4.WeightBytes()
	embed := int64(small.Vocab * small.Hidden * 2)
	if r := float64(b4-embed) / float64(fb-embed); r < 0.25 || r > 0.27 {
		t.Errorf("w4a16 streams %.3f of bf16's projection bytes", r)
	}
	if r := float64(b8-embed) / float64(fb-embed); r < 0.5 || r > 0.51 {
		t.Errorf("w8a16 streams %.3f of bf16's projection bytes", r)
	}
	if w4.NumParams() != small.NumParams() {
		t.Errorf("params %d vs %d", w4.NumParams(), small.NumParams())
	}
	tied, _ := Preset("llama-1b")
	tq := tied.Quantized(mustQuant(t, "w8a16"))
	n := KeyNames(tq)
	if n.LMHead != "lm_head.weight" || tq.LMHeadShared() {
		t.Errorf("tied quantised lm_head named %q", n.LMHead)
	}
	if fp := tied.Quantized(mustQuant(t, "w8a16-fphead")); !fp.LMHeadShared() || KeyNames(fp).LMHead != KeyNames(tied).Embed {
		t.Error("a float lm_head of a tied model is not the table")
	}
}

// Quantize follows docs/spec/quantization.md: the scale is the F16 nearest
// max|w|/qmax; every value reconstructs within half a scale step (the
// clamp never bites since |w| <= max|w|); int4 nibbles lie in [1, 15].
func TestQuantizeRoundToNearest(t *testing.T) {
	for _, scheme := range []string{"w8a16", "w4a16-g32", "w8a16-g64"} {
		cfg := quantConfig(ir.BF16, mustQuant(t, scheme))
		base := mustInit(t, cfg.Float())
		qw, err := Quantize(cfg, base)
		if err != nil {
			t.Fatal(err)
		}
		if err := qw.Check(cfg); err != nil {
			t.Fatal(err)
		}
		key := "layers.1.mlp.down_proj.weight"
		src, q, s := base[key], qw[key], qw[key+ir.ScalesSuffix]
		k := src.Shape[1]
		group := cfg.Quant.GroupOf(k)
		qmax := float64(cfg.Quant.QMax())
		w := src.Floats()
		for r := 0; r < src.Shape[0]; r++ {
			for g := 0; g < s.Shape[1]; g++ {
				amax := 0.0
				for c := g * group; c < (g+1)*group; c++ {
					amax = max(amax, math.Abs(float64(w[r*k+c])))
				}
				sc := float64(tensor.F16ToFloat(s.Half[r*s.Shape[1]+g]))
				// nearest: no F16 neighbour is closer to amax/qmax
				h := s.Half[r*s.Shape[1]+g]
				for _, n := range []uint16{h - 1, h + 1} {
					if math.Abs(float64(tensor.F16ToFloat(n))-amax/qmax) < math.Abs(sc-amax/qmax) {
						t.Fatalf("%s row %d group %d: scale %g is not the F16 nearest %g", scheme, r, g, sc, amax/qmax)
					}
				}
				for c := g * group; c < (g+1)*group; c++ {
					e := r*k + c
					var v int
					if q.DType == ir.I4 {
						nib := tensor.Nibble(q.Packed, e)
						if nib < 1 || nib > 15 {
							t.Fatalf("%s: nibble %d", scheme, nib)
						}
						v = nib - 8
					} else {
						v = int(int8(q.Bytes[e]))
					}
					if math.Abs(float64(v)) > qmax || math.Abs(float64(v)*sc-float64(w[e])) > sc/2*(1+1e-6) {
						t.Fatalf("%s [%d,%d]: w %g, q %d, scale %g", scheme, r, c, w[e], v, sc)
					}
				}
			}
		}
		// Shared, not copied: the norms and the embedding are the same tensors.
		if qw["embed.weight"] != base["embed.weight"] || qw["final_norm"] != base["final_norm"] {
			t.Errorf("%s: float tensors were copied", scheme)
		}
	}
	if sb := nearestF16(1, 3); tensor.F16ToFloat(sb) != tensor.Round(ir.F16, 1.0/3) {
		t.Errorf("nearestF16(1/3) = %v", tensor.F16ToFloat(sb))
	}
	if sb := nearestF16(0, 127); sb != 0 {
		t.Errorf("nearestF16(0) = %#x", sb)
	}
	if sb := nearestF16(1e9, 7); sb != 0x7c00 {
		t.Errorf("nearestF16(huge) = %#x", sb)
	}
	cfg := quantConfig(ir.F32, mustQuant(t, "w8a16"))
	base := mustInit(t, cfg.Float())
	huge := base["layers.0.attn.q_proj.weight"].Clone()
	huge.F[5] = 1e8
	base["layers.0.attn.q_proj.weight"] = huge
	if _, err := Quantize(cfg, base); err == nil || !strings.Contains(err.Error(), "beyond the F16 range") {
		t.Errorf("an out-of-range scale: %v", err)
	}
}

// The eager pass on quantised weights equals the eager pass of an F32
// model whose weights are the dequantised values q·s: the quantised path
// computes exactly the documented dequantisation.
func TestEagerQuantizedIsTheDequantizedModel(t *testing.T) {
	for _, scheme := range []string{"w8a16", "w4a16-g32", "w4a16-g64-fphead"} {
		cfg := quantConfig(ir.F32, mustQuant(t, scheme))
		qw := mustInit(t, cfg)
		deq := Weights{}
		for _, spec := range Keys(cfg.Float()) {
			src := qw[spec.Key]
			if src.DType == ir.F32 {
				deq[spec.Key] = src
				continue
			}
			m := newQuantMatrix(src, qw[spec.Key+ir.ScalesSuffix], cfg.Quant.GroupOf(src.Shape[1]))
			d := tensor.New(ir.F32, src.Shape...)
			for r := 0; r < m.rows; r++ {
				m.dequantRow(r, d.F[r*m.cols:])
			}
			deq[spec.Key] = d
		}
		eq, err := NewEager(cfg, qw)
		if err != nil {
			t.Fatal(err)
		}
		ef, err := NewEager(cfg.Float(), deq)
		if err != nil {
			t.Fatal(err)
		}
		for pos, tok := range []int32{3, 17, 40} {
			a, err1 := eq.Step(tok, pos)
			b, err2 := ef.Step(tok, pos)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s pos %d logit %d: quantised %v, dequantised %v", scheme, pos, i, a[i], b[i])
				}
			}
		}
	}
}

func TestQuantizedSafetensors(t *testing.T) {
	for _, scheme := range []string{"w8a16", "w4a16-g32", "w4a16-fphead"} {
		cfg := quantConfig(ir.BF16, mustQuant(t, scheme))
		base := mustInit(t, cfg.Float())
		want, err := Quantize(cfg, base)
		if err != nil {
			t.Fatal(err)
		}
		img := encode(t, want)
		got, err := readImage(img, cfg)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		sameStored(t, scheme, got, want, cfg)
		mapped, err := MapSafetensors(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sameStored(t, scheme+" mapped", mapped, want, cfg)
		// A float checkpoint of the same model, loaded as quantised: the
		// same weights as Quantize.
		fromFloat, err := readImage(encode(t, base), cfg)
		if err != nil {
			t.Fatal(err)
		}
		sameStored(t, scheme+" from float", fromFloat, want, cfg)
		// The file says what it holds.
		path := t.TempDir() + "/q.safetensors"
		writeFile(t, path, img)
		q, err := InspectSafetensors([]string{path}, cfg.Float())
		if err != nil || q != cfg.Quant {
			t.Errorf("%s: InspectSafetensors = %+v, %v", scheme, q, err)
		}
		writeFile(t, path, encode(t, base))
		if q, err := InspectSafetensors([]string{path}, cfg.Float()); err != nil || q.On() {
			t.Errorf("%s: a float file inspects as %+v, %v", scheme, q, err)
		}
		// A quantised file is not a float model's weights.
		if _, err := readImage(img, cfg.Float()); err == nil {
			t.Errorf("%s: quantised weights loaded as float", scheme)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameStored compares two quantised models' tensors at their stored bits.
func sameStored(t *testing.T, what string, got, want Weights, cfg Config) {
	t.Helper()
	if err := got.Check(cfg); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, spec := range Keys(cfg) {
		g, w := got[spec.Key], want[spec.Key]
		switch {
		case spec.DType == ir.I8 && !bytes.Equal(g.Bytes, w.Bytes),
			spec.DType == ir.I4 && !bytes.Equal(g.Packed, w.Packed):
			t.Fatalf("%s: %s differs", what, spec.Key)
		case spec.DType.IsFloat():
			gf, wf := g.Floats(), w.Floats()
			for i := range wf {
				if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
					t.Fatalf("%s: %s[%d] = %v, want %v", what, spec.Key, i, gf[i], wf[i])
				}
			}
		}
	}
}

// Layouts other than amk's are refused by name, with every problem listed;
// compressed-tensors' weight_scale is accepted; non-F16 scales are refused.
func TestQuantizedSafetensorsRefusals(t *testing.T) {
	cfg := quantConfig(ir.BF16, mustQuant(t, "w8a16"))
	w := mustInit(t, cfg)
	key := "layers.0.attn.q_proj.weight"
	edit := func(f func(Weights)) []byte {
		c := Weights{}
		maps.Copy(c, w)
		f(c)
		return encode(t, c)
	}
	alias := edit(func(c Weights) {
		c["layers.0.attn.q_proj.weight_scale"] = c[key+ir.ScalesSuffix]
		delete(c, key+ir.ScalesSuffix)
	})
	got, err := readImage(alias, cfg)
	if err != nil {
		t.Fatalf("weight_scale alias: %v", err)
	}
	sameStored(t, "alias", got, w, cfg)
	bf := tensor.NewStored(ir.BF16, w[key+ir.ScalesSuffix].Shape...)
	for i, h := range w[key+ir.ScalesSuffix].Half {
		bf.Half[i] = tensor.FloatToBF16(tensor.F16ToFloat(h))
	}
	exact := edit(func(c Weights) { c[key+ir.ScalesSuffix] = bf })
	if _, err := readImage(exact, cfg); err != nil {
		t.Errorf("BF16 scales that are F16 values: %v", err)
	}
	bf.Half[3] = tensor.FloatToBF16(1e-9) // below the F16 range
	notF16 := edit(func(c Weights) { c[key+ir.ScalesSuffix] = bf })
	if _, err := readImage(notF16, cfg); err == nil || !strings.Contains(err.Error(), "value 3 (9.968062e-10, BF16) is not an F16 value") {
		t.Errorf("BF16 scales that are not F16 values: %v", err)
	}
	cases := map[string]struct {
		img  []byte
		want string
	}{
		"gptq": {edit(func(c Weights) {
			c["layers.0.attn.q_proj.qweight"] = c[key]
			c["layers.0.attn.q_proj.qzeros"] = c[key+ir.ScalesSuffix]
		}), "quantisation layout amk does not read (e.g. layers.0.attn.q_proj.qweight, layers.0.attn.q_proj.qzeros)"},
		"both scale names": {edit(func(c Weights) { c["layers.0.attn.q_proj.weight_scale"] = c[key+ir.ScalesSuffix] }), "both hold the scales"},
		"scales one group short": {edit(func(c Weights) {
			s := c[key+ir.ScalesSuffix]
			c[key+ir.ScalesSuffix] = tensor.NewStored(ir.F16, s.Shape[0]-1, s.Shape[1])
		}), "scales of shape [127 1] in the file, the model needs [128 1]"},
		"int4 bytes for an int8 model": {edit(func(c Weights) {
			c[key] = &tensor.Tensor{DType: ir.I4, Shape: []int{128, 128}, Packed: make([]byte, 128*64)}
		}), "U8 [128 64] in the file; an int8 weight is I8 [128 128]"},
		"missing scales": {edit(func(c Weights) { delete(c, key+ir.ScalesSuffix) }), "layers.0.attn.q_proj.weight.scales"},
	}
	for name, c := range cases {
		_, err := readImage(c.img, cfg)
		var we *WeightsError
		if !errors.As(err, &we) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a WeightsError containing %q", name, err, c.want)
		}
	}
}

// A model argument names its scheme after the preset (or path); the API's
// resolver keeps it.
func TestLoadQuantizedSpec(t *testing.T) {
	cfg, err := Load("small:w4a16-g64")
	if err != nil || cfg.Quant != (Quantization{Bits: 4, Group: 64}) || cfg.Name != "small(4L/2048h) w4a16-g64" {
		t.Fatalf("Load: %+v %q, %v", cfg.Quant, cfg.Name, err)
	}
	if f := cfg.Float(); f.Name != "small(4L/2048h)" || f.Quant.On() {
		t.Errorf("Float: %q %+v", f.Name, f.Quant)
	}
	if _, err := Load("toy:w4a16"); err == nil || !strings.Contains(err.Error(), "not a multiple of the quantization group 128") {
		t.Errorf("toy with groups of 128: %v", err)
	}
	if _, err := Load("small:w4a16-g100"); err == nil {
		t.Error("a bad scheme loads")
	}
	if r, err := ResolveUnder("model", "small:w8a16", "", true); err != nil || r != "small:w8a16" {
		t.Errorf("ResolveUnder: %q, %v", r, err)
	}
	if _, err := ResolveUnder("model", "/etc/x:w8a16", "", true); !errors.Is(err, ErrModelNotAllowed) {
		t.Errorf("ResolveUnder of a path outside: %v", err)
	}
}

// The quality figures are taken where both models see the same history:
// a model compared with itself agrees everywhere; the int4 model of the
// seeded weights differs from its float twin but stays close.
func TestCompareQuality(t *testing.T) {
	cfg := quantConfig(ir.BF16, mustQuant(t, "w4a16-g32"))
	base := mustInit(t, cfg.Float())
	qw, err := Quantize(cfg, base)
	if err != nil {
		t.Fatal(err)
	}
	ef, _ := NewEager(cfg.Float(), base)
	ef2, _ := NewEager(cfg.Float(), base)
	eq, err := NewEager(cfg, qw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	self, err := CompareQuality(ctx, ef, ef2, []int32{1, 2}, 8)
	if err != nil || self.MaxAbsLogitErr != 0 || self.Top1Agreement != 1 || self.GreedyPrefix != 8 {
		t.Fatalf("self comparison: %+v, %v", self, err)
	}
	q, err := CompareQuality(ctx, ef, eq, []int32{1, 2}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxAbsLogitErr <= 0 || q.MaxAbsLogitErr > 0.5*q.MaxAbsFloatLogit || len(q.FloatTokens) != 8 || len(q.QuantTokens) != 8 || q.Scheme != "w4a16-g32" {
		t.Errorf("int4 vs float: %+v", q)
	}
	if !slices.Equal(q.FloatTokens, self.FloatTokens) {
		t.Errorf("the float continuation changed: %v vs %v", q.FloatTokens, self.FloatTokens)
	}
	if _, err := CompareQuality(ctx, ef, eq, []int32{1}, 99); err == nil {
		t.Error("beyond max_seq accepted")
	}
}

// Model arguments from outside (CLI, API, queue payloads) split into a
// model and a scheme without a panic; a scheme read back renders to itself.
func FuzzSplitModelSpec(f *testing.F) {
	for _, s := range []string{"small:w8a16", "small:w4a16-g64-fphead", "dir/x:y/config.json", "small:", ":w8a16", "small:W4A16-G32", "x:w4a16-g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, q, err := SplitModelSpec(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(s, name) {
			t.Fatalf("%q: the name %q is not its head", s, name)
		}
		if !q.On() {
			return
		}
		back, err := ParseQuantization(q.String())
		if err != nil || back != q {
			t.Fatalf("%q: scheme %+v renders as %q, which reads back as %+v, %v", s, q, q.String(), back, err)
		}
		cfg, err := Preset("small")
		if err == nil {
			qc := cfg.Quantized(q)
			_ = qc.Validate() // every scheme is checked, never a panic
		}
	})
}
