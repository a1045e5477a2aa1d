package ir_test

import (
	"sync"
	"testing"

	"github.com/amk-dev/amk/internal/cputime"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

// llama70B is the llama-3-70B shape (the presets stop at 8B).
func llama70B(t testing.TB) model.Config {
	cfg, err := model.Preset("llama-8b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name, cfg.Hidden, cfg.NLayers, cfg.NHeads, cfg.Intermediate = "llama-70b-shape", 8192, 80, 64, 28672
	return cfg
}

var lowered = map[string][]byte{}
var loweredMu sync.Mutex

// programJSON lowers a model on h100 at the default point and encodes it,
// once per shape (the 8B file is about 6 MB, the 70B one about 14 MB).
func programJSON(b *testing.B, shape string) []byte {
	b.Helper()
	loweredMu.Lock()
	defer loweredMu.Unlock()
	if data, ok := lowered[shape]; ok {
		return data
	}
	var cfg model.Config
	switch shape {
	case "70b":
		cfg = llama70B(b)
	default:
		c, err := model.Preset(shape)
		if err != nil {
			b.Fatal(err)
		}
		cfg = c
	}
	tg, err := ir.Target("h100")
	if err != nil {
		b.Fatal(err)
	}
	p, err := schedule.Lower(cfg, tg, schedule.Default(), schedule.LowerOptions{Pos: 100})
	if err != nil {
		b.Fatal(err)
	}
	data := ir.Encode(p)
	lowered[shape] = data
	return data
}

func benchDecode(b *testing.B, shape string, decode func([]byte) (*ir.Program, error), check bool) {
	data := programJSON(b, shape)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0, cpuOK := cputime.Total()
	b.ResetTimer()
	for b.Loop() {
		p, err := decode(data)
		if err != nil {
			b.Fatal(err)
		}
		if check {
			if rep := validate.Validate(p); !rep.OK {
				b.Fatal(rep.Reason(3))
			}
		}
	}
	b.StopTimer()
	if cpu1, ok := cputime.Total(); ok && cpuOK {
		// CPU time (the collector's included): on a loaded machine wall
		// time also counts the waits for a core.
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	}
}

// Decode (the direct decoder) and the tree decoder it replaced, alone and
// followed by validation with every proof, on the 1B, 8B and 70B shapes.
func BenchmarkDecode1B(b *testing.B)          { benchDecode(b, "llama-1b", ir.Decode, false) }
func BenchmarkDecode8B(b *testing.B)          { benchDecode(b, "llama-8b", ir.Decode, false) }
func BenchmarkDecode70B(b *testing.B)         { benchDecode(b, "70b", ir.Decode, false) }
func BenchmarkDecodeValidate1B(b *testing.B)  { benchDecode(b, "llama-1b", ir.Decode, true) }
func BenchmarkDecodeValidate8B(b *testing.B)  { benchDecode(b, "llama-8b", ir.Decode, true) }
func BenchmarkDecodeValidate70B(b *testing.B) { benchDecode(b, "70b", ir.Decode, true) }
func BenchmarkTreeDecode8B(b *testing.B)      { benchDecode(b, "llama-8b", ir.DecodeTreeForBench, false) }
func BenchmarkTreeDecode70B(b *testing.B)     { benchDecode(b, "70b", ir.DecodeTreeForBench, false) }
func BenchmarkTreeDecodeValidate70B(b *testing.B) {
	benchDecode(b, "70b", ir.DecodeTreeForBench, true)
}
