package validate

import (
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// builder assembles test programs the way the reference's tests do: F32
// buffers in HBM, dense ids, labels on every task.
type builder struct{ p *ir.Program }

func newBuilder(t testing.TB, target string) *builder {
	p := ir.NewProgram()
	p.SetMeta("model", pyjson.StringValue("race"))
	if target != "" {
		tg, err := ir.Target(target)
		if err != nil {
			t.Fatal(err)
		}
		p.Target = tg
		p.SetMeta("gpu", pyjson.StringValue(target))
	}
	return &builder{p: p}
}

func (b *builder) buf(name string, kind ir.BufferKind, shape ...int) int {
	return b.bufOf(name, kind, ir.F32, shape...)
}

func (b *builder) bufOf(name string, kind ir.BufferKind, dt ir.DType, shape ...int) int {
	buf := ir.Buffer{Name: name, Kind: kind, DType: dt, Shape: append([]int{}, shape...), Space: ir.HBM}
	if kind == ir.Weight || kind == ir.Const {
		src := name
		buf.Source = &src
	}
	return b.p.AddBuffer(buf)
}

func (b *builder) ctr() int { return b.p.AddCounter("") }

func (b *builder) task(op ir.Op, in, out []int, oc int, waits []ir.Wait, label string, params ...ir.Param) int {
	return b.p.AddTask(ir.Task{Op: op, Inputs: in, Outputs: out, OutCounter: oc, Waits: waits,
		Params: ir.Params(params), Label: label})
}

func ints(xs ...int) []int { return xs }

func waits(pairs ...int) []ir.Wait {
	out := make([]ir.Wait, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, ir.Wait{Counter: pairs[i], Threshold: pairs[i+1]})
	}
	return out
}

func iP(k string, v int64) ir.Param   { return ir.IntParam(k, v) }
func fP(k string, v float64) ir.Param { return ir.FloatParam(k, v) }

func rmsParams(h int64) []ir.Param { return []ir.Param{fP("eps", 1e-6), iP("hidden", h)} }

func gemvParams(k, nTile, nOff int64) []ir.Param {
	return []ir.Param{iP("K", k), iP("N_tile", nTile), iP("n_off", nOff)}
}
