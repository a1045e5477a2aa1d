package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// MaxDim bounds every single dimension of a Config, so that element counts
// stay far from integer overflow whatever a config file says.
const MaxDim = 1 << 24

// MaxLayers bounds a Config's decoder layers, far above any released decoder
// (Llama 3.1 405B has 126), so that a config file cannot make the
// per-layer work of lowering, weights and checks unbounded.
const MaxLayers = 1024

// MaxParams bounds a Config's weight values (about 4.4 trillion, ten times
// a 405B model): beyond it no evaluator could hold the model, and the
// counts stay far from integer overflow.
const MaxParams = int64(1) << 42

// Key schemes: the state-dict key layouts of the Python reference's toy
// model and of HuggingFace Llama checkpoints.
const (
	SchemeToy = "toy"
	SchemeHF  = "hf"
)

// ConfigError lists every problem found in a Config.
type ConfigError struct {
	Name     string
	Problems []string
}

func (e *ConfigError) Error() string {
	name := e.Name
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Sprintf("model config %s is invalid: %s", name, strings.Join(e.Problems, "; "))
}

// Validate checks that c describes a model the eager pass, the lowering and
// the VMs can run. It reports every problem at once as a *ConfigError.
func (c *Config) Validate() error {
	if p := c.problems(); len(p) > 0 {
		return &ConfigError{Name: c.Name, Problems: p}
	}
	return nil
}

func (c *Config) problems() []string {
	var p []string
	dims := []struct {
		name  string
		v     int
		limit int
	}{
		{"hidden", c.Hidden, MaxDim}, {"n_heads", c.NHeads, MaxDim}, {"n_kv_heads", c.NKVHeads, MaxDim},
		{"head_dim", c.HeadDim, MaxDim}, {"intermediate", c.Intermediate, MaxDim}, {"vocab", c.Vocab, MaxDim},
		{"n_layers", c.NLayers, MaxLayers}, {"max_seq", c.MaxSeq, MaxDim},
	}
	inRange := true
	for _, d := range dims {
		switch {
		case d.v <= 0:
			p = append(p, fmt.Sprintf("%s must be at least 1, got %d", d.name, d.v))
			inRange = false
		case d.v > d.limit:
			p = append(p, fmt.Sprintf("%s must be at most %d, got %d", d.name, d.limit, d.v))
			inRange = false
		}
	}
	// With every dimension in range the count cannot overflow: each product
	// of two is below 2^48, a layer below 2^52, MaxLayers of them below 2^62.
	if inRange && int64(c.NHeads)*int64(c.HeadDim) <= MaxDim && int64(c.NKVHeads)*int64(c.HeadDim) <= MaxDim {
		if n := c.NumParams(); n > MaxParams {
			p = append(p, fmt.Sprintf("the model has %d parameters, more than the %d (%.1f trillion) amk models", n, MaxParams, float64(MaxParams)/1e12))
		}
	}
	if c.HeadDim > 0 && c.HeadDim%2 != 0 {
		p = append(p, fmt.Sprintf("head_dim must be even for rotate-half RoPE, got %d", c.HeadDim))
	}
	if c.NHeads > 0 && c.NKVHeads > 0 && c.NHeads%c.NKVHeads != 0 {
		p = append(p, fmt.Sprintf("n_heads (%d) must be a multiple of n_kv_heads (%d) for grouped-query attention",
			c.NHeads, c.NKVHeads))
	}
	if c.NHeads > 0 && c.HeadDim > 0 && int64(c.NHeads)*int64(c.HeadDim) > MaxDim {
		p = append(p, fmt.Sprintf("n_heads*head_dim (%d) must be at most %d", int64(c.NHeads)*int64(c.HeadDim), MaxDim))
	}
	if !(c.RMSEps > 0) || math.IsInf(c.RMSEps, 0) {
		p = append(p, fmt.Sprintf("rms_eps must be finite and positive, got %v", c.RMSEps))
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		p = append(p, fmt.Sprintf("rope_theta must be finite and positive, got %v", c.RopeTheta))
	}
	switch c.DType {
	case ir.F32, ir.F16, ir.BF16:
	default:
		p = append(p, fmt.Sprintf("dtype must be F32, F16 or BF16, got %s", c.DType))
	}
	if c.KeyScheme != SchemeToy && c.KeyScheme != SchemeHF {
		p = append(p, fmt.Sprintf("key_scheme must be %q or %q, got %q", SchemeToy, SchemeHF, c.KeyScheme))
	}
	return append(p, c.Quant.problems(c)...)
}

// Rep is n_heads / n_kv_heads: how many query heads share one KV head.
func (c *Config) Rep() int {
	if c.NKVHeads <= 0 {
		return 0
	}
	return c.NHeads / c.NKVHeads
}
