package fib

import (
	"errors"
	"strings"
	"testing"
)

func TestExprEval(t *testing.T) {
	env := map[string]int64{"H_qo": 32, "H_kv": 8, "H_r": 4, "batch_size": 3, "len_indptr": 4, "neg": -7}
	for _, c := range []struct {
		src  string
		want string
	}{
		{"H_qo == H_kv * H_r", "True"},
		{"H_qo != H_kv * H_r", "False"},
		{"len_indptr == batch_size + 1", "True"},
		{"1 < batch_size <= 3 < H_kv", "True"},
		{"1 < batch_size < 3", "False"},
		{"neg // 2", "-4"},
		{"neg % 2", "1"},
		{"H_qo / H_kv", "4"},
		{"2 ** 3 ** 2", "512"},
		{"-2 ** 2", "-4"},
		{"(1 + 2) * 3 - 4 % 3", "8"},
		{"not H_qo == 32 or H_kv == 8 and True", "True"},
		{"H_qo % H_kv == 0 and H_qo >= H_kv", "True"},
		{"1e-6 < 1", "True"},
		{"(-1) ** 1000000000000", "1"},
	} {
		e, err := ParseExpr(c.src)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		v, err := e.Eval(env)
		if err != nil || v.String() != c.want {
			t.Errorf("%q = %v (%v), want %s", c.src, v, err, c.want)
		}
	}
}

func TestExprNeedsData(t *testing.T) {
	for _, src := range []string{"num_kv_indices == kv_indptr[-1]", "num_kv_indices == kv_indptr[-1].item()", "unknown + 1"} {
		e, err := ParseExpr(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if _, err := e.Eval(map[string]int64{"num_kv_indices": 3}); !errors.Is(err, ErrNeedsData) {
			t.Errorf("%q: want ErrNeedsData, got %v", src, err)
		}
	}
}

func TestExprErrors(t *testing.T) {
	for src, want := range map[string]string{
		"H_qo ==":   "unexpected",
		"(a + b":    `expected ")"`,
		"a $ b":     "unexpected character",
		"a = b":     "unexpected character",
		"a[1":       `expected "]"`,
		"lambda: 1": "unexpected",
		"x.":        "attribute name",
		strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100): "nested deeper",
		strings.Repeat("1+", 600) + "1":                           "longer than",
	} {
		if _, err := ParseExpr(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want an error with %q, got %v", src, want, err)
		}
	}
	for src, want := range map[string]string{"1 // 0": "division by zero", "9223372036854775807 + 1": "overflow",
		"2 ** 64": "overflow", "1 % 0": "division by zero"} {
		e, err := ParseExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Eval(nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", src, want, err)
		}
	}
}
