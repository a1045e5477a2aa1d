package fib

import (
	"strings"
	"testing"
)

// TestWorkloadsWithSafetensorsInputsAreRefused: amk builds each case from
// generated data and does not load workload tensors, so a workload whose
// inputs are safetensors files is refused by name instead of being run
// (and reported PASS) on other data; a random input is generated data and
// maps.
func TestWorkloadsWithSafetensorsInputsAreRefused(t *testing.T) {
	ds, err := ReadDataset("testdata/import")
	if err != nil {
		t.Fatal(err)
	}
	name := "gemm_n_4096_k_4096"
	d := ds.Definitions[name]
	if d == nil {
		t.Fatalf("no %s in testdata/import", name)
	}
	ws := append([]Workload(nil), ds.Workloads[name]...)
	st := ws[0]
	st.UUID = "with-a-safetensors-input"
	st.Inputs = Ordered[InputSpec]{{"A", InputSpec{Type: InputRandom}},
		{"B", InputSpec{Type: InputSafetensors, Path: "blob/b.safetensors", TensorKey: "b"}}}
	m := MapDefinition(d, append(ws, st))
	if len(m.Cases) != len(ws) {
		t.Fatalf("%d cases, want the %d random workloads only: %+v", len(m.Cases), len(ws), m)
	}
	for _, c := range m.Cases {
		if c.Workload == st.UUID {
			t.Fatal("the safetensors workload became a case")
		}
	}
	only := MapDefinition(d, []Workload{st})
	why := strings.Join(only.Reasons, "; ")
	if only.Mapped() || !strings.Contains(why, st.UUID) || !strings.Contains(why, `input "B"`) ||
		!strings.Contains(why, "blob/b.safetensors") {
		t.Fatalf("want the workload refused naming input B and its file, got %+v", only)
	}
}

// TestHugeAxesAreRefused: a workload whose axes multiply past
// MaxCaseElements is refused, also where the product overflows int64.
func TestHugeAxesAreRefused(t *testing.T) {
	d := &Definition{Name: "gemm_n16777216_k16777216", OpType: "gemm", Axes: axes("M", varAxis, "N", 1<<24, "K", 1<<24),
		Inputs:    Ordered[TensorSpec]{{"A", spec("float16", "M", "K")}, {"B", spec("float16", "N", "K")}},
		Outputs:   Ordered[TensorSpec]{{"C", spec("float16", "M", "N")}},
		Reference: "def run(A, B):\n    return A @ B.T\n"}
	w := Workload{UUID: "huge", Axes: Ordered[int64]{{"M", 1}},
		Inputs: Ordered[InputSpec]{{"A", InputSpec{Type: InputRandom}}, {"B", InputSpec{Type: InputRandom}}}}
	if m := MapDefinition(d, []Workload{w}); m.Mapped() || !strings.Contains(strings.Join(m.Reasons, "; "), "elements") {
		t.Fatalf("a 2^48-element weight: %+v", m)
	}
	var reasons []string
	sizeCheck(&reasons, "x", 1<<24, 1<<24, 1<<24, 1<<24) // 2^96 wraps to 0 in int64
	if len(reasons) != 1 {
		t.Fatalf("an overflowing product passes the size check: %v", reasons)
	}
}
