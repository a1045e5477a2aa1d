package model

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// Quantised checkpoints (docs/spec/quantization.md, "Files"). For every
// quantised projection KEY (a key of Keys, e.g. "layers.0.attn.q_proj.weight")
// a file holds
//
//	KEY          I8 [N, K]      int8, two's complement           (w8a16)
//	             U8 [N, K/2]    int4 as q + 8, two per byte,      (w4a16)
//	                            column 2b in the low nibble of byte b
//	KEY.scales   F16 [N, K/group]   (BF16 or F32 when every value is an F16)
//
// and for a key ending in ".weight" the scales may instead be named
// "<prefix>.weight_scale" (the int8 per-channel layout of the
// compressed-tensors format, [N, 1]). Everything else of the model (the
// embedding, the norms, a float lm_head) is stored at its float dtype, as in
// an unquantised checkpoint. Other quantisation layouts are refused by name.

// foreignSuffixes name tensors of quantisation layouts amk does not read:
// GPTQ/AWQ packed int32 weights and zero points, compressed-tensors packed
// int4, zero points of asymmetric schemes, block-wise fp8 inverse scales.
var foreignSuffixes = []string{".qweight", ".qzeros", ".g_idx", ".weight_packed", ".weight_zero_point",
	".weight_shape", ".weight_scale_inv", ".zeros", ".input_scale"}

