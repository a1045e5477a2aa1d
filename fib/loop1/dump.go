package loop1

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/amk-dev/amk/fib"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/tensor"
)

// A dump is what scripts/gpu/fib_check.py needs to run a Definition's
// PyTorch reference on exactly the inputs amk's micro-kernel saw and to
// compare its outputs with amk's: per case, case.json and one raw
// little-endian file per tensor (float tensors as float32 holding values
// already rounded to the storage dtype, integer tensors as int32). The
// tensors keep amk's shapes; the script reshapes them to the Definition's
// (the layouts are the same row-major order).

// DumpTensor is one tensor of a dump.
type DumpTensor struct {
	File  string `json:"file"`
	Shape []int  `json:"amk_shape"`
	DType string `json:"amk_dtype"`
}

// DumpCase is case.json.
type DumpCase struct {
	Definition string                `json:"definition"`
	Workload   string                `json:"workload"`
	Op         string                `json:"op"`
	DType      string                `json:"dtype"`
	Inputs     map[string]DumpTensor `json:"inputs"`
	Scalars    map[string]float64    `json:"scalars"`
	// Outputs are the reference VM's; DeviceOutputs the micro-kernel's
	// (the default variant) when a GPU ran it.
	Outputs       map[string]DumpTensor `json:"outputs"`
	DeviceOutputs map[string]DumpTensor `json:"device_outputs,omitempty"`
	Device        string                `json:"device,omitempty"`
}

// dumpable are the ops whose case inputs are the Definition's inputs in
// order (RoPE is not: its case rotates the queries only).
var dumpable = map[ir.Op]bool{ir.OpRMSNORM: true, ir.OpGEMVTile: true, ir.OpGEMMTile: true, ir.OpAttentionTile: true,
	ir.OpSiLUMul: true, ir.OpADD: true, ir.OpEMBED: true, ir.OpKVAppend: true}

// Dump writes one case under dir/<definition>/<workload>/. device are the
// micro-kernel's outputs (nil on the CPU).
func Dump(dir string, d *fib.Definition, s fib.CaseSpec, c *tune.Case, device map[int]*tensor.Tensor, deviceName string) error {
	if !dumpable[c.Op] {
		return fmt.Errorf("%s: no dump for %s cases", s.Definition, c.Op)
	}
	vmOut, err := c.Reference()
	if err != nil {
		return err
	}
	out := filepath.Join(dir, safeName(s.Definition), safeName(s.Workload))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dc := DumpCase{Definition: s.Definition, Workload: s.Workload, Op: tune.OpName(c.Op), DType: tune.DTypeName(c.DType),
		Inputs: map[string]DumpTensor{}, Scalars: map[string]float64{}, Outputs: map[string]DumpTensor{}, Device: deviceName}
	t0 := &c.Program.Tasks[0]
	tensors := 0
	for _, in := range d.Inputs {
		if in.Value.Scalar() {
			switch c.Op {
			case ir.OpRMSNORM:
				dc.Scalars[in.Name] = t0.Params.FloatOr("eps", 0)
			case ir.OpKVAppend:
				dc.Scalars[in.Name] = float64(t0.Params.IntOr("pos", 0))
			default:
				return fmt.Errorf("%s: scalar input %s has no amk value", s.Definition, in.Name)
			}
			continue
		}
		if tensors >= len(t0.Inputs) {
			return fmt.Errorf("%s: more tensor inputs than the %s case has", s.Definition, c.Op)
		}
		id := t0.Inputs[tensors]
		tensors++
		dt, err := writeTensor(out, "in_"+in.Name, c.Inputs[id])
		if err != nil {
			return err
		}
		dc.Inputs[in.Name] = dt
	}
	if len(d.Outputs) != 1 {
		return fmt.Errorf("%s: dumps handle one output", s.Definition)
	}
	name, id := d.Outputs[0].Name, t0.Outputs[0]
	if dc.Outputs[name], err = writeTensor(out, "vm_"+name, vmOut[id]); err != nil {
		return err
	}
	if device != nil {
		dc.DeviceOutputs = map[string]DumpTensor{}
		if dc.DeviceOutputs[name], err = writeTensor(out, "device_"+name, device[id]); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(dc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "case.json"), append(data, '\n'), 0o644)
}

func writeTensor(dir, name string, t *tensor.Tensor) (DumpTensor, error) {
	if t == nil {
		return DumpTensor{}, fmt.Errorf("%s: no tensor", name)
	}
	file := name + ".bin"
	var buf []byte
	if t.DType.IsFloat() {
		vals := t.Floats()
		buf = make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
	} else {
		buf = make([]byte, 4*t.IntCount())
		for i := range t.IntCount() {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(t.Int(i)))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, file), buf, 0o644); err != nil {
		return DumpTensor{}, err
	}
	return DumpTensor{File: file, Shape: t.Shape, DType: t.DType.String()}, nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
