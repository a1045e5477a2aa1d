package fib

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseExpr: any text parses or fails cleanly, and what parses
// evaluates without panicking.
func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{"H_qo == H_kv * H_r", "len_indptr == batch_size + 1", "n == x[-1].item()",
		"1 < a <= b", "-2 ** -1", "not (a or b) and c // 3 % 2", "9223372036854775807 * -1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseExpr(src)
		if err != nil {
			return
		}
		_, _ = e.Eval(map[string]int64{"a": 3, "b": -5, "c": 0, "H_qo": 32, "H_kv": 8, "H_r": 4})
		_ = e.Names()
	})
}

// FuzzCheckDefinition: any bytes are a Definition with findings or a clean
// ErrNotDefinition; a Definition that holds round-trips through Encode.
func FuzzCheckDefinition(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"axes": {"a": {"type": "var", "value": 1}}, "inputs": {"x": {"shape": ["a", "b"], "dtype": "int3"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, ps, err := CheckDefinition(data)
		if err != nil {
			return
		}
		if len(Errors(ps)) > 0 {
			return
		}
		out, err := d.Encode()
		if err != nil {
			t.Fatalf("encode a valid Definition: %v", err)
		}
		d2, ps2, err := CheckDefinition(out)
		if err != nil || len(Errors(ps2)) > 0 {
			t.Fatalf("a valid Definition re-read: %v %v\n%s", err, ps2, out)
		}
		if d2.Name != d.Name || len(d2.Inputs) != len(d.Inputs) || len(d2.Axes) != len(d.Axes) {
			t.Fatalf("round trip changed the Definition:\n%s", out)
		}
	})
}

// FuzzParseTrace: any line is a Trace or a clean error; validating it
// against a Definition never panics.
func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(`{"definition":"gemm_n_4096_k_4096","workload":{"uuid":"u","axes":{"M":4},"inputs":{"A":{"type":"random"},"B":{"type":"random"}}},"solution":null,"evaluation":null}`))
	f.Add([]byte(`{"definition":"d","workload":{"uuid":"u","axes":{},"inputs":{}},"solution":"s","evaluation":{"status":"PASSED","log":"","correctness":null,"performance":{"latency_ms":-1},"environment":{"hardware":""},"timestamp":""}}`))
	data, err := os.ReadFile(filepath.Join("testdata", "seed003", "example1_as_written.json"))
	if err != nil {
		f.Fatal(err)
	}
	d, _, err := ParseDefinition(data)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		tr, err := ParseTrace(line)
		if err != nil {
			return
		}
		_ = ValidateTrace(d, tr)
		_ = ValidateTrace(nil, tr)
	})
}