// foreignQuantTensor reports whether a file's tensor belongs to a
// quantisation layout amk refuses.
func foreignQuantTensor(name string) bool {
	for _, s := range foreignSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// scalesAlias is the compressed-tensors name of KEY's scales, or "" when
// KEY has none (it does not end in ".weight").
func scalesAlias(key string) string {
	if p, ok := strings.CutSuffix(key, ".weight"); ok {
		return p + ".weight_scale"
	}
	return ""
}

// lookupEntry finds spec's tensor in the index: its key, or for scales the
// alias. It returns "" when absent, or a problem when both names are there.
func lookupEntry(index map[string]stRef, spec KeySpec) (string, string) {
	if spec.Role != RoleScales {
		if _, ok := index[spec.Key]; ok {
			return spec.Key, ""
		}
		return "", ""
	}
	alias := scalesAlias(strings.TrimSuffix(spec.Key, ir.ScalesSuffix))
	_, has := index[spec.Key]
	_, hasAlias := index[alias]
	switch {
	case has && hasAlias:
		return "", fmt.Sprintf("%s and %s both hold the scales of one weight; keep one", spec.Key, alias)
	case has:
		return spec.Key, ""
	case hasAlias && alias != "":
		return alias, ""
	}
	return "", ""
}

// checkQuantEntry checks a quantised projection (I8 [N, K] or U8 [N, K/2])
// or its scales (F16, BF16 or F32 [N, groups]; the values are checked when
// read).
func checkQuantEntry(e stEntry, spec KeySpec) string {
	switch {
	case spec.Role == RoleScales:
		if !slices.Equal(e.shape, spec.Shape) {
			return fmt.Sprintf("scales of shape %v in the file, the model needs %v (one per output row and group)", e.shape, spec.Shape)
		}
		if _, ok := stDType(e.dtype); !ok {
			return fmt.Sprintf("scales of dtype %s cannot be loaded (F16, or BF16/F32 holding F16 values)", e.dtype)
		}
	case spec.DType == ir.I8:
		if e.dtype != "I8" || !slices.Equal(e.shape, spec.Shape) {
			return fmt.Sprintf("%s %v in the file; an int8 weight is I8 %v", e.dtype, e.shape, spec.Shape)
		}
	case spec.DType == ir.I4:
		packed := []int{spec.Shape[0], spec.Shape[1] / 2}
		if e.dtype != "U8" || !slices.Equal(e.shape, packed) {
			return fmt.Sprintf("%s %v in the file; a packed int4 weight is U8 %v (two columns per byte)", e.dtype, e.shape, packed)
		}
	default:
		return fmt.Sprintf("no quantised layout for a %s weight", spec.DType)
	}
	return ""
}

// isIntegerEntry reports whether a file's tensor holds integers amk reads as
// quantised weights.
func isIntegerEntry(e stEntry) bool { return e.dtype == "I8" || e.dtype == "U8" }

// holdsQuantized reports whether the index holds cfg's first quantised
// projection as integers (a quantised checkpoint) rather than as floats.
func holdsQuantized(index map[string]stRef, cfg Config) bool {
	for _, spec := range Keys(cfg) {
		if spec.Role == RoleLinear {
			ref, ok := index[spec.Key]
			return ok && isIntegerEntry(ref.entry)
		}
	}
	return false
}

// InspectSafetensors returns the quantization of the checkpoint in paths for
// the model shape cfg (whose own Quant is ignored): none when its
// projections are floats; otherwise the bits (I8: 8, U8: 4), the group
// (hidden / the scales' columns of the first q projection; 0 for one int8
// scale per row) and whether the lm_head is stored at the float dtype (or,
// for tied embeddings, absent). Only the headers are read.
func InspectSafetensors(paths []string, cfg Config) (Quantization, error) {
	index := map[string]stRef{}
	for _, p := range paths {
		fh, err := os.Open(p)
		if err != nil {
			return Quantization{}, err
		}
		info, err := fh.Stat()
		if err == nil {
			var f *stFile
			if f, err = parseSafetensors(p, fh, info.Size()); err == nil {
				for _, k := range f.order {
					index[k] = stRef{f, f.entries[k]}
				}
			}
		}
		fh.Close()
		if err != nil {
			return Quantization{}, err
		}
	}
	base := cfg.Float()
	names := KeyNames(base)
	if len(names.Layers) == 0 {
		return Quantization{}, nil
	}
	q := names.Layers[0].Q
	ref, ok := index[q]
	if !ok || !isIntegerEntry(ref.entry) {
		return Quantization{}, nil
	}
	out := Quantization{Bits: 8}
	if ref.entry.dtype == "U8" {
		out.Bits = 4
	}
	sname, msg := lookupEntry(index, KeySpec{Key: q + ir.ScalesSuffix, Role: RoleScales})
	if msg != "" || sname == "" {
		return Quantization{}, fmt.Errorf("the checkpoint stores %s as %s but has no scales for it (%s%s): %s", q, ref.entry.dtype, q, ir.ScalesSuffix, msg)
	}
	sh := index[sname].entry.shape
	if len(sh) != 2 || sh[1] <= 0 || base.Hidden%sh[1] != 0 {
		return Quantization{}, fmt.Errorf("scales %s of shape %v do not split hidden=%d into whole groups", sname, sh, base.Hidden)
	}
	if sh[1] > 1 || out.Bits == 4 {
		out.Group = base.Hidden / sh[1]
	}
	lm := "lm_head.weight"
	if !base.TiedEmbeddings {
		lm = names.LMHead
	}
	head, ok := index[lm]
	out.FloatLMHead = !ok || !isIntegerEntry(head.entry)
	cfg.Quant = out
	if err := cfg.Validate(); err != nil {
		return Quantization{}, fmt.Errorf("the checkpoint's quantization (%s) does not fit the model: %w", out, err)
	}
	return out, nil
}

// readQuantTensor reads a quantised projection or its scales (checked by
// checkQuantEntry): int8 bytes and packed int4 bytes as stored (views of an
// in-memory file), scales as F16 bit patterns, refusing BF16/F32 scales
// that are not F16 values.
func readQuantTensor(ref stRef, spec KeySpec) (*tensor.Tensor, error) {
	e := ref.entry
	var b []byte
	if data := ref.file.data; data != nil {
		b = data[e.begin:e.end]
	} else {
		b = make([]byte, e.end-e.begin)
		if err := readAtFull(ref.file.r, b, e.begin); err != nil {
			return nil, &SafetensorsError{File: ref.file.name, Msg: fmt.Sprintf("reading %s: %v", spec.Key, err)}
		}
	}
	t := &tensor.Tensor{DType: spec.DType, Shape: append([]int(nil), spec.Shape...)}
	switch spec.DType {
	case ir.I8:
		t.Bytes = b
		return t, nil
	case ir.I4:
		t.Packed = b
		return t, nil
	}
	src, _ := stDType(e.dtype)
	if src == ScalesDType {
		if v := viewStored(src, spec.Shape, b); v != nil {
			return v, nil
		}
	}
	n := t.Numel()
	vals := make([]float32, n)
	decodeFloats(vals, b, src)
	t.Half = make([]uint16, n)
	for i, v := range vals {
		h := tensor.FloatToF16(v)
		if w := tensor.F16ToFloat(h); math.Float32bits(w) != math.Float32bits(v) {
			return nil, fmt.Errorf("scales %s: value %d (%g, %s) is not an F16 value; amk keeps scales as F16 (docs/spec/quantization.md)", spec.Key, i, v, e.dtype)
		}
		t.Half[i] = h
	}
	return t, nil
}

// WithCheckpointQuantization is cfg with the quantization the checkpoint
// in paths holds (InspectSafetensors): cfg itself for a float checkpoint
// (which LoadSafetensors quantises when cfg is quantised) or one of cfg's
// own scheme; cfg quantised as the file is when cfg names none; an error
// when the two name different schemes.
func WithCheckpointQuantization(cfg Config, paths []string) (Config, error) {
	q, err := InspectSafetensors(paths, cfg)
	switch {
	case err != nil:
		return Config{}, err
	case !q.On() || q == cfg.Quant:
		return cfg, nil
	case !cfg.Quant.On():
		return cfg.Quantized(q), nil
	}
	return Config{}, fmt.Errorf("the checkpoint holds %s weights, but the model asks for %s", q, cfg.Quant)
}
