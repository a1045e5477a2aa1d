package model

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// Quantization is how a model stores its projection weights
// (docs/spec/quantization.md). The zero value is no quantization: every
// weight at the model dtype. Otherwise the seven projections of every layer
// (and the lm_head unless FloatLMHead) are stored as signed integers of
// Bits bits with one scale per Group input columns of each output row
// (Group 0: one scale per output row, the whole row); activations, the
// embedding table and the RMSNorm weights stay at the model dtype.
type Quantization struct {
	Bits        int  `json:"bits"`
	Group       int  `json:"group"`
	FloatLMHead bool `json:"float_lm_head"`
}

// Quantization schemes by name.
const (
	SchemeW8A16 = "w8a16"
	SchemeW4A16 = "w4a16"
)

// QuantGroupSizes are the group sizes a scheme may name; W4A16 defaults to the
// last.
var QuantGroupSizes = []int{32, 64, 128}

// ScalesDType is the stored dtype of every scale amk writes.
const ScalesDType = ir.F16

// fpHeadSuffix names a scheme that keeps the lm_head at the model dtype.
const fpHeadSuffix = "-fphead"

// On reports whether the model is quantised.
func (q Quantization) On() bool { return q.Bits != 0 }

// WeightDType is the stored dtype of a quantised projection (I8 or I4).
func (q Quantization) WeightDType() ir.DType {
	if q.Bits == 4 {
		return ir.I4
	}
	return ir.I8
}

// QMax is the largest magnitude a quantised value takes: 127 (int8) or 7
// (int4); values are symmetric, in [-QMax, QMax].
func (q Quantization) QMax() int {
	return 1<<(q.Bits-1) - 1
}

// GroupOf is the input columns per scale of a projection of k input columns.
func (q Quantization) GroupOf(k int) int {
	if q.Group > 0 {
		return q.Group
	}
	return k
}

// String is the scheme's name as ParseQuantization reads it: "" (none),
// "w8a16", "w4a16-g128", with "-fphead" when the lm_head stays at the model
// dtype.
func (q Quantization) String() string {
	if !q.On() {
		return ""
	}
	s := fmt.Sprintf("w%da16", q.Bits)
	if q.Group > 0 {
		s += "-g" + strconv.Itoa(q.Group)
	}
	if q.FloatLMHead {
		s += fpHeadSuffix
	}
	return s
}

// ParseQuantization reads a scheme name: "" or "none" (no quantization),
// "w8a16" (int8, one scale per output channel), "w4a16" (int4, groups of
// 128), "w8a16-gG" or "w4a16-gG" with G in QuantGroupSizes, each optionally
// followed by "-fphead" (the lm_head stays at the model dtype).
func ParseQuantization(s string) (Quantization, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" || name == "none" {
		return Quantization{}, nil
	}
	bad := func() (Quantization, error) {
		return Quantization{}, fmt.Errorf("unknown quantization %q: want %s or %s, optionally -g32, -g64 or -g128, then optionally %s (e.g. w4a16-g64)",
			s, SchemeW8A16, SchemeW4A16, fpHeadSuffix)
	}
	var q Quantization
	if rest, ok := strings.CutSuffix(name, fpHeadSuffix); ok {
		q.FloatLMHead, name = true, rest
	}
	base, group, hasGroup := strings.Cut(name, "-g")
	switch base {
	case SchemeW8A16:
		q.Bits = 8
	case SchemeW4A16:
		q.Bits, q.Group = 4, QuantGroupSizes[len(QuantGroupSizes)-1]
	default:
		return bad()
	}
	if hasGroup {
		g, err := strconv.Atoi(group)
		if err != nil || !slices.Contains(QuantGroupSizes, g) {
			return bad()
		}
		q.Group = g
	}
	return q, nil
}

