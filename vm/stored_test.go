package vm

import (
	"math"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// Weights held at their stored width (bf16 and fp16 bit patterns, read by
// EMBED, the norms and GEMV as they are) give the logits, bit for bit, of
// the same weights held as float32, over two decode steps.
func TestStoredWidthWeightsSameLogits(t *testing.T) {
	for _, dt := range []ir.DType{ir.BF16, ir.F16} {
		cfg := toySmall
		cfg.dt = dt
		var logits [2][][]float32
		var kv [2]map[string]*tensor.Tensor
		for variant := range 2 {
			p := toyProgram(cfg, 0)
			ws := toyWeights(t, p)
			if variant == 1 {
				for k, w := range ws {
					s := tensor.NewStored(w.DType, w.Shape...)
					for i, v := range w.F {
						s.Half[i] = tensor.ToHalf(dt, v)
					}
					ws[k] = s
				}
			}
			for pos, tok := range []int{3, 17} {
				v, err := New(toyProgram(cfg, pos), Options{Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				if err := v.BindWeights(ws); err != nil {
					t.Fatal(err)
				}
				bindStep(t, v, tok, pos)
				if pos > 0 {
					if err := v.BindKV(kv[variant]); err != nil {
						t.Fatal(err)
					}
				}
				res, err := v.Run()
				if err != nil {
					t.Fatal(err)
				}
				kv[variant] = res.KV
				logits[variant] = append(logits[variant], res.Outputs["logits"].F)
			}
		}
		for pos := range logits[0] {
			a, b := logits[0][pos], logits[1][pos]
			if len(a) != cfg.vocab || len(b) != cfg.vocab {
				t.Fatalf("%s pos %d: %d and %d logits", dt, pos, len(a), len(b))
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s pos %d logit %d: %v from float32, %v at stored width", dt, pos, i, a[i], b[i])
				}
			}
		}
	}
}
