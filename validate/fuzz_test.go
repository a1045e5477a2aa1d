package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// FuzzValidate decodes arbitrary JSON and validates whatever decodes: never a
// panic (not even one caught by the guard), and the same input always gives
// the same report.
func FuzzValidate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil && len(data) < 16<<10 {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"tasks": [{"id": 0, "op": "COPY", "inputs": [0], "outputs": [0], "out_counter": 0, "waits": [{"counter": 0, "threshold": 1}]}]}`))
	f.Add([]byte(`{"buffers": [{"id": 3, "name": "x", "kind": "ACTIVATION", "dtype": "I4", "shape": [4, 0], "space": "SMEM"}], "pages": {"buffer_to_page": {"3": 0, "9": 1}, "pages": []}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ir.Decode(data)
		if err != nil {
			return
		}
		a := Validate(p)
		if a.Has(CodeInternal) {
			t.Fatalf("validator panicked: %s", a.Reason(0))
		}
		if b := Validate(p); !reflect.DeepEqual(a, b) {
			t.Fatalf("same input, different reports:\n%s\n%s", a.String(), b.String())
		}
		if a.OK != (len(a.Errors) == 0) {
			t.Fatal("OK disagrees with the errors")
		}
	})
}

// FuzzValidateGenerated reads the fuzz input as a stream of choices that
// build a program directly — any opcode, out-of-range ids, odd shapes,
// mistyped params, placements, pages — to reach the deep rules that
// mutated JSON rarely gets past the decoder to.
func FuzzValidateGenerated(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x03\x01\x02\x05\x00\x07\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"))
	f.Add([]byte("validate every rule of the megakernel IR, pages and tiles included"))
	f.Add(bytes.Repeat([]byte{0xff, 0x00, 0x37}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := generated(data)
		a := Validate(p)
		if a.Has(CodeInternal) {
			t.Fatalf("validator panicked: %s", a.Reason(0))
		}
		if b := Validate(p); !reflect.DeepEqual(a, b) {
			t.Fatal("same program, different reports")
		}
	})
}

type choices struct {
	data []byte
	i    int
}

// pick returns a choice in [0, n).
func (c *choices) pick(n int) int {
	if c.i >= len(c.data) || n <= 0 {
		return 0
	}
	c.i++
	return int(c.data[c.i-1]) % n
}

// between returns a choice in [lo, hi].
func (c *choices) between(lo, hi int) int { return lo + c.pick(hi-lo+1) }

func generated(data []byte) *ir.Program {
	c := &choices{data: data}
	p := ir.NewProgram()
	if c.pick(2) == 0 {
		p.Target, _ = ir.Target(ir.TargetNames()[c.pick(len(ir.TargetNames()))])
		p.SetMeta("gpu", pyjson.StringValue([]string{"h100", "rtx5090", ""}[c.pick(3)]))
	}
	nb := c.between(1, 8)
	for i := range nb {
		shape := make([]int, c.pick(6))
		for k := range shape {
			shape[k] = c.between(-1, 9)
		}
		p.AddBuffer(ir.Buffer{Name: "b" + itoa(int64(i)), Kind: ir.BufferKind(c.pick(6)), DType: ir.DType(c.pick(10)),
			Shape: shape, Space: ir.MemSpace(c.pick(4))})
	}
	nc := c.pick(7)
	for range nc {
		p.AddCounter("")
	}
	keys := []string{"K", "N_tile", "n_off", "M_tile", "m_off", "hidden", "head_dim", "n_heads", "n_kv_heads",
		"kv_start", "kv_len", "pos", "qdtype", "group", "flags", "eps", "scale", "theta", "recipe"}
	nt := c.between(1, 12)
	for i := range nt {
		t := ir.Task{Op: ir.Op(c.pick(21)), OutCounter: c.between(-1, nc), Label: "t" + itoa(int64(i))}
		for k := c.pick(10); k > 0; k-- {
			t.Inputs = append(t.Inputs, c.between(-1, nb))
		}
		for k := c.pick(3); k > 0; k-- {
			t.Outputs = append(t.Outputs, c.between(-1, nb))
		}
		for k := c.pick(10); k > 0; k-- {
			t.Waits = append(t.Waits, ir.Wait{Counter: c.between(-1, nc), Threshold: c.between(-1, 4)})
		}
		for k := c.pick(8); k > 0; k-- {
			var v pyjson.Value
			switch c.pick(6) {
			case 0:
				v = pyjson.FloatValue(float64(c.between(-2, 300)) / 4)
			case 1:
				v = pyjson.BoolValue(c.pick(2) == 0)
			case 2:
				v = pyjson.Value{Kind: pyjson.Float, Num: []string{"NaN", "Infinity", "-Infinity"}[c.pick(3)]}
			case 3:
				v = pyjson.StringValue("x")
			default:
				v = pyjson.IntValue(int64(c.between(-3, 300)))
			}
			t.Params = append(t.Params, ir.Param{Key: keys[c.pick(len(keys))], Val: v})
		}
		if c.pick(3) == 0 {
			sm := c.between(-1, 3)
			t.SM = &sm
		}
		p.AddTask(t)
	}
	if c.pick(2) == 0 {
		pa := &ir.PageAllocation{}
		for k := c.pick(8); k > 0; k-- {
			pa.BufferToPage = append(pa.BufferToPage, ir.PageBinding{Buffer: c.between(-1, nb), Page: c.pick(3)})
		}
		p.Pages = pa
	}
	switch c.pick(8) { // occasionally break dense ids
	case 0:
		p.Tasks[c.pick(nt)].ID = c.between(-1, nt)
	case 1:
		p.Buffers[c.pick(nb)].ID = c.between(-1, nb)
	}
	return p
}