// problems lists what makes q unusable for cfg.
func (q Quantization) problems(cfg *Config) []string {
	if !q.On() {
		if q.Group != 0 || q.FloatLMHead {
			return []string{"quantization: group and float_lm_head need bits 8 or 4"}
		}
		return nil
	}
	var p []string
	switch {
	case q.Bits != 8 && q.Bits != 4:
		p = append(p, fmt.Sprintf("quantization bits must be 8 or 4, got %d", q.Bits))
	case q.Bits == 4 && q.Group == 0:
		p = append(p, "int4 quantization needs a group size (32, 64 or 128): one scale per row is too coarse for 4 bits")
	case q.Group != 0 && !slices.Contains(QuantGroupSizes, q.Group):
		p = append(p, fmt.Sprintf("quantization group must be 32, 64 or 128 (or 0 for one scale per output channel), got %d", q.Group))
	}
	if q.Group > 0 {
		for _, k := range []struct {
			name string
			v    int
		}{{"hidden", cfg.Hidden}, {"n_heads*head_dim", cfg.QDim()}, {"intermediate", cfg.Intermediate}} {
			if k.v > 0 && k.v%q.Group != 0 {
				p = append(p, fmt.Sprintf("%s (%d) is not a multiple of the quantization group %d", k.name, k.v, q.Group))
			}
		}
	}
	if q.Bits == 4 {
		for _, k := range []struct {
			name string
			v    int
		}{{"hidden", cfg.Hidden}, {"n_heads*head_dim", cfg.QDim()}, {"intermediate", cfg.Intermediate}} {
			if k.v > 0 && k.v%2 != 0 {
				p = append(p, fmt.Sprintf("%s (%d) must be even to pack int4 rows into whole bytes", k.name, k.v))
			}
		}
	}
	return p
}

// QuantizesRole reports whether weights of the role are stored quantised
// under q.
func (q Quantization) QuantizesRole(r Role) bool {
	return q.On() && (r == RoleLinear || (r == RoleLMHead && !q.FloatLMHead))
}

// Float is cfg without quantization: the model whose weights Quantize
// reads.
func (c Config) Float() Config {
	if c.Quant.On() {
		c.Name = strings.TrimSuffix(c.Name, " "+c.Quant.String())
	}
	c.Quant = Quantization{}
	return c
}

// Quantized is cfg with quantization q (its name says so).
func (c Config) Quantized(q Quantization) Config {
	c = c.Float()
	c.Quant = q
	if q.On() {
		c.Name += " " + q.String()
	}
	return c
}

// LMHeadShared reports whether the lm_head is the embedding table itself:
// tied embeddings, not quantised apart (a quantised lm_head of a tied model
// is a quantised copy of the table under the untied lm_head key).
func (c *Config) LMHeadShared() bool {
	return c.TiedEmbeddings && !c.Quant.QuantizesRole(RoleLMHead)
}

// ModelSpecSep separates a model argument from its quantization scheme in
// one string ("small:w8a16"): SplitModelSpec reads it, ModelSpec writes it.
const ModelSpecSep = ":"

// SplitModelSpec splits "NAME:SCHEME" (SCHEME a ParseQuantization name)
// into the model name and the scheme; an argument without a known scheme
// suffix is a plain model name (a path may hold colons).
func SplitModelSpec(spec string) (string, Quantization, error) {
	i := strings.LastIndex(spec, ModelSpecSep)
	if i < 0 {
		return spec, Quantization{}, nil
	}
	tail := spec[i+1:]
	if strings.TrimSpace(tail) == "" {
		return spec, Quantization{}, nil // a trailing colon names no scheme
	}
	q, err := ParseQuantization(tail)
	if err != nil {
		if strings.HasPrefix(strings.ToLower(tail), "w") && strings.Contains(strings.ToLower(tail), "a16") {
			return "", Quantization{}, err // a scheme that is misspelt, not a path
		}
		return spec, Quantization{}, nil
	}
	return spec[:i], q, nil
}

// ModelSpec is the model argument naming name under scheme q ("small:w8a16";
// name itself without quantization).
func ModelSpec(name string, q Quantization) string {
	if !q.On() {
		return name
	}
	return name + ModelSpecSep + q.String()
}

// Quantize returns cfg's weights (cfg quantised) from w, the weights of
// cfg.Float(): every projection Quantization.QuantizesRole names becomes
// its integer tensor and its F16 scales (docs/spec/quantization.md: per
// group, s = the F16 value nearest max|w| / QMax, q = w / s rounded half to
// even, clamped to [-QMax, QMax]; int4 stored as q + 8, two per byte, low
// nibble first); every other tensor is shared, not copied. Rows are
// quantised on every core; the result does not depend on how many.
func Quantize(cfg Config, w Weights) (Weights, error) {
	return QuantizeContext(context.Background(), cfg, w)
}

// QuantizeContext is Quantize that stops with ctx's error between rows.
func QuantizeContext(ctx context.Context, cfg Config, w Weights) (Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Quant.On() {
		return nil, fmt.Errorf("model %s is not quantised", cfg.Name)
	}
	base := cfg.Float()
	if err := w.Check(base); err != nil {
		return nil, err
	}
	baseNames := KeyNames(base)
	out := make(Weights, len(w)+8*cfg.NLayers+2)
	type job struct {
		src, q, s *tensor.Tensor
		key       string
		group     int
	}
	var jobs []job
	for _, spec := range Keys(cfg) {
		if spec.Role == RoleScales {
			continue
		}
		src := w[spec.Key]
		if spec.Role == RoleLMHead && cfg.TiedEmbeddings {
			src = w[baseNames.Embed] // the table, quantised apart as the lm_head
		}
		if !cfg.Quant.QuantizesRole(spec.Role) {
			out[spec.Key] = src
			continue
		}
		n, k := spec.Shape[0], spec.Shape[1]
		g := cfg.Quant.GroupOf(k)
		qt := tensor.New(cfg.Quant.WeightDType(), n, k)
		st := tensor.NewStored(ScalesDType, n, int(ir.QuantGroups(int64(k), int64(g))))
		out[spec.Key], out[spec.Key+ir.ScalesSuffix] = qt, st
		jobs = append(jobs, job{src, qt, st, spec.Key, g})
	}
	var rows []struct{ job, lo, hi int }
	for j, jb := range jobs {
		n, k := jb.q.Shape[0], jb.q.Shape[1]
		per := max(1, initChunk/max(k, 1))
		for lo := 0; lo < n; lo += per {
			rows = append(rows, struct{ job, lo, hi int }{j, lo, min(lo+per, n)})
		}
	}
	errs := make([]error, len(rows))
	parallelFor(len(rows), func(i int) {
		if ctx.Err() != nil {
			return
		}
		r := rows[i]
		jb := jobs[r.job]
		errs[i] = quantizeRows(jb.src, jb.q, jb.s, jb.group, cfg.Quant, r.lo, r.hi, jb.key)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// quantizeRows quantises rows [lo, hi) of src into q and s.
func quantizeRows(src, q, s *tensor.Tensor, group int, qz Quantization, lo, hi int, key string) error {
	k := src.Shape[1]
	ng := s.Shape[1]
	qmax := float64(qz.QMax())
	row := make([]float32, k)
	for r := lo; r < hi; r++ {
		src.ReadFloats(row, r*k)
		for g := range ng {
			k0, k1 := g*group, min((g+1)*group, k)
			amax := 0.0
			for _, v := range row[k0:k1] {
				amax = max(amax, math.Abs(float64(v)))
			}
			if math.IsNaN(amax) || math.IsInf(amax, 0) {
				return fmt.Errorf("quantising %s: row %d holds a non-finite value", key, r)
			}
			sb := nearestF16(amax, qmax)
			if sb == 0x7c00 {
				return fmt.Errorf("quantising %s: row %d group %d has max |w| = %g, whose scale %g is beyond the F16 range", key, r, g, amax, amax/qmax)
			}
			s.Half[r*ng+g] = sb
			sc := float64(tensor.F16ToFloat(sb))
			for c := k0; c < k1; c++ {
				v := 0.0
				if sc != 0 {
					v = math.Max(-qmax, math.Min(qmax, math.RoundToEven(float64(row[c])/sc)))
				}
				e := r*k + c
				if qz.Bits == 4 {
					nib := byte(int(v)+8) & 0xf
					if e&1 == 0 {
						q.Packed[e>>1] |= nib
					} else {
						q.Packed[e>>1] |= nib << 4
					}
				} else {
					q.Bytes[e] = byte(int8(v))
				}
			}
		}
	}
	return nil
}

// nearestF16 is the F16 bit pattern nearest to num/den (num >= 0, den > 0)
// with ties to even, taken from the exact quotient: a candidate from the
// float32 quotient and its two neighbours, compared by |c·den − num| in
// float64, where c·den is exact (11 by at most 8 significant bits). 0x7c00
// (infinity) when the quotient is beyond the largest F16.
func nearestF16(num, den float64) uint16 {
	c := tensor.FloatToF16(float32(num / den))
	if c >= 0x7c00 {
		return 0x7c00
	}
	best, bestErr := c, math.Abs(float64(tensor.F16ToFloat(c))*den-num)
	for _, n := range []uint16{c - 1, c + 1} {
		if c == 0 && n == c-1 || n >= 0x7c00 {
			continue
		}
		e := math.Abs(float64(tensor.F16ToFloat(n))*den - num)
		if e < bestErr || (e == bestErr && n&1 == 0) {
			best, bestErr = n, e
		}
	}
	return best
}
